package jobsocket_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"runtime"
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

// TestSilentFloodFromOneHostLeavesOthersWorking: connections that upgrade
// and never say hello are bounded per host; past the bound they get 503,
// and a job from another address still connects.
func TestSilentFloodFromOneHostLeavesOthersWorking(t *testing.T) {
	const perHost = 20
	l, _ := MustListener(t, jobsocket.Config{Budget: jobsocket.NewBudget(jobsocket.Limits{PendingPerHost: perHost}), HelloTimeout: time.Minute})
	l.Register(jobsocket.Registration{JobID: "j", Role: "r", Token: token})
	url := fmt.Sprintf("ws://127.0.0.1:%d%s", l.Port(), protocol.Path("j", "r"))
	from := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}}
	flood := &websocket.DialOptions{HTTPClient: websocketClient(from.DialContext)}
	refused := 0
	for i := range perHost + 10 {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		c, resp, err := websocket.Dial(ctx, url, flood)
		cancel()
		switch {
		case err == nil:
			t.Cleanup(func() { c.CloseNow() })
			if i >= perHost {
				t.Fatalf("silent connection %d from one host was accepted past the bound of %d", i+1, perHost)
			}
		case resp != nil && resp.StatusCode == http.StatusServiceUnavailable:
			refused++
		default:
			t.Fatalf("silent connection %d: %v", i+1, err)
		}
	}
	if refused != 10 || l.Refused() != 10 {
		t.Fatalf("refused %d (listener counted %d), want 10", refused, l.Refused())
	}
	c := dial(t, l, protocol.Path("j", "r")) // from 127.0.0.1
	c.SendText(hello(token))
	if f := c.Read(); f.Type != protocol.TypeHelloAck {
		t.Fatalf("a job from another host during the flood got %+v", f)
	}
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
// one bound, for connections that never upgrade (the oldest closed, each
// counted by its listener) and for upgraded ones that never say hello
// (503, counted).
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
		refused := 0
		for i := range total + 4 {
			l := []*jobsocket.Listener{la, lb}[i%2]
			l.Register(jobsocket.Registration{JobID: "j", Role: "r", Token: token})
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			c, resp, err := websocket.Dial(ctx, fmt.Sprintf("ws://127.0.0.1:%d%s", l.Port(), protocol.Path("j", "r")), nil)
			cancel()
			switch {
			case err == nil:
				t.Cleanup(func() { c.CloseNow() })
			case resp != nil && resp.StatusCode == http.StatusServiceUnavailable:
				refused++
			default:
				t.Fatalf("silent connection %d: %v", i+1, err)
			}
		}
		if refused != 4 || la.Refused()+lb.Refused() != 4 {
			t.Fatalf("refused %d (listeners counted %d + %d), want 4 past the shared bound of %d", refused, la.Refused(), lb.Refused(), total)
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
