package jobsocket

import (
	"bufio"
	"bytes"
	"context"
	"crypto/subtle"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/coder/websocket"
	"github.com/normsim/normsim/protocol"
	"github.com/normsim/normsim/sim"
)

// The listener speaks sim's job-socket types (sim.JobSocket is what it is
// to the manager); these names are how this package's callers read them.
type (
	// EventKind is sim.SocketEventKind.
	EventKind = sim.SocketEventKind
	// Event is what the listener tells the manager: sim.SocketEvent.
	Event = sim.SocketEvent
	// Closer is sim.Closer.
	Closer = sim.Closer
	// Registration is an instance the listener accepts connections for:
	// sim.SocketRegistration.
	Registration = sim.SocketRegistration
)

// Event kinds and closers, as sim names them.
const (
	Connected      = sim.SocketConnected
	Disconnected   = sim.SocketDisconnected
	Frame          = sim.SocketFrame
	Replaced       = sim.SocketReplaced
	Discarded      = sim.SocketDiscarded
	Hello          = sim.SocketHello
	ClosedByJob    = sim.ClosedByJob
	ClosedByWorker = sim.ClosedByWorker
	ConnectionLost = sim.ConnectionLost
)

var _ sim.JobSocket = (*Listener)(nil)

// Config configures a Listener.
type Config struct {
	Node   string
	Logger *slog.Logger
	Now    func() time.Time
	// OnEvent receives every connection change and valid frame, in order per
	// connection, on the connection's goroutine: it must not block for long.
	OnEvent func(Event)
	// Recorder keeps frames for the timeline; nil records nothing.
	Recorder *Recorder
	// HelloTimeout defaults to protocol.HelloTimeout.
	HelloTimeout time.Duration
	// WriteTimeout bounds a frame write to a slow job before it is dropped.
	WriteTimeout time.Duration
	// CloseTimeout bounds a close handshake the listener starts, including
	// the discarding of whatever the job still sends before its close frame
	// (the rest of an oversized frame, say); past it the connection is
	// dropped. Default 5s.
	CloseTimeout time.Duration
	// IdleTimeout closes an HTTP keep-alive connection that has sent no
	// request for this long (a job upgrades at once; nothing else has
	// reason to idle on a job socket). Default 10s.
	IdleTimeout time.Duration
	// Budget bounds the connections that are not jobs yet (not upgraded,
	// or upgraded without a hello), per host and in all, so that a flood
	// of them cannot take the fds the API and real jobs need. A sim hands
	// one Budget to every node's listener, so the bounds hold in total;
	// nil gives the listener one of its own, with DefaultLimits.
	Budget *Budget
	// Registered, when set, is closed once the instances that may connect
	// are registered (after a restart's recovery): a hello that comes
	// before waits for it, within the hello timeout, instead of being
	// refused as an unknown instance while normsim is still starting.
	Registered <-chan struct{}
}

// Listener is one node's job-socket server.
type Listener struct {
	cfg Config
	ln  net.Listener
	srv *http.Server

	// refused counts this listener's connections turned away because too
	// many were waiting to say hello: each the one that had waited
	// longest, closed to make room for a newer one (Budget.admit).
	refused atomic.Int64
	// refusedLogged is when the last of them was logged (UnixNano): one
	// line per evictLogEvery at most.
	refusedLogged atomic.Int64
	// discarded counts frames read and not passed on, without a close
	// for them (Event Discarded).
	discarded atomic.Int64
	// serials numbers the connections accepted (Event.Conn).
	serials atomic.Uint64
	// evicted counts this listener's connections that had not upgraded,
	// closed to keep the Budget's bounds.
	evicted atomic.Int64

	mu        sync.Mutex
	instances map[key]*instance
	conns     map[*conn]struct{}
	closed    bool
	wg        sync.WaitGroup
}

type key struct{ jobID, role string }

// instance is a registration and its current connection.
type instance struct {
	reg Registration
	cur *conn
	// expect is the set of job→worker frame types the current phase allows.
	expect map[string]bool
	// late holds answers to asks that expired (Expire): each is accepted
	// once more, flagged Late, because the job may have sent it before it
	// read that the migration ended.
	late map[string]bool
	// owed are the answers to asks of ended migrations that reached the
	// job late (Owe), each the types one ask may be answered with.
	owed [][]string
	// hello is the connection whose hello the manager is hearing
	// (sim.SocketHello), before it becomes cur: Drop cuts it off first.
	hello *conn
	// dropped is the connection Drop cut off, until its end is reported:
	// the job's next connection waits for that (awaitDropped).
	dropped *conn
	// answered holds the answers the instance's connections passed on
	// while its migration runs (cleared when it ends: Expire), and spent
	// the ones a new connection may repeat: each once, discarded instead
	// of closing the socket with 4400. A job that reconnects answers what
	// its new connection asks (a target gets initial-state again), and
	// repeats what normsim read already. spent is cleared like late.
	answered map[string]bool
	spent    map[string]bool
	// reporting counts the reports of the instance's current connection
	// on their way to OnEvent (a frame, its end). Unregister waits until
	// they are handed on (drained, made when it finds some under way), so
	// the manager, which stops or removes the instance next, hears what
	// the job sent before it goes on: a frame read in the moment before
	// the stop is never lost between the two.
	reporting int
	drained   chan struct{}
}

// CatchUp returns once the instance's connection has been read up to
// what the job sent before the call (conn.catchUp), and the reports of
// it on their way are handed on: a frame, a close or a connection gone
// that reached the node before is told first.
func (l *Listener) CatchUp(jobID, role string) {
	if c := l.current(jobID, role); c != nil {
		c.catchUp()
		if c.jobClose() != nil {
			// Its close was read, and the library is answering it: its
			// report comes once the read loop ends (readOver).
			pollUntil(time.Now().Add(l.cfg.CloseTimeout), c.readOver.Load)
		}
	}
	l.mu.Lock()
	var drained chan struct{}
	if in, ok := l.instances[key{jobID, role}]; ok {
		drained = in.draining()
	}
	l.mu.Unlock()
	l.awaitDrained(drained)
}

// draining is closed once the reports of in's on their way are handed
// on; nil when none is. Called under l.mu.
func (in *instance) draining() chan struct{} {
	if in.reporting == 0 {
		return nil
	}
	if in.drained == nil {
		in.drained = make(chan struct{})
	}
	return in.drained
}

// awaitDrained waits for draining's channel, if any. Bounded: a handler
// that waits from inside its own report would wait for itself.
func (l *Listener) awaitDrained(drained chan struct{}) {
	if drained == nil {
		return
	}
	t := time.NewTimer(l.cfg.CloseTimeout)
	defer t.Stop()
	select {
	case <-drained:
	case <-t.C:
	}
}

// report counts a report of in's that is on its way; the func it returns
// says it was handed on. Called under l.mu.
func (l *Listener) report(in *instance) (done func()) {
	in.reporting++
	return func() {
		l.mu.Lock()
		if in.reporting--; in.reporting == 0 && in.drained != nil {
			close(in.drained)
			in.drained = nil
		}
		l.mu.Unlock()
	}
}

// New returns a listener; Open starts it.
func New(cfg Config) *Listener {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	// Every line says its node once, the HTTP server's own included.
	cfg.Logger = cfg.Logger.With("node", cfg.Node)
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.HelloTimeout <= 0 {
		cfg.HelloTimeout = protocol.HelloTimeout
	}
	if cfg.WriteTimeout <= 0 {
		cfg.WriteTimeout = 5 * time.Second
	}
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = 10 * time.Second
	}
	if cfg.CloseTimeout <= 0 {
		cfg.CloseTimeout = 5 * time.Second
	}
	if cfg.Budget == nil {
		cfg.Budget = NewBudget(Limits{})
	}
	if cfg.OnEvent == nil {
		cfg.OnEvent = func(Event) {}
	}
	return &Listener{cfg: cfg, instances: map[key]*instance{}, conns: map[*conn]struct{}{}}
}

