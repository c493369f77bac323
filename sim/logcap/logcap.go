// Package logcap keeps what instances print: the runtimes hand it each line
// as they read it (sim.LogSink), and it writes the lines to the store in
// batches on its own goroutine, off the path that reads the job's output.
// A line it cannot queue (the store fell that far behind) is counted, and
// each run of such lines is marked in the log where it happened; nothing is
// dropped without saying so. It is the sim.LogBook the manager reads.
package logcap

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/normsim/normsim/internal/batchq"
	"github.com/normsim/normsim/sim"
)

// Limits bound what the capture holds while the store catches up.
type Limits struct {
	Lines int
	Bytes int
}

// DefaultLimits hold 200,000 lines or 64 MiB: at 10,000 lines/s that is
// twenty seconds of a store that does not write at all.
var DefaultLimits = Limits{Lines: 200_000, Bytes: 64 << 20}

// linger lets a burst of lines gather into one transaction: a chatty job's
// lines then cost one commit per linger, not one per line.
const linger = 20 * time.Millisecond

// batch is the most lines written in one transaction, so the store's one
// connection (which the API's reads and the manager's journal share) is
// never held long for logs: about 6 ms at the store's 80,000 lines/s.
const batch = 512

// Config configures a Capture.
type Config struct {
	Store  sim.LogStore
	Limits Limits // zero: DefaultLimits
	Logger *slog.Logger
}

// Capture is a sim.LogBook on a sim.LogStore.
type Capture struct {
	store sim.LogStore
	log   *slog.Logger
	queue *batchq.Queue[entry]
	// lines and registered are the writer's scratch, reused per batch.
	lines      []sim.LogLine
	registered []string

	// queued counts lines taken (or refused: they are settled at once);
	// written those stored (or failed to). Read waits until written
	// reaches what queued was when it was called.
	queued  atomic.Int64
	written atomic.Int64

	mu       sync.Mutex
	holds    int       // Holds not yet released
	heldAt   time.Time // when the first of them began
	unheld   chan struct{}
	overflow map[string]*overflowRun // lines refused, per instance, not yet marked
	changed  chan struct{}           // closed and replaced after each write
	failed   error                   // why the last write failed (logged once); nil once one succeeds
}

// entry is what the queue holds: a line to store or, when register is
// set, an instance (LogLine.Instance) to register.
type entry struct {
	sim.LogLine
	register bool
}

// overflowRun is a run of lines of one instance the queue refused or the
// store failed to write.
type overflowRun struct {
	service     string
	n           int64
	unstored    int64 // of n, lines whose write failed
	unread      int64 // of n, lines the runtime skipped unread (SkipLogs)
	first, last time.Time
}

var _ sim.LogBook = (*Capture)(nil)

// New starts a capture.
func New(cfg Config) *Capture {
	if cfg.Limits == (Limits{}) {
		cfg.Limits = DefaultLimits
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	c := &Capture{store: cfg.Store, log: cfg.Logger, overflow: map[string]*overflowRun{}, changed: make(chan struct{})}
	c.queue = batchq.New(batchq.Limits{Items: cfg.Limits.Lines, Size: cfg.Limits.Bytes}, linger, batch, c.write)
	return c
}

// CaptureLog queues a line; it never blocks.
func (c *Capture) CaptureLog(l sim.LogLine) {
	c.queued.Add(1)
	if c.queue.Add(entry{LogLine: l}, len(l.Text)+64) {
		return
	}
	c.mu.Lock()
	c.refuse(l, false)
	c.mu.Unlock()
	c.settle(1)
}

// SkipLogs counts n lines the runtime read past without handing them on
// (sim.LogSkipper), as lines not kept; it never blocks.
func (c *Capture) SkipLogs(l sim.LogLine, n int64) {
	if n <= 0 {
		return
	}
	c.queued.Add(n)
	c.mu.Lock()
	c.refuseRun(l, n, false)
	c.overflow[l.Instance].unread += n
	c.mu.Unlock()
	c.settle(n)
}

// refuse counts a line that is not kept into its instance's run, to be
// marked and counted with the next write. c.mu is held.
func (c *Capture) refuse(l sim.LogLine, unstored bool) { c.refuseRun(l, 1, unstored) }

// refuseRun is refuse for n lines. c.mu is held.
func (c *Capture) refuseRun(l sim.LogLine, n int64, unstored bool) {
	o := c.overflow[l.Instance]
	if o == nil {
		o = &overflowRun{service: l.Service, first: l.At, last: l.At}
		c.overflow[l.Instance] = o
	}
	o.n += n
	if unstored {
		o.unstored += n
	}
	o.first, o.last = minTime(o.first, l.At), maxTime(o.last, l.At)
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// Hold defers the store writes until release (or sim.MaxLogHold); lines
// go on being captured, into the queue.
func (c *Capture) Hold() func() {
	c.mu.Lock()
	if c.holds == 0 {
		c.heldAt = time.Now()
		c.unheld = make(chan struct{})
	}
	c.holds++
	c.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			c.mu.Lock()
			defer c.mu.Unlock()
			if c.holds--; c.holds == 0 {
				close(c.unheld)
			}
		})
	}
}

// awaitUnheld waits while a Hold is on, for at most MaxLogHold from its
// beginning.
func (c *Capture) awaitUnheld() {
	c.mu.Lock()
	if c.holds == 0 {
		c.mu.Unlock()
		return
	}
	unheld, left := c.unheld, sim.MaxLogHold-time.Since(c.heldAt)
	c.mu.Unlock()
	if left <= 0 {
		return
	}
	t := time.NewTimer(left)
	defer t.Stop()
	select {
	case <-unheld:
	case <-t.C:
	}
}

