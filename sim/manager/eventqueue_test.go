package manager

import (
	"fmt"
	"log/slog"
	"slices"
	"testing"

	"github.com/normsim/normsim/sim"
)

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

// A migration whose inbox is full drops what does not fit, but not
// silently: its timeline says so when it starts, and how many at the end.
func TestAFullInboxIsCountedOnTheTimeline(t *testing.T) {
	pr := newPlanRun(t, sim.PhaseGetState)
	pr.r.m.log = slog.New(slog.DiscardHandler)
	for range eventQueueMax + 3 {
		pr.r.post(runEvent{kind: evFault, reason: "flood"})
	}
	pr.r.mu.Lock()
	dropped := pr.r.eventsDropped
	pr.r.mu.Unlock()
	if dropped != 3 {
		t.Fatalf("%d events counted as dropped, want 3", dropped)
	}
	want := []string{fmt.Sprintf("manager: the migration's inbox is full (%d events waiting): events past it are dropped, and counted", eventQueueMax)}
	if got := pr.timeline(t, sim.PhaseGetState); !slices.Equal(got, want) {
		t.Errorf("timeline %q, want %q", got, want)
	}
}

// A queue that is never drained (a job that keeps the migration busy)
// reuses its array: what was taken from the front makes room at the back.
func TestEventQueueNeverDrainedStaysInItsArray(t *testing.T) {
	q := newEventQueue()
	for i := range 4 {
		q.put(&runEvent{reason: fmt.Sprint(i)})
	}
	most := cap(q.items)
	for i := 4; i < 10_000; i++ {
		q.put(&runEvent{reason: fmt.Sprint(i)})
		ev, _ := q.take()
		if want := fmt.Sprint(i - 4); ev.reason != want {
			t.Fatalf("took %q, want %q", ev.reason, want)
		}
		most = max(most, cap(q.items))
	}
	if most > 16 {
		t.Errorf("the array grew to %d slots with never more than 5 events waiting", most)
	}
}
