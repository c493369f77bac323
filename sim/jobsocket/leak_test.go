package jobsocket_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/normsim/normsim/internal/jobplay"
	"github.com/normsim/normsim/protocol"
	"github.com/normsim/normsim/sim/jobsocket"
)

// openFDs counts this process's open file descriptors (Linux).
func openFDs(t *testing.T) int {
	t.Helper()
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip("no /proc/self/fd: the fd count needs Linux")
	}
	return len(entries)
}

// settleFDs waits for the fd count to fall to at most want, and returns
// the last count.
func settleFDs(t *testing.T, want int) int {
	t.Helper()
	n := openFDs(t)
	for deadline := time.Now().Add(15 * time.Second); n > want && time.Now().Before(deadline); n = openFDs(t) {
		runtime.GC()
		time.Sleep(20 * time.Millisecond)
	}
	return n
}

// TestAbruptDisconnectsLeakNothing: 1,000 jobs say hello and vanish
// without a close handshake (as a crashed job does). Afterwards the
// listener holds no more fds than before, and a new job connects.
func TestAbruptDisconnectsLeakNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("1,000 connections")
	}
	const jobs = 1000
	l, ev := MustListener(t, jobsocket.Config{})
	url := func(i int) string {
		return fmt.Sprintf("ws://127.0.0.1:%d%s", l.Port(), protocol.Path("j", fmt.Sprint("r", i)))
	}
	for i := range jobs {
		l.Register(jobsocket.Registration{JobID: "j", Role: fmt.Sprint("r", i), Token: token})
	}
	base := openFDs(t)
	for i := range jobs {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		var raw net.Conn
		d := &net.Dialer{}
		hc := websocketClient(func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := d.DialContext(ctx, network, addr)
			raw = c
			return c, err
		})
		j, err := jobplay.Connect(ctx, url(i), &websocket.DialOptions{HTTPClient: hc})
		if err != nil {
			cancel()
			t.Fatalf("job %d: %v", i, err)
		}
		if err := j.Hello(ctx, token); err != nil {
			cancel()
			t.Fatalf("job %d: %v", i, err)
		}
		cancel()
		// Gone without a close frame, as when a job's process dies: its
		// kernel ends the connection with a FIN, or a reset.
		if i%2 == 1 {
			raw.(*net.TCPConn).SetLinger(0)
		}
		raw.Close()
	}
	// Every one of them is noticed as gone.
	for deadline := time.Now().Add(30 * time.Second); ev.count(jobsocket.Disconnected) < jobs; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d abrupt disconnects noticed", ev.count(jobsocket.Disconnected), jobs)
		}
	}
	if n := settleFDs(t, base+5); n > base+5 {
		t.Fatalf("%d fds open after %d abrupt disconnects, %d before: the listener leaks their sockets", n, jobs, base)
	}
	c := dial(t, l, protocol.Path("j", "r0"))
	c.SendText(hello(token))
	if f := c.Read(); f.Type != protocol.TypeHelloAck {
		t.Fatalf("a new job after the flood got %+v", f)
	}
}

// websocketClient is an HTTP client that dials through dial, so a test
// holds the TCP connection under a WebSocket.
func websocketClient(dial func(ctx context.Context, network, addr string) (net.Conn, error)) *http.Client {
	return &http.Client{Transport: &http.Transport{DialContext: dial}}
}

// count is how many events of kind the listener reported.
func (e *events) count(kind jobsocket.EventKind) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := 0
	for _, ev := range e.evs {
		if ev.Kind == kind {
			n++
		}
	}
	return n
}

// TestIdleConnectionsAreClosed: 300 plain HTTP keep-alive connections to
// the job socket (no upgrade, no token) are closed by the listener once
// idle, and the fds return to their baseline.
func TestIdleConnectionsAreClosed(t *testing.T) {
	const conns = 300
	l, _ := MustListener(t, jobsocket.Config{IdleTimeout: 200 * time.Millisecond})
	base := openFDs(t)
	var cs []net.Conn
	for i := range conns {
		c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", l.Port()))
		if err != nil {
			t.Fatalf("conn %d: %v", i, err)
		}
		t.Cleanup(func() { c.Close() })
		fmt.Fprintf(c, "GET /instances/j/r HTTP/1.1\r\nHost: x\r\n\r\n")
		cs = append(cs, c)
	}
	for i, c := range cs {
		// The answer (no upgrade asked for), then the listener's close.
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := io.ReadAll(c); err != nil {
			t.Fatalf("conn %d was not closed by the listener: %v", i, err)
		}
		c.Close()
	}
	if n := settleFDs(t, base+5); n > base+5 {
		t.Fatalf("%d fds open after %d idle connections were closed, %d before", n, conns, base)
	}
}

