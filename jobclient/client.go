package jobclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/coder/websocket"

	"github.com/normsim/normsim/protocol"
)

// Errors the client reports. The ones that stop it for good (ErrDisabled,
// ErrClosed, ErrReplaced, ErrUnauthorized, ErrStopped, a bad URL) are also
// what Err returns once Done is closed.
var (
	// ErrDisabled: the job was started without a job socket
	// (NORSK_WORKER_WS_URL or NORSK_WORKER_TOKEN unset), so the client does
	// nothing.
	ErrDisabled = errors.New("jobclient: no job socket: " + protocol.EnvURL + " or " + protocol.EnvToken + " is unset")
	// ErrClosed: Close was called.
	ErrClosed = errors.New("jobclient: client closed")
	// ErrNotConnected: the worker is not connected right now (the client is
	// reconnecting).
	ErrNotConnected = errors.New("jobclient: not connected to the worker")
	// ErrReplaced: the worker closed the socket with 4409 because a newer
	// connection for this instance took over. The client does not reconnect:
	// two copies of a job would keep replacing each other.
	ErrReplaced = errors.New("jobclient: replaced by a newer connection for this instance (close 4409)")
	// ErrUnauthorized: the worker closed the socket with 4401 because the
	// token is wrong or the path names no instance. Retrying cannot fix
	// either, so the client stops; Err wraps this with the worker's reason.
	// A 4401 whose reason begins with protocol.ReasonHelloTimeout ("no
	// hello within 5s") is not this error: the hello was only late, the
	// token may well be right, and the client reconnects with its usual
	// backoff.
	ErrUnauthorized = errors.New("jobclient: worker refused the token or the instance (close 4401)")
	// ErrStopped: the worker closed the socket normally (1000, "instance
	// stopped"): the instance was stopped or removed, as the source of a
	// completed handover or the target of a rollback is. The worker no
	// longer knows the instance, so the client does not reconnect (it
	// would only be refused with 4401); the job should end.
	ErrStopped = errors.New("jobclient: the worker stopped this instance (close 1000)")
	// ErrFrameTooLarge: a frame the job would send is over
	// protocol.MaxFrameBytes, which the worker answers by closing the socket.
	ErrFrameTooLarge = errors.New("jobclient: frame over the 64 KiB cap")
)

// Refusal is the error a GetState handler returns to decline a migration
// deliberately: the client sends state-refused with Reason, the migration
// ends and no target is placed. (Any other error also refuses, with the
// error's text as the reason, but is logged as a failure.)
type Refusal struct {
	Reason string
}

// Error returns the reason.
func (r *Refusal) Error() string { return "state refused: " + r.Reason }

// Handler is what a job does at each step of a handover. Every field may be
// nil; a nil handler answers as a job with nothing to hand over would. A
// handler's ctx is cancelled when the migration is aborted (by the worker, the
// other side, or Client.Abort), when the connection is lost before the point
// of no return, or when the client is closed; a handler must return promptly
// then, since the client waits for it. Whatever a handler returns after its
// migration was aborted is dropped.
type Handler struct {
	// GetState is asked of the SOURCE before any target is placed. Return the
	// state to hand over (nil means null, a valid acceptance), or an error to
	// send state-refused: a *Refusal for a deliberate refusal, any other
	// error for a failure. A state that cannot be sent (not JSON, or over the
	// frame cap) is refused with the reason.
	// Nil: answer with a null state.
	GetState func(ctx context.Context, migrationID string) (json.RawMessage, error)

	// InitialState gives the TARGET the source's state; it is always the
	// first thing after the hello-ack for a target launched with one. Return
	// the target-ready payload (nil means null) once the state is applied; an
	// error aborts the migration with the error's text.
	// Nil: answer target-ready with null.
	InitialState func(ctx context.Context, migrationID string, state json.RawMessage) (ready json.RawMessage, err error)

	// CutoverReady tells the SOURCE the target is ready (with the target's
	// target-ready payload). Stop output NOW and return the exact position
	// where it stopped; it is sent as source-stopped-output, the point of no
	// return. An error aborts the migration, and Abort is called so the
	// source resumes.
	// Nil: answer source-stopped-output with null.
	CutoverReady func(ctx context.Context, migrationID string, targetReady json.RawMessage) (stoppedAt json.RawMessage, err error)

	// CutoverApply tells the TARGET the source stopped at stoppedAt: start
	// output from exactly there, and return what was applied. This is past
	// the point of no return, so nothing rolls back: an error is reported as
	// one more failed item with ID "cutover-apply", and a lost connection does
	// not cancel ctx. A cutover-apply that arrived before the connection was
	// lost is still applied.
	// Nil: answer with a bare target-applied.
	CutoverApply func(ctx context.Context, migrationID string, stoppedAt json.RawMessage) (Applied, error)

	// Abort is called exactly once for every migration that is rolled back
	// on this side, whoever ended it: the worker (for the other side, a
	// timeout or an operator), this job (Client.Abort, or a handler that
	// failed), or a connection lost before this side passed the point of no
	// return. Roll back: the source resumes its output, a target cleans up.
	// It is called from the client's handler goroutine, after any handler
	// still running for the migration has returned.
	Abort func(migrationID, reason string)

	// No handler may call Client.Close: Close waits for the handlers.
	// Client.Abort is fine.
}

