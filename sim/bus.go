package sim

import (
	"fmt"
	"sync"
	"sync/atomic"
	"unsafe"
)

// Bus is the live-update pub/sub: every Event published reaches each
// subscriber without the publisher ever waiting. A subscriber that falls
// too far behind is dropped, never waited for, so a slow browser cannot
// stall the sim; the drops are counted (Stats).
//
// There are two kinds of subscriber. Subscribe gives a channel with a
// fixed buffer, for an in-process waiter that wants the next few events.
// Stream gives a backlog that grows as its reader falls behind, up to a
// limit of events and of bytes, for a reader over the network (an
// /api/v1/events client): a burst (a thousand handovers released at once)
// then costs memory for a moment instead of the subscriber. An event's
// Data is any size (a migration event carries a frame's payload, up to
// 64 KiB), so a count alone bounds no memory.
type Bus struct {
	mu      sync.Mutex
	subs    map[*Subscription]struct{}
	streams map[*Stream]struct{}
	// published counts the events; dropped the subscribers dropped for
	// falling behind; peak is the longest backlog a stream had, peakBytes
	// the largest in bytes (eventCost).
	published, dropped int64
	peak               int
	peakBytes          int64
	// waiting counts the events all streams hold, waitingBytes what they
	// cost (eventCost); TotalLimit and TotalBytes bound them (0:
	// DefaultStreamsTotal, DefaultStreamsTotalBytes), StreamBytes one
	// stream's cost (0: DefaultStreamBytes). Set them before use.
	waiting, waitingBytes   atomic.Int64
	TotalLimit              int
	TotalBytes, StreamBytes int64
	// lastID numbers the events published; recent keeps the newest of
	// them, for a stream that resumes (StreamAfter): at most RecentEvents,
	// costing at most RecentBytes (eventCost, recentBytes), from ID
	// recentFrom on. RecentBytes is 0 for DefaultRecentBytes.
	lastID      int64
	recent      []Event
	recentFrom  int64
	recentBytes int64
	RecentBytes int64
}

// RecentEvents is how many of the newest events the bus keeps for a
// subscriber that reconnects and resumes after the last one it read, and
// DefaultRecentBytes what they may cost: events are of any size, so the
// count alone does not bound the memory (4,096 events of 64 KiB would be
// 256 MiB). A reader that fell behind further cannot resume, and is told
// so.
const (
	RecentEvents       = 4096
	DefaultRecentBytes = 8 << 20
)

// Subscription is one subscriber's stream.
type Subscription struct {
	C    <-chan Event
	c    chan Event
	bus  *Bus
	once sync.Once
	// Dropped is set when the subscriber was dropped for falling behind.
	dropped bool
}

// NewBus returns an empty bus.
func NewBus() *Bus {
	return &Bus{subs: map[*Subscription]struct{}{}, streams: map[*Stream]struct{}{}}
}

// Subscribe returns a subscription with room for buffer events.
func (b *Bus) Subscribe(buffer int) *Subscription {
	c := make(chan Event, buffer)
	s := &Subscription{C: c, c: c, bus: b}
	b.mu.Lock()
	b.subs[s] = struct{}{}
	b.mu.Unlock()
	return s
}

// Publish sends ev to every subscriber without blocking.
func (b *Bus) Publish(ev Event) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.published++
	b.lastID++
	ev.ID = b.lastID
	b.keepRecent(ev)
	for s := range b.subs {
		select {
		case s.c <- ev:
		default:
			s.dropped = true
			b.dropped++
			delete(b.subs, s)
			s.once.Do(func() { close(s.c) })
		}
	}
	for s := range b.streams {
		if !s.put(ev) {
			b.dropped++
			delete(b.streams, s)
		}
	}
	// Many subscribers that all stopped reading would each hold up to
	// their limit: past a total, the one furthest behind goes (in bytes
	// when the bytes are past theirs).
	for len(b.streams) > 0 {
		var cause string
		var behind func(*Stream) int64
		switch events, bytes := b.waiting.Load(), b.waitingBytes.Load(); {
		case bytes > b.totalBytes():
			cause = fmt.Sprintf("all subscribers together held more than %d bytes of events waiting, and it held the most", b.totalBytes())
			behind = func(s *Stream) int64 { _, n := s.backlog(); return n }
		case events > b.totalLimit():
			cause = fmt.Sprintf("all subscribers together held more than %d events waiting, and it held the most", b.totalLimit())
			behind = func(s *Stream) int64 { n, _ := s.backlog(); return int64(n) }
		}
		if behind == nil {
			break
		}
		var worst *Stream
		most := int64(-1)
		for s := range b.streams {
			if n := behind(s); n > most {
				worst, most = s, n
			}
		}
		worst.drop(cause)
		b.dropped++
		delete(b.streams, worst)
	}
}

