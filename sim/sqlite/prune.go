package sqlite

import (
	"context"
	"database/sql"
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

// pruneMigrations drops the oldest finished migrations past the cap, with
// their timelines, their events, and the frames of their jobs recorded
// before the oldest migration of the job that is kept (or, for a job none
// of whose migrations is kept, before its newest dropped one began). It
// runs in tx, the transaction that saved a finished migration.
func (s *Store) pruneMigrations(ctx context.Context, tx *sql.Tx) (int64, error) {
	keep := s.migCap.keep.Load()
	if keep == 0 {
		return 0, nil
	}
	var done int64
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM migrations WHERE state != ?`, string(sim.MigrationRunning)).Scan(&done); err != nil {
		return 0, fmt.Errorf("count finished migrations: %w", err)
	}
	over := done - keep
	if over <= 0 {
		return 0, nil
	}
	rows, err := tx.QueryContext(ctx, `SELECT id, job_id, started_at FROM migrations WHERE state != ? ORDER BY started_at, id LIMIT ?`, string(sim.MigrationRunning), over)
	if err != nil {
		return 0, fmt.Errorf("find migrations to prune: %w", err)
	}
	type old struct {
		id, job string
		started int64
	}
	var olds []old
	for rows.Next() {
		var o old
		if err := rows.Scan(&o.id, &o.job, &o.started); err != nil {
			rows.Close()
			return 0, err
		}
		olds = append(olds, o)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, err
	}
	for _, o := range olds {
		// migration_events go with their migration (ON DELETE CASCADE).
		if _, err := tx.ExecContext(ctx, `DELETE FROM migrations WHERE id = ?`, o.id); err != nil {
			return 0, fmt.Errorf("prune migration %s: %w", o.id, err)
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM events WHERE migration = ?`, o.id); err != nil {
			return 0, fmt.Errorf("prune the events of migration %s: %w", o.id, err)
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM frames WHERE job_id = ? AND at < COALESCE((SELECT min(started_at) FROM migrations WHERE job_id = ?), ?)`,
			o.job, o.job, o.started); err != nil {
			return 0, fmt.Errorf("prune the frames of migration %s: %w", o.id, err)
		}
	}
	return int64(len(olds)), nil
}
