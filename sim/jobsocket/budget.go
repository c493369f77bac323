package jobsocket

import (
	"container/list"
	"net"
	"sync"

	"github.com/normsim/normsim/internal/connlimit"
)

// Limits bound the connections to job-socket ports that are not jobs yet.
// A Budget keeps them across every listener that shares it.
type Limits struct {
	// Plain bounds the connections that have not upgraded to a WebSocket,
	// PlainPerHost those from one address; past either the oldest such
	// connection is closed (a job upgrades at once: what is oldest idles).
	Plain, PlainPerHost int
	// Pending bounds the connections that have upgraded but not yet said
	// hello, PendingPerHost those from one address. Past either, the
	// upgrade is not refused: the connection that has waited longest
	// (of that address, past PendingPerHost) is closed with 4401 and a
	// reason beginning "no hello within", after which a job may connect
	// again. A job says hello within milliseconds of its upgrade, so what
	// has waited longest is silent, and silent connections from any
	// number of hosts cannot lock jobs out: a job is closed only when
	// Pending newer upgrades (PendingPerHost from its own host) come
	// before its hello does. One host's flood closes only its own.
	Pending, PendingPerHost int
}

// Each bound is at most this: far more than jobs connect at once (normsim
// bench connects a thousand), and a flood past it costs fds for nothing.
const maxBound = 4096

// DefaultLimits derives the bounds from a process's open-file limit: an
// eighth of it for connections that have not upgraded and a quarter for
// those waiting to say hello, each at most 4,096, and half of each from one
// host. So, whatever the number of nodes sharing them, connections that are
// not jobs yet hold at most three eighths of the fds, and the API, the
// store, the runtimes and the jobs that did say hello keep the rest (640
// of 1,024 under ulimit -n 1024). Waiting for hello gets the larger share
// because real jobs pass through it: after a restart every job of the
// earlier run reconnects at once, each counted there until its hello is
// read.
func DefaultLimits(openFiles int) Limits {
	plain := min(max(openFiles/8, 2), maxBound)
	pending := min(max(openFiles/4, 2), maxBound)
	return Limits{Plain: plain, PlainPerHost: max(plain/2, 1), Pending: pending, PendingPerHost: max(pending/2, 1)}
}

// Budget keeps Limits for every listener it is handed to (Config.Budget):
// a sim's nodes share one, so the bounds hold for all of them together,
// not once per node (with four nodes, four per-node bounds of a quarter of
// the fd limit were all of it).
type Budget struct {
	lim   Limits
	plain *plainConns

	mu      sync.Mutex
	waiting *list.List            // of *waiter: connections that have not said hello yet, oldest first
	byHost  map[string]*list.List // the same, by remote host
}

// waiter is a connection waiting to say hello.
type waiter struct {
	c    *conn
	host string
	// all and own are its elements in Budget.waiting and in its host's
	// list; nil once it has left them (said hello, ended, or evicted).
	all, own *list.Element
}

// eviction is a waiter closed to keep a bound, and which bound.
type eviction struct {
	w     *waiter
	bound string
}

// NewBudget returns a budget keeping lim; a bound left zero is
// DefaultLimits's for this process's open-file limit, and a per-host bound
// left zero is half its total (as DefaultLimits's are).
func NewBudget(lim Limits) *Budget {
	def := DefaultLimits(connlimit.OpenFiles())
	if lim.Plain <= 0 {
		lim.Plain = def.Plain
	}
	if lim.PlainPerHost <= 0 {
		lim.PlainPerHost = max(lim.Plain/2, 1)
	}
	if lim.Pending <= 0 {
		lim.Pending = def.Pending
	}
	if lim.PendingPerHost <= 0 {
		lim.PendingPerHost = max(lim.Pending/2, 1)
	}
	return &Budget{lim: lim, plain: newPlainConns(lim.Plain, lim.PlainPerHost), waiting: list.New(), byHost: map[string]*list.List{}}
}

// Limits are the bounds the budget keeps.
func (b *Budget) Limits() Limits { return b.lim }

// admit counts c, just upgraded from remote, as waiting to say hello.
// When that puts its host past PendingPerHost, or all past Pending, the
// connection that has waited longest (of its host, for PendingPerHost)
// is taken off and closed with 4401 (Listener.evictWaiting), counted by
// the listener that accepted it: one node's connection may close
// another's. c itself is never the one: it is the newest.
//
// done takes c off again; it reports whether c was still waiting, false
// when it was evicted meanwhile (its close is under way, or c's own
// caller makes it: conn.evict) or done was called before. evicted says
// whether c was evicted, leaving it counted if not.
func (b *Budget) admit(c *conn, remote string) (done, evicted func() bool) {
	host, _, err := net.SplitHostPort(remote)
	if err != nil {
		host = remote
	}
	w := &waiter{c: c, host: host}
	var evict []eviction
	b.mu.Lock()
	own := b.byHost[host]
	if own == nil {
		own = list.New()
		b.byHost[host] = own
	}
	w.all, w.own = b.waiting.PushBack(w), own.PushBack(w)
	for own.Len() > b.lim.PendingPerHost {
		old := own.Front().Value.(*waiter)
		b.leaveLocked(old)
		evict = append(evict, eviction{old, "per host"})
	}
	for b.waiting.Len() > b.lim.Pending {
		old := b.waiting.Front().Value.(*waiter)
		b.leaveLocked(old)
		evict = append(evict, eviction{old, "all nodes"})
	}
	b.mu.Unlock()
	for _, e := range evict {
		e.w.c.l.evictWaiting(e.w.c, e.w.host, e.bound)
	}
	done = func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		if w.all == nil {
			return false
		}
		b.leaveLocked(w)
		return true
	}
	evicted = func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return w.all == nil
	}
	return done, evicted
}

// leaveLocked takes w off the lists of connections waiting to say hello.
func (b *Budget) leaveLocked(w *waiter) {
	b.waiting.Remove(w.all)
	own := b.byHost[w.host]
	own.Remove(w.own)
	if own.Len() == 0 {
		delete(b.byHost, w.host)
	}
	w.all, w.own = nil, nil
}

// Waiting is how many connections are waiting to say hello, in all.
func (b *Budget) Waiting() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.waiting.Len()
}
