package jobsocket

import (
	"encoding/binary"
	"io"
	"net"
	"strconv"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/coder/websocket"
	"github.com/normsim/normsim/protocol"
)

// frameGuard stands between a job's connection and the WebSocket library's
// reader, and judges every frame the job sends from its header (a close
// frame from its whole payload, at most 125 bytes) before the library reads
// any of it. The library would judge some of these itself, but it writes
// its 1002 without a word to its caller (the manager heard "connection
// lost"), echoes a close frame whose reason is not UTF-8, has no close
// frame at all for a length with its top bit set, and judges the size cap
// only once the bytes over it arrive (a header announcing 2^63-1 bytes, and
// nothing after it, was never answered). Here:
//
//   - a frame that breaks RFC 6455 itself is refused with 1002, and one
//     whose close reason is not UTF-8 with 1007. The connection is failed
//     (RFC 6455 section 7.1.7): nothing it sends after is handed on, and
//     the close handshake ends when the job closes its end, or at the
//     close timeout;
//   - a frame that takes its message over protocol.MaxFrameBytes is refused
//     with 4413 as soon as its header is read. Its payload, and the rest of
//     its message, is discarded, and the frames after are handed on again,
//     so a job that answers the close completes the handshake.
//
// A refusal is told once, as the error of the read that reaches the
// refused header: the bytes before it are all handed on first, so the
// library has read every frame before (bufio asks for more only once its
// buffer is empty). The listener closes with the refusal's code (see
// readFrame); what reads after that is the library's close handshake.
//
// Reads come from one goroutine at a time (the library holds its read lock
// around them), so the guard needs no lock of its own; only stop is set
// from outside a read.
type frameGuard struct {
	src counted
	// conn is the connection under src, asked how many bytes wait in the
	// kernel (unreadBytes); nil in tests of the guard alone.
	conn net.Conn
	// marks are proofs of what had arrived, oldest first: every byte of
	// the stream before a mark's horizon was in by its at (markAhead).
	marks []arrival
	// frameAt is when the frame whose header the guard read last had
	// arrived (arrivedBy, as Unix nanoseconds; 0 when it came as it was
	// read): a close of ours for that frame (out of phase, malformed, too
	// large) is dated by it.
	frameAt atomic.Int64
	// endAt is when the read that found the stream's end (or its error)
	// returned, as Unix nanoseconds: a connection lost without a close
	// frame is dated by it, not by when its report was made.
	endAt atomic.Int64
	// frameStart is where in the stream the frame whose header the guard
	// reads last begins: the library asks for it once the read loop has
	// taken every frame before (conn.catchUp).
	frameStart atomic.Int64
	// refused: a frame was refused; the read loop closes over it.
	refused atomic.Bool
	// early is how many bytes the job sent right behind its upgrade,
	// which net/http had read into its buffer: in before the guard began.
	early int64
	// hdr holds the header being read, hn bytes of it so far.
	hdr [maxHeader]byte
	hn  int
	// pend is what was judged and is not handed on yet: a header, or a
	// close frame whole.
	pend []byte
	// left is the current frame's payload not yet handed on, or, when
	// skip, not yet discarded.
	left int64
	skip bool
	// open says a data message is open (its last frame had no FIN), of
	// msg bytes so far.
	open bool
	msg  int64
	// refusal is the first frame refused; told once it was returned.
	refusal *closeErr
	told    bool
	// closeBody is the payload, unmasked, of the close frame in pend (a
	// close frame's header is minHeader bytes: its payload is at most 125
	// bytes, its length in the 7-bit form).
	closeBody []byte
	// failed: the connection is failed, and everything it sends is
	// discarded. stop asks for it from outside a read (failAfter).
	failed bool
	stop   atomic.Bool
	// now is the listener's clock; jobClose, set once a job's close frame
	// passed (closeFrame), is read from outside a read: the library takes a
	// millisecond or so to answer a close before its reader says the job
	// closed, and a worker that stops the job meanwhile must still know the
	// job's close came first (Listener.Unregister).
	now      func() time.Time
	jobClose atomic.Pointer[jobClose]
	// parked: the guard waits in src for the first bytes of a frame, so
	// the library has read every frame before (conn.caughtUp).
	parked atomic.Bool
}

