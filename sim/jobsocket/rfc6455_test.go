package jobsocket_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/normsim/normsim/protocol"
	"github.com/normsim/normsim/sim/jobsocket"
)

// answerWithin is how long a test waits for the listener's close frame. A
// frame judged from its header is answered as soon as the header is read,
// so anything near this bound is a listener that waits for bytes that never
// come.
const answerWithin = 5 * time.Second

// clientFrame is a client frame, masked with the key 0, carrying payload.
func clientFrame(fin bool, opcode byte, payload []byte) []byte {
	return append(header(fin, opcode, uint64(len(payload))), payload...)
}

// closePayload is a close frame's payload: code, then reason.
func closePayload(code int, reason string) []byte {
	return append(binary.BigEndian.AppendUint16(nil, uint16(code)), reason...)
}

// header64 is the header of a masked client frame whose length is written
// in the 64-bit form, as n is, whatever it is.
func header64(fin bool, opcode byte, n uint64) []byte {
	b0 := opcode
	if fin {
		b0 |= 0x80
	}
	return append(binary.BigEndian.AppendUint64([]byte{b0, 0x80 | 127}, n), 0, 0, 0, 0)
}

// answer reads what the listener does within answerWithin: its close
// frame's code and reason (code -1 for a close frame without a code), or
// an error when the connection ended, or stayed silent, without one.
func (j *rawJob) answer() (code int, reason string, err error) {
	j.Conn.SetReadDeadline(time.Now().Add(answerWithin))
	defer j.Conn.SetReadDeadline(time.Now().Add(2 * peerTimeout))
	for {
		var h [2]byte
		if _, err := io.ReadFull(j.BR, h[:]); err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) {
				return 0, "", fmt.Errorf("no close frame within %v", answerWithin)
			}
			return 0, "", fmt.Errorf("the connection ended without a close frame: %w", err)
		}
		n := uint64(h[1] & 0x7f)
		switch n {
		case 126:
			var b [2]byte
			if _, err := io.ReadFull(j.BR, b[:]); err != nil {
				return 0, "", err
			}
			n = uint64(binary.BigEndian.Uint16(b[:]))
		case 127:
			var b [8]byte
			if _, err := io.ReadFull(j.BR, b[:]); err != nil {
				return 0, "", err
			}
			n = binary.BigEndian.Uint64(b[:])
		}
		if n > 1<<20 {
			return 0, "", fmt.Errorf("the listener sent a frame of %d bytes", n)
		}
		p := make([]byte, n)
		if _, err := io.ReadFull(j.BR, p); err != nil {
			return 0, "", err
		}
		if h[0]&0x0f != opClose {
			continue
		}
		if len(p) < 2 {
			return -1, "", nil
		}
		return int(binary.BigEndian.Uint16(p)), string(p[2:]), nil
	}
}

// wireCase is a hand-made byte sequence a job sends, and the close code
// the listener must answer it with at once.
type wireCase struct {
	name string
	// send writes it; afterHello says whether a hello came first (the
	// message then is an abort, which the phase allows, else a hello).
	send func(j *rawJob, afterHello bool)
	code int
}

// bytesOf sends b as it is.
func bytesOf(b ...[]byte) func(*rawJob, bool) {
	return func(j *rawJob, _ bool) {
		for _, b := range b {
			j.write(b)
		}
	}
}

// message is a frame of a job's message of exactly size bytes: a hello,
// or after hello an abort, padded (see padded).
func message(afterHello bool, size int) []byte {
	if afterHello {
		return padded(`{"type":"abort","reason":"`, size)
	}
	return padded(`{"type":"hello","token":"`+token+`","pad":"`, size)
}

// openThen sends the first fragments of a message, of sizes, in full and
// none of them final, then b.
func openThen(b []byte, sizes ...int) func(*rawJob, bool) {
	return func(j *rawJob, afterHello bool) {
		fragmentsThen(append(sizes, 0)...)(j, afterHello)
		j.write(b)
	}
}

