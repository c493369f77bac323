package connlimit

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"
)

// testServer serves /ok, and /stream: a response that stays open,
// writing "tick N" for each tick.
type testServer struct {
	conns *HTTPConns
	addr  string

	mu    sync.Mutex
	ticks int
	tick  chan struct{} // closed at the next tick
}

func startServer(t *testing.T, lim HTTPLimits) *testServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &testServer{conns: NewHTTPConns(lim, nil), addr: ln.Addr().String(), tick: make(chan struct{})}
	mux := http.NewServeMux()
	mux.HandleFunc("/ok", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	mux.HandleFunc("/sse", func(w http.ResponseWriter, r *http.Request) {
		s.conns.Streaming(r.Context())
		io.WriteString(w, "connected\n")
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	})
	mux.HandleFunc("/stream", func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		said := s.ticks
		s.mu.Unlock()
		io.WriteString(w, "connected\n")
		for {
			s.mu.Lock()
			tick, ticks := s.tick, s.ticks
			s.mu.Unlock()
			for ; said < ticks; said++ {
				fmt.Fprintf(w, "tick %d\n", said+1)
			}
			w.(http.Flusher).Flush()
			select {
			case <-tick:
			case <-r.Context().Done():
				return
			}
		}
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: time.Minute, ConnState: s.conns.ConnState, ConnContext: s.conns.ConnContext}
	go srv.Serve(ln)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		srv.Shutdown(ctx)
		srv.Close()
	})
	return s
}

// tickStreams has every /stream write its next line.
func (s *testServer) tickStreams() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ticks++
	close(s.tick)
	s.tick = make(chan struct{})
}

// client is one connection, kept alive between requests.
type client struct {
	net.Conn
	r *bufio.Reader
	// stream reads the body of /stream once asked for.
	stream *bufio.Reader
}

// dial connects from the loopback address from (127.0.0.2 is another host).
func (s *testServer) dial(t *testing.T, from string) *client {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
	c, err := d.Dial("tcp", s.addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	// Bounds a wait for what never comes; not a claim about timing.
	c.SetDeadline(time.Now().Add(20 * time.Second))
	return &client{Conn: c, r: bufio.NewReader(c)}
}

// get asks for path and reads the answer: all of it, or for /stream its
// first line.
func (c *client) get(path string) (string, error) {
	if _, err := fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: test\r\n\r\n", path); err != nil {
		return "", err
	}
	resp, err := http.ReadResponse(c.r, nil)
	if err != nil {
		return "", err
	}
	if path == "/stream" || path == "/sse" {
		c.stream = bufio.NewReader(resp.Body)
		return c.stream.ReadString('\n')
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// closed reports whether the server closed c (it reads EOF or a reset).
func (c *client) closed() bool {
	_, err := c.r.ReadByte()
	var ne net.Error
	return err != nil && !(errors.As(err, &ne) && ne.Timeout())
}

// idleFrom connects from host and asks once, and returns once the server
// holds the connection as idle.
func (s *testServer) idleFrom(t *testing.T, host string) *client {
	t.Helper()
	c := s.dial(t, host)
	if _, err := c.get("/ok"); err != nil {
		t.Fatalf("GET /ok from %s: %v", host, err)
	}
	s.waitIdle(t, c)
	return c
}

// waitIdle waits for the server to hold c as idle: it does so just after
// c has read its answer.
func (s *testServer) waitIdle(t *testing.T, c *client) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !s.idle(c); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the server never held %s's connection as idle", c.LocalAddr())
		}
	}
}

func (s *testServer) idle(c *client) bool {
	s.conns.mu.Lock()
	defer s.conns.mu.Unlock()
	for sc, hc := range s.conns.conns {
		if sc.RemoteAddr().String() == c.LocalAddr().String() {
			return hc.waiting != nil
		}
	}
	return false
}

func TestIdleConnectionsLeaveRoomForARequest(t *testing.T) {
	s := startServer(t, HTTPLimits{Total: 4, PerHost: 4})
	var idle []*client
	for range 4 {
		idle = append(idle, s.idleFrom(t, "127.0.0.1"))
	}
	// A new client, as `normsim launch` is, gets its answer.
	for i := range 3 {
		if body, err := s.dial(t, "127.0.0.1").get("/ok"); err != nil || body != "ok" {
			t.Fatalf("request %d past 4 idle connections: %q, %v", i, body, err)
		}
		if n := s.conns.Open(); n > 4 {
			t.Fatalf("%d connections open, bound 4", n)
		}
	}
	// The ones that waited longest made room, the newest idle one did not.
	for i, c := range idle[:3] {
		if !c.closed() {
			t.Errorf("idle connection %d (of the oldest 3) still open", i)
		}
	}
	if _, err := idle[3].get("/ok"); err != nil {
		t.Errorf("the newest idle connection was closed: %v", err)
	}
	if s.conns.Evicted() != 3 || s.conns.Refused() != 0 {
		t.Errorf("evicted %d, refused %d; want 3 and 0", s.conns.Evicted(), s.conns.Refused())
	}
}

