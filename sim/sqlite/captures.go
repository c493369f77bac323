package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/normsim/normsim/sim"
)

var _ sim.SeamCaptures = (*Store)(nil)

// SaveSeamCapture keeps a migration's seam capture (one per migration; a
// second replaces the first).
func (s *Store) SaveSeamCapture(ctx context.Context, c sim.SeamCapture) error {
	if s.prunedIDs.Drops(c.MigrationID, 1) {
		return nil
	}
	err := s.atomically(ctx, func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT OR REPLACE INTO seam_captures (migration_id, from_at, to_at, datagrams, ts, target_ts, rtp) VALUES (?, ?, ?, ?, ?, ?, ?)`,
			c.MigrationID, nanos(c.From), nanos(c.To), c.Datagrams, c.TS, nonNil(c.TargetTS), nonNil(c.RTP))
		return err
	})
	if err != nil {
		return fmt.Errorf("save seam capture %s: %w", c.MigrationID, err)
	}
	return nil
}

// SeamCapture is the migration's seam capture, or ENotFound.
func (s *Store) SeamCapture(ctx context.Context, migrationID string) (*sim.SeamCapture, error) {
	c := sim.SeamCapture{MigrationID: migrationID}
	var from, to int64
	err := s.pool().QueryRowContext(ctx, `SELECT from_at, to_at, datagrams, ts, target_ts, rtp FROM seam_captures WHERE migration_id = ?`, migrationID).
		Scan(&from, &to, &c.Datagrams, &c.TS, &c.TargetTS, &c.RTP)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, sim.Errorf(sim.ENotFound, "migration %q has no seam capture: normsim keeps one only for a job that sent media to its NORMSIM_MEDIA_URL around the switch", migrationID)
	}
	if err != nil {
		return nil, fmt.Errorf("get seam capture %s: %w", migrationID, err)
	}
	c.From, c.To = time.Unix(0, from).UTC(), time.Unix(0, to).UTC()
	return &c, nil
}

// nonNil is b, or an empty blob: the column is NOT NULL.
func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}
