package memstore

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/normsim/normsim/sim"
)

// migrationRow is a migration as sim/sqlite keeps it: its document as
// JSON (without its events), and the columns it is filtered and ordered by.
type migrationRow struct {
	id, jobID, state string
	// started is the start it was first saved with: a later save changes
	// the document, not the order (as sim/sqlite's upsert).
	started int64
	doc     string
}

// timelineRow is a migration event; frame is its FrameInfo as JSON, nil
// for none.
type timelineRow struct {
	seq                       int
	at                        int64
	phase, side, detail, kind string
	frame                     *string
}

func (r *migrationRow) migration() (*sim.Migration, error) {
	var m sim.Migration
	if err := json.Unmarshal([]byte(r.doc), &m); err != nil {
		return nil, fmt.Errorf("decode migration %s: %w", r.id, err)
	}
	return &m, nil
}

// SaveMigration inserts or replaces a migration's document (not its
// events). A finished one may push the oldest finished past the cap
// (SetMigrationCap): they go in the same write.
func (s *Store) SaveMigration(ctx context.Context, m *sim.Migration) error {
	if s.prunedIDs.Drops(m.ID, 1) {
		return nil
	}
	doc := *m
	doc.Events = nil
	r := &migrationRow{id: m.ID, jobID: m.JobID, state: string(m.State), started: nanos(m.StartedAt), doc: jsonText(doc)}
	unlock, err := s.lock(ctx)
	if err != nil {
		return fmt.Errorf("save migration %s: %w", m.ID, err)
	}
	defer unlock()
	if old := s.migrations[m.ID]; old != nil {
		r.started = old.started
	}
	put(s, s.migrations, m.ID, r)
	if m.State.Ended() && s.MigrationCap() != 0 {
		// Counted even if a batch it is in is undone, as sim/sqlite counts.
		pruned := s.pruneMigrations()
		s.prunedIDs.Add(pruned...)
		s.pruned.Add(int64(len(pruned)))
	}
	return nil
}

// GetMigration returns a migration with its events, or ENotFound.
func (s *Store) GetMigration(ctx context.Context, id string) (*sim.Migration, error) {
	unlock, err := s.lock(ctx)
	if err != nil {
		return nil, fmt.Errorf("get migration %s: %w", id, err)
	}
	defer unlock()
	m, err := s.summary(id)
	if err != nil {
		return nil, err
	}
	m.Events = []sim.MigrationEvent{}
	for _, r := range s.timelines[id] {
		ev := sim.MigrationEvent{Seq: r.seq, At: fromNanos(r.at), Phase: sim.Phase(r.phase), Side: r.side, Detail: r.detail, Kind: sim.TimelineKind(r.kind)}
		if r.frame != nil && *r.frame != "" {
			ev.Frame = new(sim.FrameInfo)
			if err := json.Unmarshal([]byte(*r.frame), ev.Frame); err != nil {
				return nil, fmt.Errorf("decode frame of migration %s event %d: %w", id, ev.Seq, err)
			}
		}
		m.Events = append(m.Events, ev)
	}
	return m, nil
}

// GetMigrationSummary returns a migration without its timeline (Events
// nil), or an ENotFound error.
func (s *Store) GetMigrationSummary(ctx context.Context, id string) (*sim.Migration, error) {
	unlock, err := s.lock(ctx)
	if err != nil {
		return nil, fmt.Errorf("get migration %s: %w", id, err)
	}
	defer unlock()
	return s.summary(id)
}

func (s *Store) summary(id string) (*sim.Migration, error) {
	r := s.migrations[id]
	if r == nil {
		return nil, s.prunedIDs.NotFound(id, s.MigrationCap())
	}
	m, err := r.migration()
	if err != nil {
		return nil, err
	}
	m.Events = nil
	return m, nil
}

