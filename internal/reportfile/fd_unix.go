//go:build unix

package reportfile

import (
	"fmt"
	"os"
	"syscall"
)

// writeFD writes data to this process's descriptor fd through a
// duplicate, so closing it leaves fd open.
func writeFD(fd int, data []byte) error {
	// Held so that a child started meanwhile does not inherit the
	// duplicate before it is marked close-on-exec.
	syscall.ForkLock.RLock()
	dup, err := syscall.Dup(fd)
	if err == nil {
		syscall.CloseOnExec(dup)
	}
	syscall.ForkLock.RUnlock()
	if err != nil {
		return fmt.Errorf("open: %w", err)
	}
	return writeAndClose(os.NewFile(uintptr(dup), fmt.Sprintf("fd %d", fd)), data)
}