// Open listens on addr synchronously, so a port in use is an error here, and
// serves in the background.
func (l *Listener) Open(addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	l.ln = ln
	l.srv = &http.Server{Handler: l, ReadHeaderTimeout: 5 * time.Second, IdleTimeout: l.cfg.IdleTimeout, ErrorLog: slog.NewLogLogger(l.cfg.Logger.Handler(), slog.LevelDebug),
		ConnState: func(c net.Conn, s http.ConnState) { l.cfg.Budget.plain.track(c, s, &l.evicted) }}
	// A job upgrades on its first request; a connection that asked for
	// anything else has its answer and is closed, never kept idle.
	l.srv.SetKeepAlivesEnabled(false)
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		if err := l.srv.Serve(pathGuard{ln}); err != nil && !errors.Is(err, http.ErrServerClosed) {
			l.cfg.Logger.Error("job socket stopped", "err", err)
		}
	}()
	return nil
}

// Refused is how many connections to this listener were turned away
// because too many were waiting to say hello (Limits.Pending,
// Limits.PendingPerHost): each the one that had waited longest, closed
// with 4401 to make room for a newer upgrade, which is never refused.
func (l *Listener) Refused() int64 { return l.refused.Load() }

// Discarded is how many frames were read and not passed on without a
// close for them (each also reported as an Event Discarded, with why).
func (l *Listener) Discarded() int64 { return l.discarded.Load() }

// Evicted counts this listener's connections that had not upgraded, closed
// to stay within Limits.Plain or Limits.PlainPerHost.
func (l *Listener) Evicted() int64 { return l.evicted.Load() }

// Budget is the budget the listener's connections count against.
func (l *Listener) Budget() *Budget { return l.cfg.Budget }

// Addr is the address the listener is bound to.
func (l *Listener) Addr() net.Addr { return l.ln.Addr() }

// Port is the bound port.
func (l *Listener) Port() int { return l.ln.Addr().(*net.TCPAddr).Port }

// Close stops accepting, closes every job's connection and waits for the
// goroutines the listener started to serve and to close them; a socket's
// own goroutine ends on its own once its connection is cut.
func (l *Listener) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	conns := make([]*conn, 0, len(l.conns))
	for c := range l.conns {
		conns = append(conns, c)
	}
	l.mu.Unlock()
	var err error
	if l.srv != nil {
		// Hijacked WebSocket connections are not tracked by the server;
		// we close them ourselves, without waiting for close handshakes.
		err = l.srv.Close()
	}
	for _, c := range conns {
		c.abort()
	}
	l.wg.Wait()
	return err
}

// Register makes the listener accept connections for an instance. Registering
// an already registered instance replaces its registration (the current
// connection stays).
func (l *Listener) Register(reg Registration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	k := key{reg.JobID, reg.Role}
	if l.cfg.Recorder != nil {
		l.cfg.Recorder.Know(reg.JobID, reg.Role, reg.Token)
	}
	if in, ok := l.instances[k]; ok {
		in.reg = reg
		return
	}
	l.instances[k] = &instance{reg: reg, expect: map[string]bool{}, late: map[string]bool{}, answered: map[string]bool{}, spent: map[string]bool{}}
}

// Settle ends the migration an instance was registered as the target of:
// a job that reconnects after its migration ended is told nothing of it,
// as a worker tells a reconnecting job of no migration that is over.
func (l *Listener) Settle(jobID, role string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if in, ok := l.instances[key{jobID, role}]; ok {
		in.reg.Migration, in.reg.InitialState = nil, nil
	}
}

// Unregister forgets an instance and closes its connection normally.
// What the job sent before, waiting to be read, is read first, as the
// instance's (conn.catchUp); a report of it on its way is handed on
// before Unregister returns. The manager, which stops or removes the
// instance next, hears all of it first: a frame or a close the job sent
// right before its stop is never lost between the two.
func (l *Listener) Unregister(jobID, role string) {
	k := key{jobID, role}
	caughtUp := true
	if c := l.current(jobID, role); c != nil {
		caughtUp = c.catchUp()
	}
	l.mu.Lock()
	var c *conn
	var drained chan struct{}
	in, ok := l.instances[k]
	if ok {
		c, drained = in.cur, in.draining()
	}
	delete(l.instances, k)
	l.mu.Unlock()
	if ok && l.cfg.Recorder != nil {
		l.cfg.Recorder.Forget(jobID, role)
	}
	l.awaitDrained(drained)
	if c == nil {
		return
	}
	tell := func(jc *jobClose) {
		// The job closed first, and the library is still answering it:
		// its read loop, with the instance gone now, will not report it.
		l.cfg.OnEvent(Event{Kind: Disconnected, Node: l.cfg.Node, JobID: jobID, Role: role, At: jc.at,
			Code: jc.code, Reason: redactReason(jc.reason, in.reg.Token), ClosedBy: ClosedByJob})
	}
	jc := c.jobClose()
	if jc != nil {
		tell(jc)
	}
	c.close(protocol.CloseStopped, protocol.ReasonStopped)
	if jc == nil && !caughtUp {
		// The job was still sending when we closed (a flood of pings,
		// say): the close handshake reads the rest, and a close of the
		// job's among it, dated by its arrival, may have come first.
		<-c.closeDone
		if jc := c.jobClose(); jc != nil && !jc.at.After(c.closedAt()) {
			tell(jc)
		}
	}
}

// closedAt is when we began to close c.
func (c *conn) closedAt() time.Time {
	c.closeMu.Lock()
	defer c.closeMu.Unlock()
	return c.closeAt
}

// Connected reports whether an instance has an authenticated connection.
func (l *Listener) Connected(jobID, role string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	in, ok := l.instances[key{jobID, role}]
	return ok && in.cur != nil
}

// Expect sets which job→worker frame types the instance may send now (the
// phase it is in). Any other frame closes its socket with 4400. Call it
// before sending the frame the job answers, so a fast answer is never
// judged out of phase.
func (l *Listener) Expect(jobID, role string, types ...string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	in, ok := l.instances[key{jobID, role}]
	if !ok {
		return
	}
	in.expect = make(map[string]bool, len(types))
	for _, t := range types {
		in.expect[t] = true
	}
}

// Expire ends the instance's current phase: nothing is expected of it any
// more, but each frame the phase allowed is accepted once more, as a late
// answer (Event.Late), instead of closing the socket with 4400. A job's
// answer can cross the worker's abort on the wire; a correct job must not
// be punished for it. Late answers stay acceptable until the job answers a
// newer ask (it has then read past the end, and everything it sent before
// has been read) or connects again.
func (l *Listener) Expire(jobID, role string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	in, ok := l.instances[key{jobID, role}]
	if !ok {
		return
	}
	for t, ok := range in.expect {
		if ok {
			in.late[t] = true
		}
	}
	in.expect = map[string]bool{}
	// An owed answer that has not come by the end of the migration that
	// was on meanwhile is not waited for any more.
	in.owed = nil
	clear(in.answered)
}

// Owe records that an ask of an ended migration reached the job only now:
// a frame of one of types that the current phase does not allow answers
// it, and is passed on as late (Event.Late) instead of closing the socket
// with 4400, until the migration on meanwhile expires (Expire).
func (l *Listener) Owe(jobID, role string, types ...string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if in, ok := l.instances[key{jobID, role}]; ok && len(types) > 0 {
		in.owed = append(in.owed, types)
	}
}

// current is an instance's current connection, nil when it has none.
func (l *Listener) current(jobID, role string) *conn {
	l.mu.Lock()
	defer l.mu.Unlock()
	if in, ok := l.instances[key{jobID, role}]; ok {
		return in.cur
	}
	return nil
}

// ErrNotConnected is returned by Send when the instance has no connection
// (sim.ErrNotConnected, which the manager checks for before it queues a
// frame).
var ErrNotConnected = sim.ErrNotConnected