// listed is the migrations f selects, newest first (ties by ID), its
// Limit and Offset aside.
func (s *Store) listed(f sim.MigrationFilter) []*migrationRow {
	except := make(map[string]bool, len(f.Except))
	for _, id := range f.Except {
		except[id] = true
	}
	var out []*migrationRow
	for _, r := range s.migrations {
		if (f.JobID == "" || r.jobID == f.JobID) && (f.State == "" || r.state == string(f.State)) && !except[r.id] {
			out = append(out, r)
		}
	}
	slices.SortFunc(out, func(a, b *migrationRow) int {
		return cmp.Or(cmp.Compare(b.started, a.started), cmp.Compare(a.id, b.id))
	})
	return out
}

// ListMigrations returns migrations newest first, without their events.
func (s *Store) ListMigrations(ctx context.Context, f sim.MigrationFilter) ([]*sim.Migration, error) {
	unlock, err := s.lock(ctx)
	if err != nil {
		return nil, fmt.Errorf("list migrations: %w", err)
	}
	defer unlock()
	rows := s.listed(f)
	if f.Limit > 0 || f.Offset > 0 {
		rows = rows[min(max(f.Offset, 0), len(rows)):]
	}
	if f.Limit > 0 && len(rows) > f.Limit {
		rows = rows[:f.Limit]
	}
	out := []*sim.Migration{}
	for _, r := range rows {
		m, err := r.migration()
		if err != nil {
			return nil, fmt.Errorf("decode migration: %w", err)
		}
		out = append(out, m)
	}
	return out, nil
}

// CountMigrations counts the migrations ListMigrations lists for f, its
// Limit and Offset aside.
func (s *Store) CountMigrations(ctx context.Context, f sim.MigrationFilter) (int, error) {
	unlock, err := s.lock(ctx)
	if err != nil {
		return 0, fmt.Errorf("count migrations: %w", err)
	}
	defer unlock()
	return len(s.listed(f)), nil
}

// AppendMigrationEvents adds events to a migration's timeline, all or
// none; an event of a Seq the timeline holds replaces it. The migration
// must have been saved.
func (s *Store) AppendMigrationEvents(ctx context.Context, migrationID string, evs []sim.MigrationEvent) error {
	if len(evs) == 0 || s.prunedIDs.Drops(migrationID, len(evs)) {
		return nil
	}
	fail := func(err error) error {
		return fmt.Errorf("append migration events %s/%d-%d: %w", migrationID, evs[0].Seq, evs[len(evs)-1].Seq, err)
	}
	unlock, err := s.lock(ctx)
	if err != nil {
		return fail(err)
	}
	defer unlock()
	if s.migrations[migrationID] == nil {
		return fail(fmt.Errorf("FOREIGN KEY constraint failed: no migration %q", migrationID))
	}
	// A copy (an undone batch restores the one it had), with room for
	// these events and no more: a timeline is mostly appended to, once.
	old := s.timelines[migrationID]
	tl := make([]timelineRow, len(old), len(old)+len(evs))
	copy(tl, old)
	for _, ev := range evs {
		r := timelineRow{seq: ev.Seq, at: nanos(ev.At), phase: string(ev.Phase), side: ev.Side, detail: ev.Detail, kind: string(ev.Kind)}
		if ev.Frame != nil {
			f := jsonText(ev.Frame)
			r.frame = &f
		}
		i, found := slices.BinarySearchFunc(tl, ev.Seq, func(r timelineRow, seq int) int { return cmp.Compare(r.seq, seq) })
		if found {
			tl[i] = r
		} else {
			tl = slices.Insert(tl, i, r)
		}
	}
	put(s, s.timelines, migrationID, tl)
	return nil
}

// SetMigrationCap makes the store keep at most n finished migrations,
// dropping the oldest (by start) as newer ones finish; 0 keeps every one.
// A running migration is never dropped.
func (s *Store) SetMigrationCap(n int) {
	if n < 0 {
		panic(fmt.Sprintf("memstore: migration cap must be 0 or more: %d", n))
	}
	s.migCap.Store(int64(n))
}

// MigrationCap is the cap SetMigrationCap set (0: none).
func (s *Store) MigrationCap() int { return int(s.migCap.Load()) }

// MigrationsPruned is how many finished migrations the cap has dropped.
func (s *Store) MigrationsPruned() int64 { return s.pruned.Load() }

