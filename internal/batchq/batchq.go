// Package batchq is a queue whose items one goroutine writes in batches,
// for the sim's recorders: adding never blocks, a burst of items gathers
// for a moment (the linger) before the batch is written, so the work that
// caused the burst has the CPU first, and the queue may be bounded by item
// count and by a size the caller assigns to each item.
package batchq

import (
	"sync"
	"time"
)

// Limits bound what a queue holds while its writer catches up; zero means
// no bound.
type Limits struct {
	Items int
	Size  int
}

// Queue hands items to write in batches of at most batch items, in order,
// on its own goroutine.
type Queue[T any] struct {
	write  func([]T)
	linger time.Duration
	batch  int
	limits Limits

	mu      sync.Mutex
	pending []T
	size    int
	closed  bool
	// keyed indexes the pending items added by AddKeyed, by key.
	keyed map[string]int
	// writing is how many items the writer has taken and not yet written.
	writing int
	// room is closed, and replaced, whenever the writer takes what is
	// pending: AddWait's waiters try again.
	room  chan struct{}
	wake  chan struct{} // capacity 1: something is pending, or closed
	hurry chan struct{} // capacity 1: someone waits, cut the linger short
	done  chan struct{}
}

// keepAfterBurst is the most items' room (and keys) a queue keeps between
// batches once the load that needed more has passed.
const keepAfterBurst = 1024

// New starts a queue's writer goroutine.
func New[T any](limits Limits, linger time.Duration, batch int, write func([]T)) *Queue[T] {
	q := &Queue[T]{write: write, linger: linger, batch: batch, limits: limits, room: make(chan struct{}),
		wake: make(chan struct{}, 1), hurry: make(chan struct{}, 1), done: make(chan struct{})}
	go q.loop()
	return q
}

// Add queues item, of the given size, and reports whether it was taken: not
// when the queue is closed or the item would pass a limit.
func (q *Queue[T]) Add(item T, size int) bool {
	return q.add(item, size, false)
}

// add queues item unless the queue is closed or, unless over, the item
// would pass a limit.
func (q *Queue[T]) add(item T, size int, over bool) bool {
	q.mu.Lock()
	if q.closed || (!over && ((q.limits.Items > 0 && len(q.pending) >= q.limits.Items) ||
		(q.limits.Size > 0 && q.size+size > q.limits.Size))) {
		q.mu.Unlock()
		return false
	}
	q.pending = append(q.pending, item)
	q.size += size
	q.mu.Unlock()
	q.signal()
	return true
}

// AddKeyed queues item under key, whatever the limits, or, while an item
// of the same key is still pending, merges it into that one where it
// stands: a record written again and again while the writer is behind is
// held once, not once per version. It reports false only when the queue is
// closed.
func (q *Queue[T]) AddKeyed(key string, item T, merge func(pending *T, item T)) bool {
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return false
	}
	if i, ok := q.keyed[key]; ok {
		merge(&q.pending[i], item)
		q.mu.Unlock()
		return true
	}
	if q.keyed == nil {
		q.keyed = map[string]int{}
	}
	q.keyed[key] = len(q.pending)
	q.pending = append(q.pending, item)
	q.mu.Unlock()
	q.signal()
	return true
}

// AddOver queues item whatever the limits: for a caller that applies its
// own back-pressure (see Full) and must not lose the item. It reports
// false only when the queue is closed.
func (q *Queue[T]) AddOver(item T, size int) bool {
	return q.add(item, size, true)
}

// Len is how many items wait to be written, those the writer is writing
// included.
func (q *Queue[T]) Len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.pending) + q.writing
}

// Full reports whether the queue is at or past a limit, and a channel
// closed when the writer next takes what is pending.
func (q *Queue[T]) Full() (bool, <-chan struct{}) {
	q.mu.Lock()
	defer q.mu.Unlock()
	full := (q.limits.Items > 0 && len(q.pending) >= q.limits.Items) || (q.limits.Size > 0 && q.size >= q.limits.Size)
	return full && !q.closed, q.room
}

// Close writes what is queued, then stops the writer; Add refuses from now.
func (q *Queue[T]) Close() {
	q.mu.Lock()
	if !q.closed {
		q.closed = true
		q.signal()
	}
	q.mu.Unlock()
	<-q.done
}

// Hurry has the writer write what is pending without lingering: someone
// waits for it (a reader flushing), so the work the linger gives way to
// is this wait.
func (q *Queue[T]) Hurry() {
	select {
	case q.hurry <- struct{}{}:
	default:
	}
}

func (q *Queue[T]) signal() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

func (q *Queue[T]) loop() {
	defer close(q.done)
	var spare []T
	for range q.wake {
		q.mu.Lock()
		closed := q.closed
		q.mu.Unlock()
		if !closed {
			q.lingerFor()
		}
		q.mu.Lock()
		items := q.pending
		q.pending, q.size = spare, 0
		q.writing = len(items)
		if len(q.keyed) > keepAfterBurst {
			q.keyed = nil // a map keeps its buckets when cleared
		} else {
			clear(q.keyed)
		}
		closed = q.closed
		close(q.room)
		q.room = make(chan struct{})
		q.mu.Unlock()
		for rest := items; len(rest) > 0; {
			n := min(len(rest), q.batch)
			q.write(rest[:n])
			rest = rest[n:]
		}
		q.mu.Lock()
		q.writing = 0
		q.mu.Unlock()
		clear(items) // let go of what the items hold
		spare = reuse(items)
		if closed {
			return
		}
	}
}

// lingerFor waits the linger, or less when hurried.
func (q *Queue[T]) lingerFor() {
	t := time.NewTimer(q.linger)
	defer t.Stop()
	select {
	case <-t.C:
	case <-q.hurry:
	}
}

// reuse is the array of the items just written, emptied, for the next
// ones; or nil when a burst grew it far past what the queue holds now, so
// that a long run keeps no more than its current load needs.
func reuse[T any](items []T) []T {
	if cap(items) > keepAfterBurst && len(items) < cap(items)/4 {
		return nil
	}
	return items[:0]
}
