package web_test

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/normsim/normsim/web"
)

// TestABodyThatDribblesIsCutOff (attack round 9b, F1): POSTs that sent
// their bodies a byte every 2 s held their connections busy for as long
// as they liked, and 260 of them left the API no connection to serve
// anyone. A body must arrive whole within BodyTimeout: one that does not
// is a 400 saying so, and its connection is freed. A body that comes at
// once is read as always, and the request may then run past the timeout.
func TestABodyThatDribblesIsCutOff(t *testing.T) {
	const timeout = 300 * time.Millisecond
	f := newFake()
	srv := httptest.NewServer(web.New(web.Config{Service: f, Addr: host, BodyTimeout: timeout}))
	defer srv.Close()
	c, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second)) // bounds a wait for what never comes
	start := time.Now()
	if _, err := io.WriteString(c, "POST /api/v1/instances HTTP/1.1\r\nHost: "+host+"\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"); err != nil {
		t.Fatal(err)
	}
	go func() {
		for range 50 {
			time.Sleep(100 * time.Millisecond)
			if _, err := io.WriteString(c, " "); err != nil {
				return
			}
		}
	}()
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("no answer to a body that dribbles: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "did not arrive whole within 300ms") {
		t.Errorf("a body that dribbles: %d %s; want 400 saying it did not arrive in time", resp.StatusCode, body)
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("answered after %s, with a body timeout of %s", took, timeout)
	}

	// A body sent at once is read, whatever the request then takes.
	resp, err = http.Post(srv.URL+"/api/v1/instances", "application/json", strings.NewReader(`{"template":"counter","node":"a"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode >= 500 || resp.StatusCode == http.StatusBadRequest {
		t.Errorf("a body sent at once: %d", resp.StatusCode)
	}
}