// silentFrom opens a WebSocket to path on l from the loopback address
// ip and says nothing: a connection waiting to say hello. It is dropped
// when the test ends.
func silentFrom(t *testing.T, l *jobsocket.Listener, ip, path string) (*jobplay.Job, error) {
	t.Helper()
	from := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	j, err := jobplay.Connect(ctx, fmt.Sprintf("ws://127.0.0.1:%d%s", l.Port(), path), &websocket.DialOptions{HTTPClient: websocketClient(from.DialContext)})
	if err != nil {
		return nil, err
	}
	t.Cleanup(j.Close)
	return j, nil
}

// mustSilentFrom is silentFrom, failing the test when the connection is
// refused.
func mustSilentFrom(t *testing.T, l *jobsocket.Listener, ip, path string) *jobplay.Job {
	t.Helper()
	j, err := silentFrom(t, l, ip, path)
	if err != nil {
		t.Fatal(err)
	}
	return j
}

// awaitRefused waits for the listeners to have counted want connections
// turned away: a client's upgrade returns on the 101, before the
// listener has counted the connection and made room for it.
func awaitRefused(t *testing.T, want int64, ls ...*jobsocket.Listener) {
	t.Helper()
	var n int64
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		n = 0
		for _, l := range ls {
			n += l.Refused()
		}
		if n == want {
			return
		}
	}
	t.Fatalf("%d connections waiting to say hello turned away and counted, want %d", n, want)
}

// evictedForHello counts the connections of js the listener closed as
// waiting too long to say hello (4401, with a reason a job may reconnect
// after, beginning protocol.ReasonHelloTimeout, that says why), and those
// still open. Any other end fails the test. It ends them all.
func evictedForHello(t *testing.T, js []*jobplay.Job) (evicted, open int) {
	t.Helper()
	ends := make([]error, len(js))
	var wg sync.WaitGroup
	for i, j := range js {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer cancel()
			code, reason, err := j.Closed(ctx)
			switch {
			case err != nil:
				ends[i] = err
			case code != protocol.CloseUnauthorized || !strings.HasPrefix(reason, protocol.ReasonHelloTimeout) || !strings.Contains(reason, "too many connections"):
				ends[i] = fmt.Errorf("closed %d %q, want 4401 %q… naming too many connections waiting", code, reason, protocol.ReasonHelloTimeout)
			}
		})
	}
	wg.Wait()
	for i, err := range ends {
		switch {
		case err == nil:
			evicted++
		case errors.Is(err, context.DeadlineExceeded):
			open++
		default:
			t.Fatalf("silent connection %d: %v", i+1, err)
		}
	}
	return evicted, open
}

// TestSilentHostsCannotLockJobsOut (issue 34 item 4): silent connections
// from two hosts, each within its share, filled the whole budget of
// connections waiting to say hello, and a real job's upgrade was then
// answered 503, in 10 of 10 tries. Now the newcomer is never refused:
// the connection that has waited longest is closed (4401, a reason a job
// may reconnect after) and counted, so the job that says hello at once
// is served in every round while the flood goes on, and the flood never
// holds more than the bound.
func TestSilentHostsCannotLockJobsOut(t *testing.T) {
	const total, rounds = 4, 10
	l, _ := MustListener(t, jobsocket.Config{Budget: jobsocket.NewBudget(jobsocket.Limits{Pending: total}), HelloTimeout: time.Minute})
	l.Register(jobsocket.Registration{JobID: "j", Role: "r", Token: token})
	url := fmt.Sprintf("ws://127.0.0.1:%d%s", l.Port(), protocol.Path("j", "r"))
	var flood []*jobplay.Job
	served := 0
	for round := range rounds {
		// Each round the attacker's two hosts fill the budget again,
		// two silent connections each (each host's whole share).
		for _, ip := range []string{"127.0.0.2", "127.0.0.2", "127.0.0.3", "127.0.0.3"} {
			if j, err := silentFrom(t, l, ip, protocol.Path("j", "r")); err == nil {
				flood = append(flood, j)
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		j, err := jobplay.Connect(ctx, url, nil) // from 127.0.0.1
		if err == nil {
			if err = j.Hello(ctx, token); err == nil {
				served++
			}
			j.Close()
		}
		cancel()
		if err != nil {
			t.Logf("round %d: the job was not served: %v", round+1, err)
		}
	}
	if served != rounds {
		t.Fatalf("a job that says hello at once was served in %d of %d rounds of a silent flood from two hosts", served, rounds)
	}
	// Each silent connection is waiting still, or was closed and counted
	// (a client's upgrade returns on the 101, before the listener counts
	// it: wait for the last). The flood holds no more than the bound.
	var waiting int
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		waiting = l.Budget().Waiting()
		if waiting+int(l.Refused()) == len(flood) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d silent connections: %d waiting to say hello, %d closed and counted", len(flood), waiting, l.Refused())
		}
	}
	if waiting > total {
		t.Errorf("%d connections waiting to say hello, over the bound of %d", waiting, total)
	}
	if evicted, open := evictedForHello(t, flood); evicted != int(l.Refused()) || open != waiting {
		t.Fatalf("of %d silent connections %d were closed for newer ones and %d left open, want %d (counted) and %d (waiting)",
			len(flood), evicted, open, l.Refused(), waiting)
	}
}