// counted is a reader that counts the bytes read from it: n for the
// reading goroutine, total for others (conn.catchUp).
type counted struct {
	r     io.Reader
	n     int64
	total atomic.Int64
}

func (c *counted) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	c.total.Add(int64(n))
	return n, err
}

// arrival says every byte of a stream before horizon had arrived by at.
type arrival struct {
	at      time.Time
	horizon int64
}

// markAhead, at the end of a frame the library is handed, notes the
// bytes that already wait behind it (in the kernel, or in net/http's
// buffer). The library hands the frame on before it reads them: a close
// among them, read only once the frame is dealt with, is dated by this
// (arrivedBy). A mark that covers bytes not read yet is kept; a new look
// is taken once the newest is a millisecond old, so a long burst costs a
// look a millisecond and dates what came during it to within one.
func (g *frameGuard) markAhead() {
	if g.conn == nil || g.now == nil {
		return
	}
	for len(g.marks) > 0 && g.marks[0].horizon <= g.src.n {
		g.marks = g.marks[1:]
	}
	var now time.Time
	if n := len(g.marks); n > 0 {
		if now = g.now(); now.Sub(g.marks[n-1].at) < markEvery {
			return
		}
	}
	horizon := g.src.n + g.waiting(g.src.n)
	if n := len(g.marks); horizon > g.src.n && (n == 0 || horizon > g.marks[n-1].horizon) {
		if now.IsZero() {
			now = g.now() // a quiet socket, the usual case, reads no clock
		}
		g.marks = append(g.marks, arrival{now, horizon})
	}
}

// waiting is how many bytes wait to be read once read of the stream are:
// in net/http's buffer (the early bytes not read yet) and in the kernel.
// Safe from any goroutine.
func (g *frameGuard) waiting(read int64) int64 {
	return max(g.early-read, 0) + int64(max(unreadBytes(g.conn), 0))
}

// markEvery is how often markAhead looks again during a burst.
const markEvery = time.Millisecond

// arrivedBy is when the stream's bytes up to pos were in, by the marks;
// ok false when no mark covers them: they came as they were read.
func (g *frameGuard) arrivedBy(pos int64) (at time.Time, ok bool) {
	for _, m := range g.marks {
		if pos <= m.horizon {
			return m.at, true
		}
	}
	return time.Time{}, false
}

// jobClose is a close frame the job sent, as the guard read it.
type jobClose struct {
	at     time.Time
	code   int
	reason string
}

// maxHeader is the longest frame header: 2 bytes, a 64-bit length and a
// masking key. minHeader is the shortest a client may send: 2 bytes and
// a masking key (a client must mask).
const (
	maxHeader = 14
	minHeader = 6
)

// Frame opcodes (RFC 6455, 5.2).
const (
	opContinuation = 0x0
	opText         = 0x1
	opBinary       = 0x2
	opPing         = 0x9
	opPong         = 0xa
)

func (g *frameGuard) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if !g.failed && g.stop.Load() {
		g.discardAll()
	}
	for {
		switch {
		case g.refusal != nil && !g.told:
			g.told = true
			return 0, g.refusal
		case g.failed:
			g.parked.Store(true)
			_, err := g.src.Read(p)
			g.parked.Store(false)
			if err != nil {
				return 0, err
			}
		case len(g.pend) > 0:
			n := copy(p, g.pend)
			g.pend = g.pend[n:]
			if len(g.pend) == 0 && g.left == 0 {
				// A frame with no payload (an empty ping: a flood of
				// them) ends with its header; note what waits behind it
				// as a frame with a payload does at its end.
				g.markAhead()
			}
			return n, nil
		case g.left > 0:
			n, err := g.src.Read(p[:min(int64(len(p)), g.left)])
			g.left -= int64(n)
			if !g.skip {
				if g.left == 0 {
					g.markAhead()
				}
				return n, err
			}
			if err != nil {
				return 0, err
			}
			if g.left == 0 {
				g.skip = false
			}
		default:
			if err := g.next(); err != nil {
				return 0, err
			}
		}
	}
}

// fill reads src until hdr holds n bytes.
func (g *frameGuard) fill(n int) error {
	for g.hn < n {
		m, err := g.src.Read(g.hdr[g.hn:n])
		g.hn += m
		if err != nil && g.hn < n {
			return err
		}
	}
	return nil
}