// fragmentsThen sends the first len(sizes)-1 fragments of a message in
// full, then only the header of the last one (its payload never comes; a
// last size of 0 sends no header at all).
func fragmentsThen(sizes ...int) func(*rawJob, bool) {
	return func(j *rawJob, afterHello bool) {
		total := 0
		for _, n := range sizes {
			total += n
		}
		msg := message(afterHello, total)
		for i, n := range sizes {
			op := byte(opText)
			if i > 0 {
				op = 0 // continuation
			}
			last := i == len(sizes)-1
			if last {
				if n > 0 {
					j.write(header(true, op, uint64(n)))
				}
				return
			}
			j.write(clientFrame(false, op, msg[:n]))
			msg = msg[n:]
		}
	}
}

// runWireCases sends each case before hello and after it, on a fresh
// listener, and checks the job gets the case's close code with a reason at
// once, and (after hello) the manager hears the same code and reason,
// closed by the worker.
func runWireCases(t *testing.T, cases []wireCase) {
	t.Helper()
	for _, c := range cases {
		for _, afterHello := range []bool{false, true} {
			phase := "before hello"
			if afterHello {
				phase = "after hello"
			}
			t.Run(c.name+"/"+phase, func(t *testing.T) {
				// A minute: the hello timeout must not answer first.
				l, ev := MustListener(t, jobsocket.Config{HelloTimeout: time.Minute})
				l.Register(jobsocket.Registration{JobID: "j", Role: "r", Token: token})
				j := dialRaw(t, l, protocol.Path("j", "r"))
				if afterHello {
					j.helloAck()
					ev.wait(t, jobsocket.Connected)
					l.Expect("j", "r", protocol.TypeAbort)
				}
				c.send(j, afterHello)
				code, reason, err := j.answer()
				if err != nil {
					t.Fatalf("want close %d at once: %v", c.code, err)
				}
				if code != c.code || reason == "" {
					t.Fatalf("closed with %d %q, want %d with a reason", code, reason, c.code)
				}
				if afterHello {
					d := ev.wait(t, jobsocket.Disconnected)
					if d.Code != code || d.Reason != reason || d.ClosedBy != jobsocket.ClosedByWorker {
						t.Fatalf("the manager heard %d %q (closed by %v); the job was sent %d %q by the worker", d.Code, d.Reason, d.ClosedBy, code, reason)
					}
				}
			})
		}
	}
}

// TestAFrameLengthWithItsTopBitSetIs1002 (issue 34 item 6): a 64-bit
// payload length whose most significant bit is set breaks RFC 6455 (5.2:
// "the most significant bit MUST be 0"). The listener fails the connection
// with 1002 and says why, as it does every other frame that breaks RFC 6455
// below the job protocol; the manager hears what the job was sent.
func TestAFrameLengthWithItsTopBitSetIs1002(t *testing.T) {
	const p = 1002
	runWireCases(t, []wireCase{
		{"text frame, length 2^63+5", bytesOf(header64(true, opText, 1<<63|5)), p},
		{"text frame, length 2^64-1", bytesOf(header64(true, opText, 1<<64-1)), p},
		{"continuation, length 2^63", openThen(header64(true, 0, 1<<63), 100), p},
		{"close frame, length 2^63+2", bytesOf(header64(true, opClose, 1<<63|2)), p},
	})
}

// TestFramesThatBreakRFC6455AreAnswered1002 (issue 34 item 6): every other
// frame RFC 6455 forbids is answered with a 1002 that normsim chose and
// reports, not one the WebSocket library wrote behind its back while the
// manager was told the connection was lost.
func TestFramesThatBreakRFC6455AreAnswered1002(t *testing.T) {
	const p = 1002
	ping := func(fin bool, n int) []byte { return clientFrame(fin, 0x9, make([]byte, n)) }
	runWireCases(t, []wireCase{
		{"reserved bit set", bytesOf(append([]byte{0x80 | 0x40 | opText, 0x80 | 2, 0, 0, 0, 0}, "{}"...)), p},
		{"unknown opcode 3", bytesOf(clientFrame(true, 0x3, []byte("{}"))), p},
		{"unknown opcode 11", bytesOf(clientFrame(true, 0xb, nil)), p},
		{"ping of 126 bytes", bytesOf(ping(true, 126)), p},
		{"fragmented ping", bytesOf(ping(false, 4)), p},
		{"continuation without a message", bytesOf(clientFrame(true, 0, []byte("{}"))), p},
		{"a new message inside a message", openThen(clientFrame(true, opText, []byte("{}")), 100), p},
		{"unmasked", bytesOf(append([]byte{0x80 | opText, 2}, "{}"...)), p},
	})
}

