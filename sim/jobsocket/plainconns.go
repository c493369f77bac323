package jobsocket

import (
	"container/list"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
)

// plainConns bounds the connections to a job-socket port that have not
// upgraded to a WebSocket (yet): per host and in all, well below the
// process's open-file limit, so that a flood of connections that never
// upgrade (idle, or silent) cannot take the fds the API and real jobs
// need. Past a bound the oldest such connection is closed, not the new
// one: a job upgrades on its first request, within milliseconds, so what
// is oldest is what idles. Each eviction is counted.
type plainConns struct {
	max, maxPerHost int

	mu      sync.Mutex
	order   *list.List // of *plainConn, oldest first
	byConn  map[net.Conn]*list.Element
	perHost map[string]int
	evicted atomic.Int64
}

type plainConn struct {
	c    net.Conn
	host string
}

func newPlainConns(max, maxPerHost int) *plainConns {
	return &plainConns{max: max, maxPerHost: maxPerHost, order: list.New(), byConn: map[net.Conn]*list.Element{}, perHost: map[string]int{}}
}

// track is the server's ConnState hook.
func (p *plainConns) track(c net.Conn, s http.ConnState) {
	switch s {
	case http.StateNew:
		p.add(c)
	case http.StateHijacked, http.StateClosed:
		p.remove(c)
	}
}

func (p *plainConns) add(c net.Conn) {
	host, _, err := net.SplitHostPort(c.RemoteAddr().String())
	if err != nil {
		host = c.RemoteAddr().String()
	}
	var evict []net.Conn
	p.mu.Lock()
	p.byConn[c] = p.order.PushBack(&plainConn{c: c, host: host})
	p.perHost[host]++
	for p.perHost[host] > p.maxPerHost {
		evict = append(evict, p.dropOldestLocked(host))
	}
	for p.order.Len() > p.max {
		evict = append(evict, p.dropOldestLocked(""))
	}
	p.mu.Unlock()
	for _, old := range evict {
		p.evicted.Add(1)
		old.Close()
	}
}

// dropOldestLocked forgets the oldest connection (of host, when given)
// and returns it, to be closed.
func (p *plainConns) dropOldestLocked(host string) net.Conn {
	for e := p.order.Front(); e != nil; e = e.Next() {
		pc := e.Value.(*plainConn)
		if host == "" || pc.host == host {
			p.forgetLocked(e)
			return pc.c
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
