package initgc

import (
	"os"
	"runtime/debug"
	"strconv"
	"testing"

	"github.com/normsim/normsim/internal/memlimit"
)

// Until Restore the collector is off with the backstop limit, and a limit
// set meanwhile waits behind it; after it, GOGC holds again and the limit
// is the one set, which is also what memlimit reports all along.
func TestRestore(t *testing.T) {
	gomemlimit := memlimit.Get()
	t.Cleanup(func() { memlimit.Set(gomemlimit) })
	if p := debug.SetGCPercent(-1); p != -1 {
		t.Fatalf("before Restore the collector is at %d%%, want off", p)
	}
	if l := debug.SetMemoryLimit(-1); l != min(gomemlimit, Backstop) {
		t.Fatalf("before Restore the memory limit is %d, want the %d backstop", l, Backstop)
	}
	memlimit.Set(300 << 20)
	if l := debug.SetMemoryLimit(-1); l != Backstop {
		t.Fatalf("a limit set before Restore: the runtime's is %d, want the %d backstop", l, Backstop)
	}
	if l := memlimit.Get(); l != 300<<20 {
		t.Fatalf("before Restore the limit reported is %d, want the 300 MiB set, not the backstop", l)
	}
	Restore()
	want := 100
	if v, err := strconv.Atoi(os.Getenv("GOGC")); err == nil {
		want = v
	}
	if p := debug.SetGCPercent(want); p != want {
		t.Errorf("after Restore the collector is at %d%%, want GOGC's %d", p, want)
	}
	if l := debug.SetMemoryLimit(-1); l != 300<<20 {
		t.Errorf("after Restore the memory limit is %d, want the 300 MiB set", l)
	}
	if prev := memlimit.Set(500 << 20); prev != 300<<20 {
		t.Errorf("Set returned %d, want the 300 MiB it replaced", prev)
	}
	if l := debug.SetMemoryLimit(-1); l != 500<<20 {
		t.Errorf("once back, the limit is %d, want the 500 MiB set at once", l)
	}
	Restore() // a second call changes nothing
	if p := debug.SetGCPercent(-1); p != want {
		t.Errorf("after a second Restore the collector is at %d%%, want %d", p, want)
	}
	debug.SetGCPercent(want)
}
