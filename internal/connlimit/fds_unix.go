//go:build unix

package connlimit

import "syscall"

// OpenFiles is the process's limit on open files (RLIMIT_NOFILE's soft
// limit, which Go raises to the hard one at start).
func OpenFiles() int {
	var l syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err != nil || l.Cur > 1<<30 {
		return 1 << 20
	}
	return int(l.Cur)
}
