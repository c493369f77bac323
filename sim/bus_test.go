package sim

import (
	"strings"
	"testing"
)

func TestBusDropsSlowSubscriber(t *testing.T) {
	b := NewBus()
	fast := b.Subscribe(10)
	slow := b.Subscribe(1)
	for i := 0; i < 3; i++ {
		b.Publish(Event{Kind: "k", Seq: int64(i)})
	}
	if len(fast.C) != 3 {
		t.Fatalf("fast subscriber got %d events, want 3", len(fast.C))
	}
	<-slow.C
	if _, ok := <-slow.C; ok || !slow.Dropped() || b.Stats().DroppedSubscribers != 1 {
		t.Fatal("slow subscriber was not dropped")
	}
	fast.Close()
	b.Publish(Event{Kind: "after"}) // must not panic on a closed subscriber
}

// TestStreamHoldsABurstAndDropsPastItsLimit: a stream keeps a burst far
// larger than a channel's buffer for a reader that takes it late, in
// order; past its limit it is dropped, said by Done and Dropped, and
// counted by the bus.
func TestStreamHoldsABurstAndDropsPastItsLimit(t *testing.T) {
	b := NewBus()
	s := b.Stream(1000)
	for i := range 1000 {
		b.Publish(Event{Kind: "k", Seq: int64(i)})
	}
	select {
	case <-s.Ready():
	default:
		t.Fatal("events wait, but Ready says none")
	}
	got := s.Take(nil)
	if len(got) != 1000 || got[0].Seq != 0 || got[999].Seq != 999 {
		t.Fatalf("took %d events (first %v, last %v), want 0..999 in order", len(got), got[0].Seq, got[len(got)-1].Seq)
	}
	if again := s.Take(got); len(again) != 0 {
		t.Fatalf("a second Take returned %d events", len(again))
	}
	for i := range 1001 {
		b.Publish(Event{Kind: "k", Seq: int64(i)})
	}
	select {
	case <-s.Done():
	default:
		t.Fatal("1,001 events behind a limit of 1,000 and not dropped")
	}
	if st := b.Stats(); !s.Dropped() || st.DroppedSubscribers != 1 || st.Published != 2001 || st.Subscribers != 0 || st.PeakBacklog != 1000 {
		t.Fatalf("dropped %v; the bus counts %+v, want 2,001 published, 1 dropped, none left, a backlog of 1,000 at most", s.Dropped(), st)
	}
	b.Publish(Event{Kind: "after"}) // the bus no longer holds it
	s.Close()                       // closing a dropped stream is fine
}

// TestStreamCloseIsNotADrop: a stream its owner closes is not counted.
func TestStreamCloseIsNotADrop(t *testing.T) {
	b := NewBus()
	s := b.Stream(1)
	s.Close()
	<-s.Done()
	b.Publish(Event{Kind: "k"})
	b.Publish(Event{Kind: "k"})
	if s.Dropped() || b.Stats().DroppedSubscribers != 0 {
		t.Fatalf("a closed stream: dropped %v, counted %+v", s.Dropped(), b.Stats())
	}
	s.Close()
}

// TestStalledStreamsAreBoundedTogether (issue 34 item 10): a thousand
// subscribers that stopped reading could each hold up to their own limit;
// all streams together hold at most the total, the ones furthest behind
// being dropped (and counted), while a subscriber that keeps reading is
// kept.
func TestStalledStreamsAreBoundedTogether(t *testing.T) {
	b := NewBus()
	b.TotalLimit = 1000
	reader := b.Stream(1 << 16)
	var stalled []*Stream
	for range 100 {
		stalled = append(stalled, b.Stream(1<<16))
	}
	var taken []Event
	for i := range 5000 {
		b.Publish(Event{Kind: EventInstanceState, Seq: int64(i)})
		taken = reader.Take(taken)
		if w := b.waiting.Load(); w > 1000 {
			t.Fatalf("after %d events the streams hold %d, past the total of 1000", i+1, w)
		}
	}
	select {
	case <-reader.Done():
		t.Fatal("the subscriber that kept reading was dropped")
	default:
	}
	dropped := 0
	for _, s := range stalled {
		if s.Dropped() {
			dropped++
		}
	}
	if st := b.Stats(); dropped == 0 || st.DroppedSubscribers != int64(dropped) {
		t.Fatalf("%d stalled subscribers dropped, stats say %d", dropped, st.DroppedSubscribers)
	}
}