// TestSilentFloodFromOneHostStaysInItsShare (issue 34 item 4): past its
// host's share (PendingPerHost) a silent flood closes its own oldest
// connections, never another host's, and a job from another address
// still connects and says hello.
func TestSilentFloodFromOneHostStaysInItsShare(t *testing.T) {
	const perHost = 20
	var logged bytes.Buffer
	var logMu sync.Mutex
	l, _ := MustListener(t, jobsocket.Config{Budget: jobsocket.NewBudget(jobsocket.Limits{Pending: 2 * perHost}), HelloTimeout: time.Minute,
		Logger: newBufLogger(&logged, &logMu)})
	l.Register(jobsocket.Registration{JobID: "j", Role: "r", Token: token})
	other := mustSilentFrom(t, l, "127.0.0.3", protocol.Path("j", "r")) // another host, waiting longest of all
	var flood []*jobplay.Job
	for range perHost + 10 {
		flood = append(flood, mustSilentFrom(t, l, "127.0.0.2", protocol.Path("j", "r")))
	}
	awaitRefused(t, 10, l)
	// The other host's connection, older than all of them, is still open:
	// it says hello and is served.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := other.Hello(ctx, token); err != nil {
		t.Fatalf("the other host's connection: %v", err)
	}
	c := dial(t, l, protocol.Path("j", "r")) // from 127.0.0.1
	c.SendText(hello(token))
	if f := c.Read(); f.Type != protocol.TypeHelloAck {
		t.Fatalf("a job from another host during the flood got %+v", f)
	}
	if evicted, open := evictedForHello(t, flood); evicted != 10 || open != perHost {
		t.Fatalf("of %d silent connections from one host %d were closed and %d left open, want 10 and %d", len(flood), evicted, open, perHost)
	}
	// Logged once for the flood (once per while), naming its host.
	logMu.Lock()
	log := logged.String()
	logMu.Unlock()
	if n := strings.Count(log, "too many connections waiting to say hello"); n != 1 || !strings.Contains(log, "host=127.0.0.2") {
		t.Errorf("logged %d times, want once naming host 127.0.0.2:\n%s", n, log)
	}
	// Round 13, A6: the line said node=a twice (the sim's logger named
	// the node too), which a JSON log consumer that refuses duplicate
	// keys cannot read. The listener names it, once, on every line.
	for line := range strings.Lines(log) {
		if n := strings.Count(line, " node="); n != 1 {
			t.Errorf("a log line names its node %d times, want once: %s", n, line)
		}
	}
}