// Applied is what a target reports in target-applied. Nil slices and a nil
// SkewMs are left out of the frame.
type Applied struct {
	// Applied lists the participants that were applied.
	Applied []string
	// Failed lists the participants that could not be applied and why.
	Failed []protocol.FailedApply
	// SkewMs is the output skew the target measured; it must be finite.
	SkewMs *float64
}

// Options configure a Client. The zero value reads everything from the
// environment and uses the defaults below.
type Options struct {
	// URL is the worker's socket URL. Default: $NORSK_WORKER_WS_URL.
	URL string
	// Token is sent in the hello. Default: $NORSK_WORKER_TOKEN.
	Token string
	// Logger receives the client's log lines. Default: slog.Default().
	Logger *slog.Logger
	// MinBackoff and MaxBackoff bound the delay before a reconnect, which
	// doubles from MinBackoff up to MaxBackoff and is jittered so jobs
	// dropped together by a restarting worker do not return together.
	// Defaults: 250ms and 2s, so a job that outlived its worker (normsim up
	// --keep, then a restart) is back within about two seconds of it.
	MinBackoff, MaxBackoff time.Duration
	// HTTPClient dials the socket. Default: http.DefaultClient.
	HTTPClient *http.Client
}

const (
	defaultMinBackoff = 250 * time.Millisecond
	defaultMaxBackoff = 2 * time.Second

	dialTimeout  = 10 * time.Second
	writeTimeout = 10 * time.Second
	// defaultHelloAckTimeout is how long the client waits for hello-ack
	// before it gives the connection up and dials again; the worker itself
	// allows HelloTimeout for the hello.
	defaultHelloAckTimeout = 2 * protocol.HelloTimeout

	// readLimit caps a frame from the worker. The 64 KiB cap binds what a
	// job sends; a worker relays a job's payload inside an envelope and a
	// JavaScript worker re-encodes it (JSON.stringify writes 1e20 as 21
	// digits), so its frames can be a few times larger.
	readLimit = 1 << 20

	// maxReasonBytes keeps the reasons the client sends (often error texts)
	// far below the frame cap.
	maxReasonBytes = 1024
	// maxCloseReasonBytes fits a WebSocket close reason (at most 123 bytes).
	maxCloseReasonBytes = 120

	reasonConnectionLost = "connection to the worker was lost"
	failedHandlerID      = "cutover-apply"
)

// Client is a job's connection to its worker. Its methods are safe for
// concurrent use. A Client whose job has no job socket is a no-op (Enabled
// reports false).
type Client struct {
	h          Handler
	url, token string
	log        *slog.Logger
	minBackoff time.Duration
	maxBackoff time.Duration
	httpClient *http.Client

	helloAckTimeout time.Duration

	enabled bool
	ctx     context.Context // the client's lifetime; handler contexts derive from it
	cancel  context.CancelFunc
	done    chan struct{} // closed when the client has stopped for good

	mu        sync.Mutex
	sess      *session      // the acknowledged connection; nil while there is none
	connected chan struct{} // closed when sess is set; replaced when it is cleared
	migration *protocol.MigrationRef
	closing   bool
	err       error // why the client stopped; set before done is closed
}

