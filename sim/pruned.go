package sim

import (
	"sync"
	"sync/atomic"
)

// RecentlyPruned remembers the migrations a store's cap (--keep-migrations)
// dropped last, and the state each ended in. A write for one of them
// arriving after the drop (its timeline's last events, a record saved
// again once its seam is judged) is let go of and counted, instead of
// failing every write after it (a timeline without its migration breaks
// the store's keys) or bringing the record back to be dropped and counted
// again. A read of one is answered GONE with the state it ended in
// (PrunedError), not as a migration never known: a client that asks for
// the end of its migration just after more than the cap ended learns how
// it ended and why its record is gone. The newest recentlyPrunedKept are
// kept: with more migrations than that finishing at once, the cap is far
// below what runs.
type RecentlyPruned struct {
	some    atomic.Bool // anything was ever added: without a cap, writes never lock
	mu      sync.Mutex
	ended   map[string]MigrationState
	order   []string
	dropped atomic.Int64
}

const recentlyPrunedKept = 1 << 16

// PrunedMigration is a migration the cap dropped and how it ended.
type PrunedMigration struct {
	ID    string
	State MigrationState
}

// Add remembers the migrations as pruned.
func (p *RecentlyPruned) Add(ms ...PrunedMigration) {
	if len(ms) == 0 {
		return
	}
	p.some.Store(true)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ended == nil {
		p.ended = map[string]MigrationState{}
	}
	for _, m := range ms {
		if _, ok := p.ended[m.ID]; !ok {
			p.order = append(p.order, m.ID)
		}
		p.ended[m.ID] = m.State
	}
	if over := len(p.order) - recentlyPrunedKept; over > 0 {
		for _, id := range p.order[:over] {
			delete(p.ended, id)
		}
		p.order = append(p.order[:0], p.order[over:]...)
	}
}

// Drops says whether a write for migration id is let go of (the cap
// dropped it), counting its n records if so.
func (p *RecentlyPruned) Drops(id string, n int) bool {
	if !p.some.Load() {
		return false // every write of every store passes here
	}
	p.mu.Lock()
	_, pruned := p.ended[id]
	p.mu.Unlock()
	if pruned {
		p.dropped.Add(int64(n))
	}
	return pruned
}

// Dropped is how many records were let go of so.
func (p *RecentlyPruned) Dropped() int64 { return p.dropped.Load() }

// NotFound is the error for a read of migration id that the store does
// not hold: GONE with the state it ended in when the cap of keep finished
// migrations dropped it lately, NOT_FOUND otherwise.
func (p *RecentlyPruned) NotFound(id string, keep int) *Error {
	if p.some.Load() {
		p.mu.Lock()
		state, pruned := p.ended[id]
		p.mu.Unlock()
		if pruned {
			return PrunedError(id, state, keep)
		}
	}
	return Errorf(ENotFound, "migration %q not found", id)
}

// PrunedError says that migration id ended in state and that its record
// was dropped by the cap of keep finished migrations.
func PrunedError(id string, state MigrationState, keep int) *Error {
	e := Errorf(EGone, "migration %q ended %s, and its record is gone: the store keeps only the newest %d finished migrations (normsim up --keep-migrations %d), and more than that ended after it; keep more to read the records of migrations that end together",
		id, state, keep, keep)
	e.Ended = state
	return e
}
