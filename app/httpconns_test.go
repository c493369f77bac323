package app_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/normsim/normsim/internal/bench"
	"github.com/normsim/normsim/sim"
)

// TestIdleConnectionsCannotTakeTheAPI: idle keep-alive connections past
// the API's bound are closed, the longest idle first, so the API still
// answers and a live-update stream (an active response) stays open.
// Before the bound, every fd could be held by idle connections.
func TestIdleConnectionsCannotTakeTheAPI(t *testing.T) {
	const bound = 6
	opts := testOptions(t)
	opts.Runtime = sim.RuntimeExternal
	opts.HTTPConns, opts.HTTPConnsPerHost = bound, bound
	m := openApp(t, opts)
	addr := strings.TrimPrefix(m.URL(), "http://")
	dial := func() (net.Conn, *bufio.Reader) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		// Bounds a wait for what never comes; not a claim about timing.
		c.SetDeadline(time.Now().Add(30 * time.Second))
		return c, bufio.NewReader(c)
	}

	events, er := dial()
	fmt.Fprintf(events, "GET /api/v1/events HTTP/1.1\r\nHost: %s\r\n\r\n", addr)
	resp, err := http.ReadResponse(er, nil)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /api/v1/events: %v %v", resp, err)
	}
	stream := bufio.NewReader(resp.Body)

	// More idle connections than the bound, each after one request, as
	// the flood that took every fd.
	for i := range 4 * bound {
		c, r := dial()
		fmt.Fprintf(c, "GET /readyz HTTP/1.1\r\nHost: %s\r\n\r\n", addr)
		resp, err := http.ReadResponse(r, nil)
		if err != nil {
			t.Fatalf("idle connection %d: GET /readyz: %v", i, err)
		}
		io.Copy(io.Discard, resp.Body)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	api := bench.NewAPI(m.URL(), 2)
	defer api.Close()
	if _, err := api.Nodes(ctx); err != nil {
		t.Fatalf("GET /api/v1/nodes past %d idle connections: %v", 4*bound, err)
	}
	// A launch publishes events: the stream, open all along, carries them.
	if _, err := api.Launch(ctx, sim.LaunchRequest{Template: "counter", Node: "a", Runtime: sim.RuntimeExternal}); err != nil {
		t.Fatal(err)
	}
	for {
		line, err := stream.ReadString('\n')
		if err != nil {
			t.Fatalf("the event stream ended after the idle flood: %v", err)
		}
		if strings.HasPrefix(line, "event: ") {
			break
		}
	}

	st, err := api.Stats(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	if st.HTTP.Connections > bound || st.HTTP.ConnectionsEvicted < 3*bound || st.HTTP.ConnectionsRefused != 0 {
		t.Errorf("http stats %+v: want at most %d open, at least %d evicted, none refused", st.HTTP, bound, 3*bound)
	}
}
