package sqlite

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/normsim/normsim/sim"
)

// storeLock is the lock a normsim holds on its store file for as long as it
// runs: a second normsim over the same store would otherwise recover the
// first one's records as its own, and stop or remove the first one's
// running jobs. The lock is the kernel's (flock) on the store file itself,
// so it follows the file, not its name: a symlink or a hard link to a store
// in use is refused too. A normsim that is killed leaves nothing stuck.
// Who holds it is written beside the file, in <store>.lock, for the
// message a second normsim gets.
type storeLock struct {
	f      *os.File // the store file, open for as long as the lock is held
	holder string   // where who holds it is written
}

// holderPath is where a store's holder is written: beside the file the
// store's name resolves to, so a second normsim that reaches it through a
// symlink reads the same one. (Through a hard link it cannot be found from
// the name; the message then says "another process".)
func holderPath(store string) string {
	if real, err := filepath.EvalSymlinks(store); err == nil {
		store = real
	}
	return store + ".lock"
}

// acquireLock takes the store's lock, or says who holds it. It creates the
// store file if there is none (an empty file is an empty SQLite database).
func acquireLock(store string) (*storeLock, error) {
	_, statErr := os.Stat(store)
	created := errors.Is(statErr, fs.ErrNotExist)
	f, err := os.OpenFile(store, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		// normsim must write the store and the files beside it (its lock,
		// its write-ahead log): say where, and what to do.
		fix := "make it writable by this user, or give --db a path normsim can write (or :memory:)"
		if _, lerr := os.Lstat(store); lerr == nil && statErr != nil {
			fix = "it is a symlink to a path that cannot be opened; point it at a file normsim can write, or give --db another path (or :memory:)"
		}
		return nil, fmt.Errorf("lock store %s: %w: normsim cannot create or write it there; %s", store, err, fix)
	}
	holder := holderPath(store)
	if err := tryLock(f); err != nil {
		said, _ := os.ReadFile(holder)
		f.Close()
		who := cmp.Or(strings.TrimSpace(string(said)), "another process")
		return nil, sim.Errorf(sim.EConflict, "store %s is in use by another normsim (%s); stop that one, or give this one another --db", store, who)
	}
	if walInUse(store + "-shm") {
		// The lock is free, yet another process has the database this
		// name's write-ahead log belongs to: the file was renamed or
		// removed while a normsim ran on it, and that normsim writes on
		// through the log under this name. Opening it here would take
		// the log as this file's and lose the other's records.
		unlock(f)
		f.Close()
		if created {
			os.Remove(store)
		}
		said, _ := os.ReadFile(holder)
		who := cmp.Or(strings.TrimSpace(string(said)), "another process")
		return nil, sim.Errorf(sim.EConflict, "store %s: its write-ahead log (%s-wal) is in use (%s), but the file is not: the store was renamed or removed while a normsim ran on it. Stop that normsim first, or give this one another --db", store, store, who)
	}
	l := &storeLock{f: f, holder: holder}
	l.say(fmt.Sprintf("pid %d", os.Getpid()))
	return l, nil
}

// say records who holds the lock, for the message a second normsim gets.
func (l *storeLock) say(who string) {
	if l == nil || l.f == nil {
		return
	}
	os.WriteFile(l.holder, []byte(who+"\n"), 0o644)
}

// release lets the lock go. It is called after the database is closed:
// closing the store file drops every POSIX lock this process holds on it,
// SQLite's among them.
func (l *storeLock) release() {
	if l == nil || l.f == nil {
		return
	}
	os.Remove(l.holder)
	unlock(l.f)
	l.f.Close()
	l.f = nil
}

// SetHolder says, in the store's lock file, who this normsim is (its pid
// and where it serves), so a second one started on the same store can
// name it. A no-op for an in-memory store.
func (s *Store) SetHolder(who string) { s.lock.say(who) }
