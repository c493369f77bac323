package jobsocket_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/normsim/normsim/internal/jobplay"
	"github.com/normsim/normsim/internal/memtest"
	"github.com/normsim/normsim/internal/testjob"
	"github.com/normsim/normsim/protocol"
	"github.com/normsim/normsim/sim"
	"github.com/normsim/normsim/sim/jobsocket"
)

// attack is one kind of hostile connection and the close code the
// contract answers it with.
type attack struct {
	name string
	code websocket.StatusCode
	// path is the path dialled; play does the rest on the open socket.
	path func(i int) string
	play func(ctx context.Context, j *jobplay.Job, i int) error
}

const (
	legitJob, legitRole, legitToken = "legit job", "role/1", "legit-0123456789abcdef0123456789abcdef"
	otherJob, otherRole, otherToken = "other job", "role/2", "other-0123456789abcdef0123456789abcdef"
	floodFrames                     = 50
)

func floodKey(i int) (job, role, token string) {
	return "flood", fmt.Sprintf("f%d", i), fmt.Sprintf("flood-token-%d-0123456789abcdef", i)
}

// floodPath is the socket path of flooding attacker i.
func floodPath(i int) string { j, r, _ := floodKey(i); return protocol.Path(j, r) }

// floodAfterHello says hello with the attacker's valid token, then sends
// frame floodFrames times and, unless it is "", then.
func floodAfterHello(frame, then string) func(ctx context.Context, j *jobplay.Job, i int) error {
	return func(ctx context.Context, j *jobplay.Job, i int) error {
		_, _, tok := floodKey(i)
		if err := j.Hello(ctx, tok); err != nil {
			return err
		}
		for range floodFrames {
			if err := j.SendRaw(ctx, []byte(frame)); err != nil {
				return nil // closed under us: the close code tells
			}
		}
		if then == "" {
			return nil
		}
		return j.SendRaw(ctx, []byte(then))
	}
}

// hostileAttacks covers every way the issue lists of attacking a node.
func hostileAttacks() []attack {
	legit := func(int) string { return protocol.Path(legitJob, legitRole) }
	oversize := []byte(strings.Repeat("x", protocol.MaxFrameBytes+1))
	abort := `{"type":"abort","reason":"` + strings.Repeat("a", 1000) + `"}`
	return []attack{
		{"garbage first frame", protocol.CloseProtocolError, legit, func(ctx context.Context, j *jobplay.Job, i int) error {
			return j.SendRaw(ctx, fmt.Appendf(nil, "\x00garbage %d {{{", i))
		}},
		{"binary frame", protocol.CloseProtocolError, legit, func(ctx context.Context, j *jobplay.Job, i int) error {
			return j.SendBinary(ctx, []byte(hello(legitToken)))
		}},
		{"oversize first frame", protocol.CloseFrameTooLarge, legit, func(ctx context.Context, j *jobplay.Job, i int) error {
			return j.SendRaw(ctx, oversize)
		}},
		{"no hello", protocol.CloseUnauthorized, legit, func(ctx context.Context, j *jobplay.Job, i int) error {
			return nil // say nothing: the hello timeout closes it
		}},
		{"wrong token", protocol.CloseUnauthorized, legit, func(ctx context.Context, j *jobplay.Job, i int) error {
			return j.SendRaw(ctx, []byte(hello(fmt.Sprintf("wrong-%d", i))))
		}},
		{"another instance's token", protocol.CloseUnauthorized, legit, func(ctx context.Context, j *jobplay.Job, i int) error {
			return j.SendRaw(ctx, []byte(hello(otherToken)))
		}},
		{"no instance at the path", protocol.CloseUnauthorized, func(i int) string { return protocol.Path("nobody", fmt.Sprint(i)) },
			func(ctx context.Context, j *jobplay.Job, i int) error {
				return j.SendRaw(ctx, []byte(hello(legitToken)))
			}},
		{"not an instance path", protocol.CloseUnauthorized, func(i int) string { return fmt.Sprintf("/instances/j%%C3%%28%d/r", i) },
			func(ctx context.Context, j *jobplay.Job, i int) error { return nil }},
		{"out-of-phase flood after hello", protocol.CloseProtocolError, floodPath,
			floodAfterHello(`{"type":"state","payload":{"n":1}}`, "")},
		{"allowed flood after hello, then garbage", protocol.CloseProtocolError, floodPath,
			floodAfterHello(abort, "not json")},
	}
}