// TestABadCloseFrameIsAnswered1002 (issue 34 item 6): a close frame whose
// payload is one byte (RFC 6455 5.5.1: a body starts with a 2-byte code),
// or whose code may not be sent on the wire (7.4.1, 7.4.2: 1005, 1006 and
// 1015 are for reporting only; 1004 is reserved; under 1000 and 1016-2999
// are unassigned; 5000 and over do not exist), is a protocol error: 1002,
// not an echo of the job's code.
func TestABadCloseFrameIsAnswered1002(t *testing.T) {
	const p = 1002
	cases := []wireCase{{"1-byte payload", bytesOf(clientFrame(true, opClose, []byte{0x03})), p}}
	for _, code := range []int{0, 999, 1004, 1005, 1006, 1015, 1016, 2999, 5000, 65535} {
		cases = append(cases, wireCase{fmt.Sprint("code ", code), bytesOf(clientFrame(true, opClose, closePayload(code, "bye"))), p})
	}
	runWireCases(t, cases)
}

// TestInvalidUTF8Is1007 (issue 34 item 6): a close reason or a text
// message that is not valid UTF-8 fails the connection with 1007 (RFC 6455
// 5.5.1, 5.6, 8.1), not an echo of the job's close code nor the job
// protocol's 4400.
func TestInvalidUTF8Is1007(t *testing.T) {
	const u = 1007
	text := func(afterHello bool, bad string) []byte {
		if afterHello {
			return []byte(`{"type":"abort","reason":"` + bad + `"}`)
		}
		return []byte(`{"type":"hello","token":"` + token + bad + `"}`)
	}
	runWireCases(t, []wireCase{
		{"close reason", bytesOf(clientFrame(true, opClose, closePayload(1000, "bye \xff"))), u},
		{"close reason, a surrogate", bytesOf(clientFrame(true, opClose, closePayload(4000, "\xed\xa0\x80"))), u},
		{"text frame", func(j *rawJob, afterHello bool) { j.write(clientFrame(true, opText, text(afterHello, "\xc3"))) }, u},
		{"text message in fragments", func(j *rawJob, afterHello bool) {
			msg := text(afterHello, "\xe2\x82") // cut short: a whole euro sign is \xe2\x82\xac
			j.write(clientFrame(false, opText, msg[:10]))
			j.write(clientFrame(true, 0, msg[10:]))
		}, u},
	})
}

// TestAValidCloseFrameIsEchoed (issue 34 item 6, what must still pass): a
// close frame with a code the wire allows and a UTF-8 reason (or no payload
// at all) is answered with the same code, and the manager hears the job's
// code and reason, closed by the job.
func TestAValidCloseFrameIsEchoed(t *testing.T) {
	for _, tc := range []struct {
		code   int
		reason string
	}{{1000, "bye"}, {1001, ""}, {1014, "gateway"}, {3000, "€"}, {4999, "x"}, {-1, ""}} {
		t.Run(fmt.Sprint(tc.code), func(t *testing.T) {
			l, ev := MustListener(t, jobsocket.Config{})
			j := helloedRawJob(t, l)
			ev.wait(t, jobsocket.Connected)
			var p []byte
			if tc.code != -1 {
				p = closePayload(tc.code, tc.reason)
			}
			j.write(clientFrame(true, opClose, p))
			code, _, err := j.answer()
			if err != nil || code != tc.code {
				t.Fatalf("answered %d (%v), want the job's %d echoed", code, err, tc.code)
			}
			d := ev.wait(t, jobsocket.Disconnected)
			want := tc.code
			if want == -1 {
				want = 1005 // no status received
			}
			if d.Code != want || d.Reason != tc.reason || d.ClosedBy != jobsocket.ClosedByJob {
				t.Fatalf("the manager heard %d %q (closed by %v), want %d %q closed by the job", d.Code, d.Reason, d.ClosedBy, want, tc.reason)
			}
		})
	}
}

