package jobsocket

import (
	"net"
	"sync"
	"sync/atomic"
)

// Limits bound the connections to job-socket ports that are not jobs yet.
// A Budget keeps them across every listener that shares it.
type Limits struct {
	// Plain bounds the connections that have not upgraded to a WebSocket,
	// PlainPerHost those from one address; past either the oldest such
	// connection is closed (a job upgrades at once: what is oldest idles).
	Plain, PlainPerHost int
	// Pending bounds the connections that have upgraded but not yet said
	// hello, PendingPerHost those from one address; past either an upgrade
	// is answered 503, so one host's flood of silent connections leaves
	// the other hosts' jobs working.
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
// earlier run waits there until recovery has registered it again.
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
	pending int            // connections that have not said hello yet
	byHost  map[string]int // the same, by remote host
}

// NewBudget returns a budget keeping lim; a bound left zero is
// DefaultLimits's for this process's open-file limit, and a per-host bound
// left zero is half its total (as DefaultLimits's are).
func NewBudget(lim Limits) *Budget {
	def := DefaultLimits(openFileLimit())
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
	return &Budget{lim: lim, plain: newPlainConns(lim.Plain, lim.PlainPerHost), byHost: map[string]int{}}
}

// Limits are the bounds the budget keeps.
func (b *Budget) Limits() Limits { return b.lim }

// admit counts a connection as waiting to say hello, unless too many are
// waiting already (in all, or from its host); done takes it off again and
// may be called more than once.
func (b *Budget) admit(remote string) (done func(), ok bool) {
	host, _, err := net.SplitHostPort(remote)
	if err != nil {
		host = remote
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.pending >= b.lim.Pending || b.byHost[host] >= b.lim.PendingPerHost {
		return nil, false
	}
	b.pending++
	b.byHost[host]++
	var once atomic.Bool
	return func() {
		if !once.CompareAndSwap(false, true) {
			return
		}
		b.mu.Lock()
		defer b.mu.Unlock()
		b.pending--
		if b.byHost[host]--; b.byHost[host] == 0 {
			delete(b.byHost, host)
		}
	}, true
}