// Send writes a frame to an instance's current connection. A write that
// does not finish within the write timeout drops the connection: a job that
// does not read cannot stall the sim.
func (l *Listener) Send(ctx context.Context, jobID, role string, f protocol.WorkerFrame) error {
	c := l.current(jobID, role)
	if c == nil {
		return fmt.Errorf("send %s to %s/%s: %w", f.Type, jobID, role, ErrNotConnected)
	}
	return c.send(ctx, f)
}

// Disconnect closes an instance's current connection with code and reason
// (a fault, or a normal close for an external instance being stopped).
func (l *Listener) Disconnect(jobID, role string, code int, reason string) {
	c := l.current(jobID, role)
	if c != nil {
		// What the job sent first is read first: a close of its own is
		// then reported as its (conn.closed).
		c.catchUp()
		c.close(websocket.StatusCode(code), reason)
	}
}

// Drop tears an instance's connection down without a close frame, as a
// network failure would (fault injection).
//
// The dropped connection stops being the instance's at once: a connection
// the job makes after the drop is a new one, not a replacement, so what
// the drop broke stays broken (a real worker that lost a job's socket does
// not go on with whatever connects next). Its end is reported before that
// new connection is (awaitDropped).
//
// A connection whose hello the manager is hearing (sim.SocketHello) is
// the job's newest, and the one cut off. Drop returns the connection it
// cut (Event.Conn), 0 when there was none.
func (l *Listener) Drop(jobID, role string) uint64 {
	l.mu.Lock()
	var c *conn
	if in, ok := l.instances[key{jobID, role}]; ok {
		switch {
		case in.hello != nil:
			c, in.hello = in.hello, nil
		case in.cur != nil:
			c, in.cur = in.cur, nil
		}
		if c != nil {
			in.dropped = c
			c.gone = make(chan struct{})
		}
	}
	l.mu.Unlock()
	if c == nil {
		return 0
	}
	c.once.Do(func() {
		c.setClose(int(websocket.StatusAbnormalClosure), "connection dropped")
		close(c.closeDone)
	})
	c.abort()
	return c.serial
}

// SendRaw writes data as one text frame, as is: a frame the caller has
// already marshalled (so the relay marshals once), or on purpose something
// that is not a valid frame (fault injection). typ names it in the frame
// record; a slow job is dropped as with Send.
func (l *Listener) SendRaw(ctx context.Context, jobID, role, typ string, data []byte) error {
	c := l.current(jobID, role)
	if c == nil {
		return fmt.Errorf("send %s to %s/%s: %w", typ, jobID, role, ErrNotConnected)
	}
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	return c.writeLocked(ctx, typ, data)
}

// conn is one accepted WebSocket.
type conn struct {
	l  *Listener
	ws *websocket.Conn
	// raw is the TCP connection under ws. ws cannot cut short a close
	// handshake it is in (CloseNow waits for it), and the handshake skips
	// the rest of an oversized frame without any deadline: raw's deadline
	// and Close bound it.
	raw net.Conn
	// guarded is raw as ws reads and writes it: every frame is judged
	// before ws reads it (frameGuard).
	guarded *frameGuardConn
	key     key
	serial  uint64 // Event.Conn
	// token is the instance's, once the hello proved it: what the job
	// sends after is kept with it redacted wherever it stands. Read and
	// written by the read loop alone.
	token   string
	writeMu sync.Mutex
	// helloDone takes the connection off the count of those waiting to
	// say hello (Limits.Pending) and reports whether it was still on it:
	// false once it was evicted to make room (Budget.admit). It may be
	// called more than once.
	helloDone func() bool
	// helloEvicted says whether the connection was evicted, leaving it
	// on the count when not.
	helloEvicted func() bool
	// remote is the address it was upgraded from.
	remote string
	// upgraded is when the connection was upgraded, for the reason it is
	// evicted with.
	upgraded time.Time
	// once starts the end of the connection: a close handshake (close), a
	// drop (Drop) or, when neither came first, the release in finish.
	// closeDone is closed when that end is over.
	once      sync.Once
	closeDone chan struct{}
	// closeCode and closeReason are what we closed with, for the event;
	// written once inside once.
	closeMu     sync.Mutex
	closeCode   int
	closeReason string
	closeAt     time.Time
	// frameAt: when the frame the guard had read last at setClose
	// arrived (closedOverFrameAt).
	frameAt time.Time
	// closing: setClose ran, and our close frame is on its way.
	closing atomic.Bool
	// writeStuck: our close is the 1008 of a write that ran out of time,
	// which kills the connection, so that close never reached the job.
	// With it, a close frame of the job's read after (jobClose; sent
	// before the write's end cut the connection) is the close reported:
	// the job closed first.
	writeStuck atomic.Bool
	// readOver: the read loop has ended, and its end is reported or
	// counted as on its way (instance.reporting).
	readOver atomic.Bool
	// msgAt is when the message read last had arrived, by the guard's
	// marks (zero: it came as it was read). Read loop only.
	msgAt time.Time
	// told, set (under the listener's lock) when a newer connection
	// replaces this one, is closed once that replacement is reported: a
	// frame this one reads after it is reported after it.
	told chan struct{}
	// readsOwnClose: the connection was closed with replace, so its read
	// loop reads up to the job's close frame, and finish tears it down.
	readsOwnClose bool
	// gone, made (under the listener's lock) when Drop cut the connection
	// off, is closed once its end has been reported.
	gone chan struct{}
}

func (c *conn) setClose(code int, reason string) {
	c.closing.Store(true)
	at := c.l.cfg.Now()
	var frameAt time.Time
	if c.guarded != nil {
		if ns := c.guarded.guard.frameAt.Load(); ns != 0 {
			frameAt = time.Unix(0, ns)
		}
	}
	c.closeMu.Lock()
	c.closeCode, c.closeReason, c.closeAt, c.frameAt = code, reason, at, frameAt
	c.closeMu.Unlock()
}

// closedOverFrameAt is when the frame the guard had read last when we
// began to close c arrived: the frame a close of ours for a frame
// (refusesFrame) answers. Zero when none was read.
func (c *conn) closedOverFrameAt() time.Time {
	c.closeMu.Lock()
	defer c.closeMu.Unlock()
	return c.frameAt
}

// closed is how we ended c (code 0: we did not), unless the job's close
// frame was read before we began to: that close came first, and is
// reported.
func (c *conn) closed() (int, string) {
	c.closeMu.Lock()
	defer c.closeMu.Unlock()
	if jc := c.jobClose(); jc != nil && jc.at.Before(c.closeAt) {
		return 0, ""
	}
	return c.closeCode, c.closeReason
}

// catchUp waits, before we close c, until its read loop has read what the
// job sent up to now: the bytes the kernel and net/http's buffer held for
// c when it began, or up to the job's own close. The loop may be handing
// on a frame (source-stopped-output, say, whose relay brought the answer
// that made the manager stop this job) with more behind it, a burst of
// pings among them. What the job sends after catchUp began is not waited
// for, so a job that never stops sending is closed all the same; one
// whose backlog takes the loop longer than CloseTimeout is closed then.
// It reports whether the loop caught up.
func (c *conn) catchUp() bool {
	if c.guarded == nil {
		return true
	}
	g := &c.guarded.guard
	read := g.src.total.Load()
	horizon := read + g.waiting(read)
	return pollUntil(time.Now().Add(c.l.cfg.CloseTimeout), func() bool {
		if g.refused.Load() {
			// The guard refused a frame: the read loop closes over it
			// and reports that, which is what the job did first.
			return c.readOver.Load()
		}
		if c.jobClose() != nil || c.readOver.Load() || c.caughtUp() {
			return true
		}
		// The library asks for a frame that begins past the horizon: the
		// read loop has taken every frame before it, the one that came
		// as we began included.
		return g.frameStart.Load() > horizon
	})
}

