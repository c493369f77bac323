package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/normsim/normsim/sim"
)

// FrameLimits bound the frame records a store keeps (sim.FrameLimits).
type FrameLimits = sim.FrameLimits

// DefaultFrameLimits are sim's.
var DefaultFrameLimits = sim.DefaultFrameLimits

// SetFrameLimits changes the bounds (before the store is used).
func (s *Store) SetFrameLimits(l FrameLimits) {
	if l.PerInstance <= 0 || l.PerInstanceBytes <= 0 || l.Total <= 0 || l.TotalBytes <= 0 {
		panic(fmt.Sprintf("sqlite: frame limits must be positive: %+v", l))
	}
	s.frameLimits = l
}

// stateRows is how many instances one frame_state statement counts.
const stateRows = 128

// frameKey is whose frames a record is.
type frameKey struct{ job, role string }

// totalsKey is frame_state's row of totals.
var totalsKey = frameKey{}

// frameCount is a number of frame records and the bytes of their text,
// of one instance (or, for totalsKey, of all).
type frameCount struct {
	k            frameKey
	frames, size int64
}

// boundFrames counts a batch just inserted in frame_state and trims an
// instance past its bound, then the store past its total, oldest first,
// counting what went. It runs in the batch's transaction.
func (s *Store) boundFrames(ctx context.Context, tx *sql.Tx, frs []sim.FrameRecord) error {
	tallies, sum := sim.TallyFrames(frs)
	added := make([]frameCount, len(tallies))
	for i, c := range tallies {
		added[i] = frameCount{k: frameKey{c.JobID, c.Role}, frames: c.Frames, size: c.Bytes}
	}
	all := frameCount{k: totalsKey, frames: sum.Frames, size: sum.Bytes}
	lim := s.frameLimits
	// One statement counts a chunk of instances (a batch of a busy sim's
	// frames is many instances' few each).
	for len(added) > 0 {
		chunk := added[:min(len(added), stateRows)]
		added = added[len(chunk):]
		now, err := addFrameState(ctx, tx, chunk)
		if err != nil {
			return err
		}
		for _, c := range now {
			if n, size, ok := lim.InstanceOverflow(c.frames, c.size); ok {
				if err := trimInstanceFrames(ctx, tx, c.k, n, size); err != nil {
					return err
				}
			}
		}
	}
	now, err := addFrameState(ctx, tx, []frameCount{all})
	if err != nil {
		return err
	}
	if n, size, ok := lim.TotalOverflow(now[0].frames, now[0].size); ok {
		return trimOldestFrames(ctx, tx, n, size)
	}
	return nil
}

// addFrameState adds counts to their rows of frame_state, in one
// statement, and returns what each row holds now.
func addFrameState(ctx context.Context, tx *sql.Tx, counts []frameCount) ([]frameCount, error) {
	args := make([]any, 0, 4*len(counts))
	for _, c := range counts {
		args = append(args, c.k.job, c.k.role, c.frames, c.size)
	}
	rows, err := tx.QueryContext(ctx, `INSERT INTO frame_state (job_id, role, frames, bytes) VALUES (?, ?, ?, ?)`+
		strings.Repeat(`, (?, ?, ?, ?)`, len(counts)-1)+`
		ON CONFLICT (job_id, role) DO UPDATE SET frames = frames + excluded.frames, bytes = bytes + excluded.bytes
		RETURNING job_id, role, frames, bytes`, args...)
	if err != nil {
		return nil, fmt.Errorf("count frames: %w", err)
	}
	out := make([]frameCount, 0, len(counts))
	for rows.Next() {
		var c frameCount
		if err := rows.Scan(&c.k.job, &c.k.role, &c.frames, &c.size); err != nil {
			rows.Close()
			return nil, fmt.Errorf("count frames: %w", err)
		}
		out = append(out, c)
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return nil, fmt.Errorf("count frames: %w", err)
	}
	return out, nil
}

// trimmedFrames counts what a trim let go of, by whose it was.
type trimmedFrames map[frameKey]*frameCount

func (t trimmedFrames) add(k frameKey, bytes int64) {
	c := t[k]
	if c == nil {
		c = &frameCount{k: k}
		t[k] = c
	}
	c.frames++
	c.size += bytes
}

