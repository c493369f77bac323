//go:build unix

package jobsocket

import "syscall"

// openFileLimit is the process's limit on open files (RLIMIT_NOFILE's soft
// limit, which Go raises to the hard one at start).
func openFileLimit() int {
	var l syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err != nil || l.Cur > 1<<30 {
		return 1 << 20
	}
	return int(l.Cur)
}
