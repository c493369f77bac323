package jobsocket

import (
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

// unreadBytes is how many bytes the kernel holds for c that no one has
// read yet (SIOCINQ); -1 when it cannot say.
func unreadBytes(c net.Conn) int {
	n := -1
	onFD(c, func(fd int) {
		if v, err := unix.IoctlGetInt(fd, unix.SIOCINQ); err == nil {
			n = v
		}
	})
	return n
}

// pendingRead says whether c has something for a read to take at once:
// bytes, or its end (the job closed or reset its side). 1 when it has,
// 0 when not, -1 when it cannot say.
func pendingRead(c net.Conn) int {
	n := -1
	onFD(c, func(fd int) {
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN | unix.POLLRDHUP}}
		if k, err := unix.Poll(fds, 0); err == nil {
			n = min(k, 1)
		}
	})
	return n
}

// onFD runs f on c's file descriptor, when c has one.
func onFD(c net.Conn, f func(fd int)) {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return
	}
	raw.Control(func(fd uintptr) { f(int(fd)) })
}