// Connect starts a client for the job and returns at once; the client dials
// and reconnects in the background until Close is called or ctx ends. When
// the URL or the token is missing (neither in opts nor in the environment)
// the returned client does nothing: Enabled is false and Err is ErrDisabled.
// A URL that is not a ws:// or wss:// URL stops the client at once, with Err
// saying why.
func Connect(ctx context.Context, h Handler, opts Options) *Client {
	c := newClient(h, opts)
	c.start(ctx)
	return c
}

// newClient resolves the options; start does the rest. They are apart so
// tests can adjust a client before it runs.
func newClient(h Handler, opts Options) *Client {
	c := &Client{
		h:          h,
		url:        opts.URL,
		token:      opts.Token,
		log:        opts.Logger,
		minBackoff: opts.MinBackoff,
		maxBackoff: opts.MaxBackoff,
		httpClient: opts.HTTPClient,
		done:       make(chan struct{}),
		connected:  make(chan struct{}),

		helloAckTimeout: defaultHelloAckTimeout,
	}
	if c.url == "" {
		c.url = os.Getenv(protocol.EnvURL)
	}
	if c.token == "" {
		c.token = os.Getenv(protocol.EnvToken)
	}
	if c.log == nil {
		c.log = slog.Default()
	}
	if c.minBackoff <= 0 {
		c.minBackoff = defaultMinBackoff
	}
	if c.maxBackoff <= 0 {
		c.maxBackoff = defaultMaxBackoff
	}
	c.maxBackoff = max(c.maxBackoff, c.minBackoff)
	return c
}

func (c *Client) start(ctx context.Context) {
	if c.url == "" || c.token == "" {
		if c.url != "" || c.token != "" {
			// Half a configuration is a launcher bug worth seeing; the job
			// still runs, as it would with no socket at all.
			c.log.Warn("job socket disabled: both "+protocol.EnvURL+" and "+protocol.EnvToken+" are needed",
				"url_set", c.url != "", "token_set", c.token != "")
		}
		c.stop(ErrDisabled)
		return
	}
	c.enabled = true
	c.log = c.log.With("job_socket", c.url)
	if u, err := url.Parse(c.url); err != nil || (u.Scheme != "ws" && u.Scheme != "wss") || u.Host == "" {
		err := fmt.Errorf("jobclient: %s %q is not a ws:// or wss:// URL", protocol.EnvURL, c.url)
		c.log.Error("job socket disabled", "err", err)
		c.stop(err)
		return
	}
	c.ctx, c.cancel = context.WithCancel(ctx)
	go c.run()
}

// Enabled reports whether the job has a job socket at all.
func (c *Client) Enabled() bool { return c.enabled }

// Connected reports whether the worker has acknowledged the current
// connection.
func (c *Client) Connected() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sess != nil
}

// Migration returns the migration the last hello-ack announced: non-nil only
// when this instance was launched as a migration target.
func (c *Client) Migration() *protocol.MigrationRef {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.migration == nil {
		return nil
	}
	m := *c.migration
	return &m
}

