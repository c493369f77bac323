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

// takeWhere takes the events that match, in order, and leaves the rest
// waiting in theirs: the owner hears one socket's earlier frames before
// the other's end (handleInTurn).
func TestEventQueueTakesWhatMatchesInOrder(t *testing.T) {
	q := newEventQueue()
	for _, r := range []string{"a1", "b1", "a2", "b2", "a3"} {
		q.put(&runEvent{reason: r})
	}
	q.take() // a1: the head moves on
	var got []string
	for _, ev := range q.takeWhere(func(ev *runEvent) bool { return ev.reason[0] == 'a' }) {
		got = append(got, ev.reason)
	}
	if !slices.Equal(got, []string{"a2", "a3"}) {
		t.Fatalf("took %v, want a2 a3", got)
	}
	got = nil
	for ev, ok := q.take(); ok; ev, ok = q.take() {
		got = append(got, ev.reason)
	}
	if !slices.Equal(got, []string{"b1", "b2"}) {
		t.Fatalf("left %v, want b1 b2", got)
	}
	if q.takeWhere(func(*runEvent) bool { return true }) != nil {
		t.Fatal("took from an empty queue")
	}
	q.put(&runEvent{reason: "c"})
	if ev, ok := q.take(); !ok || ev.reason != "c" {
		t.Fatal("the queue does not work after takeWhere emptied it")
	}
}
