package sink

import (
	"math"
	"math/rand/v2"
	"net"
	"reflect"
	"runtime"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/normsim/normsim/sim"
)

func TestSinkAttributesPackets(t *testing.T) {
	s := New(nil, 0)
	if err := s.Open("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c, err := net.Dial("udp", s.pc.LocalAddr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	poke, stop := s.Watch("j1")
	defer stop()
	for _, m := range []string{`{"job":"j1","instance":"a","seq":1}`, `garbage`, `{"job":"j1","instance":"b","seq":2}`, `{"job":"j2","instance":"c","seq":1}`} {
		c.Write([]byte(m))
	}
	deadline := time.After(5 * time.Second)
	for len(s.Packets("j1", time.Time{})) < 2 {
		select {
		case <-poke:
		case <-deadline:
			t.Fatalf("packets = %v", s.Packets("j1", time.Time{}))
		}
	}
	got := s.Packets("j1", time.Time{})
	if got[0].Instance != "a" || got[1].Instance != "b" || got[1].Seq != 2 {
		t.Fatalf("packets = %+v", got)
	}
}

// TestSinkDatesPacketsByArrival: a packet is dated by when it reached the
// sink's socket, not by when the sink's reader got to it. The reader is
// held (the sink's lock taken) for 300 ms while the packets wait on the
// socket, as the one goroutine reading every job's packets falls behind
// under load; a source's packet sent before its source-stopped-output was
// then dated after the frame. The sink's clock is a test's, 26 years off
// the real one: the kernel's stamp is carried over onto it.
func TestSinkDatesPacketsByArrival(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the kernel stamps a datagram's arrival on Linux only")
	}
	clock := offClock()
	s := New(clock, 0)
	if err := s.Open("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c, err := net.Dial("udp", s.pc.LocalAddr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	poke, stop := s.Watch("j1")
	defer stop()
	const n = 5
	s.mu.Lock()
	sentFrom := clock()
	for i := range n {
		c.Write([]byte(`{"job":"j1","instance":"a","seq":` + strconv.Itoa(i) + `}`))
	}
	sentTo := clock()
	time.Sleep(heldFor)
	s.mu.Unlock()
	deadline := time.After(5 * time.Second)
	for len(s.Packets("j1", time.Time{})) < n {
		select {
		case <-poke:
		case <-deadline:
			t.Fatalf("packets = %v", s.Packets("j1", time.Time{}))
		}
	}
	for _, p := range s.Packets("j1", time.Time{}) {
		checkArrival(t, "packet "+strconv.FormatInt(p.Seq, 10), p.At, sentFrom, sentTo)
	}
}

// heldFor is how long the arrival tests hold a receiver back.
const heldFor = 300 * time.Millisecond

// offClock is a test's clock, running with the real one from 2000-01-01.
func offClock() func() time.Time {
	epoch, start := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC), time.Now()
	return func() time.Time { return epoch.Add(time.Since(start)) }
}

// checkArrival says whether at is when a datagram sent between sentFrom
// and sentTo arrived over loopback (by the receiver's clock), within a few
// milliseconds, not heldFor later when it was read.
func checkArrival(t *testing.T, what string, at, sentFrom, sentTo time.Time) {
	t.Helper()
	if at.Before(sentFrom.Add(-time.Millisecond)) || at.After(sentTo.Add(20*time.Millisecond)) {
		t.Errorf("%s dated %v, %v after it was sent (sent within %v); want when it arrived, not when it was read", what, at, at.Sub(sentFrom), sentTo.Sub(sentFrom))
	}
}

// TestArrivalsFallBackToTheClock: with no stamp from the kernel a datagram
// is dated when it is read; a stamp is never dated before the one read
// before it, unless the clock itself went back.
func TestArrivalsFallBackToTheClock(t *testing.T) {
	t.Parallel()
	base := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	now := base
	a := arrivals{now: func() time.Time { return now }}
	if got := a.at(time.Time{}); !got.Equal(base) {
		t.Fatalf("no stamp: %v, want the clock's %v", got, base)
	}
	// Arrived 200 ms ago by the real clock: 200 ms before the sink's.
	now = base.Add(time.Second)
	if got := a.at(time.Now().Add(-200 * time.Millisecond)); got.Sub(now) > -200*time.Millisecond || got.Sub(now) < -250*time.Millisecond {
		t.Fatalf("stamped 200 ms ago: %v before the clock", now.Sub(got))
	}
	prev := a.last
	if got := a.at(time.Now().Add(-time.Hour)); !got.Equal(prev) {
		t.Fatalf("a stamp read after one that arrived later: %v, want %v", got, prev)
	}
	if got := a.at(time.Now().Add(time.Hour)); !got.Equal(now) {
		t.Fatalf("a stamp in the future: %v, want the clock's %v", got, now)
	}
	now = base // the clock went back
	if got := a.at(time.Now()); got.After(base) {
		t.Fatalf("after the clock went back: %v, after it", got)
	}
}

