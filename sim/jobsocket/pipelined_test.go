package jobsocket_test

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/normsim/normsim/internal/testjob"
	"github.com/normsim/normsim/protocol"
	"github.com/normsim/normsim/sim/jobsocket"
)

// A job may send its hello in the same write as its upgrade request, before
// the 101 comes back: the bytes net/http read past the request must reach
// the WebSocket's reader (the listener swaps net/http's buffers for
// smaller ones, but not one that holds such bytes).
func TestHelloSentWithTheUpgradeRequestIsRead(t *testing.T) {
	l, ev := MustListener(t, jobsocket.Config{})
	l.Register(jobsocket.Registration{JobID: "job 1", Role: "r/1", Token: token})
	conn, err := net.DialTimeout("tcp", l.Addr().String(), peerTimeout)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	conn.SetDeadline(time.Now().Add(2 * peerTimeout)) // a safety bound for the whole test
	// The hello is padded past the socket's buffer, so it also arrives in
	// more than one read.
	hello := `{"type":"hello","token":"` + token + `","pad":"` + strings.Repeat("x", 3000) + `"}`
	req := fmt.Sprintf("GET %s HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"+
		"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n", protocol.Path("job 1", "r/1"), l.Addr())
	j := newRawJob(t, testjob.NewRaw(t, conn, bufio.NewReader(conn)))
	j.write(append(append([]byte(req), header(true, opText, uint64(len(hello)))...), hello...))
	resp, err := http.ReadResponse(j.BR, nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("upgrade answered %s", resp.Status)
	}
	op, payload := j.readFrame()
	f, err := protocol.ParseWorkerFrame(payload)
	if op != opText || err != nil || f.Type != protocol.TypeHelloAck {
		t.Fatalf("got opcode %d %q (%v), want a hello-ack", op, payload, err)
	}
	ev.wait(t, jobsocket.Connected)
}
