package app

import "sync"

// lane runs start-up work that nothing waits for yet (an in-memory store's
// schema, whether a Docker engine answers, the template catalog, the
// dashboard's page templates) one piece at a time, in the order given, on
// one goroutine.
//
// Side by side on a 2-core laptop that work held both cores just as the
// first requests came: /readyz answered about 5 ms later than with the
// work out of the way, a third of normsim's whole start-up
// (docs/benchmarks.md, section 1). One lane leaves a core to the requests
// and to whoever makes them; each piece still starts at once when the one
// before it is done.
type lane struct {
	work chan func()
	once sync.Once
}

// startLane starts a lane whose goroutine wg counts until the lane is
// closed and its work done.
func startLane(wg *sync.WaitGroup) *lane {
	l := &lane{work: make(chan func(), 8)}
	wg.Go(func() {
		for f := range l.work {
			f()
		}
	})
	return l
}

// Go queues f behind the work queued before it.
func (l *lane) Go(f func()) { l.work <- f }

// close says no more work comes; what is queued still runs.
func (l *lane) close() { l.once.Do(func() { close(l.work) }) }
