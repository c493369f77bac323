package sim

import "sync"

// Bus is the live-update pub/sub: every Event published reaches each
// subscriber's buffered channel. A subscriber that falls behind is dropped
// (its channel closed), never waited for, so a slow browser cannot stall
// the sim.
type Bus struct {
	mu   sync.Mutex
	subs map[*Subscription]struct{}
}

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
func NewBus() *Bus { return &Bus{subs: map[*Subscription]struct{}{}} }

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
	for s := range b.subs {
		select {
		case s.c <- ev:
		default:
			s.dropped = true
			delete(b.subs, s)
			s.once.Do(func() { close(s.c) })
		}
	}
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
