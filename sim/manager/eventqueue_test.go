package manager

import "testing"

// The inbox behaves as the buffered channel it replaced: first in, first
// out; full at eventQueueMax, refusing more; and a value on ready exactly
// while an event waits, so a migration selecting on it never misses one
// and never wakes for nothing.
func TestEventQueueIsABoundedChannel(t *testing.T) {
	q := newEventQueue()
	ready := func() bool {
		select {
		case <-q.ready:
			return true
		default:
			return false
		}
	}
	if ready() {
		t.Fatal("ready with nothing queued")
	}
	for i := range eventQueueMax {
		if !q.put(&runEvent{reason: string(rune('a' + i%26))}) {
			t.Fatalf("event %d refused below the bound", i)
		}
	}
	if q.put(&runEvent{reason: "one too many"}) {
		t.Fatal("an event past the bound was queued")
	}
	for i := range eventQueueMax {
		if !ready() {
			t.Fatalf("not ready with %d events waiting", eventQueueMax-i)
		}
		ev, ok := q.take()
		if want := string(rune('a' + i%26)); !ok || ev.reason != want {
			t.Fatalf("take %d: %v %v, want %q", i, ev, ok, want)
		}
	}
	if ready() {
		t.Fatal("ready once every event was taken")
	}
	if ev, ok := q.take(); ok {
		t.Fatalf("took %v from an empty queue", ev)
	}
	if !q.put(&runEvent{reason: "again"}) || !ready() {
		t.Fatal("an emptied queue does not take and signal a new event")
	}
}