// pollUntil waits until done holds or deadline passes, and reports
// whether done held. What it waits on is the read loop's own progress,
// which signals nothing; the look is cheap.
func pollUntil(deadline time.Time, done func() bool) bool {
	// Looks often at first, when the loop is usually a frame away, and
	// every millisecond at most after: catchUp may wait out a backlog of
	// seconds.
	for wait := 50 * time.Microsecond; !done(); wait = min(2*wait, time.Millisecond) {
		if !time.Now().Before(deadline) {
			return false
		}
		time.Sleep(wait)
	}
	return true
}

// caughtUp says whether the read loop has read all the job sent so far:
// its guard waits for the first bytes of a frame, and the kernel holds
// none, nor the end of the job's side. (A connection whose guard reads
// net/http's buffer, for bytes the job sent right behind its upgrade,
// has them read before it parks.)
func (c *conn) caughtUp() bool {
	if c.guarded == nil {
		return true
	}
	g := &c.guarded.guard
	// Parked before and after the look: what the kernel said is not of
	// bytes the guard was taking meanwhile. A system that cannot say
	// (-1) has the guard's word alone.
	return g.parked.Load() && pendingRead(c.raw) <= 0 && g.parked.Load()
}

// jobClose is the close frame the job sent, once the guard has read it.
func (c *conn) jobClose() *jobClose {
	if c.guarded == nil {
		return nil
	}
	return c.guarded.guard.jobClose.Load()
}

func (c *conn) send(ctx context.Context, f protocol.WorkerFrame) error {
	data, err := f.Marshal()
	if err != nil {
		return fmt.Errorf("marshal %s: %w", f.Type, err)
	}
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	return c.writeLocked(ctx, f.Type, data)
}

// reasonTooSlow is 1008's reason: a write to the job (a frame, or a pong
// to its ping) did not finish within the write timeout.
const reasonTooSlow = "job too slow to read frames"

func (c *conn) writeLocked(ctx context.Context, typ string, data []byte) error {
	wctx, cancel := context.WithTimeout(ctx, c.l.cfg.WriteTimeout)
	defer cancel()
	// Recorded as it is handed to the socket: recorded once the write
	// returned, the job's answer to it could be recorded first.
	c.l.record(c, "out", typ, len(data), data)
	if err := c.ws.Write(wctx, websocket.MessageText, data); err != nil {
		// Only a write that ran out of time is the job's slowness; one
		// that failed because the job closed its socket (or the
		// connection broke) leaves the reader to report how it ended.
		if wctx.Err() != nil && ctx.Err() == nil {
			c.writeStuck.Store(true)
			c.close(websocket.StatusPolicyViolation, reasonTooSlow)
		}
		return fmt.Errorf("send %s to %s/%s: %w", typ, c.key.jobID, c.key.role, err)
	}
	return nil
}

// close closes the socket once, with a code and reason, in the background so
// a peer that never answers the close handshake cannot hold the caller.
//
// Once close is called, nothing else may read from ws: the handshake reads
// and discards everything up to the job's close frame, the rest of a
// message the reader stopped inside included. A Read of ours after a
// half-read message would take the rest of its payload for frame headers
// (and close with 1002); every path that closes ends its reading there.
func (c *conn) close(code websocket.StatusCode, reason string) {
	c.once.Do(func() {
		c.setClose(int(code), reason)
		if !c.beginClose() {
			return
		}
		// A job that keeps sending (a frame announcing terabytes, say)
		// would keep the handshake discarding for ever.
		c.raw.SetDeadline(time.Now().Add(c.l.cfg.CloseTimeout))
		go func() {
			defer c.l.wg.Done()
			defer close(c.closeDone)
			c.ws.Close(code, reason)
		}()
	})
}

// beginClose counts c's close handshake, under the lock Close sets closed
// in, so no handshake starts once Close is waiting for them: it would be a
// WaitGroup Add racing its Wait. A listener that is closing drops the
// connection instead, and beginClose reports false.
func (c *conn) beginClose() bool {
	c.l.mu.Lock()
	closing := c.l.closed
	if !closing {
		c.l.wg.Add(1)
	}
	c.l.mu.Unlock()
	if closing {
		c.abort()
		close(c.closeDone)
		return false
	}
	return true
}

// replace closes c, which a newer connection of its instance replaced,
// with 4409. Unlike close it leaves the reading to c's own loop: the
// library's close handshake would discard every frame that arrives
// before the job's close frame, and those are frames the job sent before
// it read ours, which serveFrame uses or reports. The loop reads up to
// the job's close frame, within CloseTimeout.
func (c *conn) replace() {
	c.once.Do(func() {
		c.setClose(protocol.CloseReplaced, reasonReplaced)
		if !c.beginClose() {
			return
		}
		c.readsOwnClose = true
		c.raw.SetDeadline(time.Now().Add(c.l.cfg.CloseTimeout))
		go func() {
			defer c.l.wg.Done()
			defer close(c.closeDone)
			if err := c.writeClose(protocol.CloseReplaced, reasonReplaced); err != nil {
				c.ws.Close(protocol.CloseReplaced, reasonReplaced)
			}
		}()
	})
}

// opClose is the WebSocket close frame's opcode (RFC 6455, 5.2).
const opClose = 8

// writeClose writes a close frame and nothing more. coder/websocket has no
// call for that, but writes a message of type opClose as a close frame and
// then counts the close as sent, so the read loop completes the handshake
// when the job's close frame comes. Should a later version refuse it,
// replace falls back on Close.
func (c *conn) writeClose(code int, reason string) error {
	p := binary.BigEndian.AppendUint16(make([]byte, 0, 2+len(reason)), uint16(code))
	p = append(p, reason...)
	ctx, cancel := context.WithTimeout(context.Background(), c.l.cfg.WriteTimeout)
	defer cancel()
	return c.ws.Write(ctx, websocket.MessageType(opClose), p)
}

// finish is the last thing done with a connection whose reader has
// returned: it waits for a close under way (bounded by CloseTimeout) or,
// when none was started (the job closed, or the connection broke), releases
// the connection at once.
func (c *conn) finish() {
	c.once.Do(func() {
		c.ws.CloseNow()
		close(c.closeDone)
	})
	<-c.closeDone
	if c.readsOwnClose || c.guarded.cut.Load() {
		// Its handshake ended in the read loop (or the deadline ended
		// it), or a cut write left it open (frameGuardConn.Close):
		// nothing else releases the connection.
		c.abort()
	}
}

// abort tears the connection down at once, without a close frame, even in
// the middle of a close handshake.
func (c *conn) abort() {
	c.raw.Close()
	c.ws.CloseNow()
}

// evictWriteTimeout bounds the write of an evicted connection's close
// frame. The frame is the second thing ever written to the connection
// (after the 101), so it fits the socket's buffer and the write does not
// wait in practice; the bound is for a peer that would make it.
const evictWriteTimeout = 100 * time.Millisecond

// evict closes c, which was waiting to say hello and was taken off the
// count to make room for a newer connection (Budget.admit): with 4401
// and a reason that begins as the hello timeout's (protocol.
// ReasonHelloTimeout: a job may connect again) and says why, then at
// once, without waiting for the job's close frame, so its fd comes back
// before the newer connection goes on. A close under way already (the
// hello timeout's) is cut short the same way. Either of the two
// goroutines that know of the eviction may call it first (the one that
// evicted, and c's own on its way out of the hello read); it does its
// work once.
func (c *conn) evict() {
	c.once.Do(func() {
		waited := max(time.Since(c.upgraded).Round(time.Millisecond), time.Millisecond)
		reason := protocol.ReasonHelloTimeout + " " + waited.String() + ": closed early, too many connections were waiting to say hello"
		c.setClose(protocol.CloseUnauthorized, reason)
		c.raw.SetWriteDeadline(time.Now().Add(evictWriteTimeout))
		c.writeClose(protocol.CloseUnauthorized, reason)
		close(c.closeDone)
	})
	c.abort()
}

// evictLogEvery is how often at most a listener logs that it closed a
// connection waiting to say hello to make room: a flood closes one per
// upgrade, the log says it is going on.
const evictLogEvery = 10 * time.Second