// runAttack dials, plays the attack and reads until the listener closes
// the socket, returning the close code it got.
func runAttack(ctx context.Context, port int, a attack, i int) (websocket.StatusCode, string, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	j, err := jobplay.Connect(ctx, fmt.Sprintf("ws://127.0.0.1:%d%s", port, a.path(i)), nil)
	if err != nil {
		return 0, "", err
	}
	defer j.Close()
	if err := a.play(ctx, j, i); err != nil {
		return 0, "", err
	}
	return j.Closed(ctx)
}

// legitClient is the job that stays connected through the attack and keeps
// receiving what the listener sends it.
type legitClient struct {
	c        *testjob.Job
	received atomic.Int64
	done     chan error
}

func connectLegit(t *testing.T, l *jobsocket.Listener) *legitClient {
	t.Helper()
	c := dial(t, l, protocol.Path(legitJob, legitRole))
	c.Hello(legitToken)
	lc := &legitClient{c: c, done: make(chan error, 1)}
	go func() {
		for {
			_, data, err := c.Conn().Read(context.Background())
			if err != nil {
				lc.done <- err
				return
			}
			if f, err := protocol.ParseWorkerFrame(data); err != nil || f.Type != protocol.TypeGetState {
				lc.done <- fmt.Errorf("legit job got %s", data)
				return
			}
			lc.received.Add(1)
		}
	}()
	return lc
}

// waitGoroutines waits until at most want goroutines run, or 10 s.
func waitGoroutines(want int) int {
	deadline := time.Now().Add(10 * time.Second)
	n := runtime.NumGoroutine()
	for n > want && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
		n = runtime.NumGoroutine()
	}
	return n
}

func stacks() string {
	buf := make([]byte, 1<<20)
	return string(buf[:runtime.Stack(buf, true)])
}

