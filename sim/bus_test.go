package sim

import "testing"

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