// TestEvictedConnectionsGiveTheirFDsBackAtOnce (issue 34 item 4): a
// connection closed to make room for a newer one is closed at once, with
// its close frame, not after a close handshake its silent peer never
// answers (CloseTimeout, 30 s here): else a flood that makes room again
// and again would hold its fds past the bound.
func TestEvictedConnectionsGiveTheirFDsBackAtOnce(t *testing.T) {
	const total = 2
	l, _ := MustListener(t, jobsocket.Config{Budget: jobsocket.NewBudget(jobsocket.Limits{Pending: total}), HelloTimeout: time.Minute, CloseTimeout: 30 * time.Second})
	l.Register(jobsocket.Registration{JobID: "j", Role: "r", Token: token})
	// A silent peer that never answers a close frame: a bare TCP
	// connection that upgrades and then only reads.
	c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", l.Port()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n",
		protocol.Path("j", "r"))
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("upgrade: %v %v", resp, err)
	}
	// It is the oldest once the listener has counted it.
	for deadline := time.Now().Add(5 * time.Second); l.Budget().Waiting() < 1; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the upgraded connection is not counted as waiting to say hello")
		}
	}
	for _, ip := range []string{"127.0.0.2", "127.0.0.3"} { // each within its host's share
		mustSilentFrom(t, l, ip, protocol.Path("j", "r"))
	}
	// The close frame, then the end of the connection: at once.
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	start := time.Now()
	rest, err := io.ReadAll(br)
	if err != nil {
		t.Fatalf("the oldest silent connection was not closed in %v: %v", time.Since(start), err)
	}
	// An unmasked close frame (RFC 6455, 5.2): opcode 8, length, code.
	if len(rest) < 4 || rest[0] != 0x88 || int(rest[1]) != len(rest)-2 || binary.BigEndian.Uint16(rest[2:]) != protocol.CloseUnauthorized ||
		!strings.HasPrefix(string(rest[4:]), protocol.ReasonHelloTimeout) {
		t.Fatalf("the oldest silent connection read %q before its end, want one 4401 close frame", rest)
	}
	awaitRefused(t, 1, l)
}

// TestConnectionsThatNeverUpgradeAreBounded (issue 34 item 8): connections
// to a job-socket port that never upgrade (silent, or asking a plain
// request and idling) are bounded per host and in all; past a bound the
// oldest is closed, so the flood holds no more fds than the bound and a
// job that connects during it still upgrades and says hello.
func TestConnectionsThatNeverUpgradeAreBounded(t *testing.T) {
	const perHost, total = 8, 12
	l, _ := MustListener(t, jobsocket.Config{Budget: jobsocket.NewBudget(jobsocket.Limits{Plain: total, PlainPerHost: perHost})})
	l.Register(jobsocket.Registration{JobID: "j", Role: "r", Token: token})
	addr := fmt.Sprintf("127.0.0.1:%d", l.Port())
	var flood []net.Conn
	for i := range 40 {
		from := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(fmt.Sprintf("127.0.0.%d", 2+i%2))}}
		c, err := from.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		if i%4 == 0 { // some ask a plain request and would idle on keep-alive
			fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: %s\r\n\r\n", addr)
		}
		flood = append(flood, c)
	}
	// A job connects during the flood, from the flood's own host.
	c := dial(t, l, protocol.Path("j", "r"))
	c.SendText(hello(token))
	if f := c.Read(); f.Type != protocol.TypeHelloAck {
		t.Fatalf("a job during the flood got %+v", f)
	}
	time.Sleep(100 * time.Millisecond) // the evictions and answers have landed
	open := stillOpen(flood)
	// The plain requests (one in four) are answered and closed; of the
	// silent rest, all past the bound were evicted.
	if open > total || l.Evicted() < int64(len(flood)-len(flood)/4-total) {
		t.Fatalf("%d of %d connections that never upgraded are still open (bound %d), %d evicted", open, len(flood), total, l.Evicted())
	}
}

// stillOpen is how many of cs the listener has not closed: a read that
// times out, rather than ending, finds one open.
func stillOpen(cs []net.Conn) int {
	open := 0
	buf := make([]byte, 4096)
	for _, c := range cs {
		c.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
		for {
			_, err := c.Read(buf)
			if err == nil {
				continue // a plain request's answer; the close comes after it
			}
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				open++
			}
			break
		}
	}
	return open
}

