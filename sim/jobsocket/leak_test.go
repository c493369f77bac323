package jobsocket_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/coder/websocket"

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
		c, _, err := websocket.Dial(ctx, url(i), &websocket.DialOptions{HTTPClient: hc})
		if err != nil {
			cancel()
			t.Fatalf("job %d: %v", i, err)
		}
		if err := c.Write(ctx, websocket.MessageText, []byte(hello(token))); err != nil {
			t.Fatalf("job %d: hello: %v", i, err)
		}
		if _, _, err := c.Read(ctx); err != nil {
			t.Fatalf("job %d: hello-ack: %v", i, err)
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
	write(t, c, hello(token))
	if f := read(t, c); f.Type != protocol.TypeHelloAck {
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