// TestHostileConnections throws 10,000 hostile connections at one node —
// garbage, binary and oversize frames, silence (the hello timeout is 10 s
// here; TestSlowClientsRealHelloTimeout uses the contract's 5 s),
// wrong tokens, another instance's token, paths that name nothing, and
// floods after a valid hello — while a legitimate job stays connected and
// keeps receiving frames. Every attacker gets the contract's close code,
// the legitimate job is never disturbed, and goroutines and memory return
// to where they were.
func TestHostileConnections(t *testing.T) {
	if testing.Short() {
		t.Skip("a load test: 10,000 hostile connections; run without -short")
	}
	total := 10000
	var frames atomic.Int64
	// The test is about close codes, not speed: the hello timeout and the
	// close handshake's bound are long enough that a loaded machine (the
	// race detector, 64 busy attackers, the rest of the suite, two cores)
	// gets every prompt first frame in and every close frame out. 1 s, then
	// 3 s, were not, in CI: oversize frames closed 4401, and a few sockets
	// ended without a close frame once the 5 s handshake bound ran out.
	// The silent attackers wait it out 500 at a time, 20 s in all.
	const helloTimeout = 10 * time.Second
	// Every silent attacker must get its 4401, so the bound on
	// connections waiting to say hello (TestSilentFloodFromOneHost...) is
	// raised past the 500 that wait at once here.
	l := jobsocket.New(jobsocket.Config{Node: "a", HelloTimeout: helloTimeout, CloseTimeout: 30 * time.Second, Budget: jobsocket.NewBudget(jobsocket.Limits{Pending: 4096, PendingPerHost: 4096}), OnEvent: func(ev jobsocket.Event) {
		if ev.Kind == jobsocket.Frame {
			frames.Add(1)
		}
	}})
	if err := l.Open("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	l.Register(jobsocket.Registration{JobID: legitJob, Role: legitRole, Token: legitToken})
	l.Register(jobsocket.Registration{JobID: otherJob, Role: otherRole, Token: otherToken})
	attacks := hostileAttacks()
	silentAttack := -1
	for i, a := range attacks {
		if a.name == "no hello" {
			silentAttack = i
		}
	}
	for i := range total {
		if strings.Contains(attacks[i%len(attacks)].name, "flood") {
			j, r, tok := floodKey(i)
			l.Register(jobsocket.Registration{JobID: j, Role: r, Token: tok})
			if strings.HasPrefix(attacks[i%len(attacks)].name, "allowed") {
				l.Expect(j, r, protocol.TypeAbort)
			}
		}
	}
	lc := connectLegit(t, l)
	t.Cleanup(func() { lc.c.Conn().CloseNow() })
	// Warm up, then take the baseline with the legitimate job connected.
	if err := l.Send(context.Background(), legitJob, legitRole, protocol.WorkerFrame{Type: protocol.TypeGetState, MigrationID: "m0"}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	baseGoroutines := runtime.NumGoroutine()
	baseHeap := memtest.LiveHeap()

	// The legitimate job keeps working all along: the worker sends it a
	// frame every 5 ms and it must arrive.
	stopSending := make(chan struct{})
	var sendErr error
	var sent atomic.Int64
	var sendWG sync.WaitGroup
	sendWG.Add(1)
	go func() {
		defer sendWG.Done()
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stopSending:
				return
			case <-tick.C:
			}
			if err := l.Send(context.Background(), legitJob, legitRole, protocol.WorkerFrame{Type: protocol.TypeGetState, MigrationID: "m"}); err != nil {
				sendErr = err
				return
			}
			sent.Add(1)
		}
	}()

	type failure struct {
		attack string
		detail string
	}
	var (
		mu       sync.Mutex
		failures []failure
		perKind  = map[string]int{}
		next     atomic.Int64
		wg       sync.WaitGroup
	)
	start := time.Now()
	attackOnce := func(i int) {
		a := attacks[i%len(attacks)]
		code, reason, err := runAttack(context.Background(), l.Port(), a, i)
		mu.Lock()
		perKind[a.name]++
		switch {
		case err != nil:
			failures = append(failures, failure{a.name, err.Error()})
		case code != a.code:
			failures = append(failures, failure{a.name, fmt.Sprintf("closed with %d %q, want %d", code, reason, a.code)})
		case reason == "":
			failures = append(failures, failure{a.name, fmt.Sprintf("closed with %d and no reason", code)})
		}
		mu.Unlock()
	}
	// Silent attackers only wait: they get a pool of their own so the
	// busy ones are not held up behind them.
	var nextSilent atomic.Int64
	pool := func(workers int, silent bool) {
		for range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					var i int
					if silent {
						i = int(nextSilent.Add(1)-1)*len(attacks) + silentAttack
					} else {
						i = int(next.Add(1) - 1)
						if i%len(attacks) == silentAttack {
							continue
						}
					}
					if i >= total {
						return
					}
					attackOnce(i)
				}
			}()
		}
	}
	pool(64, false)
	pool(500, true)
	wg.Wait()
	elapsed := time.Since(start)
	close(stopSending)
	sendWG.Wait()

	for i, f := range failures {
		if i == 20 {
			t.Errorf("... and %d more", len(failures)-20)
			break
		}
		t.Errorf("%s: %s", f.attack, f.detail)
	}
	t.Logf("%d hostile connections in %v (%v)", total, elapsed.Round(time.Millisecond), perKind)

	// The legitimate job was never disturbed: every frame sent reached it,
	// and it is still this instance's connection.
	if sendErr != nil {
		t.Fatalf("sending to the legitimate job failed during the attack: %v", sendErr)
	}
	if sent.Load() < 10 {
		t.Fatalf("only %d frames were sent to the legitimate job during the attack", sent.Load())
	}
	deadline := time.Now().Add(5 * time.Second)
	for lc.received.Load() < sent.Load()+1 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	select {
	case err := <-lc.done:
		t.Fatalf("the legitimate job's socket ended: %v", err)
	default:
	}
	if got, want := lc.received.Load(), sent.Load()+1; got != want {
		t.Fatalf("the legitimate job received %d frames, want %d", got, want)
	}
	if !l.Connected(legitJob, legitRole) {
		t.Fatal("the legitimate job is no longer connected")
	}
	if n := frames.Load(); n < int64(total/len(attacks)*floodFrames/2) {
		t.Errorf("only %d allowed flood frames reached the manager", n)
	}

	// Everything the attack started is gone.
	for i := range total {
		if strings.Contains(attacks[i%len(attacks)].name, "flood") {
			j, r, _ := floodKey(i)
			l.Unregister(j, r)
		}
	}
	if n := waitGoroutines(baseGoroutines); n > baseGoroutines {
		t.Fatalf("%d goroutines after the attack, %d before\n%s", n, baseGoroutines, stacks())
	}
	// A leak of even 1 KiB per connection would show as 10 MB.
	if heap := memtest.LiveHeap(); heap > baseHeap+8<<20 {
		t.Fatalf("live heap %d KiB after the attack, %d KiB before", heap>>10, baseHeap>>10)
	} else {
		t.Logf("live heap %d KiB before, %d KiB after; goroutines %d before, %d after", baseHeap>>10, heap>>10, baseGoroutines, runtime.NumGoroutine())
	}
}

