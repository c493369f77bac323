package memstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/normsim/normsim/sim"
)

// captureRow is a seam capture; an empty TS, TargetTS or RTP is nil, as
// sim/sqlite reads an empty blob.
type captureRow struct {
	from, to          int64
	datagrams         int
	ts, targetTS, rtp []byte
}

// SaveSeamCapture keeps a migration's seam capture (one per migration; a
// second replaces the first). A capture with no TS at all (nil) is
// refused, as sim/sqlite's NOT NULL column refuses it; an empty one is
// kept.
func (s *Store) SaveSeamCapture(ctx context.Context, c sim.SeamCapture) error {
	if s.prunedIDs.Drops(c.MigrationID, 1) {
		return nil
	}
	unlock, err := s.lock(ctx)
	if err != nil {
		return fmt.Errorf("save seam capture %s: %w", c.MigrationID, err)
	}
	defer unlock()
	if c.TS == nil {
		return fmt.Errorf("save seam capture %s: %w", c.MigrationID, errors.New("the capture has no TS (NOT NULL)"))
	}
	put(s, s.captures, c.MigrationID, &captureRow{from: nanos(c.From), to: nanos(c.To), datagrams: c.Datagrams, ts: clone(c.TS), targetTS: clone(c.TargetTS), rtp: clone(c.RTP)})
	return nil
}

// SeamCapture is the migration's seam capture, or ENotFound.
func (s *Store) SeamCapture(ctx context.Context, migrationID string) (*sim.SeamCapture, error) {
	unlock, err := s.lock(ctx)
	if err != nil {
		return nil, fmt.Errorf("get seam capture %s: %w", migrationID, err)
	}
	defer unlock()
	r := s.captures[migrationID]
	if r == nil {
		return nil, sim.Errorf(sim.ENotFound, "migration %q has no seam capture: normsim keeps one only for a job that sent media to its NORMSIM_MEDIA_URL around the switch", migrationID)
	}
	return &sim.SeamCapture{MigrationID: migrationID, From: fromNanos(r.from), To: fromNanos(r.to), Datagrams: r.datagrams,
		TS: clone(r.ts), TargetTS: clone(r.targetTS), RTP: clone(r.rtp)}, nil
}

// clone is a copy of b, nil when b is empty.
func clone(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	return bytes.Clone(b)
}
