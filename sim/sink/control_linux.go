//go:build linux

package sink

import (
	"encoding/binary"
	"net"
	"time"

	"golang.org/x/sys/unix"
)

// watchKernelDrops asks the kernel to say, with each datagram it hands
// over, how many it has dropped on the socket so far because its receive
// buffer was full (SO_RXQ_OVFL): what never reached the receiver is
// counted, not lost silently.
func watchKernelDrops(uc *net.UDPConn) bool {
	return setSockopt(uc, unix.SO_RXQ_OVFL)
}

// stampArrivals asks the kernel to stamp each datagram with the moment it
// arrived on the socket (SO_TIMESTAMPNS), so it is dated by that, not by
// when a reader behind on its queue got to it. Set before anything is
// read: a datagram that arrived before it carries no stamp.
func stampArrivals(uc *net.UDPConn) bool {
	return setSockopt(uc, unix.SO_TIMESTAMPNS)
}

func setSockopt(uc *net.UDPConn, opt int) bool {
	rc, err := uc.SyscallConn()
	if err != nil {
		return false
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, opt, 1)
	}); err != nil {
		return false
	}
	return serr == nil
}

// controlBuffer is the room a read gives the control messages: a drop
// count and an arrival stamp, with room to spare (a message that does not
// fit is cut, never written past the buffer).
const controlBuffer = 128

// control reads a datagram's control messages in place (nothing is
// allocated: it runs for every datagram): when the kernel stamped its
// arrival (zero when it did not), and the socket's drop count so far (0
// when it sent none, as it does while it has dropped nothing).
func control(oob []byte) (arrived time.Time, dropped uint32) {
	for len(oob) >= unix.CmsgLen(0) {
		h, data, rest, err := unix.ParseOneSocketControlMessage(oob)
		if err != nil {
			break
		}
		if h.Level == unix.SOL_SOCKET {
			switch h.Type {
			case unix.SO_RXQ_OVFL:
				if len(data) >= 4 {
					dropped = binary.NativeEndian.Uint32(data)
				}
			case unix.SCM_TIMESTAMPNS:
				// A struct timespec: two longs, 32 bits each on a 32-bit
				// platform.
				switch len(data) {
				case 16:
					arrived = time.Unix(int64(binary.NativeEndian.Uint64(data)), int64(binary.NativeEndian.Uint64(data[8:])))
				case 8:
					arrived = time.Unix(int64(int32(binary.NativeEndian.Uint32(data))), int64(int32(binary.NativeEndian.Uint32(data[4:]))))
				}
			}
		}
		oob = rest
	}
	return arrived, dropped
}

// truncated says the kernel cut the datagram to fit the buffer.
func truncated(flags int) bool { return flags&unix.MSG_TRUNC != 0 }
