package sqlite

import (
	"fmt"
	"os"
	"strings"

	"github.com/normsim/normsim/sim"
)

// storeLock is the lock a normsim holds on its store file for as long as it
// runs: a second normsim over the same store would otherwise recover the
// first one's records as its own, and stop or remove the first one's
// running jobs. The lock is the kernel's (flock), so a normsim that is
// killed leaves nothing stuck. The lock file says who holds it.
type storeLock struct {
	f *os.File
}

// lockPath is the lock file of a store.
func lockPath(store string) string { return store + ".lock" }

// acquireLock takes the store's lock, or says who holds it.
func acquireLock(store string) (*storeLock, error) {
	f, err := os.OpenFile(lockPath(store), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("lock store %s: %w", store, err)
	}
	if err := tryLock(f); err != nil {
		holder, _ := os.ReadFile(lockPath(store))
		f.Close()
		who := strings.TrimSpace(string(holder))
		if who == "" {
			who = "another process"
		}
		return nil, sim.Errorf(sim.EConflict, "store %s is in use by another normsim (%s); stop that one, or give this one another --db", store, who)
	}
	l := &storeLock{f: f}
	l.say(fmt.Sprintf("pid %d", os.Getpid()))
	return l, nil
}

// say records who holds the lock, for the message a second normsim gets.
func (l *storeLock) say(who string) {
	if l == nil || l.f == nil {
		return
	}
	l.f.Truncate(0)
	l.f.WriteAt([]byte(who+"\n"), 0)
}

func (l *storeLock) release() {
	if l == nil || l.f == nil {
		return
	}
	l.f.Truncate(0)
	unlock(l.f)
	l.f.Close()
	l.f = nil
}

// SetHolder says, in the store's lock file, who this normsim is (its pid
// and where it serves), so a second one started on the same store can
// name it. A no-op for an in-memory store.
func (s *Store) SetHolder(who string) { s.lock.say(who) }
