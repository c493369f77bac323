package jobsocket_test

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/normsim/normsim/protocol"
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

// TestRecorderKeepsPastItsLimitsAndSlowsTheFlooder: while the store is
// stuck, records past the queue's limits (count or bytes) are kept, not
// lost; Throttle holds a connection with more than its fair share
// waiting, and lets one with a record or two through at once; once the
// store catches up every record is written, in order, and the flooder
// reads on. Only a record after Close is lost, and counted.
func TestRecorderKeepsPastItsLimitsAndSlowsTheFlooder(t *testing.T) {
	for _, lim := range []jobsocket.RecorderLimits{
		{Records: 10, Bytes: 1 << 20},
		{Records: 1000, Bytes: 100 << 10}, // 40 KiB records: two fit
	} {
		st := &gatedStore{entered: make(chan struct{}), release: make(chan struct{})}
		rec := jobsocket.NewRecorder(st, lim, nil)
		frame := func(job string, i int) sim.FrameRecord {
			return sim.FrameRecord{Node: "a", JobID: job, Role: "source", Type: "abort", Data: strconv.Itoa(i) + strings.Repeat(".", 40<<10)}
		}
		rec.Record(frame("flood", 0))
		<-st.entered
		for i := 1; i <= 30; i++ {
			rec.Record(frame("flood", i))
		}
		rec.Record(frame("calm", 31))
		if got := rec.Dropped(); got != 0 {
			t.Fatalf("%+v: dropped %d records past the limits; want them kept", lim, got)
		}
		calm := make(chan struct{})
		go func() { rec.Throttle("a", "calm", "source"); close(calm) }()
		select {
		case <-calm:
		case <-time.After(5 * time.Second):
			t.Fatalf("%+v: a connection with one record waiting was throttled for the flooder's", lim)
		}
		flood := make(chan struct{})
		go func() { rec.Throttle("a", "flood", "source"); close(flood) }()
		select {
		case <-flood:
			t.Fatalf("%+v: the flooder read on while the store was stuck and the queue full", lim)
		case <-time.After(50 * time.Millisecond):
		}
		if rec.Throttled() != 1 {
			t.Errorf("%+v: throttled %d, want 1", lim, rec.Throttled())
		}
		close(st.release)
		select {
		case <-flood:
		case <-time.After(5 * time.Second):
			t.Fatalf("%+v: the flooder was still held after the store caught up", lim)
		}
		rec.Close()
		st.mu.Lock()
		if len(st.got) != 32 {
			t.Fatalf("%+v: stored %d records, want 32", lim, len(st.got))
		}
		for i, f := range st.got {
			if !strings.HasPrefix(f.Data, strconv.Itoa(i)+".") {
				t.Fatalf("%+v: record %d is %.8q: out of order", lim, i, f.Data)
			}
		}
		st.mu.Unlock()
		rec.Record(frame("flood", 32)) // after Close: lost and counted, not a panic
		if got := rec.Dropped(); got != 1 {
			t.Fatalf("%+v: dropped %d after Close, want 1", lim, got)
		}
	}
}

// TestRecorderWaitIsBounded: a store that never catches up holds a
// flooding connection for the recorder's wait, then lets it read on, its
// records still queued rather than lost.
func TestRecorderWaitIsBounded(t *testing.T) {
	st := &gatedStore{entered: make(chan struct{}), release: make(chan struct{})}
	rec := jobsocket.NewRecorder(st, jobsocket.RecorderLimits{Records: 4, Bytes: 1 << 20, Wait: 30 * time.Millisecond}, nil)
	defer func() { close(st.release); rec.Close() }()
	record := func(i int) {
		rec.Record(sim.FrameRecord{Node: "a", JobID: "j", Role: "source", Type: "state", Data: strconv.Itoa(i)})
	}
	record(0)
	<-st.entered // the writer holds record 0; the next 20 wait
	for i := 1; i <= 20; i++ {
		record(i)
	}
	start := time.Now()
	done := make(chan struct{})
	go func() { rec.Throttle("a", "j", "source"); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Throttle outlasted the recorder's wait")
	}
	if waited := time.Since(start); waited < 30*time.Millisecond || rec.Throttled() != 1 {
		t.Errorf("Throttle returned after %v, throttled %d; want the 30ms wait, once", waited, rec.Throttled())
	}
	if rec.Dropped() != 0 {
		t.Fatalf("dropped %d; a wait that runs out loses nothing", rec.Dropped())
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
	requireRecordedWithoutToken(t, st, 4, "the two hellos, the repeat and the broken frame")
}

// requireRecordedWithoutToken fails unless st holds at least n frames
// (want says which) and none of them holds the token.
func requireRecordedWithoutToken(t *testing.T, st *gatedStore, n int, want string) {
	t.Helper()
	st.mu.Lock()
	defer st.mu.Unlock()
	if len(st.got) < n {
		t.Fatalf("recorded %d frames, want %s", len(st.got), want)
	}
	for _, f := range st.got {
		if strings.Contains(f.Data, token) {
			t.Errorf("a %s frame was recorded with the job's token: %s", f.Type, f.Data)
		}
	}
}

// flakyStore refuses its first writes, then keeps what it is given.
type flakyStore struct {
	sim.Store
	mu    sync.Mutex
	fails int
	got   []sim.FrameRecord
}

func (s *flakyStore) RecordFrames(ctx context.Context, frs []sim.FrameRecord) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fails > 0 {
		s.fails--
		return context.DeadlineExceeded
	}
	s.got = append(s.got, frs...)
	return nil
}

