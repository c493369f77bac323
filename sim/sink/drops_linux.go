//go:build linux

package sink

import (
	"encoding/binary"
	"net"
	"syscall"
)

// watchKernelDrops asks the kernel to say, with each datagram it hands
// over, how many it has dropped on the socket so far because its receive
// buffer was full (SO_RXQ_OVFL): what never reached the receiver is
// counted, not lost silently.
func watchKernelDrops(uc *net.UDPConn) bool {
	rc, err := uc.SyscallConn()
	if err != nil {
		return false
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RXQ_OVFL, 1)
	}); err != nil {
		return false
	}
	return serr == nil
}

// kernelDropped is the socket's drop count a datagram's control messages
// carry; the kernel sends none while it has dropped nothing.
func kernelDropped(oob []byte) uint32 {
	msgs, err := syscall.ParseSocketControlMessage(oob)
	if err != nil {
		return 0
	}
	for _, m := range msgs {
		if m.Header.Level == syscall.SOL_SOCKET && m.Header.Type == syscall.SO_RXQ_OVFL && len(m.Data) >= 4 {
			return binary.NativeEndian.Uint32(m.Data)
		}
	}
	return 0
}

// truncated says the kernel cut the datagram to fit the buffer.
func truncated(flags int) bool { return flags&syscall.MSG_TRUNC != 0 }
