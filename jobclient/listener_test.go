package jobclient

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/normsim/normsim/protocol"
	"github.com/normsim/normsim/sim/jobsocket"
)

// These tests run the client against normsim's own listener, so the close
// reasons are the ones a job really gets.

const listenerToken = "0123456789abcdef0123456789abcdef"

// listener is a real job-socket listener with a short hello timeout and
// instance j/r registered; connected counts the hellos it accepted.
func listener(t *testing.T) (l *jobsocket.Listener, connected *atomic.Int64) {
	t.Helper()
	connected = new(atomic.Int64)
	l = jobsocket.New(jobsocket.Config{Node: "a", HelloTimeout: 100 * time.Millisecond, OnEvent: func(ev jobsocket.Event) {
		if ev.Kind == jobsocket.Connected {
			connected.Add(1)
		}
	}})
	if err := l.Open("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	l.Register(jobsocket.Registration{JobID: "j", Role: "r", Token: listenerToken})
	return l, connected
}

// lateConn holds the client's first WebSocket frame, its hello, until the
// worker has sent something: with no hello yet, that can only be the
// worker's close for the hello timeout. So the hello is late by
// construction, however fast or slow the machine. What the wait read is
// handed to the client's reads afterwards.
type lateConn struct {
	net.Conn
	mu      sync.Mutex
	late    bool
	pending []byte
	waited  chan []byte // what the worker sent while the hello was held
}

func (c *lateConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	hold := c.late && len(p) > 0 && p[0] == 0x81 // FIN + text: the hello (the upgrade request starts "GET")
	c.late = c.late && !hold
	c.mu.Unlock()
	if hold {
		buf := make([]byte, 256)
		n, err := c.Conn.Read(buf)
		c.mu.Lock()
		c.pending = append(c.pending, buf[:n]...)
		c.mu.Unlock()
		c.waited <- buf[:n]
		if err != nil {
			return 0, err
		}
	}
	return c.Conn.Write(p)
}

func (c *lateConn) Read(p []byte) (int, error) {
	c.mu.Lock()
	if len(c.pending) > 0 {
		n := copy(p, c.pending)
		c.pending = c.pending[n:]
		c.mu.Unlock()
		return n, nil
	}
	c.mu.Unlock()
	return c.Conn.Read(p)
}

// TestLateHelloReconnects: a client whose first hello comes after the
// listener's hello timeout gets 4401 "no hello within ...", and, its token
// being right, reconnects and is accepted.
func TestLateHelloReconnects(t *testing.T) {
	l, connected := listener(t)
	waited := make(chan []byte, 1)
	var dials atomic.Int64
	var d net.Dialer
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &lateConn{Conn: conn, late: dials.Add(1) == 1, waited: waited}, nil
	}}}
	c := Connect(context.Background(), Handler{}, Options{URL: protocol.URL("127.0.0.1", l.Port(), "j", "r"), Token: listenerToken,
		Logger: testLogger(t), HTTPClient: hc, MinBackoff: 5 * time.Millisecond, MaxBackoff: 20 * time.Millisecond})
	t.Cleanup(func() { _ = c.Close() })

	// The first connection's hello was held until the worker closed it.
	sent := recv(t, waited)
	if len(sent) < 2 || sent[0] != 0x88 || !strings.Contains(string(sent), protocol.ReasonHelloTimeout) {
		t.Fatalf("while the hello was held the worker sent %q, want its 4401 close for the hello timeout", sent)
	}
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if err := c.WaitConnected(ctx); err != nil {
		t.Fatalf("WaitConnected = %v; the client should reconnect after a late hello", err)
	}
	// The listener reports a connection just after it wrote hello-ack,
	// so the client can be connected a moment before it is counted.
	for connected.Load() == 0 && ctx.Err() == nil {
		time.Sleep(time.Millisecond)
	}
	if n, hellos := dials.Load(), connected.Load(); n != 2 || hellos != 1 {
		t.Fatalf("%d dials and %d accepted hellos, want 2 and 1", n, hellos)
	}
}

// TestRefusedByListenerGivesUp: a wrong token, an instance the listener does
// not know, or a path that names no instance stops the client for good,
// with an error naming 4401 and the listener's reason.
func TestRefusedByListenerGivesUp(t *testing.T) {
	tests := []struct {
		name, url, token, reason string
	}{
		{"wrong token", "/instances/j/r", "not-the-token", "wrong token"},
		{"unknown instance", "/instances/j/other", listenerToken, "path names no instance"},
		{"path names no instance", "/elsewhere", listenerToken, "path names no instance"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, connected := listener(t)
			c := Connect(context.Background(), Handler{}, Options{URL: "ws://" + l.Addr().String() + tt.url, Token: tt.token,
				Logger: testLogger(t), MinBackoff: 5 * time.Millisecond, MaxBackoff: 20 * time.Millisecond})
			t.Cleanup(func() { _ = c.Close() })
			select {
			case <-c.Done():
			case <-time.After(testTimeout):
				t.Fatal("the client did not give up")
			}
			err := c.Err()
			if !errors.Is(err, ErrUnauthorized) || !strings.Contains(err.Error(), "4401") || !strings.Contains(err.Error(), tt.reason) {
				t.Fatalf("Err = %v, want ErrUnauthorized naming 4401 and %q", err, tt.reason)
			}
			if n := connected.Load(); n != 0 {
				t.Fatalf("the listener accepted %d hellos", n)
			}
		})
	}
}
