package web_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/normsim/normsim/internal/testenv"
	"github.com/normsim/normsim/sim"
	"github.com/normsim/normsim/web"
)

// TestStalledEventSubscribersAreDropped: 1,000 /api/v1/events
// subscribers connect and then never read. Once events fill their
// connections, each is dropped within the write timeout, and the
// goroutines return to their baseline.
func TestStalledEventSubscribersAreDropped(t *testing.T) {
	if testing.Short() {
		t.Skip("1,000 connections")
	}
	const subscribers = 1000
	f := newFake()
	srv := httptest.NewUnstartedServer(web.New(web.Config{Service: f, Addr: host, EventWriteTimeout: 200 * time.Millisecond}))
	// Small socket buffers on the server's side too, so a stalled
	// subscriber's connection fills after a few events, not megabytes.
	srv.Listener = smallBuffers{srv.Listener}
	srv.Start()
	defer srv.Close()
	addr := srv.Listener.Addr().String()
	base := runtime.NumGoroutine()

	var conns []net.Conn
	for range subscribers {
		c := stalledReader(t, addr, "/api/v1/events")
		readToConnected(t, c) // then reads nothing more
		conns = append(conns, c)
	}
	if n := runtime.NumGoroutine(); n < base+subscribers {
		t.Fatalf("%d goroutines with %d subscribers, %d before: they are not all subscribed", n, subscribers, base)
	}
	payload := strings.Repeat("x", 16<<10)
	deadline := time.Now().Add(60 * time.Second)
	for runtime.NumGoroutine() > base+20 {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines %s after the subscribers stopped reading, %d before", runtime.NumGoroutine(), "60s", base)
		}
		f.bus.Publish(sim.Event{Kind: "instance.changed", Data: []byte(`"` + payload + `"`)})
		time.Sleep(5 * time.Millisecond)
	}
	// A subscriber that reads is still served.
	resp, err := http.Get("http://" + addr + "/api/v1/events")
	if err == nil {
		defer resp.Body.Close()
	}
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("a new subscriber after the stall: %v %v", resp, err)
	}
}

// stalledReader connects to addr with a 4 KiB receive buffer and sends a
// GET of target; the caller reads as much as it likes, and then nothing.
func stalledReader(t *testing.T, addr, target string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.(*net.TCPConn).SetReadBuffer(4096) // a few events fill it
	fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, host)
	return c
}

// readToConnected reads an events stream up to its first comment, when
// the subscription is in place.
func readToConnected(t *testing.T, c net.Conn) {
	t.Helper()
	br := bufio.NewReader(c)
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(line, ": connected") {
			return
		}
	}
}

// smallBuffers is a listener whose connections have 4 KiB send buffers.
type smallBuffers struct{ net.Listener }

func (l smallBuffers) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetWriteBuffer(4096)
	}
	return c, err
}

// TestAnEventSubscriberThatFallsBehindIsToldSo: a subscriber's stream is
// stuck writing an event while more events come than it may fall behind,
// in number or (issue 34 item 10: an event's data is any size) in bytes.
// Once the write goes through, its stream ends with a "dropped" event that
// says which bound it passed and how many subscribers were dropped, sent
// before anything queued behind the stuck write, and the drop is logged.
func TestAnEventSubscriberThatFallsBehindIsToldSo(t *testing.T) {
	big := json.RawMessage(`"` + strings.Repeat("x", 64<<10) + `"`)
	for _, tc := range []struct {
		name   string
		events int
		data   json.RawMessage
		reason string
	}{
		{"events", 1<<16 + 1, nil, "it fell more than 65536 events behind"},
		// 16 MiB of 64 KiB events is 255 of them, far fewer than 65,536.
		{"bytes", 300, big, fmt.Sprintf("the events it had not read passed %d bytes", sim.DefaultStreamBytes)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake()
			var logs testenv.SyncBuffer
			gate := newWriteGate()
			srv := httptest.NewUnstartedServer(web.New(web.Config{Service: f, Addr: host, EventWriteTimeout: 20 * time.Second,
				Logger: slog.New(slog.NewTextHandler(&logs, nil))}))
			srv.Listener = gatedListener{srv.Listener, gate}
			srv.Start()
			defer srv.Close()
			defer gate.open() // a failed test leaves no write stuck for Close
			resp, err := http.Get(srv.URL + "/api/v1/events")
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			br := bufio.NewReader(resp.Body)
			readUntil := func(prefix string) []string {
				t.Helper()
				var seen []string
				for {
					line, err := br.ReadString('\n')
					if err != nil {
						t.Fatalf("the stream ended before %q: %v; it sent %q", prefix, err, seen)
					}
					if strings.HasPrefix(line, prefix) {
						return seen
					}
					seen = append(seen, line)
				}
			}
			readUntil(": connected")

			gate.shut()
			f.bus.Publish(sim.Event{Kind: "first"})
			gate.waitStuck(t)
			for i := range tc.events {
				f.bus.Publish(sim.Event{Kind: sim.EventInstanceState, Instance: fmt.Sprint("i", i), Data: tc.data})
			}
			if n := f.bus.Stats().DroppedSubscribers; n != 1 {
				t.Fatalf("%d subscribers dropped, want 1", n)
			}
			gate.open()
			before := readUntil("event: dropped")
			if !slices.Contains(before, "event: first\n") || slices.Contains(before, "event: instance.state\n") {
				t.Errorf("before the dropped event the stream sent %q, want the first event and none of those queued behind it", before)
			}
			data, _ := br.ReadString('\n')
			var notice web.StreamDropped
			if err := json.Unmarshal([]byte(strings.TrimPrefix(data, "data: ")), &notice); err != nil {
				t.Fatalf("dropped event data %q: %v", data, err)
			}
			if notice.Limit != 1<<16 || notice.LimitBytes != sim.DefaultStreamBytes || notice.DroppedSubscribers != 1 || !strings.Contains(notice.Reason, tc.reason) {
				t.Errorf("dropped event = %+v, want the reason %q", notice, tc.reason)
			}
			waitFor(t, 5*time.Second, "the drop in the log", func() bool {
				return strings.Contains(logs.String(), "fell behind and was dropped") && strings.Contains(logs.String(), tc.reason)
			})
		})
	}
}

