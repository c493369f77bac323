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
	if _, ok := <-slow.C; ok || !slow.Dropped() {
		t.Fatal("slow subscriber was not dropped")
	}
	fast.Close()
	b.Publish(Event{Kind: "after"}) // must not panic on a closed subscriber
}
