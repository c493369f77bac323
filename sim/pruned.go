package sim

import (
	"sync"
	"sync/atomic"
)

// RecentlyPruned remembers the migrations a store's cap (--keep-migrations)
// dropped last, so that a write for one of them arriving after the drop
// (its timeline's last events, a record saved again once its seam is
// judged) is let go of and counted, instead of failing every write after
// it (a timeline without its migration breaks the store's keys) or
// bringing the record back to be dropped and counted again. The newest
// recentlyPrunedKept are kept: with more migrations than that finishing
// at once, the cap is far below what runs.
type RecentlyPruned struct {
	some    atomic.Bool // anything was ever added: without a cap, writes never lock
	mu      sync.Mutex
	ids     map[string]bool
	order   []string
	dropped atomic.Int64
}

const recentlyPrunedKept = 1 << 16

// Add remembers ids as pruned.
func (p *RecentlyPruned) Add(ids ...string) {
	if len(ids) == 0 {
		return
	}
	p.some.Store(true)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ids == nil {
		p.ids = map[string]bool{}
	}
	for _, id := range ids {
		if p.ids[id] {
			continue
		}
		p.ids[id] = true
		p.order = append(p.order, id)
	}
	if over := len(p.order) - recentlyPrunedKept; over > 0 {
		for _, id := range p.order[:over] {
			delete(p.ids, id)
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
	pruned := p.ids[id]
	p.mu.Unlock()
	if pruned {
		p.dropped.Add(int64(n))
	}
	return pruned
}

// Dropped is how many records were let go of so.
func (p *RecentlyPruned) Dropped() int64 { return p.dropped.Load() }
