package manager

import (
	"sync"
	"sync/atomic"
	"time"
)

// A frame a delay-frame fault holds is held as a slow network holds data
// on one TCP connection: what is sent after it on the same socket, in the
// same direction, waits behind it and follows it in the order it was sent.
// A pipe is one instance's socket in one direction while something is
// held on it; one goroutine (drain) delivers what is in it, in order,
// each item no sooner than its time, and closes the pipe once it is empty.

// pipeKey names a pipe: an instance's socket, one way.
type pipeKey struct {
	role string // the instance
	dir  string // dirIn (job → worker) or dirOut
}

// pipeItem is one frame (or socket event) in a pipe.
type pipeItem struct {
	id uint64
	// at is when a held frame's hold ends; zero for what only waits its
	// turn.
	at      time.Time
	deliver func()
	// lost says it never went on, and why: the connection it was written
	// to went away, or normsim shut down during its hold.
	lost func(why string)
}

// pipes are the open pipes (the manager's).
type pipes struct {
	open atomic.Int32 // how many are open: with none, a frame goes straight on

	mu  sync.Mutex
	by  map[pipeKey]*pipe
	seq uint64
}

type pipe struct {
	items []pipeItem
	wake  chan struct{} // cut emptied the pipe
}

// hold puts it on k's pipe, opening the pipe if none is open.
func (m *Manager) hold(k pipeKey, it pipeItem) {
	m.pipes.mu.Lock()
	defer m.pipes.mu.Unlock()
	p := m.pipes.by[k]
	if p == nil {
		if m.pipes.by == nil {
			m.pipes.by = map[pipeKey]*pipe{}
		}
		p = &pipe{wake: make(chan struct{}, 1)}
		m.pipes.by[k] = p
		m.pipes.open.Add(1)
		m.wg.Add(1)
		go m.drain(k, p)
	}
	m.pipes.seq++
	it.id = m.pipes.seq
	p.items = append(p.items, it)
}

// behind puts it on k's pipe if one is open, and reports whether it did;
// if not, nothing is held on that socket, and the caller goes on at once.
func (m *Manager) behind(k pipeKey, it pipeItem) bool {
	if m.pipes.open.Load() == 0 {
		return false
	}
	m.pipes.mu.Lock()
	defer m.pipes.mu.Unlock()
	p := m.pipes.by[k]
	if p == nil {
		return false
	}
	m.pipes.seq++
	it.id = m.pipes.seq
	p.items = append(p.items, it)
	return true
}

// cut loses what waits in k's pipe, saying why: the connection it was
// written to is gone, and data in flight on a connection goes with it.
func (m *Manager) cut(k pipeKey, why string) {
	if m.pipes.open.Load() == 0 {
		return
	}
	m.pipes.mu.Lock()
	var lost []pipeItem
	if p := m.pipes.by[k]; p != nil && len(p.items) > 0 {
		lost, p.items = p.items, nil
		select {
		case p.wake <- struct{}{}:
		default:
		}
	}
	m.pipes.mu.Unlock()
	for _, it := range lost {
		it.lost(why)
	}
}

// drain delivers what is in p, in order, until it is empty. When normsim
// shuts down no hold is waited out: a frame still held is lost, and what
// only waited behind it goes on at once.
func (m *Manager) drain(k pipeKey, p *pipe) {
	defer m.wg.Done()
	for {
		m.pipes.mu.Lock()
		if len(p.items) == 0 {
			delete(m.pipes.by, k)
			m.pipes.open.Add(-1)
			m.pipes.mu.Unlock()
			return
		}
		it := p.items[0]
		m.pipes.mu.Unlock()
		if wait := time.Until(it.at); wait > 0 && m.ctx.Err() == nil {
			t := time.NewTimer(wait)
			select {
			case <-t.C:
			case <-p.wake:
			case <-m.ctx.Done():
			}
			t.Stop()
		}
		m.pipes.mu.Lock()
		if len(p.items) == 0 || p.items[0].id != it.id || (time.Now().Before(it.at) && m.ctx.Err() == nil) {
			m.pipes.mu.Unlock()
			continue // cut while it waited
		}
		p.items = p.items[1:]
		m.pipes.mu.Unlock()
		if time.Now().Before(it.at) {
			it.lost("normsim is shutting down")
			continue
		}
		it.deliver()
	}
}