// TestSlowClientsRealHelloTimeout holds 200 connections open without a
// hello for the contract's full 5 s: each is closed with 4401 at the
// timeout, and a legitimate job connected alongside is served throughout.
func TestSlowClientsRealHelloTimeout(t *testing.T) {
	if testing.Short() {
		t.Skip("waits the contract's 5 s hello timeout")
	}
	l, _ := MustListener(t, jobsocket.Config{})
	l.Register(jobsocket.Registration{JobID: legitJob, Role: legitRole, Token: legitToken})
	lc := connectLegit(t, l)
	baseGoroutines := runtime.NumGoroutine()
	const n = 200
	type result struct {
		code    websocket.StatusCode
		err     error
		elapsed time.Duration
	}
	results := make(chan result, n)
	for i := range n {
		go func() {
			start := time.Now()
			code, _, err := runAttack(context.Background(), l.Port(), hostileAttacks()[3], i) // no hello
			results <- result{code, err, time.Since(start)}
		}()
	}
	// Served while they wait.
	time.Sleep(time.Second)
	for range 10 {
		if err := l.Send(context.Background(), legitJob, legitRole, protocol.WorkerFrame{Type: protocol.TypeGetState, MigrationID: "m"}); err != nil {
			t.Fatal(err)
		}
	}
	for range n {
		r := <-results
		if r.err != nil || r.code != protocol.CloseUnauthorized {
			t.Fatalf("slow client: code %d, err %v; want 4401", r.code, r.err)
		}
		if r.elapsed < protocol.HelloTimeout-100*time.Millisecond {
			t.Fatalf("slow client closed after %v, before the 5 s hello timeout", r.elapsed)
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for lc.received.Load() < 10 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if got := lc.received.Load(); got != 10 {
		t.Fatalf("the legitimate job received %d of 10 frames", got)
	}
	if got := waitGoroutines(baseGoroutines); got > baseGoroutines {
		t.Fatalf("%d goroutines after, %d before\n%s", got, baseGoroutines, stacks())
	}
}

// slowStore is a store whose frame writes take their time, as a busy disk
// would: the recorder's queue fills and must drop rather than grow.
type slowStore struct {
	sim.Store
	delay time.Duration
	// until, when set, holds the first write back until it reports true
	// (at most 10 s): a test that must see the recorder's queue fill then
	// does not depend on the job outpacing the store, which a loaded -race
	// run's did not (48 MiB in 8.6 s, the store keeping up).
	until   func() bool
	first   sync.Once
	written atomic.Int64
}

func (s *slowStore) RecordFrames(ctx context.Context, frs []sim.FrameRecord) error {
	if s.until != nil {
		s.first.Do(func() {
			for deadline := time.Now().Add(10 * time.Second); !s.until() && time.Now().Before(deadline); {
				time.Sleep(5 * time.Millisecond)
			}
		})
	}
	time.Sleep(s.delay)
	s.written.Add(int64(len(frs)))
	return nil
}

// TestFloodingJobCannotGrowMemory has a job flood the listener with frames
// of the maximum size that its phase allows, as fast as it can, while the
// frame store is slow. The listener reads one frame at a
// time (TCP pushes back on the job), the recorder's queue is bounded and,
// once full, holds the connection until the store catches up (logged once,
// and nothing lost), so the live heap stays flat however much the job
// sends.
func TestFloodingJobCannotGrowMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("a load test that measures the heap; run without -short")
	}
	const queue = 16
	var logged bytes.Buffer
	var logMu sync.Mutex
	// The store takes nothing until the queue is full and the flood is
	// held back, then writes slowly.
	var rec *jobsocket.Recorder
	store := &slowStore{delay: 50 * time.Millisecond, until: func() bool { return rec.Throttled() > 0 }}
	rec = jobsocket.NewRecorder(store, jobsocket.RecorderLimits{Records: queue, Bytes: queue * protocol.MaxFrameBytes}, newBufLogger(&logged, &logMu))
	var frames atomic.Int64
	l := jobsocket.New(jobsocket.Config{Node: "a", Recorder: rec, OnEvent: func(ev jobsocket.Event) {
		if ev.Kind == jobsocket.Frame {
			frames.Add(1)
		}
	}})
	if err := l.Open("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close(); rec.Close() })
	l.Register(jobsocket.Registration{JobID: "j", Role: "r", Token: token})
	c := dial(t, l, "/instances/j/r")
	c.Hello(token)
	l.Expect("j", "r", protocol.TypeAbort) // abort stays allowed: a flood the phase accepts
	prefix := `{"type":"abort","reason":"`
	frame := []byte(prefix + strings.Repeat("x", protocol.MaxFrameBytes-len(prefix)-2) + `"}`)
	base := memtest.LiveHeap()

	var peak atomic.Uint64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		var ms runtime.MemStats
		for {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			// What is kept, not what awaits collection: a busy machine's
			// collector lags, and the heap in use (garbage included) then
			// grew past the bound with nothing retained (CI, under -race).
			runtime.GC()
			runtime.ReadMemStats(&ms)
			if ms.HeapAlloc > peak.Load() {
				peak.Store(ms.HeapAlloc)
			}
		}
	}()
	// The queue's frames, each perhaps twice (read and recorded), and what
	// the process's other goroutines hold meanwhile (up to 9 MiB seen with
	// the package's other tests under -race). The job sends three times
	// that: a listener that kept every frame it read would hold all of it.
	// How long that takes is the machine's business (28 MiB in 10 s on a
	// loaded CI machine under -race); the minute is only a guard against a
	// listener that stopped reading.
	bound := uint64(queue*2*len(frame)) + 14<<20
	var sentBytes int64
	deadline := time.Now().Add(time.Minute)
	for sentBytes < 3*int64(bound) && time.Now().Before(deadline) {
		if err := c.Conn().Write(context.Background(), websocket.MessageText, frame); err != nil {
			t.Fatalf("flood write: %v", err)
		}
		sentBytes += int64(len(frame))
	}
	close(stop)
	wg.Wait()
	// Every frame was judged and handed over; nothing was kept for it but
	// what the bounded queue holds.
	deadline = time.Now().Add(5 * time.Second)
	for frames.Load() < sentBytes/int64(len(frame)) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if got, want := frames.Load(), sentBytes/int64(len(frame)); got != want {
		t.Fatalf("%d frames reached the manager, %d were sent", got, want)
	}
	growth := int64(peak.Load()) - int64(base)
	t.Logf("flooded %d MiB in %d frames; the live heap peaked %d MiB over the baseline; slowed for the store %d times, %d were lost",
		sentBytes>>20, frames.Load(), growth>>20, rec.Throttled(), rec.Dropped())
	if growth > int64(bound) {
		t.Fatalf("the live heap grew %d MiB during the flood; the bound is %d MiB", growth>>20, bound>>20)
	}
	if sentBytes < 2*int64(bound) {
		t.Fatalf("the job sent only %d MiB in a minute: too little to tell a bounded listener from one that keeps it all", sentBytes>>20)
	}
	if rec.Throttled() == 0 {
		t.Fatal("the recorder never slowed the flood, though its store took nothing until it did")
	}
	// The flood was slowed to the store's pace instead: nothing is lost.
	if n := rec.Dropped(); n != 0 {
		t.Fatalf("%d frame records were lost; a store that keeps writing loses none", n)
	}
	logMu.Lock()
	defer logMu.Unlock()
	if n := strings.Count(logged.String(), "queue full"); n != 1 {
		t.Fatalf("the full queue was logged %d times, want once:\n%s", n, logged.String())
	}
	if !l.Connected("j", "r") {
		t.Fatal("the flooding job was dropped although every frame was allowed")
	}
}

