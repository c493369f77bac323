package web

import (
	"strings"
	"testing"

	"github.com/normsim/normsim/sim"
)

// TestParamViewOfAPortWithADefault: a parameters.yaml parameter that is
// also an allocated port shows its default (auto) and says that clearing
// the field closes the port, once.
func TestParamViewOfAPortWithADefault(t *testing.T) {
	auto := "auto"
	tpl := &sim.Template{Name: "web",
		Parameters:     []sim.Parameter{{Name: "HTTP_PORT", Purpose: "The page's port.", Type: "string", Default: &auto}},
		AllocatedPorts: []sim.AllocatedPortDecl{{Param: "HTTP_PORT", Protocol: "tcp", Preferred: 8080, Service: "web"}},
	}
	views := paramViews(tpl, nil, nil)
	if len(views) != 1 {
		t.Fatalf("views = %+v, want one field", views)
	}
	if v := views[0]; v.Value != "auto" || !strings.Contains(v.Hint, "blank closes it") {
		t.Errorf("view = %+v, want value auto and a hint that blank closes the port", v)
	}
}