// TestControlAllocatesNothing: a datagram's control messages, its
// arrival stamp and the drop count both, are read for every datagram,
// and without an allocation.
func TestControlAllocatesNothing(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the kernel stamps a datagram's arrival on Linux only")
	}
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	uc := pc.(*net.UDPConn)
	if !watchKernelDrops(uc) || !stampArrivals(uc) {
		t.Fatal("the socket options were refused")
	}
	sent := time.Now()
	if _, err := uc.WriteTo([]byte("x"), uc.LocalAddr()); err != nil {
		t.Fatal(err)
	}
	oob := make([]byte, controlBuffer)
	_, oobn, _, _, err := uc.ReadMsgUDPAddrPort(make([]byte, 16), oob)
	if err != nil {
		t.Fatal(err)
	}
	arrived, _ := control(oob[:oobn])
	if d := arrived.Sub(sent); d < -time.Millisecond || d > time.Second {
		t.Fatalf("arrival stamp %v, %v after the datagram was sent", arrived, d)
	}
	a := arrivals{now: time.Now}
	if n := testing.AllocsPerRun(100, func() { a.at(arrived); control(oob[:oobn]) }); n != 0 {
		t.Fatalf("%v allocations a datagram", n)
	}
}

// TestSinkCountsWhatItCannotRead sends every kind of datagram the sink
// cannot read and checks each is counted against the job whose address
// sent readable packets before, or as unattributed.
func TestSinkCountsWhatItCannotRead(t *testing.T) {
	s := New(nil, 0)
	start := time.Now()
	from := "127.0.0.1:4000" // the job's sender
	stranger := "127.0.0.1:4001"
	s.receive([]byte(`{"job":"j1","instance":"a","seq":1}`), from, start)
	for _, d := range []string{
		`garbage`,                               // not JSON
		`[1,2]`,                                 // not an object
		`{"instance":"a","seq":2}`,              // no job
		`{"job":"j1","seq":2}`,                  // no instance
		`{"job":"j1","instance":"a","seq":2.5}`, // not an integer
		`{"job":"j1","instance":"a","seq":"3"}`, // a string
		`{"job":"j1","instance":"a"}`,           // no seq at all
		string(make([]byte, 2049)),              // too long
	} {
		s.receive([]byte(d), from, start.Add(time.Millisecond))
	}
	s.receive([]byte("\xff\xfe binary"), stranger, start.Add(time.Millisecond))
	s.receive([]byte(`{"job":"j1","instance":"a","seq":9}`), from, start.Add(2*time.Millisecond))

	if got := len(s.Packets("j1", time.Time{})); got != 2 {
		t.Fatalf("kept %d readable packets, want 2", got)
	}
	u := s.Unreadable("j1", start)
	if u == nil || u.Count != 9 || u.FromJob != 8 || u.Unattributed != 1 {
		t.Fatalf("unreadable = %+v, want 9: 8 from the job, 1 unattributed", u)
	}
	want := map[string]int64{whyNotJSON: 3, whyNoJob: 1, whyNoInst: 1, whyBadSeq: 3, whyTooLong: 1}
	for why, n := range want {
		if u.Reasons[why] != n {
			t.Errorf("%q: %d, want %d (all: %v)", why, u.Reasons[why], n, u.Reasons)
		}
	}
	if u.Example != "garbage" {
		t.Errorf("example %q", u.Example)
	}
	if later := s.Unreadable("j1", start.Add(2*time.Millisecond)); later != nil {
		t.Errorf("nothing unreadable arrived after the last one; got %+v", later)
	}
	if other := s.Unreadable("j2", start); other == nil || other.FromJob != 0 || other.Unattributed != 1 {
		t.Errorf("another job sees only the unattributed datagram; got %+v", other)
	}
}