// evictWaiting counts and closes c, one of this listener's connections
// waiting to say hello, from host, evicted because too many were waiting
// (bound says which bound: "per host" or "all nodes").
func (l *Listener) evictWaiting(c *conn, host, bound string) {
	n := l.refused.Add(1)
	now := time.Now()
	if last := l.refusedLogged.Load(); (last == 0 || now.Sub(time.Unix(0, last)) >= evictLogEvery) && l.refusedLogged.CompareAndSwap(last, now.UnixNano()) {
		lim := l.cfg.Budget.Limits()
		l.cfg.Logger.Warn("job socket: too many connections waiting to say hello; closing the one that waited longest (4401)",
			"host", host, "waited", now.Sub(c.upgraded).Round(time.Millisecond), "bound", bound,
			"limit (all nodes)", lim.Pending, "per host", lim.PendingPerHost, "closed so far", n)
	}
	c.evict()
}

// hijackWatch hands the TCP connection that websocket.Accept hijacks to the
// listener as well, with buffers of socketBufferSize.
type hijackWatch struct {
	http.ResponseWriter
	conn    net.Conn
	guarded *frameGuardConn
	now     func() time.Time
}

// socketBufferSize is the size of a job socket's read and of its write
// buffer. The WebSocket keeps the buffers Hijack returns for the
// connection's life, and net/http's are 4 KiB each: 8 KiB a socket, about
// 80 MiB of a sim whose 10,000 jobs are all being handed over (20,000
// sockets; docs/benchmarks.md, section 7). A frame larger than the buffer
// costs one more read or write call, not a copy: bufio passes it through.
const socketBufferSize = 1 << 10

func (h *hijackWatch) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	c, brw, err := http.NewResponseController(h.ResponseWriter).Hijack()
	h.conn = c
	if err != nil {
		return c, brw, err
	}
	// The library reads the connection it is handed (after what the
	// reader it is handed buffered): that connection reads through the
	// frameGuard. What a job sent right behind its upgrade request is in
	// net/http's read buffer already, and the guard reads it from there,
	// and then the connection itself: read on, the buffer would take in
	// 4 KiB at once, and what waits in it is neither in the kernel's count
	// (unreadBytes) nor dated by it. The write buffer is empty (the 101
	// was flushed before the hijack).
	src := io.Reader(c)
	n := brw.Reader.Buffered()
	if n > 0 {
		src = io.MultiReader(io.LimitReader(brw.Reader, int64(n)), c)
	}
	gc := &frameGuardConn{Conn: c, guard: frameGuard{src: counted{r: src}, conn: c, now: h.now, early: int64(n)}}
	h.guarded = gc
	return gc, bufio.NewReadWriter(bufio.NewReaderSize(gc, socketBufferSize), bufio.NewWriterSize(gc, socketBufferSize)), nil
}

// frameGuardConn is a job's connection as the WebSocket library reads and
// writes it: reads through a frameGuard, and a close that cuts a write
// short leaves what the job sent unread to the read loop (Close).
type frameGuardConn struct {
	net.Conn
	guard frameGuard
	// writes counts the writes under way.
	writes atomic.Int32
	// cut: Close came while a write was under way (the library's write
	// timeout), and only stopped the connection.
	cut atomic.Bool
}

func (g *frameGuardConn) Read(p []byte) (int, error) { return g.guard.Read(p) }

func (g *frameGuardConn) Write(p []byte) (int, error) {
	g.writes.Add(1)
	defer g.writes.Add(-1)
	return g.Conn.Write(p)
}

// Close closes the connection, unless a write is under way: a write that
// ran out of time is cut by the library's Close, and the read loop may be
// the goroutine stuck in it (the pong to a ping waits behind a stuck
// frame). The job's close frame may then wait unread in the socket's
// buffer, sent before normsim gave up. Close then only stops the
// connection's reads and writes, and the read loop looks for that frame
// (unreadClose) before the connection is released (conn.finish closes it).
func (g *frameGuardConn) Close() error {
	if g.writes.Load() > 0 {
		g.cut.Store(true)
		return g.Conn.SetDeadline(time.Now())
	}
	return g.Conn.Close()
}

// unreadLook bounds how long the read loop reads what a job sent when a
// stuck write was cut: what the job sent in time is in the socket's
// buffer already.
const unreadLook = time.Millisecond

// unreadClose reports the job's close frame among what it sent and no one
// read, when a write that ran out of time cut the connection (cut): the
// job closed first. Only the read loop calls it, once its read failed.
func (g *frameGuardConn) unreadClose() (code int, reason string, ok bool) {
	if !g.cut.Load() {
		return 0, "", false
	}
	g.Conn.SetReadDeadline(time.Now().Add(unreadLook))
	return g.guard.unreadClose()
}

// ServeHTTP upgrades a job's connection and runs it.
func (l *Listener) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hw := &hijackWatch{ResponseWriter: w, now: l.cfg.Now}
	var accepted atomic.Pointer[conn]
	ws, err := websocket.Accept(hw, r, &websocket.AcceptOptions{
		// Jobs are not browsers; the per-instance token is the guard.
		InsecureSkipVerify: true,
		CompressionMode:    websocket.CompressionDisabled,
		// Once our close frame is on its way a pong cannot follow it, and
		// the library's refused write would end the read that is looking
		// for the job's close: a ping then goes unanswered.
		OnPingReceived: func(context.Context, []byte) bool {
			c := accepted.Load()
			return c == nil || !c.closing.Load()
		},
	})
	if err != nil {
		return // Accept already wrote the HTTP error
	}
	// We enforce the cap ourselves to close with 4413 rather than the
	// library's 1009; one byte over the cap is enough to know.
	ws.SetReadLimit(protocol.MaxFrameBytes + 1)
	jobID, role, ok := protocol.ParsePath(r.RequestURI)
	c := &conn{l: l, ws: ws, raw: hw.conn, guarded: hw.guarded, key: key{jobID, role}, serial: l.serials.Add(1), closeDone: make(chan struct{}), upgraded: time.Now()}
	accepted.Store(c)
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		c.abort()
		return
	}
	l.conns[c] = struct{}{}
	l.mu.Unlock()
	// Counted once it is a WebSocket: a newcomer is never refused, the
	// connection that has waited longest to say hello makes room for it
	// (Budget.admit).
	c.remote = r.RemoteAddr
	c.helloDone, c.helloEvicted = l.cfg.Budget.admit(c, c.remote)
	// The socket lives on a goroutine of its own and this handler returns:
	// while it runs, net/http keeps the connection's request, its 4 KiB
	// read and write buffers and a stack grown by the request's parsing,
	// none of which a WebSocket uses (about 12 KiB a socket). The request's
	// context ends with the handler; its values stay. Close aborts the
	// socket and does not wait for its goroutine, as it did not wait for
	// the handler: at 10,000 jobs the disconnects the goroutines report on
	// their way out took longer than the 10 s normsim bench gives the sim
	// to exit.
	ctx := context.WithoutCancel(r.Context())
	go func() {
		defer func() { c.helloDone() }() // the count it is on at its end (hello may count it again)
		defer func() {
			// Listed until its close is over, so Listener.Close can cut a
			// close handshake short.
			c.finish()
			l.mu.Lock()
			delete(l.conns, c)
			l.mu.Unlock()
		}()
		if !ok || l.unknown(c.key) {
			c.close(protocol.CloseUnauthorized, "path names no instance")
			return
		}
		l.run(ctx, c)
	}()
}

