// Package connlimit keeps what servers accept below the process's
// open-file limit: the job sockets (sim/jobsocket) and the API's HTTP
// server (HTTPConns) each take a share of it, so that a flood of idle
// connections cannot take the fds the others need.
package connlimit

import (
	"container/list"
	"context"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// HTTPLimits bound an HTTP server's open connections: Total in all,
// PerHost from one remote address.
type HTTPLimits struct{ Total, PerHost int }

// maxHTTPConns caps Total: far more than browsers and API clients keep
// open (normsim bench keeps 256), and a flood past it costs fds for nothing.
const maxHTTPConns = 4096

// DefaultHTTPLimits derives the bounds from a process's open-file limit: a
// quarter of it in all, at most 4,096, and three quarters of that from one
// host. Under ulimit -n 1024 that is 256 (192 per host); with the job
// sockets' three eighths (jobsocket.DefaultLimits) that leaves 384 fds for
// the store, the runtimes and the jobs. A host gets more than half because
// the local one is every CLI, the dashboard and normsim bench at once (its
// 256 connections, all busy with waiting requests, fit from 2,048 open
// files on).
func DefaultHTTPLimits(openFiles int) HTTPLimits {
	total := min(max(openFiles/4, 2), maxHTTPConns)
	return HTTPLimits{Total: total, PerHost: hostShare(total)}
}

// hostShare is how many of total connections one host may hold.
func hostShare(total int) int { return max(total*3/4, 1) }

// logEvery is how often at most HTTPConns logs evictions, and refusals: a
// flood makes one per connection, the log says it is going on.
const logEvery = 10 * time.Second

// HTTPConns keeps an http.Server's open connections within HTTPLimits
// (install ConnState as the server's, and ConnContext so that a handler
// can say it streams). Past a bound, the connection that has waited
// longest (idle between requests, or not having sent its first one yet)
// is closed: of the newcomer's host past PerHost, else of the host
// holding the most connections, so a host's flood closes its own
// connections before anyone else's. With none waiting, the oldest stream
// (a response its handler marked with Streaming, such as /api/v1/events,
// which an EventSource resumes by itself) is closed the same way: a
// flood of streams nobody reads would otherwise hold every connection
// for ever. A connection serving any other request is never closed; when
// every one that counts is busy so, the newcomer is closed at once.
type HTTPConns struct {
	lim HTTPLimits
	log *slog.Logger
	now func() time.Time

	mu    sync.Mutex
	conns map[net.Conn]*httpConn
	hosts map[string]*hostConns
	open  int

	evicted, refused             atomic.Int64
	evictedLogged, refusedLogged atomic.Int64 // UnixNano of the last line
}

type hostConns struct {
	open    int
	waiting *list.List // of *httpConn: idle or new, longest waiting first
	streams *list.List // of *httpConn: serving a stream, oldest first
}

type httpConn struct {
	c    net.Conn
	host string
	// waiting is its element in its host's list while it is idle or new,
	// nil while it serves a request; since is when it began to wait.
	waiting *list.Element
	since   time.Time
	// stream is its element in its host's streams while it serves one.
	stream *list.Element
}

type connKey struct{}

// ConnContext is the server's ConnContext hook: it lets a handler find
// its connection (Streaming).
func (h *HTTPConns) ConnContext(ctx context.Context, c net.Conn) context.Context {
	return context.WithValue(ctx, connKey{}, c)
}

// Streaming marks the connection serving ctx's request as a stream that
// may be closed to make room for a newcomer, oldest first, once no
// connection waits. Its handler ends when its writes fail.
func (h *HTTPConns) Streaming(ctx context.Context) {
	c, _ := ctx.Value(connKey{}).(net.Conn)
	if c == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if hc := h.conns[c]; hc != nil && hc.waiting == nil && hc.stream == nil {
		hc.stream, hc.since = h.hosts[hc.host].streams.PushBack(hc), h.now()
	}
}

// NewHTTPConns keeps lim; a bound left zero is DefaultHTTPLimits's for
// this process's open-file limit (PerHost three quarters of Total).
func NewHTTPConns(lim HTTPLimits, log *slog.Logger) *HTTPConns {
	if lim.Total <= 0 {
		lim.Total = DefaultHTTPLimits(OpenFiles()).Total
	}
	if lim.PerHost <= 0 {
		lim.PerHost = hostShare(lim.Total)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &HTTPConns{lim: lim, log: log, now: time.Now, conns: map[net.Conn]*httpConn{}, hosts: map[string]*hostConns{}}
}

// Limits are the bounds kept.
func (h *HTTPConns) Limits() HTTPLimits { return h.lim }

// Open is how many connections are open now.
func (h *HTTPConns) Open() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.open
}

// Evicted counts the waiting connections closed to make room for a newer
// one; Refused the newcomers closed because every connection was busy.
func (h *HTTPConns) Evicted() int64 { return h.evicted.Load() }
func (h *HTTPConns) Refused() int64 { return h.refused.Load() }

// ConnState is the server's ConnState hook. The server calls it with
// StateNew in its accept loop, before serving: a newcomer closed there is
// never read from.
func (h *HTTPConns) ConnState(c net.Conn, s http.ConnState) {
	switch s {
	case http.StateNew:
		h.admit(c)
	case http.StateActive:
		h.setWaiting(c, false)
	case http.StateIdle:
		h.setWaiting(c, true)
	case http.StateHijacked, http.StateClosed:
		// A hijacked connection is its handler's to close; none of the
		// API's handlers hijack.
		h.mu.Lock()
		if hc := h.conns[c]; hc != nil {
			h.forgetLocked(hc)
		}
		h.mu.Unlock()
	}
}

func (h *HTTPConns) admit(c net.Conn) {
	host := hostOf(c)
	now := h.now()
	h.mu.Lock()
	var victim *httpConn
	bound := ""
	if own := h.hosts[host]; own != nil && own.open >= h.lim.PerHost {
		bound, victim = "per host", longestWaiting(own)
		if victim == nil {
			victim = oldestStream(own)
		}
	} else if h.open >= h.lim.Total {
		bound, victim = "in total", h.longestWaitingOfBusiestHostLocked()
		if victim == nil {
			victim = h.oldestStreamOfBusiestHostLocked()
		}
	}
	if bound != "" && victim == nil {
		h.mu.Unlock()
		n := h.refused.Add(1) // counted before the newcomer can see it closed
		c.Close()
		if logNow(&h.refusedLogged, now) {
			h.log.Warn("API: too many connections, every one serving a request; closed a new one at once", "host", host, "bound", bound,
				"limit", h.lim.Total, "per host", h.lim.PerHost, "refused so far", n)
		}
		return
	}
	stream := victim != nil && victim.stream != nil
	if victim != nil {
		h.forgetLocked(victim)
	}
	own := h.hosts[host]
	if own == nil {
		own = &hostConns{waiting: list.New(), streams: list.New()}
		h.hosts[host] = own
	}
	hc := &httpConn{c: c, host: host, since: now}
	hc.waiting = own.waiting.PushBack(hc)
	h.conns[c] = hc
	own.open++
	h.open++
	h.mu.Unlock()
	if victim == nil {
		return
	}
	n := h.evicted.Add(1) // counted before its client can see it closed
	victim.c.Close()
	if logNow(&h.evictedLogged, now) {
		what, held := "the one that waited longest for a request", "waited"
		if stream {
			what, held = "the oldest stream, none waiting (an EventSource resumes by itself)", "streamed for"
		}
		h.log.Warn("API: too many connections; closed "+what, "host", victim.host, held, now.Sub(victim.since).Round(time.Millisecond),
			"newcomer from", host, "bound", bound, "limit", h.lim.Total, "per host", h.lim.PerHost, "closed so far", n)
	}
}

// setWaiting puts c among its host's waiting connections (idle) or takes
// it off them (serving a request). A connection forgotten meanwhile
// (evicted) stays forgotten.
func (h *HTTPConns) setWaiting(c net.Conn, waiting bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	hc := h.conns[c]
	if hc == nil || (hc.waiting != nil) == waiting {
		return
	}
	own := h.hosts[hc.host]
	if hc.stream != nil {
		own.streams.Remove(hc.stream) // its stream ended
		hc.stream = nil
	}
	if waiting {
		hc.waiting, hc.since = own.waiting.PushBack(hc), h.now()
	} else {
		own.waiting.Remove(hc.waiting)
		hc.waiting = nil
	}
}

// longestWaiting is the first of own's waiting connections, nil if none.
func longestWaiting(own *hostConns) *httpConn {
	if e := own.waiting.Front(); e != nil {
		return e.Value.(*httpConn)
	}
	return nil
}

// oldestStream is the first of own's streams, nil if none.
func oldestStream(own *hostConns) *httpConn {
	if e := own.streams.Front(); e != nil {
		return e.Value.(*httpConn)
	}
	return nil
}

// oldestStreamOfBusiestHostLocked is the oldest stream of the host
// holding the most connections among those with one streaming.
func (h *HTTPConns) oldestStreamOfBusiestHostLocked() *httpConn {
	return h.firstOfBusiestHostLocked(oldestStream)
}

// longestWaitingOfBusiestHostLocked is the connection that has waited
// longest of the host holding the most connections among those with one
// waiting (ties to the one that waited longer), nil if none waits.
func (h *HTTPConns) longestWaitingOfBusiestHostLocked() *httpConn {
	return h.firstOfBusiestHostLocked(longestWaiting)
}

// firstOfBusiestHostLocked is first of the host holding the most
// connections among those first finds one of (ties to the one that has
// been in its list longer), nil if none.
func (h *HTTPConns) firstOfBusiestHostLocked(first func(*hostConns) *httpConn) *httpConn {
	var best *httpConn
	bestOpen := 0
	for _, own := range h.hosts {
		hc := first(own)
		if hc == nil {
			continue
		}
		if best == nil || own.open > bestOpen || (own.open == bestOpen && hc.since.Before(best.since)) {
			best, bestOpen = hc, own.open
		}
	}
	return best
}

func (h *HTTPConns) forgetLocked(hc *httpConn) {
	own := h.hosts[hc.host]
	if hc.waiting != nil {
		own.waiting.Remove(hc.waiting)
		hc.waiting = nil
	}
	if hc.stream != nil {
		own.streams.Remove(hc.stream)
		hc.stream = nil
	}
	delete(h.conns, hc.c)
	h.open--
	if own.open--; own.open == 0 {
		delete(h.hosts, hc.host)
	}
}

// logNow reports whether a line is due (none in the last logEvery), and
// takes the turn.
func logNow(last *atomic.Int64, now time.Time) bool {
	l := last.Load()
	return (l == 0 || now.Sub(time.Unix(0, l)) >= logEvery) && last.CompareAndSwap(l, now.UnixNano())
}

func hostOf(c net.Conn) string {
	addr := c.RemoteAddr().String()
	if host, _, err := net.SplitHostPort(addr); err == nil {
		return host
	}
	return addr
}