// TestSinkKeepsOnlyAcceptedJobs: datagrams naming 10,000 job ids nobody
// runs are counted and dropped, not kept; a live job's packets are kept,
// and forgotten with the job.
func TestSinkKeepsOnlyAcceptedJobs(t *testing.T) {
	s := New(nil, 0)
	s.Accept(func(job string) bool { return job == "live" })
	at := time.Now()
	for i := range 10000 {
		s.receive([]byte(`{"job":"stranger-`+strconv.Itoa(i)+`","instance":"x","seq":1}`), "127.0.0.1:9", at)
	}
	s.receive([]byte(`{"job":"live","instance":"a","seq":1}`), "127.0.0.1:10", at)
	if s.Refused() != 10000 {
		t.Fatalf("refused %d, want 10000", s.Refused())
	}
	s.mu.Lock()
	jobs := len(s.byJob)
	s.mu.Unlock()
	if jobs != 1 || len(s.Packets("live", time.Time{})) != 1 {
		t.Fatalf("the sink holds %d jobs, want only the live one", jobs)
	}
	s.Forget("live")
	if s.Seen("live") {
		t.Fatal("a forgotten job's packets are still held")
	}
}

// TestSinkAsksOncePerSender: a live job's packets from one address ask
// whether the job is known once, not per packet (the answer takes the
// manager's lock); after Forget it is asked again.
func TestSinkAsksOncePerSender(t *testing.T) {
	s := New(nil, 0)
	asked := 0
	s.Accept(func(job string) bool { asked++; return job == "live" })
	for i := range 100 {
		s.receive([]byte(`{"job":"live","instance":"a","seq":`+strconv.Itoa(i)+`}`), "127.0.0.1:10", time.Now())
	}
	if asked != 1 || len(s.Packets("live", time.Time{})) != 100 {
		t.Fatalf("asked %d times for 100 packets, kept %d", asked, len(s.Packets("live", time.Time{})))
	}
	s.Forget("live")
	s.receive([]byte(`{"job":"live","instance":"a","seq":1}`), "127.0.0.1:10", time.Now())
	if asked != 2 {
		t.Fatalf("asked %d times after Forget, want 2", asked)
	}
}

// TestSinkKeepsWhatEachInstanceSent: the packets are trimmed to limit, but
// the ranges of what each instance sent cover the job's whole life, one
// range per instance that counts without a hole (whatever the order and
// the repeats UDP delivers), and go with Forget.
func TestSinkKeepsWhatEachInstanceSent(t *testing.T) {
	t.Parallel()
	s := New(nil, 10)
	at := time.Now()
	send := func(inst string, seq int64) {
		s.receive([]byte(`{"job":"j","instance":"`+inst+`","seq":`+strconv.FormatInt(seq, 10)+`}`), "127.0.0.1:1", at)
	}
	for seq := int64(0); seq < 1000; seq++ {
		switch seq {
		case 500: // 500 and 501 arrive swapped, 502 twice
			send("a", 501)
			send("a", 500)
		case 501:
		default:
			send("a", seq)
		}
		if seq == 502 {
			send("a", 502)
		}
	}
	for seq := int64(1000); seq < 1005; seq++ {
		send("b", seq)
	}
	if n := len(s.Packets("j", time.Time{})); n > 10 {
		t.Fatalf("kept %d packets, limit 10", n)
	}
	got := s.Sent("j")
	want := map[string][]sim.SeqRange{"a": {{From: 0, To: 999}}, "b": {{From: 1000, To: 1004}}}
	if !reflect.DeepEqual(got.ByInstance, want) || len(got.Earlier) != 0 || got.Coalesced != 0 {
		t.Fatalf("sent = %+v, want %+v", got, want)
	}
	s.Forget("j")
	if got := s.Sent("j"); len(got.ByInstance) != 0 {
		t.Fatalf("a forgotten job's ranges are still held: %+v", got)
	}
}