// writeGate holds the server's writes while shut, and says when one waits.
type writeGate struct {
	mu     sync.Mutex
	cond   *sync.Cond
	isShut bool
	stuck  chan struct{}
}

func newWriteGate() *writeGate {
	g := &writeGate{stuck: make(chan struct{}, 1)}
	g.cond = sync.NewCond(&g.mu)
	return g
}

func (g *writeGate) shut() { g.mu.Lock(); g.isShut = true; g.mu.Unlock() }

func (g *writeGate) open() {
	g.mu.Lock()
	g.isShut = false
	g.mu.Unlock()
	g.cond.Broadcast()
}

func (g *writeGate) pass() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.isShut {
		select {
		case g.stuck <- struct{}{}:
		default:
		}
	}
	for g.isShut {
		g.cond.Wait()
	}
}

func (g *writeGate) waitStuck(t *testing.T) {
	t.Helper()
	select {
	case <-g.stuck:
	case <-time.After(10 * time.Second):
		t.Fatal("the stream wrote nothing after an event was published")
	}
}

// gatedListener's connections write through a writeGate.
type gatedListener struct {
	net.Listener
	gate *writeGate
}

func (l gatedListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return gatedConn{c, l.gate}, nil
}

type gatedConn struct {
	net.Conn
	gate *writeGate
}

func (c gatedConn) Write(p []byte) (int, error) {
	c.gate.pass()
	return c.Conn.Write(p)
}

// TestEventStreamResumes (issue 32): every event carries its id; a client
// that reconnects with Last-Event-ID (as an EventSource does) gets the
// events it missed, and one whose id is no longer kept is told to read the
// state afresh.
func TestEventStreamResumes(t *testing.T) {
	f := newFake()
	srv := httptest.NewServer(web.New(web.Config{Service: f, Addr: host}))
	defer srv.Close()
	for i := range 5 {
		f.bus.Publish(sim.Event{Kind: sim.EventInstanceState, Instance: fmt.Sprintf("i%d", i)})
	}
	read := func(header, query string, want int) []string {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, srv.URL+"/api/v1/events"+query, nil)
		if header != "" {
			req.Header.Set("Last-Event-ID", header)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		br := bufio.NewReader(resp.Body)
		var lines []string
		for len(lines) < want {
			line, err := br.ReadString('\n')
			if err != nil {
				t.Fatalf("the stream ended after %q: %v", lines, err)
			}
			if strings.HasPrefix(line, "id: ") || strings.HasPrefix(line, "event: reset") {
				lines = append(lines, strings.TrimSpace(line))
			}
		}
		return lines
	}
	if got := read("3", "", 2); !slices.Equal(got, []string{"id: 4", "id: 5"}) {
		t.Fatalf("resumed after 3: %q", got)
	}
	if got := read("", "?after=4", 1); !slices.Equal(got, []string{"id: 5"}) {
		t.Fatalf("resumed with ?after=4: %q", got)
	}
	if got := read("99", "", 1); !slices.Equal(got, []string{"event: reset"}) {
		t.Fatalf("an id from elsewhere: %q", got)
	}
	resp, err := http.Get(srv.URL + "/api/v1/events?after=x")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("?after=x answered %d", resp.StatusCode)
	}
}

// TestAStalledSubscriberCutByItsWriteIsCountedAndLogged (round 13, A4): a
// subscriber that stopped reading was cut when a write to it timed out,
// before the bus dropped it: its stream just ended, nothing was logged,
// and the drop was counted nowhere. It is the same drop, counted in
// droppedSubscribers and logged with why.
func TestAStalledSubscriberCutByItsWriteIsCountedAndLogged(t *testing.T) {
	f := newFake()
	var logs testenv.SyncBuffer
	srv := httptest.NewUnstartedServer(web.New(web.Config{Service: f, Addr: host, EventWriteTimeout: 200 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))}))
	srv.Listener = smallBuffers{srv.Listener}
	srv.Start()
	defer srv.Close()
	readToConnected(t, stalledReader(t, srv.Listener.Addr().String(), "/api/v1/events")) // then reads nothing more
	payload := `"` + strings.Repeat("x", 16<<10) + `"`
	deadline := time.Now().Add(30 * time.Second)
	for f.bus.Stats().DroppedSubscribers == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the stalled subscriber was never counted dropped; stats %+v", f.bus.Stats())
		}
		f.bus.Publish(sim.Event{Kind: "instance.changed", Data: []byte(payload)})
		time.Sleep(5 * time.Millisecond)
	}
	for !strings.Contains(logs.String(), "subscriber fell behind and was dropped") {
		if time.Now().After(deadline) {
			t.Fatalf("the drop was not logged:\n%s", logs.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if got := logs.String(); !strings.Contains(got, "read nothing for 200ms") || strings.Count(got, "was dropped") != 1 {
		t.Errorf("logged %q; want one line saying it read nothing for 200ms", got)
	}
}