// bigEvent is an event whose data is n bytes of JSON.
func bigEvent(seq, n int) Event {
	return Event{Kind: EventMigrationEvent, Seq: int64(seq), Data: []byte(`"` + strings.Repeat("x", n-2) + `"`)}
}

// TestStreamIsBoundedInBytes (issue 34 item 10): an event's data is any
// size, so a stream's backlog is bounded in bytes as well as in events: a
// stalled one is dropped once what it holds passes its bytes, long before
// its count, said by DropCause and counted; one that keeps reading is
// kept, and so is one that has read everything, whatever the size of the
// next event.
func TestStreamIsBoundedInBytes(t *testing.T) {
	b := NewBus()
	b.StreamBytes = 1 << 20
	stalled, reader := b.Stream(1<<16), b.Stream(1<<16)
	var taken []Event
	for i := range 100 {
		b.Publish(bigEvent(i, 64<<10))
		taken = reader.Take(taken)
	}
	if !stalled.Dropped() || !strings.Contains(stalled.DropCause(), "passed 1048576 bytes") {
		t.Fatalf("a stream that took none of 100 events of 64 KiB: dropped %v (%q), want dropped past 1 MiB", stalled.Dropped(), stalled.DropCause())
	}
	if reader.Dropped() {
		t.Fatalf("the stream that kept reading was dropped: %s", reader.DropCause())
	}
	// One event larger than the bound, to a stream that is not behind.
	b.Publish(bigEvent(100, 2<<20))
	if got := reader.Take(taken); reader.Dropped() || len(got) != 1 {
		t.Fatalf("one event over the bytes to a stream that read all: dropped %v (%s), took %d", reader.Dropped(), reader.DropCause(), len(got))
	}
	st := b.Stats()
	if st.DroppedSubscribers != 1 || st.PeakBacklogBytes > 2<<20+1024 || st.PeakBacklogBytes < 1<<20-(65<<10) {
		t.Fatalf("stats %+v, want 1 dropped and a peak near 1 MiB (the one large event aside)", st)
	}
	if w, wb := b.waiting.Load(), b.waitingBytes.Load(); w != 0 || wb != 0 {
		t.Fatalf("with every stream read or dropped, %d events and %d bytes are counted waiting", w, wb)
	}
}

// TestStalledStreamsAreBoundedTogetherInBytes (issue 34 item 10): a
// hundred stalled subscribers of large events could each hold up to
// their own bytes; all together hold at most the bus's total bytes, the
// ones holding the most dropped (each said why, and counted), while a
// subscriber that keeps reading is kept.
func TestStalledStreamsAreBoundedTogetherInBytes(t *testing.T) {
	b := NewBus()
	b.TotalBytes = 4 << 20
	reader := b.Stream(1 << 16)
	var stalled []*Stream
	for range 100 {
		stalled = append(stalled, b.Stream(1<<16))
	}
	var taken []Event
	for i := range 500 {
		b.Publish(bigEvent(i, 16<<10))
		taken = reader.Take(taken)
		if wb := b.waitingBytes.Load(); wb > 4<<20 {
			t.Fatalf("after %d events the streams hold %d bytes, past the total of 4 MiB", i+1, wb)
		}
	}
	if reader.Dropped() {
		t.Fatalf("the subscriber that kept reading was dropped: %s", reader.DropCause())
	}
	dropped := 0
	for _, s := range stalled {
		if s.Dropped() {
			dropped++
			if !strings.Contains(s.DropCause(), "more than 4194304 bytes of events waiting") {
				t.Errorf("a stalled stream dropped as %q", s.DropCause())
			}
		}
	}
	if st := b.Stats(); dropped == 0 || st.DroppedSubscribers != int64(dropped) {
		t.Fatalf("%d stalled subscribers dropped, stats say %d", dropped, st.DroppedSubscribers)
	}
}

