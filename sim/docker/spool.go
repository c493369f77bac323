package docker

import (
	"io"
	"sync"
	"time"
)

// spoolMax is how much of a container's attached output the capture holds
// unparsed before the engine has to wait for it.
const spoolMax = 64 << 20

// spool reads an attached stream into memory as fast as it arrives and
// hands it on as an io.Reader, so splitting and keeping lines never slows
// the engine's copy of the job's output: an attached reader that falls
// behind makes the job's writes wait, which a job under the real system's
// log driver would not see. It holds up to spoolMax bytes; past that its
// reading waits. Each chunk carries when it arrived, the time its lines
// are stamped with however late they are parsed.
type spool struct {
	mu     sync.Mutex
	cond   *sync.Cond
	chunks []spoolChunk
	held   int
	err    error // the stream's end, once read to it
	done   bool

	cur spoolChunk // being read; only the Read side touches it
}

type spoolChunk struct {
	b  []byte
	at time.Time
}

func newSpool(r io.Reader, now func() time.Time) *spool {
	s := &spool{}
	s.cond = sync.NewCond(&s.mu)
	go s.fill(r, now)
	return s
}

func (s *spool) fill(r io.Reader, now func() time.Time) {
	buf := make([]byte, 64<<10)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			c := spoolChunk{b: append([]byte(nil), buf[:n]...), at: now()}
			s.mu.Lock()
			for s.held >= spoolMax && !s.done {
				s.cond.Wait()
			}
			s.chunks = append(s.chunks, c)
			s.held += n
			s.cond.Broadcast()
			s.mu.Unlock()
		}
		if err != nil {
			s.mu.Lock()
			s.err, s.done = err, true
			s.cond.Broadcast()
			s.mu.Unlock()
			return
		}
	}
}

// Read returns spooled bytes, waiting for more; at the stream's end it
// returns the error the stream ended with (io.EOF for a clean end).
func (s *spool) Read(p []byte) (int, error) {
	if len(s.cur.b) == 0 {
		s.mu.Lock()
		for len(s.chunks) == 0 && !s.done {
			s.cond.Wait()
		}
		if len(s.chunks) == 0 {
			err := s.err
			s.mu.Unlock()
			return 0, err
		}
		s.cur = s.chunks[0]
		s.chunks[0] = spoolChunk{}
		s.chunks = s.chunks[1:]
		s.held -= len(s.cur.b)
		s.cond.Broadcast()
		s.mu.Unlock()
	}
	n := copy(p, s.cur.b)
	s.cur.b = s.cur.b[n:]
	return n, nil
}

// stop lets a fill waiting for room end: the reader is gone.
func (s *spool) stop() {
	s.mu.Lock()
	s.done, s.chunks, s.held = true, nil, 0
	s.cond.Broadcast()
	s.mu.Unlock()
}

// at is when the bytes Read returned last arrived.
func (s *spool) at() time.Time { return s.cur.at }
