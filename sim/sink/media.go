package sink

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"time"

	"github.com/normsim/normsim/sim"
)

// Media is normsim's media receiver (sim.MediaReceiver): every job gets a
// UDP port of its own, handed to each of its instances as
// NORMSIM_MEDIA_URL, and what arrives there is kept as the receiver got
// it, datagram by datagram, with its arrival time and sender address. A
// real output URL is the same for a source and its target, so which
// instance sent a datagram is told later from the sender's address and
// when it was first heard, never from the payload.
//
// It keeps a job's newest Keep of datagrams, and at most MaxBytes of
// them: a datagram let go of to stay within MaxBytes before Keep has
// passed is counted (MediaWindow.Trimmed), so a seam judged on less than
// all that arrived says so. Datagrams that never reached it (the kernel
// dropped them on a full socket buffer, or a read failed) are counted too
// (MediaWindow.Lost), by when the loss was noticed.
type Media struct {
	host string
	now  func() time.Time
	// Keep and MaxBytes bound what is kept of each job.
	Keep     time.Duration
	MaxBytes int
	// ReadBuffer is the socket receive buffer asked of the kernel for each
	// job's port; 0 asks for 4 MiB.
	ReadBuffer int
	log        *slog.Logger

	mu   sync.Mutex
	jobs map[string]*mediaJob
}

// Default bounds: a 5 Mbit/s stream fills 20 MiB in about half a minute,
// more than a migration's seam needs either side of its switch.
const (
	DefaultMediaKeep     = 60 * time.Second
	DefaultMediaMaxBytes = 32 << 20
)

// datagramCost is what a kept datagram costs beyond its payload: its
// record, its slot in the list, its sender's name. MaxBytes counts it, or
// a flood of 1-byte datagrams (150,000 a second) was kept whole for 60 s
// and ran normsim out of memory.
const datagramCost = 128

// maxMediaSenders bounds the sender addresses a job's receiver tells apart: a
// stream has one sender an instance. A datagram from a new address past
// it is let go of and counted (trimmed), as one past MaxBytes is; senders
// not heard within Keep are forgotten first.
const maxMediaSenders = 1024

type mediaJob struct {
	pc   net.PacketConn
	port int
	done chan struct{}

	mu    sync.Mutex
	dgs   []sim.MediaDatagram // arrival order; dgs[head:] are kept
	head  int
	bytes int
	// trimmed are the datagrams let go of early (by arrival); lost those
	// that never reached the receiver (the kernel dropped them, or a read
	// failed), by when that was noticed.
	trimmed, lost countsAt
	senders       map[netip.AddrPort]*sender
	forgotAt      time.Time // when forgetSenders last ran
	notify        []chan struct{}
}

// sender is an address heard on a job's port: its name (shared by every
// datagram it sent), when it was first and last heard.
type sender struct {
	name        string
	first, last time.Time
}

// countsAt counts datagrams by the moment they were counted, oldest first,
// so a window counts those since its start.
type countsAt []countAt

type countAt struct {
	at time.Time
	n  int64
}

// add counts n at at. Counts within a millisecond of the last one join it,
// at the later moment, so a flood is a few entries a millisecond at most:
// a window that begins inside that millisecond counts them all (more let
// go than were, never fewer).
func (c *countsAt) add(at time.Time, n int64) {
	if k := len(*c); k > 0 && at.Sub((*c)[k-1].at) < time.Millisecond {
		(*c)[k-1] = countAt{at, (*c)[k-1].n + n}
		return
	}
	*c = append(*c, countAt{at, n})
}

// forget lets go of the counts older than horizon.
func (c *countsAt) forget(horizon time.Time) {
	i := 0
	for i < len(*c) && (*c)[i].at.Before(horizon) {
		i++
	}
	*c = (*c)[i:]
}

// since sums the counts at or after t.
func (c countsAt) since(t time.Time) int64 {
	var n int64
	for _, x := range c {
		if !x.at.Before(t) {
			n += x.n
		}
	}
	return n
}

// NewMedia returns a receiver that opens jobs' ports on host.
func NewMedia(host string, now func() time.Time) *Media {
	if now == nil {
		now = time.Now
	}
	return &Media{host: host, now: now, Keep: DefaultMediaKeep, MaxBytes: DefaultMediaMaxBytes,
		log: slog.New(slog.DiscardHandler), jobs: map[string]*mediaJob{}}
}