// readFrame reads one message, enforcing text-only and the size cap.
// The frameGuard under the library refuses a frame that breaks RFC 6455
// (1002), or whose close reason is not UTF-8 (1007), and one that takes
// its message over the cap (4413) as soon as its header is read, whatever
// its type: its refusal is the *closeErr the read fails with. After an
// error the message may be half read: the caller must not read again (see
// close).
func (c *conn) readFrame(ctx context.Context) ([]byte, error) {
	typ, rd, err := c.ws.Reader(ctx)
	if err != nil {
		return nil, err
	}
	data, err := io.ReadAll(io.LimitReader(rd, protocol.MaxFrameBytes+1))
	if err != nil {
		return nil, err
	}
	// The library has read the message's last frame and nothing after
	// it: the header the guard read last is that frame's.
	c.msgAt = time.Time{}
	if c.guarded != nil {
		if ns := c.guarded.guard.frameAt.Load(); ns != 0 {
			c.msgAt = time.Unix(0, ns)
		}
	}
	if len(data) > protocol.MaxFrameBytes { // the guard refuses it at its header: a backstop
		return nil, &closeErr{protocol.CloseFrameTooLarge, reasonFrameTooLarge}
	}
	if typ != websocket.MessageText {
		return nil, &closeErr{protocol.CloseProtocolError, "binary frames are not allowed"}
	}
	return data, nil
}

// arrivedAt is when the message c read last arrived: a frame that waited
// on the socket behind others (a burst of pings) is dated by when it was
// in, not by when the read loop got to it, so a migration judges it
// against its deadline, and against the other socket's news, as of then
// (attack round 16, A-F1 and A-F2).
func (l *Listener) arrivedAt(c *conn) time.Time {
	now := l.cfg.Now()
	if !c.msgAt.IsZero() && c.msgAt.Before(now) {
		return c.msgAt
	}
	return now
}

// refuseFrame closes c for a frame that did not parse (perr), and returns
// the close code and reason: 4400 with the parse error, or 1007 for text
// that is not UTF-8, which fails the WebSocket itself (RFC 6455 section
// 8.1) before the job protocol can judge it: nothing more the job sends is
// read, as after the guard's own 1002 and 1007.
func (c *conn) refuseFrame(data []byte, perr error) (int, string) {
	code, reason := protocol.CloseProtocolError, perr.Error() // parse errors are capped at 120 bytes
	if !utf8.Valid(data) {
		code, reason = int(websocket.StatusInvalidFramePayloadData), "a text message must be valid UTF-8 (RFC 6455 section 8.1)"
		c.guarded.guard.failAfter()
	}
	c.close(websocket.StatusCode(code), reason)
	return code, reason
}

// reasonFrameTooLarge is the reason of a close with 4413.
const reasonFrameTooLarge = "frame over 65536 bytes"

type closeErr struct {
	code   int
	reason string
}

func (e *closeErr) Error() string { return strconv.Itoa(e.code) + " " + e.reason }

// run serves a connection: its hello, then its frames, then says it is
// gone. Each step is a function of its own, and the read loop keeps
// nothing of a frame on its stack while it waits for the next: a socket's
// goroutine spends its life parked in that read, and the collector halves
// a stack only when under a quarter of it is in use. With the frames'
// structs and events in these loops' own frames, a parked goroutine used
// just over 4 KiB of its stack, and 10,000 sockets kept 16 KiB stacks
// each, 160 MiB, where 8 KiB stacks would do (docs/benchmarks.md,
// section 7).
func (l *Listener) run(ctx context.Context, c *conn) {
	if !l.hello(ctx, c) {
		return
	}
	code, reason := l.serveFrames(ctx, c)
	l.disconnected(c, code, reason)
}

// hello reads and checks the first frame: a valid hello with the right
// token, within the hello timeout. It reports whether c is now its
// instance's connection; if not, c is closing.
func (l *Listener) hello(ctx context.Context, c *conn) bool {
	// A cancelled read context would tear the socket down without a close
	// frame, so the timeout closes with 4401 from the side instead.
	var timedOut atomic.Bool
	helloBy := time.Now().Add(l.cfg.HelloTimeout)
	timeout := func() {
		c.close(protocol.CloseUnauthorized, protocol.ReasonHelloTimeout+" "+l.cfg.HelloTimeout.String())
	}
	timer := time.AfterFunc(l.cfg.HelloTimeout, func() {
		timedOut.Store(true)
		timeout()
	})
	data, err := c.readFrame(ctx)
	// The connection counts as waiting to say hello until its hello is
	// taken: one refused (a wrong token, a first frame that is no hello,
	// a timeout) stays counted through its close handshake, so a flood of
	// refused connections that never answer the close is held to the
	// same bounds, and evicted at once to make room (attack round 16,
	// A-F3: it took every fd for the handshake's 5 s). Unless it was
	// evicted meanwhile (its hello, if that came, came too late).
	waiting := !c.helloEvicted()
	if !timer.Stop() || timedOut.Load() {
		// The timer fired, but its close may not have begun: begin it
		// here (once, whoever is first), or the caller's teardown would
		// beat it and the job get no close frame at all.
		timeout()
		return false
	}
	if !waiting {
		c.evict()
		return false
	}
	if err != nil {
		// As after the hello: a pong the job did not read is 1008 too.
		c.readFailed(err)
		return false
	}
	f, perr := protocol.ParseJobFrame(data)
	if perr != nil {
		c.refuseFrame(data, perr)
		return false
	}
	if f.Type != protocol.TypeHello {
		c.close(protocol.CloseProtocolError, "first frame must be hello; got "+f.Type)
		return false
	}
	l.record(c, "in", f.Type, len(data), redactedHello)
	l.awaitRegistered(helloBy)
	l.awaitDropped(c.key)
	// Off the count before its hello is answered: a job that acts on its
	// hello-ack must not be taken for one still waiting and evicted.
	if !c.helloDone() {
		c.evict()
		return false
	}
	heard := l.authenticate(c, f.Token)
	switch heard {
	case helloRefused:
		// No job after all: counted again through its close.
		c.helloDone, c.helloEvicted = l.cfg.Budget.admit(c, c.remote)
		c.close(protocol.CloseUnauthorized, "wrong token or unknown instance")
		return false
	case helloRemoved:
		// Answered as heard, then closed as its instance's connection
		// would have been by the removal (Unregister).
		c.close(protocol.CloseStopped, protocol.ReasonStopped)
		return false
	case helloDropped:
		// A fault armed on the hello dropped the connection before its
		// answer: its end is reported, as any dropped connection's.
		l.disconnected(c, int(websocket.StatusAbnormalClosure), "connection dropped")
		return false
	}
	return true
}

// announce tells the manager that c is its instance's connection now, and
// that old (if any) was replaced, before c's hello is answered: a job that
// acts the moment it reads hello-ack (asks to migrate) finds the manager
// knowing it is connected, so "connected" is one fact, not the listener's
// first and the manager's a moment later.
func (l *Listener) announce(c, old *conn) {
	if old != nil {
		l.cfg.OnEvent(Event{Kind: Replaced, Node: l.cfg.Node, JobID: c.key.jobID, Role: c.key.role, At: l.cfg.Now(),
			Code: protocol.CloseReplaced, Reason: reasonReplaced, ClosedBy: ClosedByWorker})
		close(old.told)
	}
	l.cfg.OnEvent(Event{Kind: Connected, Node: l.cfg.Node, JobID: c.key.jobID, Role: c.key.role, At: l.cfg.Now()})
}

const reasonReplaced = "replaced by a newer connection"

// refusesFrame says whether a close code of ours answers a frame the job
// sent: one out of phase or unparsable, malformed, or too large.
func refusesFrame(code int) bool {
	switch code {
	case protocol.CloseProtocolError, protocol.CloseFrameTooLarge,
		int(websocket.StatusProtocolError), int(websocket.StatusInvalidFramePayloadData):
		return true
	}
	return false
}

