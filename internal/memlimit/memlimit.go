// Package memlimit keeps the Go memory limit as normsim's user set it
// (GOMEMLIMIT, normsim up --memory-limit) apart from the runtime's own
// setting. While the binary starts, internal/initgc holds the runtime's
// limit down to a backstop; what normsim reports (GET /api/v1/stats'
// memory.limitBytes, normsim bench) and what comes back after the start
// is the user's, never the backstop. It imports only the standard
// library, so that initgc, initialised first, can use it.
package memlimit

import (
	"runtime/debug"
	"sync"
)

var (
	mu    sync.Mutex
	limit = debug.SetMemoryLimit(-1) // GOMEMLIMIT's, math.MaxInt64 for none; read before any cap
	capAt = int64(-1)                // while 0 or more, the runtime's limit is at most this
)

// Get is the limit the user set; math.MaxInt64 for none.
func Get() int64 {
	mu.Lock()
	defer mu.Unlock()
	return limit
}

// Set sets the limit, in place of GOMEMLIMIT's, and returns the one it
// replaced. Under a cap the runtime gets it when the cap is lifted.
func Set(n int64) int64 {
	mu.Lock()
	defer mu.Unlock()
	previous := limit
	limit = n
	apply()
	return previous
}

// Cap holds the runtime's limit at most at n until Uncap, keeping the
// user's to bring back.
func Cap(n int64) {
	mu.Lock()
	defer mu.Unlock()
	capAt = n
	apply()
}

// Uncap gives the runtime the user's limit again.
func Uncap() {
	mu.Lock()
	defer mu.Unlock()
	capAt = -1
	apply()
}

func apply() {
	n := limit
	if capAt >= 0 {
		n = min(n, capAt)
	}
	debug.SetMemoryLimit(n)
}
