package jobsocket

import (
	"container/list"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
)

// plainConns bounds the connections to a job-socket port that have not
// upgraded to a WebSocket (yet): per host and in all, across every
// listener of a Budget, well below the process's open-file limit, so that a flood of connections that never
// upgrade (idle, or silent) cannot take the fds the API and real jobs
// need. Past a bound the oldest such connection is closed, not the new
// one: a job upgrades on its first request, within milliseconds, so what
// is oldest is what idles. Each eviction is counted by the listener that
// accepted the connection: a connection to one node may evict another's.
type plainConns struct {
	max, maxPerHost int

	mu      sync.Mutex
	order   *list.List // of *plainConn, oldest first
	byConn  map[net.Conn]*list.Element
	perHost map[string]int
}

type plainConn struct {
	c       net.Conn
	host    string
	evicted *atomic.Int64 // its listener's count
}

func newPlainConns(max, maxPerHost int) *plainConns {
	return &plainConns{max: max, maxPerHost: maxPerHost, order: list.New(), byConn: map[net.Conn]*list.Element{}, perHost: map[string]int{}}
}

// track is a listener's server's ConnState hook; evicted is the
// listener's count of its connections closed to keep the bounds.
func (p *plainConns) track(c net.Conn, s http.ConnState, evicted *atomic.Int64) {
	switch s {
	case http.StateNew:
		p.add(c, evicted)
	case http.StateHijacked, http.StateClosed:
		p.remove(c)
	}
}

func (p *plainConns) add(c net.Conn, evicted *atomic.Int64) {
	host, _, err := net.SplitHostPort(c.RemoteAddr().String())
	if err != nil {
		host = c.RemoteAddr().String()
	}
	var evict []*plainConn
	p.mu.Lock()
	p.byConn[c] = p.order.PushBack(&plainConn{c: c, host: host, evicted: evicted})
	p.perHost[host]++
	for p.perHost[host] > p.maxPerHost {
		evict = append(evict, p.dropOldestLocked(host))
	}
	for p.order.Len() > p.max {
		evict = append(evict, p.dropOldestLocked(""))
	}
	p.mu.Unlock()
	for _, old := range evict {
		old.evicted.Add(1)
		old.c.Close()
	}
}

// dropOldestLocked forgets the oldest connection (of host, when given)
// and returns it, to be closed.
func (p *plainConns) dropOldestLocked(host string) *plainConn {
	for e := p.order.Front(); e != nil; e = e.Next() {
		pc := e.Value.(*plainConn)
		if host == "" || pc.host == host {
			p.forgetLocked(e)
			return pc
		}
	}
	return nil
}

func (p *plainConns) forgetLocked(e *list.Element) {
	pc := e.Value.(*plainConn)
	p.order.Remove(e)
	delete(p.byConn, pc.c)
	if p.perHost[pc.host]--; p.perHost[pc.host] == 0 {
		delete(p.perHost, pc.host)
	}
}

func (p *plainConns) remove(c net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if e, ok := p.byConn[c]; ok {
		p.forgetLocked(e)
	}
}
