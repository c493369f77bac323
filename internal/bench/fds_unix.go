//go:build unix

package bench

import "syscall"

// openFileLimit is the process's limit on open files (RLIMIT_NOFILE, which
// Go raises to its hard limit at start); 0 when unknown.
func openFileLimit() int {
	var l syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		return 0
	}
	return int(min(l.Cur, 1<<30))
}
