package jobsocket

import (
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

// unreadBytes is how many bytes the kernel holds for c that no one has
// read yet (SIOCINQ); -1 when it cannot say.
func unreadBytes(c net.Conn) int {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return -1
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return -1
	}
	n := -1
	raw.Control(func(fd uintptr) {
		if v, err := unix.IoctlGetInt(int(fd), unix.SIOCINQ); err == nil {
			n = v
		}
	})
	return n
}

// pendingRead says whether c has something for a read to take at once:
// bytes, or its end (the job closed or reset its side). 1 when it has,
// 0 when not, -1 when it cannot say.
func pendingRead(c net.Conn) int {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return -1
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return -1
	}
	n := -1
	raw.Control(func(fd uintptr) {
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN | unix.POLLRDHUP}}
		if k, err := unix.Poll(fds, 0); err == nil {
			n = min(k, 1)
		}
	})
	return n
}
