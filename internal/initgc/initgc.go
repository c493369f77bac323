// Package initgc keeps the garbage collector off while normsim starts.
// The binary's package init functions (the Compose SDK's, compose-go's JSON
// Schema compiler, protobuf registrations) allocate a few MiB that live for
// the whole process: a collection during them, or right after, finds almost
// nothing and, on a busy 2-core machine, delays every command's start and
// normsim up's readiness by milliseconds (docs/benchmarks.md). So the
// collector is off from this package's init until shortly after main
// starts, with a memory limit as the backstop: past it the runtime collects
// anyway. It imports only runtime/debug and time, so it is initialised
// before the heavy packages.
package initgc

import (
	"runtime/debug"
	"sync"
	"time"
)

// Backstop is the heap size at which the runtime collects while the
// collector is off.
const Backstop = 64 << 20

// After is how long after main starts the collector comes back: longer
// than any start-up (normsim up is ready in about 15 ms), short enough that
// no command runs long without it.
const After = 250 * time.Millisecond

var (
	mu       sync.Mutex
	limit    = debug.SetMemoryLimit(-1) // GOMEMLIMIT's, default none; guarded by mu
	restored bool

	percent = debug.SetGCPercent(-1) // GOGC's setting, default 100
	_       = debug.SetMemoryLimit(min(limit, Backstop))
)

// Start is called first in main: the collector comes back After from now.
func Start() { time.AfterFunc(After, Restore) }

// Restore sets the collector back as GOGC says, and the memory limit as
// GOMEMLIMIT or SetMemoryLimit does.
func Restore() {
	mu.Lock()
	defer mu.Unlock()
	restored = true
	debug.SetGCPercent(percent)
	debug.SetMemoryLimit(limit)
}

// SetMemoryLimit sets the memory limit (normsim up --memory-limit) in
// place of GOMEMLIMIT's: at once when the collector is back, else when
// Restore brings it back. It returns the limit it replaced.
func SetMemoryLimit(n int64) int64 {
	mu.Lock()
	defer mu.Unlock()
	previous := limit
	limit = n
	if restored {
		debug.SetMemoryLimit(n)
	} else {
		debug.SetMemoryLimit(min(n, Backstop))
	}
	return previous
}
