// Package sink is normsim's output sink: a UDP endpoint jobs send their
// output packets to (its address handed to them as NORMSIM_OUTPUT_ADDR), so
// a migration can prove whether the output continued across the cutover.
//
// A packet is one datagram holding a JSON object
// {"job":"<jobId>","instance":"<role>","seq":<n>}; the sink stamps it with
// its arrival time (the kernel's, on Linux: not when the sink's reader got
// to it) and keeps the most recent packets per job, and, over
// the job's whole life, the numbers each instance sent as ranges (bounded;
// what the bound merges is counted). A datagram it
// cannot read (not JSON, no job or instance, a seq that is not an integer)
// is counted, never dropped silently: against the job whose packets came
// from the same address before, or else as unattributed.
package sink

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/normsim/normsim/sim"
)

// EnvAddr is the env var that carries the sink's address to a job.
const EnvAddr = "NORMSIM_OUTPUT_ADDR"

// Sink receives output packets.
type Sink struct {
	now   func() time.Time
	limit int
	pc    net.PacketConn
	mu    sync.Mutex
	byJob map[string][]sim.Packet
	// sent is every number each job's instances sent, over the job's
	// whole life, as ranges: byJob keeps only the newest limit packets,
	// and a target that goes back to numbers sent before them must still
	// be caught. At most maxRanges ranges a job.
	sent      map[string]*history
	maxRanges int
	wg        sync.WaitGroup
	notify    map[string][]chan struct{}
	// unreadable holds the datagrams that could not be read, by the job
	// their sender's address last sent a readable packet for ("" when
	// none); senders maps those addresses to jobs.
	unreadable map[string][]unreadable
	senders    map[string]string
	// accept, when set, says which jobs' packets to keep: the sink is
	// open to anyone who can reach the port, and must not keep every job
	// id it hears. refused counts the packets it turned away.
	accept  atomic.Pointer[func(jobID string) bool]
	refused atomic.Int64
	log     *slog.Logger
}

// unreadable is one datagram the sink could not read.
type unreadable struct {
	at     time.Time
	reason string
	data   string
}

// maxSenders bounds the address → job map; past it the map starts over
// (packets from forgotten senders count as unattributed until they send a
// readable one again).
const maxSenders = 4096

// New returns a sink keeping up to limit packets per job.
func New(now func() time.Time, limit int) *Sink {
	if now == nil {
		now = time.Now
	}
	if limit <= 0 {
		limit = 50000
	}
	return &Sink{now: now, limit: limit, byJob: map[string][]sim.Packet{}, sent: map[string]*history{}, maxRanges: maxRanges, notify: map[string][]chan struct{}{},
		unreadable: map[string][]unreadable{}, senders: map[string]string{}, log: slog.New(slog.DiscardHandler)}
}

// Open listens on a UDP address and receives in the background.
func (s *Sink) Open(addr string) error {
	pc, err := net.ListenPacket("udp", addr)
	if err != nil {
		return err
	}
	s.pc = pc
	uc := pc.(*net.UDPConn)
	s.wg.Add(1)
	go s.loop(uc, stampArrivals(uc))
	return nil
}

// Port is the bound UDP port.
func (s *Sink) Port() int { return s.pc.LocalAddr().(*net.UDPAddr).Port }

// Close stops receiving.
func (s *Sink) Close() error {
	if s.pc == nil {
		return nil
	}
	err := s.pc.Close()
	s.wg.Wait()
	return err
}

// loop reads the datagrams. One goroutine reads every job's packets, and
// under load it falls behind (100 ms and more on two busy cores), so a
// packet is dated by when it arrived, where the kernel stamps that
// (stamped): dated when read, a source's packet sent before its
// source-stopped-output came after the frame, and the source was blamed.
func (s *Sink) loop(uc *net.UDPConn, stamped bool) {
	defer s.wg.Done()
	// One byte more than a readable packet needs, so a datagram cut by
	// the buffer is seen as too long rather than as bad JSON.
	buf := make([]byte, 2049)
	var oob []byte
	if stamped {
		oob = make([]byte, controlBuffer)
	}
	clock := arrivals{now: s.now}
	for {
		n, oobn, _, from, err := uc.ReadMsgUDP(buf, oob)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		arrived, _ := control(oob[:oobn])
		s.receive(buf[:n], from.String(), clock.at(arrived))
	}
}

