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

// TestSetMemoryLimit: a limit set while the collector is off waits behind
// the backstop and is what Restore brings back, in place of GOMEMLIMIT's;
// once back, a limit is set at once.
func TestSetMemoryLimit(t *testing.T) {
	mu.Lock()
	restored = false
	gomemlimit := limit
	mu.Unlock()
	debug.SetMemoryLimit(min(gomemlimit, Backstop))
	t.Cleanup(func() { SetMemoryLimit(gomemlimit) })

	SetMemoryLimit(300 << 20)
	if l := debug.SetMemoryLimit(-1); l != Backstop {
		t.Fatalf("before Restore the limit is %d, want the %d backstop", l, Backstop)
	}
	Restore()
	if l := debug.SetMemoryLimit(-1); l != 300<<20 {
		t.Fatalf("after Restore the limit is %d, want the 300 MiB set", l)
	}
	if prev := SetMemoryLimit(500 << 20); prev != 300<<20 {
		t.Errorf("SetMemoryLimit returned %d, want the 300 MiB it replaced", prev)
	}
	if l := debug.SetMemoryLimit(-1); l != 500<<20 {
		t.Fatalf("once back, the limit is %d, want the 500 MiB set at once", l)
	}
}
