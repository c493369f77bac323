package testjob

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
	"time"
)

// Raw speaks the job socket over a bare TCP connection, frame by frame,
// to send what no WebSocket library will: a frame that announces more
// than it ever sends, a close in the same write as the frame before it.
type Raw struct {
	tb   testing.TB
	Conn net.Conn
	BR   *bufio.Reader
}

// Client frame opcodes (RFC 6455, 5.2).
const (
	OpText  = 0x1
	OpClose = 0x8
	OpPing  = 0x9
)

// DialRaw upgrades a TCP connection to addr for path. The connection is
// closed when the test ends, and every read and write must be done within
// bound.
func DialRaw(tb testing.TB, addr, path string, bound time.Duration) *Raw {
	tb.Helper()
	conn, err := net.DialTimeout("tcp", addr, bound)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { conn.Close() })
	conn.SetDeadline(time.Now().Add(bound)) // a safety bound for the whole test
	fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"+
		"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n", path, addr)
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		tb.Fatal(err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		tb.Fatalf("upgrade answered %s", resp.Status)
	}
	return NewRaw(tb, conn, br)
}

// NewRaw is a Raw on a connection upgraded already, read through br.
func NewRaw(tb testing.TB, conn net.Conn, br *bufio.Reader) *Raw {
	return &Raw{tb: tb, Conn: conn, BR: br}
}

// Header is the header of a client frame of n payload bytes. It is
// masked, as a client's must be, with the key 0, so the payload goes as
// it is.
func Header(fin bool, opcode byte, n uint64) []byte {
	b0 := opcode
	if fin {
		b0 |= 0x80
	}
	var h []byte
	switch {
	case n < 126:
		h = []byte{b0, 0x80 | byte(n)}
	case n <= 0xffff:
		h = binary.BigEndian.AppendUint16([]byte{b0, 0x80 | 126}, uint16(n))
	default:
		h = binary.BigEndian.AppendUint64([]byte{b0, 0x80 | 127}, n)
	}
	return append(h, 0, 0, 0, 0)
}

// Frame is a whole client frame: Header and payload.
func Frame(opcode byte, payload []byte) []byte {
	return append(Header(true, opcode, uint64(len(payload))), payload...)
}

// Text is a text frame of s.
func Text(s string) []byte { return Frame(OpText, []byte(s)) }

// Write writes b as it is, in one write.
func (j *Raw) Write(b []byte) {
	j.tb.Helper()
	if _, err := j.Conn.Write(b); err != nil {
		j.tb.Fatalf("raw write: %v", err)
	}
}

// ReadFrame reads one frame from the worker (unmasked, unfragmented).
func (j *Raw) ReadFrame() (opcode byte, payload []byte) {
	j.tb.Helper()
	readFull := func(b []byte) {
		if _, err := io.ReadFull(j.BR, b); err != nil {
			j.tb.Fatalf("raw read: %v", err)
		}
	}
	var h [2]byte
	readFull(h[:])
	n := uint64(h[1] & 0x7f)
	switch n {
	case 126:
		var b [2]byte
		readFull(b[:])
		n = uint64(binary.BigEndian.Uint16(b[:]))
	case 127:
		var b [8]byte
		readFull(b[:])
		n = binary.BigEndian.Uint64(b[:])
	}
	if n > 1<<20 {
		j.tb.Fatalf("the worker sent a frame of %d bytes", n)
	}
	payload = make([]byte, n)
	readFull(payload)
	return h[0] & 0x0f, payload
}