// TestBoundsHoldAcrossListenersSharingABudget (issue 34 item 8): a sim's
// nodes share one Budget, so connections that are not jobs yet are
// bounded in total, not once per node: with N nodes, N per-node bounds
// reached the fd limit. A flood spread over two listeners is held to the
// one bound, for connections that never upgrade and for upgraded ones
// that never say hello (the oldest closed, each counted by its listener).
func TestBoundsHoldAcrossListenersSharingABudget(t *testing.T) {
	t.Run("not upgraded", func(t *testing.T) {
		const total = 12
		budget := jobsocket.NewBudget(jobsocket.Limits{Plain: total, PlainPerHost: total})
		la, _ := MustListener(t, jobsocket.Config{Budget: budget})
		lb, _ := MustListener(t, jobsocket.Config{Budget: budget})
		var flood []net.Conn
		for i := range 40 {
			l := []*jobsocket.Listener{la, lb}[i%2]
			c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", l.Port()))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { c.Close() })
			flood = append(flood, c)
		}
		time.Sleep(100 * time.Millisecond) // the evictions have landed
		open, evicted := stillOpen(flood), la.Evicted()+lb.Evicted()
		if open > total || evicted != int64(len(flood)-total) {
			t.Fatalf("%d of %d silent connections to two nodes still open, %d evicted (%d + %d); the shared bound is %d",
				open, len(flood), evicted, la.Evicted(), lb.Evicted(), total)
		}
		if la.Evicted() == 0 || lb.Evicted() == 0 {
			t.Errorf("evictions counted %d and %d: each listener counts its own connections", la.Evicted(), lb.Evicted())
		}
	})
	t.Run("waiting for hello", func(t *testing.T) {
		const total = 6
		budget := jobsocket.NewBudget(jobsocket.Limits{Pending: total, PendingPerHost: total})
		la, _ := MustListener(t, jobsocket.Config{Budget: budget, HelloTimeout: time.Minute})
		lb, _ := MustListener(t, jobsocket.Config{Budget: budget, HelloTimeout: time.Minute})
		var flood []*jobplay.Job
		for i := range total + 4 {
			l := []*jobsocket.Listener{la, lb}[i%2]
			l.Register(jobsocket.Registration{JobID: "j", Role: "r", Token: token})
			flood = append(flood, mustSilentFrom(t, l, "127.0.0.1", protocol.Path("j", "r")))
		}
		// Past the shared bound the connections that waited longest, on
		// either node, were closed, each counted by its own listener.
		awaitRefused(t, 4, la, lb)
		if n := budget.Waiting(); n != total {
			t.Errorf("%d connections waiting to say hello, want the shared bound of %d", n, total)
		}
		if la.Refused() == 0 || lb.Refused() == 0 {
			t.Errorf("closes counted %d and %d: each listener counts its own connections", la.Refused(), lb.Refused())
		}
		if evicted, open := evictedForHello(t, flood); evicted != 4 || open != total {
			t.Fatalf("of %d silent connections to two nodes %d were closed and %d left open, want 4 and %d", len(flood), evicted, open, total)
		}
	})
}

// TestDefaultLimitsLeaveTheFDsToJobs (issue 34 item 8): the bounds come
// from the open-file limit, and connections that are not jobs yet, of
// every node together, hold at most three eighths of it.
func TestDefaultLimitsLeaveTheFDsToJobs(t *testing.T) {
	t.Parallel()
	if got, want := jobsocket.DefaultLimits(1024), (jobsocket.Limits{Plain: 128, PlainPerHost: 64, Pending: 256, PendingPerHost: 128}); got != want {
		t.Errorf("DefaultLimits(1024) = %+v, want %+v", got, want)
	}
	for _, fds := range []int{64, 256, 1024, 4096, 20000, 1 << 20} {
		lim := jobsocket.DefaultLimits(fds)
		if lim.Plain+lim.Pending > fds*3/8 || lim.Plain > 4096 || lim.Pending > 4096 ||
			lim.PlainPerHost >= lim.Plain || lim.PendingPerHost >= lim.Pending {
			t.Errorf("DefaultLimits(%d) = %+v", fds, lim)
		}
	}
}

// Attack round 16, A-F3: a connection refused before its hello (a wrong
// token, a first frame that is no hello) that never answers normsim's
// close kept its fd through the close handshake, counted by no bound: a
// flood of them took every fd. It stays counted as waiting to say hello
// until its end, and is dropped at once to make room for a newer one.
func TestRefusedConnectionsThatNeverAnswerTheCloseStayWithinTheBound(t *testing.T) {
	const bound = 10
	l, _ := MustListener(t, jobsocket.Config{Budget: jobsocket.NewBudget(jobsocket.Limits{Pending: bound, PendingPerHost: bound}),
		HelloTimeout: time.Minute, CloseTimeout: time.Minute})
	l.Register(jobsocket.Registration{JobID: "j", Role: "r", Token: token})
	for i := range 3 * bound {
		j := mustSilentFrom(t, l, "127.0.0.2", protocol.Path("j", "r"))
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		first := `{"type":"hello","token":"wrong"}`
		if i%2 == 1 {
			first = `"no hello"`
		}
		if err := j.SendRaw(ctx, []byte(first)); err != nil {
			t.Fatal(err)
		}
		cancel()
	}
	awaitRefused(t, 2*bound, l)
	if n := l.Budget().Waiting(); n > bound {
		t.Fatalf("%d refused connections counted as waiting, over the bound of %d", n, bound)
	}
	c := dial(t, l, protocol.Path("j", "r")) // from 127.0.0.1
	c.SendText(hello(token))
	if f := c.Read(); f.Type != protocol.TypeHelloAck {
		t.Fatalf("a job during the flood got %+v", f)
	}
}