// arrivals dates the datagrams one socket's reader reads, in turn, by
// when they arrived, on the clock now reads.
type arrivals struct {
	now  func() time.Time
	last time.Time
}

// at is when a datagram arrived: the kernel's stamp of its arrival, as how
// long ago that was, carried over onto now's clock (a test's may be
// fake); now itself where the kernel gave no stamp (zero). A stamp is
// never dated before the datagram read before it, which arrived first
// (the two clocks are read apart), unless now has gone back past that.
func (a *arrivals) at(stamp time.Time) time.Time {
	now := a.now()
	at := now
	if !stamp.IsZero() {
		// now is read first: the wait for it counts in the delay.
		at = now.Add(-max(time.Since(stamp), 0))
		if at.Before(a.last) && !a.last.After(now) {
			at = a.last
		}
	}
	a.last = at
	return at
}

// receive keeps one datagram: a packet, or a count of one it could not read.
func (s *Sink) receive(data []byte, from string, at time.Time) {
	p, why := parsePacket(data)
	if why != "" {
		s.mu.Lock()
		job := s.senders[from]
		s.unreadable[job] = trim(append(s.unreadable[job], unreadable{at: at, reason: why, data: example(data)}), s.limit)
		s.mu.Unlock()
		return
	}
	p.At = at
	// A sender already seen sending for this job was accepted then: the
	// manager (whose lock the frame relays take) is asked once per
	// sender, not per packet.
	s.mu.Lock()
	known := s.senders[from] == p.JobID
	s.mu.Unlock()
	if accept := s.accept.Load(); !known && accept != nil && !(*accept)(p.JobID) {
		// No live job of that name: nothing would judge it. Counted, and
		// said once so the count has somewhere to be seen.
		if s.refused.Add(1) == 1 {
			s.log.Warn("output sink: packets naming a job normsim does not run are dropped and counted", "job", p.JobID, "from", from)
		}
		return
	}
	s.mu.Lock()
	if _, ok := s.senders[from]; !ok && len(s.senders) >= maxSenders {
		clear(s.senders)
	}
	s.senders[from] = p.JobID
	s.mu.Unlock()
	s.add(p)
}

// Reasons a datagram could not be read, as the report counts them.
const (
	whyNotJSON   = "not a JSON object"
	whyNoJob     = "naming no job"
	whyNoInst    = "naming no instance"
	whyBadSeq    = "with a seq that is not an integer"
	whyTooLong   = "longer than 2048 bytes"
	exampleBytes = 80
)

// parsePacket reads {"job","instance","seq"} or says why it cannot.
func parsePacket(data []byte) (sim.Packet, string) {
	if len(data) > 2048 {
		return sim.Packet{}, whyTooLong
	}
	var raw struct {
		JobID    string          `json:"job"`
		Instance string          `json:"instance"`
		Seq      json.RawMessage `json:"seq"`
	}
	if json.Unmarshal(data, &raw) != nil || !bytes.HasPrefix(bytes.TrimSpace(data), []byte("{")) {
		return sim.Packet{}, whyNotJSON
	}
	switch {
	case raw.JobID == "":
		return sim.Packet{}, whyNoJob
	case raw.Instance == "":
		return sim.Packet{}, whyNoInst
	}
	seq, err := strconv.ParseInt(string(raw.Seq), 10, 64)
	if err != nil {
		return sim.Packet{}, whyBadSeq
	}
	return sim.Packet{JobID: raw.JobID, Instance: raw.Instance, Seq: seq}, ""
}

// example is a datagram as a report quotes it: valid UTF-8, cut short.
func example(data []byte) string {
	if len(data) > exampleBytes {
		data = data[:exampleBytes]
	}
	return string(bytes.ToValidUTF8(data, []byte(string(utf8.RuneError))))
}