// next reads the next frame's header and judges it: the header is then
// pend (with the payload of a close frame), or the frame is refused.
func (g *frameGuard) next() error {
	// Two bytes tell an unmasked frame, refused at once; a masked one has
	// at least minHeader, read in one call when they came together.
	g.skip, g.closeBody = false, nil
	if g.hn == 0 {
		g.frameStart.Store(g.src.n)
	}
	for g.hn < 2 || g.hn < minHeader && g.hdr[1]&0x80 != 0 {
		g.parked.Store(g.hn == 0)
		m, err := g.src.Read(g.hdr[g.hn:minHeader])
		g.parked.Store(false)
		g.hn += m
		if err != nil && (g.hn < 2 || g.hn < minHeader && g.hdr[1]&0x80 != 0) {
			if g.now != nil {
				g.endAt.CompareAndSwap(0, g.now().UnixNano())
			}
			return err
		}
	}
	frameAt := int64(0)
	if at, ok := g.arrivedBy(g.src.n); ok {
		frameAt = at.UnixNano()
	} else if g.now != nil {
		// It came as it was read: dated as the read that waited for it
		// returned, before the library and the read loop get to it (a
		// frame is ordered against the other socket's news by this).
		frameAt = g.now().UnixNano()
	}
	g.frameAt.Store(frameAt)
	b0, b1 := g.hdr[0], g.hdr[1]
	fin, op := b0&0x80 != 0, b0&0x0f
	control := op&0x8 != 0
	switch {
	case b0&0x70 != 0:
		return g.fail(websocket.StatusProtocolError, "reserved bits are set (RFC 6455 section 5.2)")
	case op > opBinary && op < opClose || op > opPong:
		return g.fail(websocket.StatusProtocolError, "unknown opcode "+strconv.Itoa(int(op))+" (RFC 6455 section 5.2)")
	case b1&0x80 == 0:
		return g.fail(websocket.StatusProtocolError, "a job's frames must be masked (RFC 6455 section 5.1)")
	case control && !fin:
		return g.fail(websocket.StatusProtocolError, "a control frame must not be fragmented (RFC 6455 section 5.5)")
	case control && b1&0x7f > 125:
		// 126 and 127 announce a 16- or 64-bit length, which a control
		// frame may not use whatever its payload's size.
		return g.fail(websocket.StatusProtocolError, "a control frame's payload must be at most 125 bytes, its length in the 7-bit form (RFC 6455 section 5.5)")
	}
	n := minHeader
	switch b1 & 0x7f {
	case 126:
		n += 2
	case 127:
		n += 8
	}
	if err := g.fill(n); err != nil {
		return err
	}
	var size uint64
	switch n {
	case minHeader:
		size = uint64(b1 & 0x7f)
	case minHeader + 2:
		size = uint64(binary.BigEndian.Uint16(g.hdr[2:]))
	default:
		size = binary.BigEndian.Uint64(g.hdr[2:])
		if size>>63 != 0 {
			return g.fail(websocket.StatusProtocolError, "the frame's 64-bit length has its most significant bit set (RFC 6455 section 5.2)")
		}
	}
	length := int64(size)
	switch {
	case op == opClose:
		return g.closeFrame(length)
	case control:
		// A ping or a pong, which the library answers or notes.
	case op == opContinuation && !g.open:
		return g.fail(websocket.StatusProtocolError, "a continuation frame without a message to continue (RFC 6455 section 5.4)")
	case op != opContinuation && g.open:
		return g.fail(websocket.StatusProtocolError, "a new message before the last one ended (RFC 6455 section 5.4)")
	default:
		if op != opContinuation {
			g.msg = 0
		}
		g.open = !fin
		if length > protocol.MaxFrameBytes-g.msg {
			// Counted as over, so the rest of its message is refused too.
			g.msg = protocol.MaxFrameBytes + 1
			g.refuse(protocol.CloseFrameTooLarge, reasonFrameTooLarge)
			g.hn, g.left, g.skip = 0, length, true
			return nil
		}
		g.msg += length
	}
	g.pend, g.hn, g.left = g.hdr[:n], 0, length
	return nil
}

