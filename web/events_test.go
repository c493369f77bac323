package web_test

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

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
	for i := range subscribers {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatalf("subscriber %d: %v", i, err)
		}
		defer c.Close()
		// A small receive buffer, so a few events fill it.
		c.(*net.TCPConn).SetReadBuffer(4096)
		fmt.Fprintf(c, "GET /api/v1/events HTTP/1.1\r\nHost: %s\r\n\r\n", host)
		// Read up to the first comment, so the subscription is in place,
		// then read nothing more.
		br := bufio.NewReader(c)
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				t.Fatalf("subscriber %d: %v", i, err)
			}
			if strings.HasPrefix(line, ": connected") {
				break
			}
		}
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

// smallBuffers is a listener whose connections have 4 KiB send buffers.
type smallBuffers struct{ net.Listener }

func (l smallBuffers) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetWriteBuffer(4096)
	}
	return c, err
}
