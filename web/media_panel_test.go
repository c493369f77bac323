package web

import (
	"testing"

	"github.com/normsim/normsim/sim"
)

// TestMediaPanelSaysLateTablesHidePicture: a target that began on a
// keyframe but sent its tables after it still leaves a receiver that
// joins there without a picture; the panel says so beside "yes".
func TestMediaPanelSaysLateTablesHidePicture(t *testing.T) {
	yes, no, missing := true, false, 1000.0
	for _, tt := range []struct {
		key  *bool
		want string
	}{
		{&yes, "yes · but without tables first: a receiver joining there has no picture for 1000.0 ms"},
		{&no, "no · the picture is missing for 1000.0 ms"},
	} {
		m := &sim.Migration{ID: "m-1", Output: &sim.OutputReport{Media: &sim.MediaReport{KeyframeAtJoin: tt.key, PictureMissingMs: &missing}}}
		if v := mediaPanel(m, timeline{}); v == nil || v.Keyframe != tt.want {
			t.Errorf("keyframe at join %v: panel says %+v, want %q", *tt.key, v, tt.want)
		}
	}
}