// keepRecent puts ev in the ring of recent events (event n is at
// (n-1) % RecentEvents), letting go of the oldest while the ring holds
// more than RecentEvents or costs more than its bytes. The newest event is
// kept whatever it costs.
func (b *Bus) keepRecent(ev Event) {
	if b.recentFrom == 0 {
		b.recentFrom = ev.ID
	}
	if len(b.recent) < RecentEvents {
		b.recent = append(b.recent, Event{})
	}
	limit := b.RecentBytes
	if limit <= 0 {
		limit = DefaultRecentBytes
	}
	cost := eventCost(ev)
	for b.recentFrom < ev.ID && (ev.ID-b.recentFrom >= RecentEvents || b.recentBytes+cost > limit) {
		slot := &b.recent[(b.recentFrom-1)%RecentEvents]
		b.recentBytes -= eventCost(*slot)
		*slot = Event{} // its data is free to go
		b.recentFrom++
	}
	b.recent[(ev.ID-1)%RecentEvents] = ev
	b.recentBytes += cost
}

// DefaultStreamsTotal is how many events all streams together may hold
// waiting, whatever the number of subscribers.
const DefaultStreamsTotal = 1 << 18

// DefaultStreamsTotalBytes is what all streams together may hold waiting
// (eventCost), and DefaultStreamBytes what one may: the bounds on memory,
// as the counts are not, events being of any size. A stream holds far
// less in a burst: the most one held at 9,488 handovers in flight was
// 7,200 events, about 2 MiB (docs/benchmarks.md, section 8).
const (
	DefaultStreamsTotalBytes = 64 << 20
	DefaultStreamBytes       = 16 << 20
)

func (b *Bus) totalLimit() int64 {
	if b.TotalLimit > 0 {
		return int64(b.TotalLimit)
	}
	return DefaultStreamsTotal
}

func (b *Bus) totalBytes() int64 {
	if b.TotalBytes > 0 {
		return b.TotalBytes
	}
	return DefaultStreamsTotalBytes
}

func (b *Bus) streamBytes() int64 {
	if b.StreamBytes > 0 {
		return b.StreamBytes
	}
	return DefaultStreamBytes
}

// eventCost is what an event waiting in a stream may keep alive: its slot
// in the queue and the bytes it points to. Streams share those bytes, so
// counting them for each stream that holds the event bounds the memory
// from above.
func eventCost(ev Event) int64 {
	return int64(unsafe.Sizeof(ev)) + int64(len(ev.Kind)+len(ev.Instance)+len(ev.Migration)+len(ev.Data))
}

// Stats counts the events published so far, the subscribers (channels
// and streams) now, those dropped for falling behind, and the longest
// backlog a stream has had.
func (b *Bus) Stats() EventStats {
	b.mu.Lock()
	defer b.mu.Unlock()
	return EventStats{Published: b.published, Subscribers: len(b.subs) + len(b.streams), DroppedSubscribers: b.dropped,
		PeakBacklog: b.peak, PeakBacklogBytes: b.peakBytes}
}

// Dropped reports whether the subscription was dropped for falling behind
// (as opposed to closed by its owner). Valid once C is closed.
func (s *Subscription) Dropped() bool {
	s.bus.mu.Lock()
	defer s.bus.mu.Unlock()
	return s.dropped
}

// Close unsubscribes.
func (s *Subscription) Close() {
	s.bus.mu.Lock()
	delete(s.bus.subs, s)
	s.bus.mu.Unlock()
	s.once.Do(func() { close(s.c) })
}

// Stream is a subscriber whose backlog grows while it is behind: it holds
// up to limit events that its reader has not taken, costing up to
// limitBytes (eventCost), and only what is waiting costs memory. One
// event more than either drops it.
type Stream struct {
	bus        *Bus
	limit      int
	limitBytes int64
	ready      chan struct{} // holds a token while events wait
	done       chan struct{} // closed when dropped or closed

	mu      sync.Mutex
	queue   []Event
	bytes   int64 // what queue costs (eventCost)
	dropped bool
	cause   string // why it was dropped
	ended   bool
}

// keptBacklog is the largest backlog buffer a stream keeps for reuse.
const keptBacklog = 1024

// Stream subscribes a reader that may fall up to limit events, and the
// bus's StreamBytes, behind.
func (b *Bus) Stream(limit int) *Stream {
	s, _ := b.StreamAfter(limit, -1)
	return s
}