// SetLogger gives the receiver a logger; call it before Open.
func (m *Media) SetLogger(l *slog.Logger) { m.log = l }

// Open starts receiving the job's media on port (a free one when 0).
func (m *Media) Open(jobID string, port int) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if j := m.jobs[jobID]; j != nil {
		return j.port, nil
	}
	pc, err := net.ListenPacket("udp", net.JoinHostPort(m.host, strconv.Itoa(port)))
	if err != nil {
		return 0, fmt.Errorf("open the media port of job %s: %w", jobID, err)
	}
	// A video stream comes in bursts (a keyframe is many datagrams at
	// once): a larger socket buffer keeps the kernel from dropping them
	// while the reader is busy.
	uc := pc.(*net.UDPConn)
	_ = uc.SetReadBuffer(m.readBuffer())
	j := &mediaJob{pc: pc, port: pc.LocalAddr().(*net.UDPAddr).Port, done: make(chan struct{}), senders: map[netip.AddrPort]*sender{}}
	m.jobs[jobID] = j
	go m.receive(jobID, j, uc, watchKernelDrops(uc), stampArrivals(uc))
	return j.port, nil
}

// datagramBuffer is the longest datagram a job's receiver reads whole: a
// jumbo frame's payload, over any MTU a TS or RTP sender uses (1,316 bytes
// of TS a datagram is usual). A variable, so the buffer is allocated on
// the heap, not on the receiving goroutine's stack.
var datagramBuffer = 9216

// maxDatagram is the longest UDP payload: a job whose datagram was longer
// than datagramBuffer gets a receiver that reads anything a real one
// reads, so only its first such datagram is lost. Every job's receiver
// reading 64 KiB would cost about 450 MiB at 10,000 jobs.
const maxDatagram = 65535

// readBuffer is the socket receive buffer asked for: ReadBuffer, or 4 MiB.
func (m *Media) readBuffer() int {
	if m.ReadBuffer > 0 {
		return m.ReadBuffer
	}
	return 4 << 20
}

// receive reads the job's datagrams. Each is dated by when it arrived,
// where the kernel stamps that (stamps), not by when this reader got to
// it behind a burst.
func (m *Media) receive(jobID string, j *mediaJob, uc *net.UDPConn, drops, stamps bool) {
	defer close(j.done)
	// Not 64 KiB: every job has a receiver, and at 10,000 jobs that was
	// 640 MiB (on each goroutine's stack, once the read no longer went
	// through an interface). A datagram longer than the buffer is counted
	// as lost, never cut silently.
	buf := make([]byte, datagramBuffer)
	// One buffer for both control messages, the drop count and the
	// arrival stamp, read in one pass.
	var oob []byte
	if drops || stamps {
		oob = make([]byte, controlBuffer)
	}
	clock := arrivals{now: m.now}
	var dropped uint32 // the kernel's count so far
	for {
		n, oobn, flags, from, err := uc.ReadMsgUDPAddrPort(buf, oob)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			m.log.Warn("media receiver: read failed; the datagram is counted as lost", "job", jobID, "err", err)
			j.noteLost(m.now(), 1)
			continue
		}
		if truncated(flags) {
			m.log.Warn("media receiver: a datagram longer than the receiver reads; counted as lost, and this job's receiver reads up to 65,535 bytes from now on", "job", jobID, "limit", len(buf))
			j.noteLost(m.now(), 1)
			if len(buf) < maxDatagram {
				buf = make([]byte, maxDatagram)
			}
			continue
		}
		arrived, d := control(oob[:oobn])
		at := clock.at(arrived)
		if drops && d != dropped {
			j.noteLost(at, int64(d-dropped)) // wraps as the kernel's counter does
			dropped = d
		}
		j.add(from, at, buf[:n], at.Add(-m.Keep), m.MaxBytes)
	}
}

// noteLost counts n datagrams that never reached the receiver.
func (j *mediaJob) noteLost(at time.Time, n int64) {
	j.mu.Lock()
	j.lost.add(at, n)
	j.mu.Unlock()
}

