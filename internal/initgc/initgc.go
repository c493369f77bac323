// Package initgc keeps the garbage collector off while normsim starts.
// The binary's package init functions (the Compose SDK's, compose-go's JSON
// Schema compiler, protobuf registrations) allocate a few MiB that live for
// the whole process: a collection during them, or right after, finds almost
// nothing and, on a busy 2-core machine, delays every command's start and
// normsim up's readiness by milliseconds (docs/benchmarks.md). So the
// collector is off from this package's init until shortly after main
// starts, with a memory limit as the backstop (internal/memlimit's cap,
// which keeps the user's limit to report and bring back): past it the
// runtime collects anyway. It imports only the standard library and
// memlimit, so it is initialised before the heavy packages.
package initgc

import (
	"runtime/debug"
	"sync"
	"time"

	"github.com/normsim/normsim/internal/memlimit"
)

// Backstop is the heap size at which the runtime collects while the
// collector is off.
const Backstop = 64 << 20

// After is how long after main starts the collector comes back: longer
// than any start-up (normsim up is ready in about 15 ms), short enough that
// no command runs long without it.
const After = 250 * time.Millisecond

var (
	percent = debug.SetGCPercent(-1) // GOGC's setting, default 100
	_       = capped()
	restore sync.Once
)

func capped() bool {
	memlimit.Cap(Backstop)
	return true
}

// Start is called first in main: the collector comes back After from now.
func Start() { time.AfterFunc(After, Restore) }

// Restore sets the collector back as GOGC says, and the memory limit as
// GOMEMLIMIT or memlimit.Set does. Only the first call does anything: a
// command that measures calls it at once, before Start's timer does.
func Restore() {
	restore.Do(func() {
		debug.SetGCPercent(percent)
		memlimit.Uncap()
	})
}
