package manager

import "sync"

// eventQueueMax is the most events a migration has waiting: a flood of
// events cannot grow memory, the migration sees the ones that fit, and a
// flood is itself a reason to end.
const eventQueueMax = 256

// eventQueue is a migration's inbox: socket, runtime and fault events put
// by other goroutines, taken in order by the migration's own. It is a
// channel of eventQueueMax events whose memory grows with what is waiting,
// not with the bound: a buffered channel of 256 pointers cost every
// migration 2 KiB, about 20 MiB with 10,000 handovers in flight
// (docs/benchmarks.md, section 7), while one waits for a handful.
type eventQueue struct {
	mu    sync.Mutex
	items []*runEvent
	// ready holds a value while items is not empty: the migration selects
	// on it beside its timers, then takes one event.
	ready chan struct{}
}

func newEventQueue() *eventQueue { return &eventQueue{ready: make(chan struct{}, 1)} }

// put queues ev behind the others, or says the queue is full.
func (q *eventQueue) put(ev *runEvent) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.items) >= eventQueueMax {
		return false
	}
	q.items = append(q.items, ev)
	q.signalLocked()
	return true
}

// take returns the oldest event, if any; after a value from ready there is
// one.
func (q *eventQueue) take() (*runEvent, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.items) == 0 {
		return nil, false
	}
	ev := q.items[0]
	q.items[0] = nil
	if q.items = q.items[1:]; len(q.items) == 0 {
		q.items = nil // let the array go: most of a migration, nothing waits
	} else {
		q.signalLocked()
	}
	return ev, true
}

func (q *eventQueue) signalLocked() {
	select {
	case q.ready <- struct{}{}:
	default: // signalled already
	}
}
