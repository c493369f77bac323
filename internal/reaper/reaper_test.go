//go:build unix && !aix

package reaper

import (
	"os"
	"slices"
	"testing"
)

// What is still listed when the pipe closes, in the order it was listed:
// a taken-off ID is gone, one listed twice counts once.
func TestReadKeepsWhatIsStillListed(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		w.WriteString("+a\n+b\n+c\n-b\n+a\n\n+d\n-x\n")
		w.Close()
	}()
	if got := read(r); !slices.Equal(got, []string{"a", "c", "d"}) {
		t.Errorf("read = %v, want [a c d]", got)
	}
}
