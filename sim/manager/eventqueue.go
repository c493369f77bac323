package manager

import "sync"

// eventQueueMax is the most events a migration has waiting: a flood of
// events cannot grow memory, the migration sees the ones that fit, and a
// flood is itself a reason to end.
const eventQueueMax = 256

// eventQueue is a migration's inbox: socket, runtime and fault events put
// by other goroutines, taken in order by the migration's own. It is a
// channel of eventQueueMax events whose memory grows with the most that
// waited at once, not with the bound: a buffered channel of 256 pointers
// cost every migration 2 KiB, about 20 MiB with 10,000 handovers in
// flight (docs/benchmarks.md, section 7), while one waits for a handful.
type eventQueue struct {
	mu sync.Mutex
	// items[head:] wait; the array is kept when they are all taken, so a
	// migration allocates it once, as large as the most that waited.
	items []*runEvent
	head  int
	// ready holds a value while items is not empty: the migration selects
	// on it beside its timers, then takes one event.
	ready chan struct{}
}

func newEventQueue() *eventQueue { return &eventQueue{ready: make(chan struct{}, 1)} }

// put queues ev behind the others, or says the queue is full.
func (q *eventQueue) put(ev *runEvent) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.items)-q.head >= eventQueueMax {
		return false
	}
	if q.head > 0 && len(q.items) == cap(q.items) {
		// Full at the back with room at the front: move what waits to the
		// front, so a queue never drained stays within its array.
		n := copy(q.items, q.items[q.head:])
		clear(q.items[n:])
		q.items, q.head = q.items[:n], 0
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
	if q.head == len(q.items) {
		return nil, false
	}
	ev := q.items[q.head]
	q.items[q.head] = nil
	if q.head++; q.head == len(q.items) {
		q.items, q.head = q.items[:0], 0
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

// takeWhere takes, in order, the waiting events that match, leaving the
// others in theirs.
func (q *eventQueue) takeWhere(match func(*runEvent) bool) []*runEvent {
	q.mu.Lock()
	defer q.mu.Unlock()
	var taken []*runEvent
	kept := q.items[:q.head]
	for _, ev := range q.items[q.head:] {
		if match(ev) {
			taken = append(taken, ev)
		} else {
			kept = append(kept, ev)
		}
	}
	if taken == nil {
		return nil
	}
	clear(q.items[len(kept):])
	q.items = kept
	if q.head == len(q.items) {
		q.items, q.head = q.items[:0], 0
	}
	return taken
}