// PrunedWritesDropped is how many records came for a migration the cap
// had dropped, and went (sim.RecentlyPruned).
func (s *Store) PrunedWritesDropped() int64 { return s.prunedIDs.Dropped() }

// pruneMigrations drops the oldest finished migrations past the cap with
// their timelines and seam captures (and the captures of migrations never
// saved), and the events and frames older than the oldest migration kept,
// running or finished: those before the first (by seq) recorded at or
// after its start. The frames are counted as let go of. It returns the
// migrations that went.
func (s *Store) pruneMigrations() (pruned []sim.PrunedMigration) {
	keep := s.migCap.Load()
	if keep == 0 {
		return nil
	}
	var done []*migrationRow
	for _, r := range s.migrations {
		// sim/sqlite counts as finished what is not running (a
		// migration saved with no state too).
		if r.state != string(sim.MigrationRunning) {
			done = append(done, r)
		}
	}
	over := int64(len(done)) - keep
	if over <= 0 {
		return nil
	}
	slices.SortFunc(done, func(a, b *migrationRow) int {
		return cmp.Or(cmp.Compare(a.started, b.started), cmp.Compare(a.id, b.id))
	})
	for _, r := range done[:over] {
		del(s, s.migrations, r.id)
		del(s, s.timelines, r.id)
		pruned = append(pruned, sim.PrunedMigration{ID: r.id, State: sim.MigrationState(r.state)})
	}
	for id := range s.captures {
		if s.migrations[id] == nil {
			del(s, s.captures, id)
		}
	}
	if len(s.migrations) == 0 {
		return pruned
	}
	oldest := int64(0)
	first := true
	for _, r := range s.migrations {
		if first || r.started < oldest {
			oldest, first = r.started, false
		}
	}
	s.pruneFrames(oldest)
	s.pruneEvents(oldest)
	s.pruneGoneInstances()
	return pruned
}

// pruneEvents lets go of removed instances' events older than the oldest
// migration kept (started at oldest), counted as trimmed. A live
// instance's stay: they are bounded per instance, and other jobs'
// migrations pruned those of one that never migrated (attack round 11,
// B3). Where none of those older events is a live instance's, the slice
// is cut at the front, as cheaply as before; where some are, it is
// rebuilt only once what goes is an eighth of all, as a rebuild copies
// every event kept and a prune follows every finished migration.
func (s *Store) pruneEvents(oldest int64) {
	i := slices.IndexFunc(s.events, func(ev eventRow) bool { return ev.at >= oldest })
	if i <= 0 {
		return
	}
	drop := 0
	for _, e := range s.events[:i] {
		if s.instances[e.instance] == nil {
			drop++
		}
	}
	switch {
	case drop == 0:
		return
	case drop == i:
		assign(s, &s.events, s.events[i:])
	case drop*8 >= len(s.events):
		kept := make([]eventRow, 0, len(s.events)-drop)
		for _, e := range s.events[:i] {
			if s.instances[e.instance] != nil {
				kept = append(kept, e)
			}
		}
		assign(s, &s.events, append(kept, s.events[i:]...))
	default:
		return
	}
	s.eventsTrimmed.Add(int64(drop))
}

// pruneGoneInstances lets go of what is kept of removed instances that
// have nothing left to read: their frame counts once no frame of theirs is
// kept, their log counts once no line is. A store whose migrations are
// capped stays flat over any number of them, as sim/sqlite's does.
func (s *Store) pruneGoneInstances() {
	for k := range s.frameState {
		if k != totalsKey && len(s.frames[k]) == 0 && s.instances[k.role] == nil {
			del(s, s.frameState, k)
			if _, ok := s.frames[k]; ok {
				del(s, s.frames, k)
			}
		}
	}
	for inst := range s.logState {
		if len(s.logs[inst]) == 0 && s.instances[inst] == nil {
			del(s, s.logState, inst)
			if _, ok := s.logs[inst]; ok {
				del(s, s.logs, inst)
			}
		}
	}
}
