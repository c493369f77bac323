package manager

import (
	"errors"
	"strings"
	"testing"

	"github.com/normsim/normsim/sim"
)

// TestExplainPortInUse: the engine's bare refusal gains why and what to do,
// and keeps the runtime's code; other errors, and instances that publish
// nothing, are left alone.
func TestExplainPortInUse(t *testing.T) {
	pub := []sim.PublishedPort{{Service: "ingest", ContainerPort: 1935, Protocol: "tcp", HostIP: "127.0.1.2", HostPort: 1935}}
	engine := errors.New("Error response from daemon: driver failed programming external connectivity: Bind for 127.0.1.2:1935 failed: port is already allocated")
	coded := sim.Errorf(sim.EConflict, "start service %q: a published port is in use: %v", "ingest", engine)
	for _, err := range []error{engine, coded} {
		got := explainPortInUse(err, pub)
		if sim.ErrorCode(got) != sim.EConflict {
			t.Errorf("code %s, want %s", sim.ErrorCode(got), sim.EConflict)
		}
		msg := sim.ErrorMessage(got)
		for _, want := range []string{"port is already allocated", "127.0.1.2:1935->1935/tcp", "held by something else on this host", "normsim ps", "ss -ltnup", "free it"} {
			if !strings.Contains(msg, want) {
				t.Errorf("%q\nlacks %q", msg, want)
			}
		}
	}
	other := errors.New("no such image")
	if got := explainPortInUse(other, pub); got != other {
		t.Errorf("an unrelated error became %v", got)
	}
	if got := explainPortInUse(engine, nil); got != engine {
		t.Errorf("an instance publishing nothing got %v", got)
	}
}
