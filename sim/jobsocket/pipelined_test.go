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

// maskedText is a client's text frame carrying payload, masked as RFC 6455
// requires of a client.
func maskedText(payload string) []byte {
	key := [4]byte{0x37, 0xfa, 0x21, 0x3d}
	f := []byte{0x81}
	switch n := len(payload); {
	case n < 126:
		f = append(f, 0x80|byte(n))
	default:
		f = append(f, 0x80|126)
		f = binary.BigEndian.AppendUint16(f, uint16(n))
	}
	f = append(f, key[:]...)
	for i := range len(payload) {
		f = append(f, payload[i]^key[i%4])
	}
	return f
}

// A job may send its hello in the same write as its upgrade request, before
// the 101 comes back: the bytes net/http read past the request must reach
// the WebSocket's reader (the listener swaps net/http's buffers for
// smaller ones, but not one that holds such bytes).
func TestHelloSentWithTheUpgradeRequestIsRead(t *testing.T) {
	l, ev := MustListener(t, jobsocket.Config{})
	l.Register(jobsocket.Registration{JobID: "job 1", Role: "r/1", Token: token})
	c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", l.Port()))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	req := "GET " + protocol.Path("job 1", "r/1") + " HTTP/1.1\r\n" +
		"Host: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
		"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
	// The hello is padded past the socket's buffer, so it also arrives in
	// more than one read.
	hello := `{"type":"hello","token":"` + token + `","pad":"` + strings.Repeat("x", 3000) + `"}`
	if _, err := c.Write(append([]byte(req), maskedText(hello)...)); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("upgrade answered %s", resp.Status)
	}
	var head [2]byte
	if _, err := io.ReadFull(br, head[:]); err != nil {
		t.Fatalf("no frame after the hello: %v", err)
	}
	n := int(head[1] & 0x7f)
	if head[0] != 0x81 || head[1]&0x80 != 0 || n >= 126 {
		t.Fatalf("frame header % x: want a short unmasked text frame", head)
	}
	payload := make([]byte, n)
	if _, err := io.ReadFull(br, payload); err != nil {
		t.Fatal(err)
	}
	f, err := protocol.ParseWorkerFrame(payload)
	if err != nil || f.Type != protocol.TypeHelloAck {
		t.Fatalf("got %q (%v), want a hello-ack", payload, err)
	}
	ev.wait(t, jobsocket.Connected)
}
