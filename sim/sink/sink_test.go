package sink

import (
	"net"
	"strconv"
	"testing"
	"time"
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
