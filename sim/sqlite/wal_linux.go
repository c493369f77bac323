package sqlite

import (
	"os"

	"golang.org/x/sys/unix"
)

// shmDMS is the byte of a WAL database's -shm file on which every
// connection that has the database open holds a shared lock (SQLite's
// unix VFS: UNIX_SHM_BASE 120 plus its 8 lock bytes).
const shmDMS = 128

// walInUse says whether another process has the database whose -shm file
// is shm open: SQLite keeps a read lock on its DMS byte for as long as it
// does. A store file renamed or removed under a running normsim leaves its
// -wal and -shm under the old name, still in use.
func walInUse(shm string) bool {
	f, err := os.Open(shm)
	if err != nil {
		return false
	}
	defer f.Close()
	// An open file description's query sees the locks of this process
	// too (F_GETLK would not): a test holds both ends.
	lk := unix.Flock_t{Type: unix.F_WRLCK, Whence: 0, Start: shmDMS, Len: 1}
	if err := unix.FcntlFlock(f.Fd(), unix.F_OFD_GETLK, &lk); err != nil {
		return false
	}
	return lk.Type != unix.F_UNLCK
}