// closeFrame reads a close frame's payload of n bytes (at most 125: a
// longer control frame is refused already) and judges it: a code it may
// not carry is a protocol error, a reason that is not UTF-8 invalid data
// (RFC 6455 sections 5.5.1, 7.4). A frame that passes is handed on whole.
func (g *frameGuard) closeFrame(n int64) error {
	hn := g.hn
	frame := make([]byte, hn+int(n))
	copy(frame, g.hdr[:hn])
	if _, err := io.ReadFull(&g.src, frame[hn:]); err != nil {
		// The library sees none of it: a read that failed ends it.
		return err
	}
	g.hn = 0
	body := make([]byte, n)
	for i := range body {
		body[i] = frame[hn+i] ^ frame[hn-4+i%4]
	}
	switch {
	case n == 1:
		return g.fail(websocket.StatusProtocolError, "a close frame's payload of 1 byte has no room for a code (RFC 6455 section 5.5.1)")
	case n >= 2 && !wireCloseCode(binary.BigEndian.Uint16(body)):
		return g.fail(websocket.StatusProtocolError, "close code "+strconv.Itoa(int(binary.BigEndian.Uint16(body)))+" may not be sent (RFC 6455 section 7.4)")
	case n > 2 && !utf8.Valid(body[2:]):
		return g.fail(websocket.StatusInvalidFramePayloadData, "the close reason is not valid UTF-8 (RFC 6455 section 5.5.1)")
	}
	g.pend, g.closeBody = frame, body
	if g.jobClose.Load() == nil && g.now != nil {
		at, ok := g.arrivedBy(g.src.n) // it may have waited behind frames the library was handed
		if !ok {
			at = g.now()
		}
		seen := &jobClose{at: at, code: int(websocket.StatusNoStatusRcvd)}
		if n >= 2 {
			seen.code, seen.reason = int(binary.BigEndian.Uint16(body)), string(body[2:])
		}
		g.jobClose.Store(seen)
	}
	return nil
}

// unreadClose reads on from where the library stopped reading, without
// handing anything on, until a close frame: its code (1005 for none) and
// reason. It stops, with ok false, at a frame the guard refuses or at the
// end of what src gives (its read deadline).
func (g *frameGuard) unreadClose() (code int, reason string, ok bool) {
	for !g.failed && g.refusal == nil {
		switch {
		case g.closeBody != nil && len(g.pend) < minHeader+len(g.closeBody):
			// Partly handed on already: the library has the rest.
			return 0, "", false
		case g.closeBody != nil:
			if len(g.closeBody) < 2 {
				return int(websocket.StatusNoStatusRcvd), "", true
			}
			return int(binary.BigEndian.Uint16(g.closeBody)), string(g.closeBody[2:]), true
		case len(g.pend) > 0:
			g.pend = nil
		case g.left > 0:
			n, err := io.CopyN(io.Discard, &g.src, g.left)
			g.left -= n
			if err != nil {
				return 0, "", false
			}
		default:
			if err := g.next(); err != nil {
				return 0, "", false
			}
		}
	}
	return 0, "", false
}

// wireCloseCode reports whether a close frame may carry code: the codes RFC
// 6455 defines for the wire, those IANA registered since (1012-1014), and
// the ranges for libraries and applications (RFC 6455 section 7.4). 1004
// is reserved; 1005, 1006 and 1015 only report a close that had no code.
func wireCloseCode(code uint16) bool {
	switch {
	case code >= 1000 && code <= 1003, code >= 1007 && code <= 1014:
		return true
	default:
		return code >= 3000 && code <= 4999
	}
}

// refuse records the first frame refused; a later one is not told.
func (g *frameGuard) refuse(code websocket.StatusCode, reason string) {
	if g.refusal == nil {
		g.refusal = &closeErr{int(code), reason}
		g.refused.Store(true)
	}
}

// fail refuses a frame that fails the connection: nothing after it is
// handed on.
func (g *frameGuard) fail(code websocket.StatusCode, reason string) error {
	g.refuse(code, reason)
	g.discardAll()
	return nil
}

// discardAll fails the connection: nothing more is handed on, and reads
// wait for the job to close its end (or the close timeout).
func (g *frameGuard) discardAll() {
	g.failed, g.hn, g.pend, g.left = true, 0, nil, 0
}

// failAfter fails the connection from the next read on. The listener
// calls it for a message it refuses with 1007, between its reads; a close
// handshake that another goroutine started may be reading meanwhile.
func (g *frameGuard) failAfter() { g.stop.Store(true) }