// TestJobThatDoesNotReadIsDropped: a job that stops reading cannot make the
// worker buffer frames for it. A write that does not finish within the
// write timeout closes the socket with a reason, and the manager is told.
func TestJobThatDoesNotReadIsDropped(t *testing.T) {
	l, ev := MustListener(t, jobsocket.Config{WriteTimeout: 300 * time.Millisecond})
	l.Register(jobsocket.Registration{JobID: "j", Role: "r", Token: token})
	c := dial(t, l, "/instances/j/r")
	c.Hello(token)
	ev.wait(t, jobsocket.Connected)
	payload := []byte(`"` + strings.Repeat("p", 60000) + `"`)
	base := memtest.LiveHeap()
	start := time.Now()
	var sendErr error
	n := 0
	for time.Since(start) < 30*time.Second {
		if sendErr = l.Send(context.Background(), "j", "r", protocol.WorkerFrame{Type: protocol.TypeInitialState, MigrationID: "m", Payload: payload}); sendErr != nil {
			break
		}
		n++
	}
	if sendErr == nil {
		t.Fatal("the worker kept writing to a job that never reads")
	}
	d := ev.wait(t, jobsocket.Disconnected)
	if d.Code != int(websocket.StatusPolicyViolation) || !strings.Contains(d.Reason, "too slow") {
		t.Fatalf("disconnected with %d %q, want 1008 naming the slow reader", d.Code, d.Reason)
	}
	if l.Connected("j", "r") {
		t.Fatal("the slow job is still connected")
	}
	if heap := memtest.LiveHeap(); heap > base+16<<20 {
		t.Fatalf("live heap grew %d MiB buffering for a job that does not read", (heap-base)>>20)
	}
	t.Logf("%d frames (%d KiB) fit in the socket buffers before the write timed out: %v", n, n*len(payload)>>10, sendErr)
}