// disconnected reports that c, whose frames ended with code and reason,
// is gone, unless a newer connection of its instance replaced it.
func (l *Listener) disconnected(c *conn, code int, reason string) {
	// A write that timed out closes the socket under the read loop before
	// the writer can say why (1008, too slow to read): wait for the writer
	// to let go, so the close reported below is the writer's, not "lost".
	c.writeMu.Lock()
	c.writeMu.Unlock()
	l.mu.Lock()
	in, ok := l.instances[c.key]
	current := ok && in.cur == c
	if current {
		in.cur = nil
		defer l.report(in)()
	}
	c.readOver.Store(true) // under l.mu, its report counted: catchUp waits no more
	token := ""
	if ok {
		token = in.reg.Token
	}
	gone := c.gone
	if ok && in.dropped == c {
		in.dropped = nil
	}
	l.mu.Unlock()
	by := ClosedByJob
	at := l.cfg.Now()
	if code == int(websocket.StatusAbnormalClosure) {
		by = ConnectionLost
		if c.guarded != nil {
			if end := c.guarded.guard.endAt.Load(); end != 0 && time.Unix(0, end).Before(at) {
				at = time.Unix(0, end) // as the read found it gone
			}
		}
	}
	reason = redactReason(reason, token)
	cc, cr := c.closed()
	jc := c.jobClose()
	switch {
	case cc != 0 && !(c.writeStuck.Load() && jc != nil):
		code, reason, by = cc, cr, ClosedByWorker
		if fa := c.closedOverFrameAt(); refusesFrame(cc) && !fa.IsZero() && fa.Before(at) {
			// We closed over a frame of the job's: the job acted when
			// that frame came, which may be well before the read loop
			// got to it (behind a burst of pings, say).
			at = fa
		}
	case jc != nil:
		// The job's close frame, as the guard read it, and as of then
		// (a migration asks whether the job closed before it was told
		// to stop): how the read loop ended after it (the library's
		// answer, or a close of ours that cut the answer short) is not
		// what the job did.
		code, reason, by, at = jc.code, redactReason(jc.reason, token), ClosedByJob, jc.at
	}
	if current || gone != nil {
		l.cfg.OnEvent(Event{Kind: Disconnected, Node: l.cfg.Node, JobID: c.key.jobID, Role: c.key.role, At: at, Code: code, Reason: reason, ClosedBy: by})
	}
	if gone != nil {
		close(gone)
	}
}

// awaitDropped waits, for CloseTimeout at most, until the end of a
// connection of k that Drop cut off has been reported: the job's next
// connection is then told after it, never before.
func (l *Listener) awaitDropped(k key) {
	l.mu.Lock()
	var gone chan struct{}
	if in, ok := l.instances[k]; ok && in.dropped != nil {
		gone = in.dropped.gone
	}
	l.mu.Unlock()
	if gone == nil {
		return
	}
	t := time.NewTimer(l.cfg.CloseTimeout)
	defer t.Stop()
	select {
	case <-gone:
	case <-t.C:
	}
}

var redactedHello = []byte(`{"type":"hello","token":"<redacted>"}`)