func TestStreamOutlivesIdleFloods(t *testing.T) {
	s := startServer(t, HTTPLimits{Total: 4, PerHost: 4})
	stream := s.dial(t, "127.0.0.1")
	if line, err := stream.get("/stream"); err != nil || line != "connected\n" {
		t.Fatalf("stream: %q, %v", line, err)
	}
	var idle []*client
	for round := range 3 {
		idle = nil
		for range 8 {
			idle = append(idle, s.idleFrom(t, "127.0.0.1"))
		}
		s.tickStreams()
		if line, err := stream.stream.ReadString('\n'); err != nil || line != fmt.Sprintf("tick %d\n", round+1) {
			t.Fatalf("stream after idle flood %d: %q, %v", round, line, err)
		}
	}
	if s.conns.Refused() != 0 {
		t.Errorf("refused %d while idle connections could make room", s.conns.Refused())
	}

	// With every connection streaming, a newcomer is refused, not a stream
	// closed.
	streams := []*client{stream}
	for range 3 {
		c := s.dial(t, "127.0.0.1")
		if _, err := c.get("/stream"); err != nil {
			t.Fatal(err)
		}
		streams = append(streams, c)
	}
	if _, err := s.dial(t, "127.0.0.1").get("/ok"); err == nil {
		t.Fatal("a newcomer was served with 4 streams open, bound 4")
	}
	if s.conns.Refused() != 1 {
		t.Errorf("refused %d, want 1", s.conns.Refused())
	}
	s.tickStreams()
	for i, c := range streams {
		if line, err := c.stream.ReadString('\n'); err != nil || line != "tick 4\n" {
			t.Errorf("stream %d: %q, %v", i, line, err)
		}
	}
}

// TestStreamsNobodyReadsMakeRoom (attack round 9b, F1): 300 event
// streams nobody read held every API connection, and every newcomer was
// refused for as long as they stayed. A stream its handler marked
// (Streaming) is closed to make room once no connection waits, oldest
// first; an EventSource resumes by itself. Other busy requests are still
// never closed (TestStreamOutlivesIdleFloods).
func TestStreamsNobodyReadsMakeRoom(t *testing.T) {
	s := startServer(t, HTTPLimits{Total: 4, PerHost: 4})
	var streams []*client
	for range 4 {
		c := s.dial(t, "127.0.0.1")
		if line, err := c.get("/sse"); err != nil || line != "connected\n" {
			t.Fatalf("sse: %q, %v", line, err)
		}
		streams = append(streams, c)
	}
	if got, err := s.dial(t, "127.0.0.1").get("/ok"); err != nil || got != "ok" {
		t.Fatalf("a newcomer with every connection streaming: %q, %v; want it served", got, err)
	}
	if !streams[0].closed() {
		t.Error("the oldest stream was not the one closed")
	}
	if s.conns.Refused() != 0 || s.conns.Evicted() != 1 {
		t.Errorf("refused %d, evicted %d; want 0 and 1", s.conns.Refused(), s.conns.Evicted())
	}
}

func TestOneHostsFloodClosesOnlyItsOwn(t *testing.T) {
	s := startServer(t, HTTPLimits{Total: 4, PerHost: 2})
	other := s.idleFrom(t, "127.0.0.2")
	for range 10 {
		s.idleFrom(t, "127.0.0.1")
	}
	if _, err := other.get("/ok"); err != nil {
		t.Fatalf("127.0.0.1's flood closed 127.0.0.2's idle connection: %v", err)
	}
	if s.conns.Evicted() != 8 {
		t.Errorf("evicted %d, want 127.0.0.1's 8 past its 2", s.conns.Evicted())
	}

	// Full in all (2 + 1 + 1): a newcomer closes one of the host holding
	// the most, not another host's.
	s.waitIdle(t, other)
	third := s.idleFrom(t, "127.0.0.3")
	if _, err := s.dial(t, "127.0.0.4").get("/ok"); err != nil {
		t.Fatalf("a fourth host was refused: %v", err)
	}
	for host, c := range map[string]*client{"127.0.0.2": other, "127.0.0.3": third} {
		if _, err := c.get("/ok"); err != nil {
			t.Errorf("%s's only connection was closed for a newcomer: %v", host, err)
		}
	}
	if s.conns.Evicted() != 9 {
		t.Errorf("evicted %d, want 9", s.conns.Evicted())
	}
}

func TestDefaultHTTPLimits(t *testing.T) {
	for _, c := range []struct {
		files int
		want  HTTPLimits
	}{{1024, HTTPLimits{256, 192}}, {2048, HTTPLimits{512, 384}}, {1 << 20, HTTPLimits{4096, 3072}}, {4, HTTPLimits{2, 1}}} {
		if got := DefaultHTTPLimits(c.files); got != c.want {
			t.Errorf("DefaultHTTPLimits(%d) = %+v, want %+v", c.files, got, c.want)
		}
	}
}
