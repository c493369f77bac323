package process

import "sync"

// logRing keeps the last lines of an instance's output. Every line has a
// sequence number, so a follower keeps a cursor instead of a channel: a
// slow reader never holds up the processes' output, and when it falls more
// than the ring's size behind it learns how many lines it missed.
type logRing struct {
	mu     sync.Mutex
	lines  []string // line with sequence number s is at s % max
	max    int
	next   uint64        // sequence number of the next line appended
	wake   chan struct{} // closed (and replaced) on every append
	closed bool
}

func newLogRing(max int) *logRing {
	return &logRing{max: max, wake: make(chan struct{})}
}

// append adds lines. A closed ring takes no more lines.
func (r *logRing) append(lines ...string) {
	if len(lines) == 0 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return
	}
	for _, l := range lines {
		if len(r.lines) < r.max {
			r.lines = append(r.lines, l)
		} else {
			r.lines[r.next%uint64(r.max)] = l
		}
		r.next++
	}
	close(r.wake)
	r.wake = make(chan struct{})
}

// since returns the lines from sequence number seq on and the number to ask
// for next time, how many lines before them have already been overwritten,
// a channel closed on the next append, and whether the ring is closed (in
// which case the lines returned are the last there will be).
func (r *logRing) since(seq uint64) (lines []string, next, missed uint64, wake <-chan struct{}, closed bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	oldest := r.next - uint64(len(r.lines))
	if seq < oldest {
		missed = oldest - seq
		seq = oldest
	}
	if seq < r.next {
		lines = make([]string, 0, r.next-seq)
		for s := seq; s < r.next; s++ {
			lines = append(lines, r.lines[s%uint64(r.max)])
		}
	}
	return lines, r.next, missed, r.wake, r.closed
}

// empty reports whether no line was ever appended.
func (r *logRing) empty() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.next == 0
}

// close ends the ring: followers return once they have read what is left.
func (r *logRing) close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.closed {
		r.closed = true
		close(r.wake)
	}
}