func TestInsertSeq(t *testing.T) {
	t.Parallel()
	const lo, hi = math.MinInt64, math.MaxInt64
	r := func(from, to int64) sim.SeqRange { return sim.SeqRange{From: from, To: to} }
	tests := []struct {
		name string
		in   []sim.SeqRange
		seq  int64
		want []sim.SeqRange
	}{
		{"first", nil, 5, []sim.SeqRange{r(5, 5)}},
		{"counting on", []sim.SeqRange{r(1, 4)}, 5, []sim.SeqRange{r(1, 5)}},
		{"sent before", []sim.SeqRange{r(1, 4)}, 3, []sim.SeqRange{r(1, 4)}},
		{"just below", []sim.SeqRange{r(1, 4)}, 0, []sim.SeqRange{r(0, 4)}},
		{"apart below", []sim.SeqRange{r(1, 4)}, -1, []sim.SeqRange{r(-1, -1), r(1, 4)}},
		{"apart above", []sim.SeqRange{r(1, 4)}, 6, []sim.SeqRange{r(1, 4), r(6, 6)}},
		{"fills a hole of one", []sim.SeqRange{r(1, 4), r(6, 9)}, 5, []sim.SeqRange{r(1, 9)}},
		{"extends the lower of two", []sim.SeqRange{r(1, 4), r(7, 9)}, 5, []sim.SeqRange{r(1, 5), r(7, 9)}},
		{"extends the upper of two", []sim.SeqRange{r(1, 4), r(7, 9)}, 6, []sim.SeqRange{r(1, 4), r(6, 9)}},
		{"between", []sim.SeqRange{r(1, 2), r(8, 9)}, 5, []sim.SeqRange{r(1, 2), r(5, 5), r(8, 9)}},
		{"a merged hole keeps its mark", []sim.SeqRange{r(1, 4), {From: 6, To: 9, Coalesced: true}}, 5, []sim.SeqRange{{From: 1, To: 9, Coalesced: true}}},
		{"the lowest number", []sim.SeqRange{r(lo+1, lo+2)}, lo, []sim.SeqRange{r(lo, lo+2)}},
		{"the highest number", []sim.SeqRange{r(hi-2, hi-1)}, hi, []sim.SeqRange{r(hi-2, hi)}},
		{"past the highest", []sim.SeqRange{r(hi, hi)}, lo, []sim.SeqRange{r(lo, lo), r(hi, hi)}},
	}
	for _, tt := range tests {
		if got := insertSeq(slices.Clone(tt.in), tt.seq); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s: insert %d into %v = %v, want %v", tt.name, tt.seq, tt.in, got, tt.want)
		}
	}
}

// TestSentStaysBounded: a job migrated more times than the bound keeps
// one range for the instances it no longer tells apart, exactly, and the
// newest instances apart; nothing is coalesced.
func TestSentStaysBounded(t *testing.T) {
	t.Parallel()
	h := newHistory()
	for i := range 3000 {
		for seq := int64(i * 10); seq < int64(i*10+10); seq++ {
			h.add("i"+strconv.Itoa(i), seq, 8)
		}
	}
	got := h.sent()
	if h.n > 8 || got.Coalesced != 0 || len(got.Earlier) != 1 || got.Earlier[0].From != 0 ||
		!reflect.DeepEqual(got.ByInstance["i2999"], []sim.SeqRange{{From: 29990, To: 29999}}) {
		t.Fatalf("%d ranges held (bound 8): %+v", h.n, got)
	}
	// The instances still apart take up where earlier ends, without a
	// hole: every number sent is there, once.
	next := got.Earlier[0].To + 1
	for i := 2999 - len(got.ByInstance) + 1; i < 3000; i++ {
		rs := got.ByInstance["i"+strconv.Itoa(i)]
		if len(rs) != 1 || rs[0].From != next || rs[0].To != next+9 {
			t.Fatalf("i%d: %+v, want %d to %d (all: %+v)", i, rs, next, next+9, got)
		}
		next += 10
	}
}

// TestSentCoalescesCounted: a job numbering with holes goes over the bound
// on one instance; the sink then fills the smallest holes, counts each,
// and marks the ranges it merged. Every number sent is still covered, and
// the numbers in ranges not marked were all sent.
func TestSentCoalescesCounted(t *testing.T) {
	t.Parallel()
	rnd := rand.New(rand.NewPCG(1, 2))
	h := newHistory()
	sent := map[string]map[int64]bool{"src": {}, "tgt": {}}
	for range 20000 {
		inst := "src"
		if rnd.IntN(4) == 0 {
			inst = "tgt"
		}
		seq := rnd.Int64N(100000)
		sent[inst][seq] = true
		h.add(inst, seq, 64)
		if h.n > 64 {
			t.Fatalf("%d ranges held, bound 64", h.n)
		}
	}
	got := h.sent()
	if got.Coalesced == 0 {
		t.Fatal("nothing coalesced")
	}
	for inst, seqs := range sent {
		rs := got.ByInstance[inst]
		for seq := range seqs {
			if !slices.ContainsFunc(rs, func(r sim.SeqRange) bool { return r.From <= seq && seq <= r.To }) {
				t.Fatalf("%s sent %d, which no range covers", inst, seq)
			}
		}
		for _, r := range rs {
			if !seqs[r.From] || !seqs[r.To] {
				t.Fatalf("%s: range %+v does not start and end at numbers sent", inst, r)
			}
			for seq := r.From; !r.Coalesced && seq <= r.To; seq++ {
				if !seqs[seq] {
					t.Fatalf("%s: range %+v is not marked coalesced, but %d was never sent", inst, r, seq)
				}
			}
		}
	}
}