// add keeps a copy of data, from from at at, lets go of what is older
// than horizon, and of the oldest beyond maxBytes (counted), each
// datagram's cost counted with its payload.
func (j *mediaJob) add(from netip.AddrPort, at time.Time, data []byte, horizon time.Time, maxBytes int) {
	j.mu.Lock()
	defer j.mu.Unlock()
	s := j.senders[from]
	if s == nil {
		if len(j.senders) >= maxMediaSenders && !at.Before(j.forgotAt.Add(time.Second)) {
			// At most once a second: a flood from new addresses would
			// otherwise walk every sender on every datagram.
			j.forgotAt = at
			j.forgetSenders(horizon)
		}
		if len(j.senders) >= maxMediaSenders {
			j.trimmed.add(at, 1)
			j.poke()
			return
		}
		s = &sender{name: from.String(), first: at}
		j.senders[from] = s
	}
	s.last = at
	d := sim.MediaDatagram{At: at, From: s.name, Data: append([]byte(nil), data...)}
	j.dgs = append(j.dgs, d)
	j.bytes += len(d.Data) + datagramCost
	for j.head < len(j.dgs)-1 && (j.dgs[j.head].At.Before(horizon) || j.bytes > maxBytes) {
		old := j.dgs[j.head]
		if !old.At.Before(horizon) {
			j.trimmed.add(old.At, 1)
		}
		j.bytes -= len(old.Data) + datagramCost
		j.dgs[j.head] = sim.MediaDatagram{}
		j.head++
	}
	j.trimmed.forget(horizon)
	j.lost.forget(horizon)
	// Move what is kept to the front once the dead part is the bigger.
	if j.head > len(j.dgs)/2 && j.head > 1024 {
		n := copy(j.dgs, j.dgs[j.head:])
		clear(j.dgs[n:])
		j.dgs, j.head = j.dgs[:n], 0
	}
	j.poke()
}

// poke tells the job's watchers a datagram came. j.mu is held.
func (j *mediaJob) poke() {
	for _, c := range j.notify {
		select {
		case c <- struct{}{}:
		default:
		}
	}
}

// forgetSenders forgets the senders last heard before horizon: none of
// their datagrams is kept. j.mu is held.
func (j *mediaJob) forgetSenders(horizon time.Time) {
	for a, s := range j.senders {
		if s.last.Before(horizon) {
			delete(j.senders, a)
		}
	}
}

// Media is what arrived for the job at or after since.
func (m *Media) Media(jobID string, since time.Time) sim.MediaWindow {
	m.mu.Lock()
	j := m.jobs[jobID]
	m.mu.Unlock()
	w := sim.MediaWindow{FirstHeard: map[string]time.Time{}}
	if j == nil {
		return w
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	kept := j.dgs[j.head:]
	i := 0
	for i < len(kept) && kept[i].At.Before(since) {
		i++
	}
	// The bytes are never written again once kept, so they are shared.
	w.Datagrams = append([]sim.MediaDatagram(nil), kept[i:]...)
	for _, s := range j.senders {
		w.FirstHeard[s.name] = s.first
	}
	w.Trimmed, w.Lost = j.trimmed.since(since), j.lost.since(since)
	return w
}

// Watch returns a channel poked whenever a datagram of the job arrives.
func (m *Media) Watch(jobID string) (<-chan struct{}, func()) {
	c := make(chan struct{}, 1)
	m.mu.Lock()
	j := m.jobs[jobID]
	m.mu.Unlock()
	if j == nil {
		return c, func() {}
	}
	j.mu.Lock()
	j.notify = append(j.notify, c)
	j.mu.Unlock()
	return c, func() {
		j.mu.Lock()
		defer j.mu.Unlock()
		for i, x := range j.notify {
			if x == c {
				j.notify = append(j.notify[:i], j.notify[i+1:]...)
				break
			}
		}
	}
}

// Close stops receiving the job's media and forgets it.
func (m *Media) Close(jobID string) {
	m.mu.Lock()
	j := m.jobs[jobID]
	delete(m.jobs, jobID)
	m.mu.Unlock()
	if j != nil {
		j.pc.Close()
		<-j.done
	}
}

// CloseAll closes every job's port.
func (m *Media) CloseAll() {
	m.mu.Lock()
	ids := make([]string, 0, len(m.jobs))
	for id := range m.jobs {
		ids = append(ids, id)
	}
	m.mu.Unlock()
	for _, id := range ids {
		m.Close(id)
	}
}

// Ports is each open job's port.
func (m *Media) Ports() map[string]int {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[string]int, len(m.jobs))
	for id, j := range m.jobs {
		out[id] = j.port
	}
	return out
}