// lockedWriter lets a test read what a logger wrote from other goroutines.
type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func newBufLogger(b *bytes.Buffer, mu *sync.Mutex) *slog.Logger {
	return slog.New(slog.NewTextHandler(lockedWriter{mu, b}, nil))
}

// connectedSlowReader registers j/r and connects a raw job to it, with a
// small receive buffer so that what it does not read backs up soon, also
// under -race.
func connectedSlowReader(t *testing.T, l *jobsocket.Listener, ev *events) *rawJob {
	t.Helper()
	l.Register(jobsocket.Registration{JobID: "j", Role: "r", Token: token})
	j := dialRaw(t, l, "/instances/j/r")
	if tc, ok := j.Conn.(*net.TCPConn); ok {
		tc.SetReadBuffer(4 << 10)
	}
	j.helloAck()
	ev.wait(t, jobsocket.Connected)
	return j
}

// writeUntilStuck writes large frames to j/r until a write fails, which
// it returns: with a job that does not read, the buffers fill and a write
// waits for it (WriteTimeout), and so does the library's answer to
// anything the job sends meanwhile.
func writeUntilStuck(l *jobsocket.Listener) <-chan error {
	sent := make(chan error, 1)
	go func() {
		payload := []byte(`"` + strings.Repeat("p", 60000) + `"`)
		for {
			if err := l.Send(context.Background(), "j", "r", protocol.WorkerFrame{Type: protocol.TypeInitialState, MigrationID: "m", Payload: payload}); err != nil {
				sent <- err
				return
			}
		}
	}()
	return sent
}

// Issue 34 round 5, F3: a job that pings and never reads the pongs is as
// slow a reader as one that never reads its frames: the pong that cannot
// be written in time closes its socket with 1008 from normsim, not a
// "connection lost" no one did. The library writes pongs itself, with a
// 5 s bound of its own.
func TestJobThatDoesNotReadItsPongsIsTooSlow(t *testing.T) {
	if testing.Short() {
		t.Skip("waits out the library's 5 s pong write")
	}
	l, ev := MustListener(t, jobsocket.Config{})
	j := connectedSlowReader(t, l, ev)
	ping := append(header(true, 0x9, 125), bytes.Repeat([]byte{'p'}, 125)...)
	pings := bytes.Repeat(ping, 512)
	go func() {
		for {
			if _, err := j.Conn.Write(pings); err != nil {
				return
			}
		}
	}()
	// The library's pong write waits 5 s once the buffers are full.
	d := ev.waitFor(t, jobsocket.Disconnected, 60*time.Second)
	if d.Code != int(websocket.StatusPolicyViolation) || !strings.Contains(d.Reason, "too slow") || d.ClosedBy != jobsocket.ClosedByWorker {
		t.Fatalf("disconnected with %d %q by %v, want 1008 from normsim naming the slow reader", d.Code, d.Reason, d.ClosedBy)
	}
}