// TestRecorderTriesABatchAgain: a store that misses a write's deadline
// twice (busy with the journal) loses nothing; one that never takes the
// batch loses it after the recorder's tries, counted, in all and by
// instance (attack round 11, B6: an instance whose every record was
// refused looked as if its job never connected).
func TestRecorderTriesABatchAgain(t *testing.T) {
	for _, c := range []struct {
		fails, kept, lost int
		lostOfJ           int64
	}{{fails: 2, kept: 4}, {fails: 100, lost: 4, lostOfJ: 3}} {
		st := &flakyStore{fails: c.fails}
		rec := jobsocket.NewRecorder(st, jobsocket.DefaultRecorderLimits, nil)
		for i := range 3 {
			rec.Record(sim.FrameRecord{JobID: "j", Type: "state", Data: strconv.Itoa(i)})
		}
		rec.Record(sim.FrameRecord{JobID: "j", Role: "other", Type: "hello", Data: "{}"})
		rec.Close()
		if len(st.got) != c.kept || rec.Dropped() != int64(c.lost) {
			t.Errorf("store failing %d times: kept %d, lost %d; want %d and %d", c.fails, len(st.got), rec.Dropped(), c.kept, c.lost)
		}
		if got := rec.LostOf("j", ""); got != c.lostOfJ {
			t.Errorf("store failing %d times: %d of the instance's records lost, want %d", c.fails, got, c.lostOfJ)
		}
	}
}

// TestACloseReasonIsKeptWithoutTheToken (attack round 9a, M2): a job that
// closes its socket with its token in the reason (token=…, a JSON object,
// or the bare value) has sent its secret; the event keeps the reason
// without it.
func TestACloseReasonIsKeptWithoutTheToken(t *testing.T) {
	for _, reason := range []string{"token=" + token, `{"token":"` + token + `"}`, "bye " + token + " now", "Token: " + token} {
		l, ev := MustListener(t, jobsocket.Config{})
		l.Register(jobsocket.Registration{JobID: "j", Role: "s", Token: token})
		c := connected(t, l, ev)
		c.Conn().Close(4000, reason)
		got := ev.wait(t, jobsocket.Disconnected)
		if strings.Contains(got.Reason, token) || !strings.Contains(got.Reason, "<redacted>") || got.Code != 4000 {
			t.Errorf("closed with %q: the event says %d %q; want 4000 with the token redacted", reason, got.Code, got.Reason)
		}
	}
}

// TestATokenAJobEchoesInAFrameIsNotKept (round 12): an abort whose reason
// quoted the job's token ("bad token <tok>") was recorded as sent, and
// /frames served the secret; a close reason with it was already redacted.
// The frame record and the reason passed on to the migration keep it
// redacted, in a reason and in a payload alike.
func TestATokenAJobEchoesInAFrameIsNotKept(t *testing.T) {
	st := &gatedStore{entered: make(chan struct{}), release: make(chan struct{})}
	close(st.release)
	rec := jobsocket.NewRecorder(st, jobsocket.RecorderLimits{}, nil)
	l, ev := MustListener(t, jobsocket.Config{Recorder: rec})
	l.Register(jobsocket.Registration{JobID: "j", Role: "s", Token: token})
	c := connected(t, l, ev)
	l.Expect("j", "s", protocol.TypeState, protocol.TypeAbort)
	c.SendText(`{"type":"abort","reason":"my token ` + token + ` looks wrong"}`)
	if f := ev.wait(t, jobsocket.Frame); strings.Contains(f.Frame.Reason, token) || !strings.Contains(f.Frame.Reason, "<redacted>") {
		t.Errorf("the abort's reason was passed on as %q; want the token redacted", f.Frame.Reason)
	}
	c.SendText(`{"type":"state","payload":{"note":"` + token + `"}}`)
	ev.wait(t, jobsocket.Frame)
	rec.Close()
	requireRecordedWithoutToken(t, st, 3, "the hello, the abort and the state")
}

// Attack round 15, A-F6: a job's records keep none of its instances'
// tokens, the one that spoke or another; one gone while the job has
// another instance stays redacted (a target echoes the state its source
// handed it), and is forgotten with the job's last instance.
func TestAJobsRecordsKeepNoneOfItsTokens(t *testing.T) {
	st := &gatedStore{entered: make(chan struct{}), release: make(chan struct{})}
	close(st.release)
	rec := jobsocket.NewRecorder(st, jobsocket.RecorderLimits{}, nil)
	rec.Know("j", "src", "srcsecret")
	rec.Know("j", "tgt", "tgtsecret")
	rec.Know("other", "x", "othersecret")
	rec.Record(sim.FrameRecord{JobID: "j", Role: "tgt", Direction: "out", Type: "initial-state", Data: `{"t":"srcsecret","u":"tgtsecret"}`})
	rec.Forget("j", "src")
	rec.Record(sim.FrameRecord{JobID: "j", Role: "tgt", Direction: "in", Type: "state", Data: `{"t":"srcsecret"}`})
	rec.Record(sim.FrameRecord{JobID: "other", Role: "x", Direction: "in", Type: "state", Data: `{"t":"srcsecret"}`})
	rec.Forget("j", "tgt")
	rec.Record(sim.FrameRecord{JobID: "j", Role: "tgt", Direction: "in", Type: "state", Data: `{"t":"tgtsecret"}`})
	rec.Close()
	want := []string{`{"t":"<redacted>","u":"<redacted>"}`, `{"t":"<redacted>"}`, `{"t":"srcsecret"}`, `{"t":"tgtsecret"}`}
	st.mu.Lock()
	defer st.mu.Unlock()
	if len(st.got) != len(want) {
		t.Fatalf("recorded %d frames, want %d", len(st.got), len(want))
	}
	for i, f := range st.got {
		if f.Data != want[i] {
			t.Errorf("record %d kept %s, want %s", i, f.Data, want[i])
		}
	}
}
