// Package sink is normsim's output sink: a UDP endpoint jobs send their
// output packets to (its address handed to them as NORMSIM_OUTPUT_ADDR), so
// a migration can prove whether the output continued across the cutover.
//
// A packet is one datagram holding a JSON object
// {"job":"<jobId>","instance":"<role>","seq":<n>}; the sink stamps it with
// its arrival time and keeps the most recent packets per job.
package sink

import (
	"encoding/json"
	"errors"
	"net"
	"sync"
	"time"

	"github.com/normsim/normsim/sim"
)

// EnvAddr is the env var that carries the sink's address to a job.
const EnvAddr = "NORMSIM_OUTPUT_ADDR"

// Sink receives output packets.
type Sink struct {
	now    func() time.Time
	limit  int
	pc     net.PacketConn
	mu     sync.Mutex
	byJob  map[string][]sim.Packet
	wg     sync.WaitGroup
	notify map[string][]chan struct{}
}

// New returns a sink keeping up to limit packets per job.
func New(now func() time.Time, limit int) *Sink {
	if now == nil {
		now = time.Now
	}
	if limit <= 0 {
		limit = 50000
	}
	return &Sink{now: now, limit: limit, byJob: map[string][]sim.Packet{}, notify: map[string][]chan struct{}{}}
}

// Open listens on a UDP address and receives in the background.
func (s *Sink) Open(addr string) error {
	pc, err := net.ListenPacket("udp", addr)
	if err != nil {
		return err
	}
	s.pc = pc
	s.wg.Add(1)
	go s.loop()
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

func (s *Sink) loop() {
	defer s.wg.Done()
	buf := make([]byte, 2048)
	for {
		n, _, err := s.pc.ReadFrom(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		at := s.now()
		var p sim.Packet
		if json.Unmarshal(buf[:n], &p) != nil || p.JobID == "" || p.Instance == "" {
			continue // not ours to judge: output that is not a counter packet
		}
		p.At = at
		s.add(p)
	}
}

func (s *Sink) add(p sim.Packet) {
	s.mu.Lock()
	defer s.mu.Unlock()
	pk := append(s.byJob[p.JobID], p)
	if len(pk) > s.limit {
		pk = append(pk[:0], pk[len(pk)-s.limit/2:]...)
	}
	s.byJob[p.JobID] = pk
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

// Forget drops a job's packets.
func (s *Sink) Forget(jobID string) {
	s.mu.Lock()
	delete(s.byJob, jobID)
	s.mu.Unlock()
}