// TestAHeaderOverTheCapIs4413AtOnce (issue 34 item 6): the size cap is
// judged from frame headers. A header announcing a frame, or the frame that
// takes its message, over 64 KiB is answered 4413 as soon as it is read,
// whatever does or does not follow, and whichever length form it uses: the
// 64-bit one for a single frame (7-bit and 16-bit lengths cannot pass the
// cap alone), any of the three for a fragment that takes its message over.
func TestAHeaderOverTheCapIs4413AtOnce(t *testing.T) {
	const big, maxLen = protocol.CloseFrameTooLarge, protocol.MaxFrameBytes
	runWireCases(t, []wireCase{
		{"64-bit length, cap+1", bytesOf(header(true, opText, maxLen+1)), big},
		{"64-bit length, 2^32", bytesOf(header(true, opText, 1<<32)), big},
		{"64-bit length, 2^63-1", bytesOf(header(true, opText, 1<<63-1)), big},
		{"binary, 64-bit length, 2^63-1", bytesOf(header(true, 0x2, 1<<63-1)), big},
		{"first of fragments, 64-bit length, cap+1", bytesOf(header(false, opText, maxLen+1)), big},
		{"7-bit continuation takes it over", fragmentsThen(65535, 1, 1), big},
		{"16-bit continuation takes it over", fragmentsThen(60000, 5537), big},
		{"64-bit continuation takes it over", fragmentsThen(100, maxLen-99), big},
		{"64-bit continuation of 2^63-1", openThen(header(true, 0, 1<<63-1), 100), big},
		{"many fragments, the last over", fragmentsThen(20000, 20000, 20000, 5537), big},
	})
}

// TestAHeaderAtTheCapPasses (issue 34 item 6, what must still pass):
// lengths in every form that keep a message at 64 KiB or under are not
// refused: a 65,536-byte message in one frame, a
// small frame whose length is written in the 64-bit form, and 65,536 bytes
// in fragments whose last header is 7-bit.
func TestAHeaderAtTheCapPasses(t *testing.T) {
	for _, tc := range []struct {
		name  string
		sizes []int
		long  bool // the first header in the 64-bit form
	}{
		{"one frame of 65536", []int{protocol.MaxFrameBytes}, false},
		{"a 64-bit length of 200", []int{200}, true},
		{"fragments of 65535 and 1", []int{65535, 1}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, ev := MustListener(t, jobsocket.Config{})
			j := helloedRawJob(t, l)
			ev.wait(t, jobsocket.Connected)
			l.Expect("j", "r", protocol.TypeAbort)
			total := 0
			for _, n := range tc.sizes {
				total += n
			}
			msg := message(true, total)
			for i, n := range tc.sizes {
				op := byte(opText)
				if i > 0 {
					op = 0
				}
				h := header(i == len(tc.sizes)-1, op, uint64(n))
				if tc.long && i == 0 {
					h = header64(i == len(tc.sizes)-1, op, uint64(n))
				}
				j.write(append(h, msg[:n]...))
				msg = msg[n:]
			}
			if got := ev.wait(t, jobsocket.Frame); got.Size != total {
				t.Fatalf("got a frame of %d bytes, want %d", got.Size, total)
			}
		})
	}
}

// TestARefusedFrameThenTheJobsCloseEndsCleanly (issue 34 item 6): after a
// 4413 judged from the header, the listener discards the rest of the frame
// and completes the close handshake when the job answers: the connection
// ends with EOF, not a reset.
func TestARefusedFrameThenTheJobsCloseEndsCleanly(t *testing.T) {
	l, ev := MustListener(t, jobsocket.Config{})
	j := helloedRawJob(t, l)
	ev.wait(t, jobsocket.Connected)
	const size = 100000
	j.write(header(true, opText, size))
	code, reason, err := j.answer()
	if err != nil || code != protocol.CloseFrameTooLarge {
		t.Fatalf("closed with %d %q (%v), want 4413", code, reason, err)
	}
	j.write([]byte(strings.Repeat("x", size)))
	j.write(clientFrame(true, opClose, closePayload(code, "")))
	if n, err := j.BR.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Fatalf("after the close handshake the connection gave %d bytes, %v; want EOF", n, err)
	}
	if d := ev.wait(t, jobsocket.Disconnected); d.Code != code || d.Reason != reason {
		t.Fatalf("the manager heard %d %q, want %d %q", d.Code, d.Reason, code, reason)
	}
}
