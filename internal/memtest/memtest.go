// Package memtest measures memory for tests that prove nothing is kept:
// the live heap before and after an attack, a flood, a thousand
// connections. It imports only the runtime, so any test links it cheaply.
package memtest

import "runtime"

// LiveHeap is the live heap once garbage is collected: collected twice, so
// what the first collection only marked for finalisation is gone too.
func LiveHeap() uint64 {
	var ms runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}
