package jobsocket_test

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/normsim/normsim/sim"
	"github.com/normsim/normsim/sim/jobsocket"
)

// gatedStore blocks its first RecordFrames until released, and keeps what
// it was given.
type gatedStore struct {
	sim.Store
	entered chan struct{}
	release chan struct{}
	once    sync.Once
	mu      sync.Mutex
	got     []sim.FrameRecord
}

func (s *gatedStore) RecordFrames(ctx context.Context, frs []sim.FrameRecord) error {
	s.once.Do(func() {
		close(s.entered)
		<-s.release
	})
	s.mu.Lock()
	defer s.mu.Unlock()
	s.got = append(s.got, frs...)
	return nil
}

// TestRecorderBoundsBytes: while the store is stuck, the recorder holds at
// most its byte budget of frame text, however few records that is; a
// record that finds no room within the wait is lost and counted; what
// fits is written once the store catches up, in order, and Close flushes.
func TestRecorderBoundsBytes(t *testing.T) {
	st := &gatedStore{entered: make(chan struct{}), release: make(chan struct{})}
	rec := jobsocket.NewRecorder(st, jobsocket.RecorderLimits{Records: 1000, Bytes: 100 << 10, Wait: 20 * time.Millisecond}, nil)
	frame := func(i int) sim.FrameRecord {
		return sim.FrameRecord{JobID: "j", Type: "abort", Size: 40 << 10, Data: strings.Repeat(string(rune('a'+i)), 40<<10)}
	}
	rec.Record(frame(0))
	select {
	case <-st.entered:
	case <-time.After(5 * time.Second):
		t.Fatal("the recorder did not write the first record")
	}
	for i := 1; i <= 4; i++ { // 40 KiB each against a 100 KiB budget: two fit
		rec.Record(frame(i))
	}
	if got := rec.Dropped(); got != 2 {
		t.Fatalf("dropped %d records, want 2 (two 40 KiB records fit in 100 KiB)", got)
	}
	close(st.release)
	rec.Close()
	st.mu.Lock()
	defer st.mu.Unlock()
	var types []string
	for _, f := range st.got {
		types = append(types, f.Data[:1])
	}
	if strings.Join(types, "") != "abc" {
		t.Fatalf("stored %q, want the first three records in order", strings.Join(types, ""))
	}
	rec.Record(frame(5)) // after Close: dropped, not a panic
	if got := rec.Dropped(); got != 3 {
		t.Fatalf("dropped %d after Close, want 3", got)
	}
}

// TestRecorderBoundsRecords: the count limit holds for small records too.
func TestRecorderBoundsRecords(t *testing.T) {
	st := &gatedStore{entered: make(chan struct{}), release: make(chan struct{})}
	rec := jobsocket.NewRecorder(st, jobsocket.RecorderLimits{Records: 10, Bytes: 1 << 20, Wait: 20 * time.Millisecond}, nil)
	rec.Record(sim.FrameRecord{Type: "hello"})
	<-st.entered
	for range 15 {
		rec.Record(sim.FrameRecord{Type: "state", Data: "{}"})
	}
	if got := rec.Dropped(); got != 5 {
		t.Fatalf("dropped %d records, want 5 over a limit of 10", got)
	}
	close(st.release)
	rec.Close()
	if len(st.got) != 11 {
		t.Fatalf("stored %d records, want 11", len(st.got))
	}
}

// TestRecorderSlowsTheSenderInsteadOfDropping: with a store that writes
// slowly, records past the queue's limit wait for room (each slowing its
// caller) and every one is kept, in order.
func TestRecorderSlowsTheSenderInsteadOfDropping(t *testing.T) {
	st := &gatedStore{entered: make(chan struct{}), release: make(chan struct{})}
	rec := jobsocket.NewRecorder(st, jobsocket.RecorderLimits{Records: 10, Bytes: 1 << 20}, nil)
	rec.Record(sim.FrameRecord{Type: "hello", Data: "0"})
	<-st.entered
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 1; i <= 30; i++ {
			rec.Record(sim.FrameRecord{Type: "state", Data: strconv.Itoa(i)})
		}
	}()
	// The sender fills the queue and then waits: it cannot finish while
	// the store is stuck.
	deadline := time.Now().Add(5 * time.Second)
	for rec.Throttled() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the sender never waited for room")
		}
		time.Sleep(time.Millisecond)
	}
	select {
	case <-done:
		t.Fatal("all 30 records were taken by a 10-record queue while the store was stuck")
	default:
	}
	close(st.release)
	<-done
	rec.Close()
	if got := rec.Dropped(); got != 0 {
		t.Fatalf("dropped %d records; a store that catches up loses none", got)
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if len(st.got) != 31 {
		t.Fatalf("stored %d records, want 31", len(st.got))
	}
	for i, f := range st.got {
		if f.Data != strconv.Itoa(i) {
			t.Fatalf("record %d is %q: out of order", i, f.Data)
		}
	}
}

// TestRepeatedHelloIsRecordedRedacted: a hello said again after the socket
// is authenticated (closed 4400) and a broken frame that carries a token
// are recorded without the token.
func TestRepeatedHelloIsRecordedRedacted(t *testing.T) {
	st := &gatedStore{entered: make(chan struct{}), release: make(chan struct{})}
	close(st.release)
	rec := jobsocket.NewRecorder(st, jobsocket.RecorderLimits{}, nil)
	l, ev := MustListener(t, jobsocket.Config{Recorder: rec})
	l.Register(jobsocket.Registration{JobID: "j", Role: "s", Token: token})
	c := connected(t, l, ev)
	c.SendText(hello(token))
	c.Closed(5 * time.Second)
	c = connected(t, l, ev)
	c.SendText(`{"type":"state","token":"` + token + `",`)
	c.Closed(5 * time.Second)
	ev.wait(t, jobsocket.Disconnected)
	rec.Close()
	st.mu.Lock()
	defer st.mu.Unlock()
	if len(st.got) < 4 {
		t.Fatalf("recorded %d frames, want the two hellos, the repeat and the broken frame", len(st.got))
	}
	for _, f := range st.got {
		if strings.Contains(f.Data, token) {
			t.Errorf("a %s frame was recorded with its token: %s", f.Type, f.Data)
		}
	}
}
