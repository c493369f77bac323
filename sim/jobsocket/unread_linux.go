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