// write stores one batch (the registrations first: an instance is
// registered before it prints), then marks the runs of lines refused so
// far.
func (c *Capture) write(batch []entry) {
	c.awaitUnheld()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	lines, registered := c.lines[:0], c.registered[:0]
	for _, e := range batch {
		if e.register {
			registered = append(registered, e.Instance)
		} else {
			lines = append(lines, e.LogLine)
		}
	}
	if len(registered) > 0 {
		if err := c.store.RegisterLogs(ctx, registered...); err != nil {
			c.log.Warn("register instances' logs: their logs may not be served once they are gone", "err", err, "instances", len(registered))
		}
	}
	if len(lines) > 0 {
		err := c.store.AppendLogs(ctx, lines)
		c.report(err, len(lines))
		if err != nil {
			// Not kept, so counted and marked like lines the queue refused,
			// once the store writes again.
			c.mu.Lock()
			for _, l := range lines {
				c.refuse(l, true)
			}
			c.mu.Unlock()
		}
	}
	clear(lines)
	clear(registered)
	c.lines, c.registered = lines, registered
	c.markOverflow(ctx)
	c.settle(int64(len(batch)))
}

// markOverflow writes a marker line for each run of refused lines and
// counts them in the store.
func (c *Capture) markOverflow(ctx context.Context) {
	c.mu.Lock()
	runs := c.overflow
	if len(runs) > 0 {
		c.overflow = map[string]*overflowRun{}
	}
	c.mu.Unlock()
	for inst, o := range runs {
		why := "they came faster than the store could keep them"
		switch {
		case o.unread == o.n:
			why = "the job printed them faster than normsim reads its output, and they were skipped unread"
		case o.unread > 0:
			why = fmt.Sprintf("they came faster than the store could keep them, or (%d of them) the job printed them faster than normsim reads its output", o.unread)
		case o.unstored == o.n:
			why = "the store failed to write them"
		case o.unstored > 0:
			why = fmt.Sprintf("they came faster than the store could keep them, or (%d of them) the store failed to write them", o.unstored)
		}
		mark := sim.LogLine{Instance: inst, Service: o.service, Stream: sim.StreamNormsim, At: o.first,
			Text: fmt.Sprintf("normsim: %d line(s) printed between %s and %s were dropped here: %s",
				o.n, o.first.UTC().Format(time.RFC3339Nano), o.last.UTC().Format(time.RFC3339Nano), why)}
		err := c.store.AppendLogs(ctx, []sim.LogLine{mark})
		if err == nil {
			err = c.store.CountOverflow(ctx, inst, o.n)
		}
		c.report(err, 1)
		if err != nil {
			// Still not marked: keep the run for the next write.
			c.mu.Lock()
			if cur := c.overflow[inst]; cur != nil {
				o.n, o.unstored, o.unread = o.n+cur.n, o.unstored+cur.unstored, o.unread+cur.unread
				o.first, o.last = minTime(o.first, cur.first), maxTime(o.last, cur.last)
			}
			c.overflow[inst] = o
			c.mu.Unlock()
		}
	}
}

func (c *Capture) report(err error, n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil && c.failed == nil {
		c.log.Error("store log lines; instances' output is being lost until the store writes again", "err", err, "lines", n)
	}
	c.failed = err
}

// Failing is why the store refused the capture's last write, or nil: a
// store that cannot keep output (its disk full) must turn new work away
// as one that cannot keep records does (attack round 16, B-F4). A quiet
// job would leave the failure standing after the store recovered, so it
// first tries again what is owed anyway: the marks of the lines lost
// meanwhile.
func (c *Capture) Failing(ctx context.Context) error {
	c.mu.Lock()
	failed := c.failed
	c.mu.Unlock()
	if failed == nil {
		return nil
	}
	c.markOverflow(ctx)
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.failed
}

// settle counts n lines as done with and wakes readers.
func (c *Capture) settle(n int64) {
	c.written.Add(n)
	c.mu.Lock()
	close(c.changed)
	c.changed = make(chan struct{})
	c.mu.Unlock()
}

// Changed is closed once lines captured after the call are settled.
func (c *Capture) Changed() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.changed
}

// Flush waits until every line captured before the call is settled, and
// the runs of refused lines among them are marked.
func (c *Capture) Flush(ctx context.Context) error {
	target := c.queued.Load()
	if c.written.Load() < target {
		c.queue.Hurry()
	}
	for c.written.Load() < target {
		ch := c.Changed()
		if c.written.Load() >= target {
			break
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	c.markOverflow(ctx) // refused lines settle at once; mark them now
	return nil
}

// Register queues the record that an instance exists, ahead of its lines;
// it never blocks, and is never refused for a full queue. Read waits for
// it as for a line.
func (c *Capture) Register(instance string) {
	c.queued.Add(1)
	if !c.queue.AddOver(entry{LogLine: sim.LogLine{Instance: instance}, register: true}, 0) {
		c.settle(1) // closed: nothing will write it
	}
}

// readFlushBound bounds how long Read waits for what is queued: a store
// that fell behind a chatty job must not hold a reader (a migration's
// record, a failure report) for long. Lines still queued then are read
// next time.
const readFlushBound = 2 * time.Second

// Read flushes (for at most readFlushBound), then reads from the store.
func (c *Capture) Read(ctx context.Context, q sim.LogQuery) (*sim.LogPage, error) {
	fctx, cancel := context.WithTimeout(ctx, readFlushBound)
	err := c.Flush(fctx)
	cancel()
	if err != nil && ctx.Err() != nil {
		return nil, ctx.Err()
	}
	return c.store.ReadLogs(ctx, q)
}

// Close stores what is queued and stops.
func (c *Capture) Close() {
	c.queue.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c.markOverflow(ctx)
}
