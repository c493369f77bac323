package manager

import (
	"context"
	"errors"
	"sort"
	"time"

	"github.com/normsim/normsim/sim"
)

// Lists a page at a time: the dashboard and the API show 10,000 instances
// and their history without copying, sorting or decoding all of it for
// every page.

// InstancePage lists the instances as Instances does (oldest first), those
// on f.Node when it is set, cut to f's page.
func (m *Manager) InstancePage(ctx context.Context, f sim.InstanceFilter) (sim.Page[sim.Instance], error) {
	type key struct {
		created time.Time
		id      string
		in      *instance
	}
	// Only the keys are copied for the sort, and only the page's
	// instances after it.
	m.mu.Lock()
	keys := make([]key, 0, len(m.instances))
	for _, in := range m.instances {
		if f.Node == "" || in.Node == f.Node {
			keys = append(keys, key{in.CreatedAt, in.ID, in})
		}
	}
	m.mu.Unlock()
	sort.Slice(keys, func(i, j int) bool {
		if !keys[i].created.Equal(keys[j].created) {
			return keys[i].created.Before(keys[j].created)
		}
		return keys[i].id < keys[j].id
	})
	page := sim.PageOf(keys, f.Offset, f.Limit)
	out := sim.Page[sim.Instance]{Items: make([]sim.Instance, 0, len(page.Items)), Total: page.Total}
	m.mu.Lock()
	for _, k := range page.Items {
		// One removed since is shown as it was last: it was in the list.
		out.Items = append(out.Items, k.in.Instance)
	}
	m.mu.Unlock()
	return out, nil
}

// InstanceCounts counts the instances on each node, nodes this run does
// not have (from an earlier run's store) included.
func (m *Manager) InstanceCounts(ctx context.Context) (map[string]int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[string]int{}
	for _, in := range m.instances {
		out[in.Node]++
	}
	return out, nil
}

// MigrationPage lists migrations as Migrations does, newest first, cut to
// f's page in the store, with how many match f in all.
//
// The migrations running here are in memory, which is their truth (the
// store's copy may lag, or not be written yet); the rest are in the
// store. So the store is asked for its page leaving out every one in
// memory, and the two are merged. Those in memory are few (the ones
// running), and at most that many more of the store's are read than the
// page holds.
func (m *Manager) MigrationPage(ctx context.Context, f sim.MigrationFilter) (sim.Page[*sim.Migration], error) {
	type live struct {
		started int64
		id      string
		r       *run
	}
	m.mu.Lock()
	runs := make([]*run, 0, len(m.migrations))
	for _, r := range m.migrations {
		runs = append(runs, r)
	}
	m.mu.Unlock()
	inMemory := make([]string, 0, len(runs))
	var lives []live
	for _, r := range runs {
		inMemory = append(inMemory, r.id)
		r.mu.Lock()
		job, state, started := r.mig.JobID, r.mig.State, r.mig.StartedAt
		r.mu.Unlock()
		if (f.JobID == "" || job == f.JobID) && (f.State == "" || state == f.State) {
			lives = append(lives, live{started.UnixNano(), r.id, r})
		}
	}
	// Newest first, ties by id: the store's order.
	newer := func(aStarted int64, aID string, bStarted int64, bID string) bool {
		if aStarted != bStarted {
			return aStarted > bStarted
		}
		return aID < bID
	}
	sort.Slice(lives, func(i, j int) bool { return newer(lives[i].started, lives[i].id, lives[j].started, lives[j].id) })

	sf := sim.MigrationFilter{JobID: f.JobID, State: f.State, Except: append(inMemory, f.Except...)}
	stored, err := m.cfg.Store.CountMigrations(ctx, sf)
	if err != nil {
		return sim.Page[*sim.Migration]{}, err
	}
	total := len(lives) + stored
	lo := max(f.Offset, 0)
	hi := sim.PageEnd(lo, f.Limit, total)
	out := sim.Page[*sim.Migration]{Items: []*sim.Migration{}, Total: total}
	if lo >= hi {
		return out, nil
	}
	// At most len(lives) of those in memory come before lo, so the store's
	// part of the page starts at or after its own index lo-len(lives).
	from := max(0, lo-len(lives))
	sf.Offset, sf.Limit = from, hi-from
	rows, err := m.cfg.Store.ListMigrations(ctx, sf)
	if unreadable, ok := errors.AsType[*sim.UnreadableRecords](err); ok {
		out.Unreadable, out.Damage = unreadable.Count, unreadable.First.Error()
		m.log.Warn("migration records the store could not read were left out of a list", "count", unreadable.Count, "first", unreadable.First)
	} else if err != nil {
		return sim.Page[*sim.Migration]{}, err
	}
	// Merge from the store's row at index from, whose rank in the whole
	// list is from plus the live ones newer than it; live ones newer than
	// it rank before lo (there are at most len(lives)-1 of them ahead of
	// from >= lo-len(lives)), unless from is 0 and they are the list's
	// head.
	rest, rank := lives, 0
	if from > 0 {
		if len(rows) == 0 {
			return out, nil // the store shrank since it was counted
		}
		head := rows[0]
		i := sort.Search(len(lives), func(i int) bool {
			return !newer(lives[i].started, lives[i].id, head.StartedAt.UnixNano(), head.ID)
		})
		rest, rank = lives[i:], from+i
	}
	for len(out.Items) < hi-lo && (len(rest) > 0 || len(rows) > 0) {
		var next *sim.Migration
		if len(rest) > 0 && (len(rows) == 0 || newer(rest[0].started, rest[0].id, rows[0].StartedAt.UnixNano(), rows[0].ID)) {
			if rank >= lo {
				next = rest[0].r.doc() // a list shows no timelines
			}
			rest = rest[1:]
		} else {
			if rank >= lo {
				next = rows[0]
			}
			rows = rows[1:]
		}
		if next != nil {
			out.Items = append(out.Items, next)
		}
		rank++
	}
	return out, nil
}