// unknown says the path names an instance that is not registered, once
// the instances that may connect are (before, a hello waits for them).
func (l *Listener) unknown(k key) bool {
	if l.cfg.Registered != nil {
		select {
		case <-l.cfg.Registered:
		default:
			return false
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	_, ok := l.instances[k]
	return !ok
}

// awaitRegistered waits, until by at the latest, for the instances to be
// registered (Config.Registered): a job that reconnects the moment a
// restarted normsim listens is not told it is unknown.
func (l *Listener) awaitRegistered(by time.Time) {
	if l.cfg.Registered == nil {
		return
	}
	t := time.NewTimer(time.Until(by))
	defer t.Stop()
	select {
	case <-l.cfg.Registered:
	case <-t.C:
	}
}

// helloOutcome is what became of a hello the listener heard.
type helloOutcome int

const (
	helloRefused  helloOutcome = iota // wrong token or unknown instance: 4401
	helloAccepted                     // c is the instance's connection now
	helloDropped                      // a fault armed on the hello dropped c
	helloRemoved                      // answered as heard, its instance removed meanwhile
)

// authenticate checks the token in constant time and makes c the instance's
// connection, replacing an older one with 4409; the replacement and the
// connection are announced before hello-ack (and the initial state of a
// migration target) is written, and that before anything else can be.
//
// Between the two, with no lock held, the manager hears the hello
// (sim.SocketHello) and strikes what a fault arms on it, before the job
// can read its answer. Dropped there, c never becomes the instance's
// connection (helloDropped). Unregistered there (a rollback removing the
// target the fault struck), the hello is still answered as it was heard,
// and the caller closes c as the removal closes a connection
// (helloRemoved): a job told 4401 for a hello its worker accepted would
// take itself for an instance nobody manages.
func (l *Listener) authenticate(c *conn, token string) helloOutcome {
	l.mu.Lock()
	in, ok := l.instances[c.key]
	if !ok || subtle.ConstantTimeCompare([]byte(in.reg.Token), []byte(token)) != 1 || token == "" {
		l.mu.Unlock()
		return helloRefused
	}
	in.hello = c
	c.token = token
	// The hello is answered as it was heard: a migration that ends while
	// the manager hears it (a worker abort armed on hello) was still the
	// one this job was started for, and its abort follows the answer.
	reg := in.reg
	l.mu.Unlock()
	l.cfg.OnEvent(Event{Kind: Hello, Node: l.cfg.Node, JobID: c.key.jobID, Role: c.key.role, Conn: c.serial, At: l.cfg.Now()})

	l.mu.Lock()
	in, ok = l.instances[c.key]
	if ok && in.hello == c {
		in.hello = nil
	}
	if c.gone != nil {
		l.mu.Unlock()
		return helloDropped
	}
	if !ok {
		c.writeMu.Lock()
		l.mu.Unlock()
		defer c.writeMu.Unlock()
		c.answerHello(reg)
		return helloRemoved
	}
	old := in.cur
	in.cur = c
	if old != nil {
		old.told = make(chan struct{})
	}
	// Late answers belong to the connection that was asked.
	in.late = map[string]bool{}
	in.owed = nil
	clear(in.spent)
	maps.Copy(in.spent, in.answered)
	// Hold c's write lock until hello-ack and the initial state are out, so
	// no Send can slip in between.
	c.writeMu.Lock()
	l.mu.Unlock()
	defer c.writeMu.Unlock()
	if old != nil {
		old.replace()
	}
	// The manager's handling of these posts to the migration's owner and
	// never writes to c, whose write lock is held.
	l.announce(c, old)
	c.answerHello(reg)
	return helloAccepted
}

// answerHello writes hello-ack and, to a migration target, its initial
// state; c's write lock is held.
func (c *conn) answerHello(reg Registration) {
	ack := protocol.WorkerFrame{Type: protocol.TypeHelloAck, Migration: reg.Migration}
	data, _ := ack.Marshal()
	if err := c.writeLocked(context.Background(), ack.Type, data); err != nil {
		return
	}
	if reg.InitialState != nil {
		data, err := reg.InitialState.Marshal()
		if err == nil {
			c.writeLocked(context.Background(), reg.InitialState.Type, data)
		}
	}
}

// serveFrames reads frames until the socket closes, and returns its close
// code and reason. Only the read is done here (see run).
func (l *Listener) serveFrames(ctx context.Context, c *conn) (int, string) {
	for {
		if l.cfg.Recorder != nil {
			// Back-pressure lands before the next read, once the frame
			// before has been handed on.
			l.cfg.Recorder.Throttle(l.cfg.Node, c.key.jobID, c.key.role)
		}
		data, err := c.readFrame(ctx)
		if err != nil {
			return c.readFailed(err)
		}
		if code, reason := l.serveFrame(c, data); code != 0 {
			return code, reason
		}
	}
}

// readFailed closes c as a failed read calls for, and returns the close
// code and reason.
func (c *conn) readFailed(err error) (int, string) {
	var ce *closeErr
	if errors.As(err, &ce) {
		c.close(websocket.StatusCode(ce.code), ce.reason)
		return ce.code, ce.reason
	}
	if s := websocket.CloseStatus(err); s != -1 {
		// The guard read it first (jobClose): disconnected dates it.
		var wce websocket.CloseError
		errors.As(err, &wce)
		return int(s), wce.Reason
	}
	if code, reason, ok := c.guarded.unreadClose(); ok {
		// Sent before a stuck write ran out of time, and never read:
		// the job closed first (the guard holds it, jobClose).
		return code, reason
	}
	if errors.Is(err, context.DeadlineExceeded) {
		// Reads have no deadline: this is the pong the library writes to
		// a job's ping, with 5 s of its own, and the job did not read it.
		// As slow a reader as one that does not read its frames.
		c.close(websocket.StatusPolicyViolation, reasonTooSlow)
		return int(websocket.StatusPolicyViolation), reasonTooSlow
	}
	return int(websocket.StatusAbnormalClosure), "connection lost"
}

// serveFrame judges one frame against the instance's current phase and
// hands it on. A frame that closes c returns the close code (else 0) and
// reason.
func (l *Listener) serveFrame(c *conn, data []byte) (int, string) {
	f, perr := protocol.ParseJobFrame(data)
	if perr != nil {
		l.record(c, "in", "invalid", len(data), data)
	}
	redactFrameReasons(&f, c.token)
	l.mu.Lock()
	in, ok := l.instances[c.key]
	if !ok || in.cur != c {
		told, dropped := c.told, c.gone != nil
		l.mu.Unlock()
		if dropped {
			return l.droppedFrame(c, f, perr, data)
		}
		return l.staleFrame(c, told, f, perr, data)
	}
	defer l.report(in)()
	if perr != nil {
		l.mu.Unlock()
		return c.refuseFrame(data, perr)
	}
	allowed := in.expect[f.Type]
	if allowed && f.Type != protocol.TypeAbort {
		// A job answers each ask once: a second answer is out of phase
		// until the manager asks again. Abort stays allowed.
		in.expect = map[string]bool{protocol.TypeAbort: in.expect[protocol.TypeAbort]}
	}
	late := !allowed && in.late[f.Type]
	owed := !allowed && !late && owes(in, f.Type)
	spent := !allowed && !late && !owed && in.spent[f.Type]
	switch {
	case owed:
		allowed = true
	case late:
		delete(in.late, f.Type)
		allowed = true
	case spent:
		delete(in.spent, f.Type)
	case allowed:
		clear(in.late)
		clear(in.spent)
		if f.Type != protocol.TypeAbort {
			in.answered[f.Type] = true
		}
	}
	l.mu.Unlock()
	l.record(c, "in", f.Type, len(data), data)
	if spent {
		l.discard(Event{Kind: Discarded, Node: l.cfg.Node, JobID: c.key.jobID, Role: c.key.role, At: l.cfg.Now(), Frame: f, Size: len(data),
			Reason: "it was answered already, on the connection this one replaced"})
		return 0, ""
	}
	if !allowed {
		reason := "frame " + f.Type + " is out of phase"
		if f.Type == protocol.TypeHello {
			reason = "hello was already said"
		}
		c.close(protocol.CloseProtocolError, reason)
		return protocol.CloseProtocolError, reason
	}
	ev := Event{Kind: Frame, Node: l.cfg.Node, JobID: c.key.jobID, Role: c.key.role, Conn: c.serial, At: l.arrivedAt(c), Frame: f, Size: len(data), Late: late || owed}
	if owed {
		ev.Reason = "it answers an ask that reached the job after its migration ended"
	}
	l.cfg.OnEvent(ev)
	return 0, ""
}

// owes reports whether a frame of type t answers an ask that reached the
// job after its migration ended (Owe), and takes that ask off. Called
// only for a frame the current phase does not allow: a frame it allows is
// the current ask's answer, whichever ask the job meant (answers carry no
// migration id), and the owed answer may then follow, or never come (a
// job told abort before it answered may not answer at all).
func owes(in *instance, t string) bool {
	for i, types := range in.owed {
		if slices.Contains(types, t) {
			in.owed = slices.Delete(in.owed, i, i+1)
			return true
		}
	}
	return false
}

// staleFrame handles a frame read on a connection that is closing already
// (nothing here closes one): a newer connection replaced it (told is then
// set), or its instance was unregistered. A frame of a replaced connection
// that the instance is asked for now is passed on, marked Replaced: it is
// the same authenticated instance, and the job sent it before it read the
// close. Anything else is reported discarded, with why. The reading goes
// on, up to the job's close frame, on a replaced connection only.
func (l *Listener) staleFrame(c *conn, told chan struct{}, f protocol.JobFrame, perr error, data []byte) (int, string) {
	if told != nil {
		<-told // the replacement is reported before what followed it
	}
	l.mu.Lock()
	in, ok := l.instances[c.key]
	use := told != nil && perr == nil && ok && in.expect[f.Type]
	if use {
		if f.Type != protocol.TypeAbort {
			in.expect = map[string]bool{protocol.TypeAbort: in.expect[protocol.TypeAbort]}
		}
		clear(in.late)
		in.answered[f.Type] = true
		in.spent[f.Type] = true
	}
	l.mu.Unlock()
	if perr == nil {
		l.record(c, "in", f.Type, len(data), data)
	}
	ev := Event{Kind: Frame, Node: l.cfg.Node, JobID: c.key.jobID, Role: c.key.role, Conn: c.serial, At: l.arrivedAt(c), Frame: f, Size: len(data), Replaced: told != nil}
	if use {
		l.cfg.OnEvent(ev)
		return 0, ""
	}
	ev.Kind = Discarded
	switch {
	case perr != nil:
		ev.Reason = "not a valid frame: " + perr.Error()
	case told == nil || !ok:
		ev.Reason = "its instance was stopped, and the socket is closing"
	case f.Type == protocol.TypeHello:
		ev.Reason = "hello was already said"
	default:
		ev.Reason = "frame " + f.Type + " is out of phase"
	}
	l.discard(ev)
	if told == nil {
		// Unregister is closing it, with the normal close a stop has:
		// should this loop end first, its teardown must not take the
		// place of that close.
		c.close(protocol.CloseStopped, protocol.ReasonStopped)
		return protocol.CloseProtocolError, ev.Reason
	}
	return 0, ""
}

// droppedFrame reports a frame read from a connection after Drop cut it
// off: it was on its way, and a worker that drops a connection reads
// nothing more of it.
func (l *Listener) droppedFrame(c *conn, f protocol.JobFrame, perr error, data []byte) (int, string) {
	if perr == nil {
		l.record(c, "in", f.Type, len(data), data)
	}
	l.discard(Event{Kind: Discarded, Node: l.cfg.Node, JobID: c.key.jobID, Role: c.key.role, At: l.cfg.Now(), Frame: f, Size: len(data),
		Reason: "it was read after normsim dropped the connection (drop-socket)"})
	return 0, ""
}

// discard reports a frame that was read and not passed on.
func (l *Listener) discard(ev Event) {
	l.discarded.Add(1)
	l.cfg.Logger.Warn("job socket: frame discarded", "job", ev.JobID, "role", ev.Role, "type", ev.Frame.Type,
		"replaced socket", ev.Replaced, "why", ev.Reason)
	l.cfg.OnEvent(ev)
}

func (l *Listener) record(c *conn, dir, typ string, size int, data []byte) {
	if l.cfg.Recorder == nil {
		return
	}
	if dir == "in" {
		// A hello can come again (out of phase) or arrive broken; its
		// token is never kept, whatever the phase, nor is the
		// instance's token anywhere else a job echoes it (an abort's
		// reason, a payload).
		data = redactTokens(data)
		if c.token != "" && bytes.Contains(data, []byte(c.token)) {
			data = bytes.ReplaceAll(data, []byte(c.token), []byte("<redacted>"))
		}
	}
	l.cfg.Recorder.Record(sim.FrameRecord{At: l.cfg.Now(), Node: l.cfg.Node, JobID: c.key.jobID, Role: c.key.role,
		Direction: dir, Type: typ, Size: size, Data: string(data)})
}