// TestStreamAfterResumes (issue 32): a stream that resumes after the last
// event its reader read gets the events since, in order, while the bus
// keeps them; one from before what is kept (or from another run) is told
// it cannot resume.
func TestStreamAfterResumes(t *testing.T) {
	b := NewBus()
	for i := range 10 {
		b.Publish(Event{Kind: EventInstanceState, Seq: int64(i)})
	}
	s, resumed := b.StreamAfter(100, 7)
	if got := s.Take(nil); !resumed || len(got) != 3 || got[0].ID != 8 || got[2].ID != 10 {
		t.Fatalf("resumed %v with %d events (%+v), want 8..10", resumed, len(got), got)
	}
	b.Publish(Event{Kind: EventInstanceState})
	if got := s.Take(nil); len(got) != 1 || got[0].ID != 11 {
		t.Fatalf("then %+v, want 11", got)
	}
	if _, resumed := b.StreamAfter(100, 11); !resumed {
		t.Fatal("a reader that read everything cannot resume")
	}
	// after=0 is a reader that read nothing yet: every event since the
	// start (attack round 16: it was taken as no after at all, and
	// replayed nothing); without an after, only what comes next.
	if s, resumed := b.StreamAfter(100, 0); !resumed || len(s.Take(nil)) != 11 {
		t.Fatal("after 0 did not replay every event kept")
	}
	if s, resumed := b.StreamAfter(100, -1); !resumed || len(s.Take(nil)) != 0 {
		t.Fatal("a reader of what comes next was handed the past")
	}
	if _, resumed := b.StreamAfter(100, 500); resumed {
		t.Fatal("an id from another run (past the last) resumed")
	}
	for range RecentEvents {
		b.Publish(Event{Kind: EventInstanceState})
	}
	if _, resumed := b.StreamAfter(100, 5); resumed {
		t.Fatal("an id older than what is kept resumed")
	}
	if _, resumed := b.StreamAfter(100, 0); resumed {
		t.Fatal("after 0 resumed once the first events are no longer kept")
	}
	s, resumed = b.StreamAfter(RecentEvents+10, b.lastID-RecentEvents)
	if got := s.Take(nil); !resumed || len(got) != RecentEvents || got[0].ID != b.lastID-RecentEvents+1 {
		t.Fatalf("from the oldest kept: resumed %v, %d events", resumed, len(got))
	}
}

// TestResumeRingIsBoundedInBytes (issue 34 item 10): the events kept for
// a reader that resumes cost at most RecentBytes, whatever their size; a
// reader behind what is kept is told it cannot resume, and one within it
// gets every event since, in order.
func TestResumeRingIsBoundedInBytes(t *testing.T) {
	b := NewBus()
	b.RecentBytes = 1 << 20
	big := func() Event {
		return Event{Kind: EventMigrationEvent, Data: []byte(`"` + strings.Repeat("x", 64<<10) + `"`)}
	}
	for range 100 { // 6.4 MiB of events into a 1 MiB ring
		b.Publish(big())
	}
	if b.recentBytes > b.RecentBytes {
		t.Fatalf("the ring costs %d bytes, bound %d", b.recentBytes, b.RecentBytes)
	}
	kept := b.lastID - b.recentFrom + 1
	if kept < 10 || kept > 16 {
		t.Fatalf("%d events kept of 64 KiB each in 1 MiB", kept)
	}
	if _, resumed := b.StreamAfter(100, b.recentFrom-2); resumed {
		t.Fatal("a reader behind what is kept resumed")
	}
	s, resumed := b.StreamAfter(100, b.recentFrom-1)
	got := s.Take(nil)
	if !resumed || int64(len(got)) != kept || got[0].ID != b.recentFrom || got[len(got)-1].ID != b.lastID {
		t.Fatalf("from the oldest kept: resumed %v, %d events of %d", resumed, len(got), kept)
	}
	// One event alone past the bound is kept: the newest is never lost.
	b.Publish(Event{Kind: EventMigrationEvent, Data: []byte(`"` + strings.Repeat("y", 2<<20) + `"`)})
	if b.recentFrom != b.lastID {
		t.Fatalf("kept from %d to %d, want the huge newest alone", b.recentFrom, b.lastID)
	}
}