// StreamAfter is Stream for a reader that resumes after the event it read
// last (its ID; 0 for one that read none and wants every event since
// normsim started; negative for a reader of what comes next only): the
// events since, while the bus still keeps them (RecentEvents), wait in
// the stream from the start. resumed is false when some are no longer
// kept: the reader must read the state afresh.
func (b *Bus) StreamAfter(limit int, after int64) (s *Stream, resumed bool) {
	s = &Stream{bus: b, limit: max(limit, 1), limitBytes: b.streamBytes(), ready: make(chan struct{}, 1), done: make(chan struct{})}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.streams[s] = struct{}{}
	if after < 0 {
		return s, true
	}
	if after > b.lastID || after < b.recentFrom-1 {
		return s, false // from before what is kept, or from another run of normsim
	}
	for id := after + 1; id <= b.lastID; id++ {
		if !s.put(b.recent[(id-1)%RecentEvents]) {
			b.dropped++
			delete(b.streams, s)
			break
		}
	}
	return s, true
}

// put queues ev; false when that would pass a limit, which drops the
// stream. An event alone is never past the bytes: a reader that has taken
// everything is not behind, however large the next event. Called under
// the bus's lock.
func (s *Stream) put(ev Event) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended {
		return false
	}
	cost := eventCost(ev)
	switch {
	case len(s.queue) >= s.limit:
		s.dropLocked(fmt.Sprintf("it fell more than %d events behind", s.limit))
		return false
	case len(s.queue) > 0 && s.bytes+cost > s.limitBytes:
		s.dropLocked(fmt.Sprintf("the events it had not read passed %d bytes", s.limitBytes))
		return false
	}
	s.queue = append(s.queue, ev)
	s.bytes += cost
	s.bus.waiting.Add(1)
	s.bus.waitingBytes.Add(cost)
	s.bus.peak = max(s.bus.peak, len(s.queue))
	s.bus.peakBytes = max(s.bus.peakBytes, s.bytes)
	select {
	case s.ready <- struct{}{}:
	default:
	}
	return true
}

// backlog is how many events wait in the stream, and what they cost.
func (s *Stream) backlog() (int, int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.queue), s.bytes
}

// drop ends the stream as one dropped for falling behind, for cause.
// Called under the bus's lock.
func (s *Stream) drop(cause string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.ended {
		s.dropLocked(cause)
	}
}

func (s *Stream) dropLocked(cause string) {
	s.dropped, s.cause = true, cause
	s.endLocked()
}

func (s *Stream) endLocked() {
	s.ended = true
	s.bus.waiting.Add(-int64(len(s.queue)))
	s.bus.waitingBytes.Add(-s.bytes)
	s.bytes = 0
	clear(s.queue)
	s.queue = nil
	close(s.done)
}

// Ready has a value when events are waiting to be taken.
func (s *Stream) Ready() <-chan struct{} { return s.ready }

// Done is closed once the stream was dropped or closed.
func (s *Stream) Done() <-chan struct{} { return s.done }

// Take returns the events waiting, oldest first, and empties the backlog.
// reuse, the slice a previous Take returned (or nil), is taken back to
// hold the next ones, unless a burst made it large: that one goes, so a
// stream does not keep the memory of its longest backlog.
func (s *Stream) Take(reuse []Event) []Event {
	clear(reuse)
	if cap(reuse) > keptBacklog {
		reuse = nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.queue
	if !s.ended {
		s.queue = reuse[:0]
		s.bus.waiting.Add(-int64(len(out)))
		s.bus.waitingBytes.Add(-s.bytes)
		s.bytes = 0
	}
	return out
}

// Dropped reports whether the stream was dropped for falling behind.
func (s *Stream) Dropped() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.dropped
}

// DropCause says why the stream was dropped: which bound its backlog, or
// all streams' together, passed. Empty when it was not dropped.
func (s *Stream) DropCause() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cause
}

// Limit is how many events behind the stream may fall.
func (s *Stream) Limit() int { return s.limit }

// LimitBytes is how many bytes of events (as the bus counts them: the
// event and what it points to) the stream may hold waiting.
func (s *Stream) LimitBytes() int64 { return s.limitBytes }

// Cut drops the stream for a cause outside the bus (its reader stopped
// reading, and a write to it timed out), counted in DroppedSubscribers as
// a drop for falling behind is. It reports false when the stream had
// ended already (the bus dropped it first, and counted it).
func (s *Stream) Cut(cause string) bool {
	s.bus.mu.Lock()
	defer s.bus.mu.Unlock()
	if _, ok := s.bus.streams[s]; !ok {
		return false
	}
	delete(s.bus.streams, s)
	s.bus.dropped++
	s.drop(cause)
	return true
}

// Close unsubscribes.
func (s *Stream) Close() {
	s.bus.mu.Lock()
	delete(s.bus.streams, s)
	s.bus.mu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.ended {
		s.endLocked()
	}
}
