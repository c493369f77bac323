package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/normsim/normsim/sim"
)

// migrationCap bounds the finished migrations a store keeps (0: all);
// pruned counts those it let go. Read and set atomically: the cap is set
// once before use, the count by every save that prunes.
type migrationCap struct {
	keep   atomic.Int64
	pruned atomic.Int64
}

// SetMigrationCap makes the store keep at most n finished migrations,
// dropping the oldest (by start) as newer ones finish; 0 keeps every one.
// A running migration is never dropped. Long runs on an in-memory store
// (normsim up --db :memory: --keep-migrations N) then stay within a
// bound instead of growing with every handover.
func (s *Store) SetMigrationCap(n int) {
	if n < 0 {
		panic(fmt.Sprintf("sqlite: migration cap must be 0 or more: %d", n))
	}
	s.migCap.keep.Store(int64(n))
}

// MigrationCap is the cap SetMigrationCap set (0: none).
func (s *Store) MigrationCap() int { return int(s.migCap.keep.Load()) }

// MigrationsPruned is how many finished migrations the cap has dropped.
func (s *Store) MigrationsPruned() int64 { return s.migCap.pruned.Load() }

// PrunedWritesDropped is how many records came for a migration the cap
// had dropped, and went (sim.RecentlyPruned).
func (s *Store) PrunedWritesDropped() int64 { return s.prunedIDs.Dropped() }

// pruneMigrations drops the oldest finished migrations past the cap with
// their timelines, and the history of removed instances older than the
// oldest migration kept (running or finished): events (counted as
// trimmed) and frames (counted per instance), found from the front of
// their tables (their seq grows with time). It runs in tx, the
// transaction that saved a finished migration.
func (s *Store) pruneMigrations(ctx context.Context, tx *sql.Tx) (pruned []sim.PrunedMigration, err error) {
	keep := s.migCap.keep.Load()
	if keep == 0 {
		return nil, nil
	}
	var done int64
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM migrations WHERE state != ?`, string(sim.MigrationRunning)).Scan(&done); err != nil {
		return nil, fmt.Errorf("count finished migrations: %w", err)
	}
	over := done - keep
	if over <= 0 {
		return nil, nil
	}
	rows, err := tx.QueryContext(ctx, `DELETE FROM migrations WHERE id IN
		(SELECT id FROM migrations WHERE state != ? ORDER BY started_at, id LIMIT ?) RETURNING id, state`, string(sim.MigrationRunning), over)
	if err != nil {
		return nil, fmt.Errorf("prune migrations: %w", err)
	}
	for rows.Next() {
		var m sim.PrunedMigration
		if err := rows.Scan(&m.ID, &m.State); err != nil {
			rows.Close()
			return nil, fmt.Errorf("prune migrations: %w", err)
		}
		pruned = append(pruned, m)
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return nil, fmt.Errorf("prune migrations: %w", err)
	}
	// migration_events went with their migrations (ON DELETE CASCADE);
	// seam captures have no key to cascade by.
	if _, err := tx.ExecContext(ctx, `DELETE FROM seam_captures WHERE migration_id NOT IN (SELECT id FROM migrations)`); err != nil {
		return nil, fmt.Errorf("prune seam captures: %w", err)
	}
	var oldest sql.NullInt64
	if err := tx.QueryRowContext(ctx, `SELECT min(started_at) FROM migrations`).Scan(&oldest); err != nil {
		return nil, fmt.Errorf("prune history: %w", err)
	}
	if !oldest.Valid {
		return pruned, nil
	}
	if err := pruneFrames(ctx, tx, oldest.Int64); err != nil {
		return nil, err
	}
	// A live instance's history stays: it is bounded per instance, and
	// other jobs' migrations pruned that of one that never migrated
	// (attack round 11, B3: a connected job's events and frames gone).
	// Frames were counted per instance above (pruneFrames); events are
	// counted here, as a trim of them.
	for _, table := range []struct {
		name, instance string
		count          *atomic.Int64
	}{{"events", "instance", &s.eventsTrimmed}, {"frames", "role", nil}} {
		q := `DELETE FROM ` + table.name + ` WHERE seq < (SELECT seq FROM ` + table.name + ` WHERE at >= ? ORDER BY seq LIMIT 1)
			AND ` + table.instance + ` NOT IN (SELECT id FROM instances)`
		res, err := tx.ExecContext(ctx, q, oldest.Int64)
		if err != nil {
			return nil, fmt.Errorf("prune %s: %w", table.name, err)
		}
		if n, err := res.RowsAffected(); err == nil && table.count != nil {
			table.count.Add(n)
		}
	}
	// What is kept of removed instances that have nothing left to read:
	// their frame counts once no frame of theirs is kept, their log counts
	// once no line is. A capped store stays flat over any number of
	// migrations.
	if _, err := tx.ExecContext(ctx, `DELETE FROM frame_state WHERE NOT (job_id = '' AND role = '')
		AND role NOT IN (SELECT id FROM instances)
		AND NOT EXISTS (SELECT 1 FROM frames f WHERE f.job_id = frame_state.job_id AND f.role = frame_state.role)`); err != nil {
		return nil, fmt.Errorf("prune frame counts: %w", err)
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM log_state WHERE instance NOT IN (SELECT id FROM instances)
		AND NOT EXISTS (SELECT 1 FROM logs l WHERE l.instance = log_state.instance)`); err != nil {
		return nil, fmt.Errorf("prune log counts: %w", err)
	}
	return pruned, nil
}

// pruneFrames counts, in frame_state, the frames older than the oldest
// migration kept as let go of, before the prune deletes them.
func pruneFrames(ctx context.Context, tx *sql.Tx, oldest int64) error {
	rows, err := tx.QueryContext(ctx, `SELECT job_id, role, count(*), coalesce(sum(length(CAST(data AS BLOB))), 0) FROM frames
		WHERE seq < (SELECT seq FROM frames WHERE at >= ? ORDER BY seq LIMIT 1) AND role NOT IN (SELECT id FROM instances)
		GROUP BY job_id, role`, oldest)
	if err != nil {
		return fmt.Errorf("prune frames: %w", err)
	}
	gone := trimmedFrames{}
	for rows.Next() {
		c := &frameCount{}
		if err := rows.Scan(&c.k.job, &c.k.role, &c.frames, &c.size); err != nil {
			rows.Close()
			return fmt.Errorf("prune frames: %w", err)
		}
		gone[c.k] = c
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return fmt.Errorf("prune frames: %w", err)
	}
	return countTrimmed(ctx, tx, gone)
}
