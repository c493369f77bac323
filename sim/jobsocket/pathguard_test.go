package jobsocket_test

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/normsim/normsim/protocol"
	"github.com/normsim/normsim/sim/jobsocket"
)

// TestAPathThatDoesNotDecodeIsClosedWith4401: a path with a percent sign
// that starts no escape is no path at all (the contract): it is upgraded
// and closed with 4401, as the reference worker does, not answered 400
// by Go's HTTP server before the listener sees it. A well-escaped path
// that names no instance is refused the same way.
func TestAPathThatDoesNotDecodeIsClosedWith4401(t *testing.T) {
	l, _ := MustListener(t, jobsocket.Config{})
	for _, path := range []string{"/instances/job-x/%A", "/instances/%/x", "/instances/j/a%ZZb", "/instances/j/%41?x=%"} {
		t.Run(path, func(t *testing.T) {
			c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", l.Port()))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(5 * time.Second))
			fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"+
				"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n", path)
			br := bufio.NewReader(c)
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != http.StatusSwitchingProtocols {
				t.Fatalf("answered %s, want 101 and then a 4401 close", resp.Status)
			}
			code, reason := readClose(t, br)
			if code != protocol.CloseUnauthorized || reason != "path names no instance" {
				t.Fatalf("closed %d %q, want 4401 \"path names no instance\"", code, reason)
			}
		})
	}
}

// readClose reads a server's (unmasked) close frame.
func readClose(t *testing.T, r io.Reader) (int, string) {
	t.Helper()
	var h [2]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		t.Fatal(err)
	}
	if h[0]&0x0f != 0x8 || h[1]&0x80 != 0 || h[1]&0x7f > 125 {
		t.Fatalf("frame header %x, want an unmasked close", h)
	}
	body := make([]byte, h[1]&0x7f)
	if _, err := io.ReadFull(r, body); err != nil || len(body) < 2 {
		t.Fatalf("close body %q: %v", body, err)
	}
	return int(binary.BigEndian.Uint16(body)), strings.ToValidUTF8(string(body[2:]), "")
}