// WaitConnected waits until the worker has acknowledged a connection. It
// returns ctx's error if ctx ends first, and Err if the client stops first
// (at once for a disabled client).
func (c *Client) WaitConnected(ctx context.Context) error {
	c.mu.Lock()
	ch, ok := c.connected, c.sess != nil
	c.mu.Unlock()
	if ok {
		return nil
	}
	select {
	case <-ch:
		return nil
	case <-c.done:
		return c.Err()
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Done is closed when the client has stopped for good: closed, replaced,
// refused, or disabled from the start. A job replaced by a newer copy of
// itself may want to exit then.
func (c *Client) Done() <-chan struct{} { return c.done }

// Err returns nil while the client runs, and why it stopped once Done is
// closed: ErrDisabled, ErrClosed, ErrReplaced, ErrUnauthorized (wrapped
// with the worker's reason; test with errors.Is), a URL error, or the error
// of the context given to Connect.
func (c *Client) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// Abort aborts a migration from the job's side: the worker rolls it back and
// tells the other side, and Handler.Abort is called for it here too (once).
// ctx bounds the write; a write cut short closes the connection, which the
// worker also treats as a rollback.
func (c *Client) Abort(ctx context.Context, migrationID, reason string) error {
	if !c.enabled {
		return ErrDisabled
	}
	c.mu.Lock()
	s, err := c.sess, c.err
	c.mu.Unlock()
	if err != nil {
		return err
	}
	if s == nil {
		return ErrNotConnected
	}
	return s.abortFromJob(ctx, migrationID, reason)
}

// Close closes the connection normally (1000), stops reconnecting, and waits
// for the client's goroutines, including any handler still running, to
// return. A migration in flight is rolled back by the worker, and
// Handler.Abort is called for it. Close on a disabled client does nothing.
func (c *Client) Close() error {
	if !c.enabled || c.cancel == nil {
		return nil
	}
	c.mu.Lock()
	c.closing = true
	c.mu.Unlock()
	c.cancel()
	<-c.done
	return nil
}

// stop records why the client stopped and releases everything waiting on it.
func (c *Client) stop(err error) {
	c.mu.Lock()
	c.err = err
	c.mu.Unlock()
	close(c.done)
}

func (c *Client) run() {
	attempt := 0
	for {
		acked, err := c.connect()
		if c.ctx.Err() != nil {
			c.mu.Lock()
			closing := c.closing
			c.mu.Unlock()
			if closing {
				c.stop(ErrClosed)
			} else {
				c.stop(context.Cause(c.ctx))
			}
			return
		}
		var ce websocket.CloseError
		errors.As(err, &ce)
		switch {
		case ce.Code == websocket.StatusNormalClosure && acked:
			c.log.Info("job socket closed by the worker: this instance was stopped; not reconnecting", "reason", ce.Reason)
			c.stop(ErrStopped)
			return
		case ce.Code == protocol.CloseReplaced:
			c.log.Warn("job socket replaced by a newer connection for this instance; not reconnecting", "err", err)
			c.stop(ErrReplaced)
			return
		case ce.Code == protocol.CloseUnauthorized && helloTimedOut(ce.Reason):
			// Only late (a slow start, a stalled network): the token may
			// be right, so try again like after any other drop.
			c.log.Warn("job socket closed: the worker gave up waiting for our hello; reconnecting", "err", err)
		case ce.Code == protocol.CloseUnauthorized:
			c.log.Error("job socket refused: wrong token or no such instance; not reconnecting", "err", err)
			c.stop(fmt.Errorf("%w: %s", ErrUnauthorized, ce.Reason))
			return
		}
		if acked {
			attempt = 0 // the worker was there: start the backoff afresh
		}
		delay := c.backoff(attempt)
		attempt++
		c.log.Info("job socket disconnected; reconnecting", "err", err, "in", delay)
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-c.ctx.Done():
			t.Stop()
		}
	}
}

// helloTimedOut reports whether the reason of a 4401 close says the worker
// timed out waiting for the hello: the only way to tell that close from a
// refused token. Case is ignored, so a worker that words the reason with a
// capital still counts.
func helloTimedOut(reason string) bool {
	p := protocol.ReasonHelloTimeout
	return len(reason) >= len(p) && strings.EqualFold(reason[:len(p)], p)
}

// backoff returns the delay before reconnect attempt n (from 0): doubling
// from minBackoff, capped at maxBackoff, then jittered over its upper half.
func (c *Client) backoff(n int) time.Duration {
	d := c.maxBackoff
	if n < 32 {
		if x := c.minBackoff << n; x > 0 && x < d {
			d = x
		}
	}
	return d/2 + rand.N(d/2+1)
}

// connect runs one connection from dial to close and reports whether the
// worker acknowledged it, and the error that ended it.
func (c *Client) connect() (acked bool, err error) {
	dctx, cancel := context.WithTimeout(c.ctx, dialTimeout)
	conn, _, err := websocket.Dial(dctx, c.url, &websocket.DialOptions{HTTPClient: c.httpClient})
	cancel()
	if err != nil {
		return false, err
	}
	conn.SetReadLimit(readLimit)
	s := newSession(c, conn)
	defer s.finish()
	return s.serve()
}

// ack records an acknowledged connection.
func (c *Client) ack(s *session, m *protocol.MigrationRef) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sess = s
	c.migration = m
	close(c.connected)
}

// unack forgets s if it is the acknowledged connection.
func (c *Client) unack(s *session) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.sess == s {
		c.sess = nil
		c.connected = make(chan struct{})
	}
}

// reasonText makes a reason (often an error's text) safe to send in a frame.
func reasonText(s string) string { return truncate(s, maxReasonBytes) }

// truncate makes s valid UTF-8 and at most n bytes, cut on a rune boundary.
func truncate(s string, n int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