// trimInstanceFrames lets go of an instance's oldest frames until at least
// overN of them and overBytes of their text are gone.
func trimInstanceFrames(ctx context.Context, tx *sql.Tx, k frameKey, overN, overBytes int64) error {
	rows, err := tx.QueryContext(ctx, `SELECT seq, length(CAST(data AS BLOB)) FROM frames WHERE job_id = ? AND role = ? ORDER BY seq`, k.job, k.role)
	if err != nil {
		return fmt.Errorf("trim frames of %s: %w", k.role, err)
	}
	gone := trimmedFrames{}
	last, err := scanOldest(rows, overN, overBytes, func(_ frameKey, bytes int64) { gone.add(k, bytes) }, false)
	if err != nil {
		return fmt.Errorf("trim frames of %s: %w", k.role, err)
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM frames WHERE job_id = ? AND role = ? AND seq <= ?`, k.job, k.role, last); err != nil {
		return fmt.Errorf("trim frames of %s: %w", k.role, err)
	}
	return countTrimmed(ctx, tx, gone)
}

// trimOldestFrames lets go of the store's oldest frames, whoever's, until
// at least overN of them and overBytes of their text are gone.
func trimOldestFrames(ctx context.Context, tx *sql.Tx, overN, overBytes int64) error {
	rows, err := tx.QueryContext(ctx, `SELECT seq, length(CAST(data AS BLOB)), job_id, role FROM frames ORDER BY seq`)
	if err != nil {
		return fmt.Errorf("trim frames: %w", err)
	}
	gone := trimmedFrames{}
	last, err := scanOldest(rows, overN, overBytes, gone.add, true)
	if err != nil {
		return fmt.Errorf("trim frames: %w", err)
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM frames WHERE seq <= ?`, last); err != nil {
		return fmt.Errorf("trim frames: %w", err)
	}
	return countTrimmed(ctx, tx, gone)
}

// scanOldest reads rows (seq, length[, job, role]) oldest first until at
// least overN rows and overBytes bytes are read, and returns the last seq.
func scanOldest(rows *sql.Rows, overN, overBytes int64, each func(frameKey, int64), keyed bool) (int64, error) {
	defer rows.Close()
	var last, n, bytes int64
	for (n < overN || bytes < overBytes) && rows.Next() {
		var seq, size int64
		var k frameKey
		var err error
		if keyed {
			err = rows.Scan(&seq, &size, &k.job, &k.role)
		} else {
			err = rows.Scan(&seq, &size)
		}
		if err != nil {
			return 0, err
		}
		last, n, bytes = seq, n+1, bytes+size
		each(k, size)
	}
	return last, rows.Err()
}

// countTrimmed moves what a trim let go of from kept to trimmed, for each
// instance and in the totals.
func countTrimmed(ctx context.Context, tx *sql.Tx, gone trimmedFrames) error {
	all := frameCount{k: totalsKey}
	for _, c := range gone {
		all.frames += c.frames
		all.size += c.size
		if err := moveToTrimmed(ctx, tx, *c); err != nil {
			return err
		}
	}
	return moveToTrimmed(ctx, tx, all)
}

func moveToTrimmed(ctx context.Context, tx *sql.Tx, c frameCount) error {
	_, err := tx.ExecContext(ctx, `UPDATE frame_state SET frames = frames - ?, bytes = bytes - ?, trimmed = trimmed + ?, trimmed_bytes = trimmed_bytes + ?
		WHERE job_id = ? AND role = ?`, c.frames, c.size, c.frames, c.size, c.k.job, c.k.role)
	if err != nil {
		return fmt.Errorf("count trimmed frames: %w", err)
	}
	return nil
}

// FrameCounts says how many of an instance's frames (jobID, role) are kept
// and how many were let go of to stay within the bounds; with both empty,
// the store's totals.
func (s *Store) FrameCounts(ctx context.Context, jobID, role string) (sim.FrameCounts, error) {
	var c sim.FrameCounts
	err := s.pool().QueryRowContext(ctx, `SELECT frames, trimmed, trimmed_bytes FROM frame_state WHERE job_id = ? AND role = ?`, jobID, role).
		Scan(&c.Kept, &c.Dropped, &c.DroppedBytes)
	if err == sql.ErrNoRows {
		return c, nil
	}
	if err != nil {
		return c, fmt.Errorf("count frames: %w", err)
	}
	return c, nil
}