// TestAJobThatClosesWhileAWriteIsStuckClosedItself (issue 34 item 10, left
// from round 9b): a job that stopped reading and then sent its own close
// (1000) while normsim's write to it was stuck in full buffers closed its
// socket itself. normsim's 1008 was never on the wire (the stuck write
// kills the connection), so the end reported is the job's close frame.
// A2 of round 11: the same when the job pinged before its close. The
// library answers a ping on the read loop, so the pong waits behind the
// stuck write and the job's close frame is never read before the write's
// timeout cuts the connection; it had still reached normsim.
func TestAJobThatClosesWhileAWriteIsStuckClosedItself(t *testing.T) {
	for name, before := range map[string][]byte{"closes": nil, "pings, then closes": append(header(true, 0x9, 4), "ping"...)} {
		t.Run(name, func(t *testing.T) {
			l, ev := MustListener(t, jobsocket.Config{WriteTimeout: 2 * time.Second})
			j := connectedSlowReader(t, l, ev)
			sent := writeUntilStuck(l)
			// A few frames fill the buffers; the next write waits for the job.
			time.Sleep(500 * time.Millisecond)
			if len(sent) > 0 {
				t.Fatalf("a write failed before the job closed: %v", <-sent)
			}
			reason := "bye"
			if before != nil {
				j.write(before)
			}
			j.write(append(append(header(true, opClose, uint64(2+len(reason))), 0x03, 0xe8), reason...))
			d := ev.waitFor(t, jobsocket.Disconnected, 30*time.Second)
			if d.Code != 1000 || d.Reason != reason || d.ClosedBy != jobsocket.ClosedByJob {
				t.Fatalf("disconnected with %d %q by %v, want the job's own 1000 %q", d.Code, d.Reason, d.ClosedBy, reason)
			}
			<-sent
		})
	}
}

// Issue 34 round 13, A-F1: a source that sends its close right behind its
// last frame, and is stopped (Unregister) or closed (Disconnect) by the
// manager between the guard's read of that close and the read loop's
// news of it, closed first. The library answers a close before its reader
// returns (a millisecond or so; here, held by a write stuck in full
// buffers), and the instance's end used to be told as normsim's "instance
// stopped", or not at all. It is the job's close, as of when it was read.
func TestAJobThatClosesBeforeItIsStoppedClosedFirst(t *testing.T) {
	for name, end := range map[string]func(l *jobsocket.Listener){
		"unregister": func(l *jobsocket.Listener) { l.Unregister("j", "r") },
		"disconnect": func(l *jobsocket.Listener) { l.Disconnect("j", "r", 4500, "fault") },
	} {
		t.Run(name, func(t *testing.T) {
			l, ev := MustListener(t, jobsocket.Config{WriteTimeout: 2 * time.Second})
			j := connectedSlowReader(t, l, ev)
			sent := writeUntilStuck(l)
			time.Sleep(300 * time.Millisecond) // the buffers fill; the library's answer to a close waits
			reason := "done"
			wrote := time.Now()
			j.write(append(append(header(true, opClose, uint64(2+len(reason))), 0x0f, 0xa0), reason...)) // 4000
			for !l.JobCloseRead("j", "r") {
				if time.Since(wrote) > 10*time.Second {
					t.Fatal("the guard never read the job's close frame")
				}
				time.Sleep(time.Millisecond)
			}
			end(l)
			d := ev.waitFor(t, jobsocket.Disconnected, 30*time.Second)
			if d.Code != 4000 || d.Reason != reason || d.ClosedBy != jobsocket.ClosedByJob {
				t.Fatalf("disconnected with %d %q by %v, want the job's own 4000 %q", d.Code, d.Reason, d.ClosedBy, reason)
			}
			if d.At.Before(wrote) || d.At.After(wrote.Add(10*time.Second)) {
				t.Fatalf("the close is dated %v, want when it was read (written at %v)", d.At, wrote)
			}
			go io.Copy(io.Discard, j.BR) // let the stuck write go
			<-sent
			if n := ev.count(jobsocket.Disconnected); n != 1 {
				t.Fatalf("%d disconnects reported, want 1", n)
			}
		})
	}
}
