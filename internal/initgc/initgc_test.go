package initgc

import (
	"os"
	"runtime/debug"
	"strconv"
	"testing"
)

// Until Restore the collector is off with the backstop limit; after it,
// GOGC and GOMEMLIMIT hold again.
func TestRestore(t *testing.T) {
	if p := debug.SetGCPercent(-1); p != -1 {
		t.Fatalf("before Restore the collector is at %d%%, want off", p)
	}
	if l := debug.SetMemoryLimit(-1); l != min(limit, Backstop) {
		t.Fatalf("before Restore the memory limit is %d, want the %d backstop", l, Backstop)
	}
	Restore()
	want := 100
	if v, err := strconv.Atoi(os.Getenv("GOGC")); err == nil {
		want = v
	}
	if p := debug.SetGCPercent(want); p != want {
		t.Errorf("after Restore the collector is at %d%%, want GOGC's %d", p, want)
	}
	if l := debug.SetMemoryLimit(-1); l != limit {
		t.Errorf("after Restore the memory limit is %d, want GOMEMLIMIT's %d", l, limit)
	}
}