// trim keeps the newest half of xs once it is over limit.
func trim[T any](xs []T, limit int) []T {
	if len(xs) > limit {
		xs = append(xs[:0], xs[len(xs)-limit/2:]...)
	}
	return xs
}

// Accept makes the sink keep packets only of the jobs f accepts (the ones
// normsim runs); the others are counted (Refused) and dropped. f is
// called without the sink's lock held.
func (s *Sink) Accept(f func(jobID string) bool) { s.accept.Store(&f) }

// SetLogger gives the sink a logger for what it turns away; call it
// before Open.
func (s *Sink) SetLogger(l *slog.Logger) { s.log = l }

// Refused is how many readable packets named a job Accept refused.
func (s *Sink) Refused() int64 { return s.refused.Load() }

// Unreadable counts the datagrams received at or after since that could
// not be read: those from the job's senders and those from senders tied to
// no job. Nil when there were none.
func (s *Sink) Unreadable(jobID string, since time.Time) *sim.UnreadablePackets {
	s.mu.Lock()
	defer s.mu.Unlock()
	u := &sim.UnreadablePackets{Reasons: map[string]int64{}}
	for _, key := range []string{jobID, ""} {
		for _, x := range s.unreadable[key] {
			if x.at.Before(since) {
				continue
			}
			u.Count++
			if key == "" {
				u.Unattributed++
			} else {
				u.FromJob++
			}
			u.Reasons[x.reason]++
			if u.Example == "" {
				u.Example = x.data
			}
		}
		if jobID == "" {
			break
		}
	}
	if u.Count == 0 {
		return nil
	}
	return u
}

func (s *Sink) add(p sim.Packet) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.byJob[p.JobID] = trim(append(s.byJob[p.JobID], p), s.limit)
	h := s.sent[p.JobID]
	if h == nil {
		h = newHistory()
		s.sent[p.JobID] = h
	}
	h.add(p.Instance, p.Seq, s.maxRanges)
	for _, c := range s.notify[p.JobID] {
		select {
		case c <- struct{}{}:
		default:
		}
	}
}

// Packets returns the job's packets received at or after since.
func (s *Sink) Packets(jobID string, since time.Time) []sim.Packet {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []sim.Packet
	for _, p := range s.byJob[jobID] {
		if !p.At.Before(since) {
			out = append(out, p)
		}
	}
	return out
}

// Sent is every number the job's instances sent since the sink first
// heard of the job (or since it was last forgotten), as ranges.
func (s *Sink) Sent(jobID string) sim.SentRanges {
	s.mu.Lock()
	defer s.mu.Unlock()
	if h := s.sent[jobID]; h != nil {
		return h.sent()
	}
	return sim.SentRanges{ByInstance: map[string][]sim.SeqRange{}}
}

// Seen reports whether the job ever sent a packet.
func (s *Sink) Seen(jobID string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.byJob[jobID]) > 0
}

// Watch returns a channel poked whenever a packet of the job arrives, and a
// function to stop watching.
func (s *Sink) Watch(jobID string) (<-chan struct{}, func()) {
	c := make(chan struct{}, 1)
	s.mu.Lock()
	s.notify[jobID] = append(s.notify[jobID], c)
	s.mu.Unlock()
	return c, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		cs := s.notify[jobID]
		for i, x := range cs {
			if x == c {
				s.notify[jobID] = append(cs[:i], cs[i+1:]...)
				break
			}
		}
		if len(s.notify[jobID]) == 0 {
			delete(s.notify, jobID)
		}
	}
}

// Forget drops a job's packets, the ranges of what it sent and the count
// of its unreadable ones.
func (s *Sink) Forget(jobID string) {
	s.mu.Lock()
	delete(s.byJob, jobID)
	delete(s.sent, jobID)
	delete(s.unreadable, jobID)
	// Its senders are asked about again: the job is gone.
	for from, job := range s.senders {
		if job == jobID {
			delete(s.senders, from)
		}
	}
	s.mu.Unlock()
}
