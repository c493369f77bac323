package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/normsim/normsim/sim"
)

// LogLimits bound what the store keeps of an instance's output
// (sim.LogLimits).
type LogLimits = sim.LogLimits

// DefaultLogLimits are sim's.
var DefaultLogLimits = sim.DefaultLogLimits

// logRows is how many lines one insert statement writes.
const logRows = 64

// SetLogLimits changes the bounds (before the store is used).
func (s *Store) SetLogLimits(l LogLimits) {
	if l.TotalBytes == 0 {
		l.TotalBytes = DefaultLogLimits.TotalBytes
	}
	if l.Lines <= 0 || l.Bytes <= 0 || l.Instances <= 0 || l.TotalBytes < 0 {
		panic(fmt.Sprintf("sqlite: log limits must be positive: %+v", l))
	}
	s.logLimits = l
}

var _ sim.LogStore = (*Store)(nil)

// AppendLogs stores lines in order, in one transaction, and trims each
// instance that passed its bound back under it, oldest lines first.
func (s *Store) AppendLogs(ctx context.Context, lines []sim.LogLine) error {
	if len(lines) == 0 {
		return nil
	}
	tallies := sim.TallyLogs(lines)
	now := time.Now().UnixNano()
	return s.atomically(ctx, func(ctx context.Context, tx *sql.Tx) error {
		rest := lines
		if len(rest) >= logRows {
			many := tx.StmtContext(ctx, s.writes[wLogLines])
			args := make([]any, 0, 5*logRows)
			for ; len(rest) >= logRows; rest = rest[logRows:] {
				args = args[:0]
				for _, l := range rest[:logRows] {
					args = append(args, l.Instance, l.Service, l.Stream, nanos(l.At), l.Text)
				}
				if _, err := many.ExecContext(ctx, args...); err != nil {
					return fmt.Errorf("append log lines: %w", err)
				}
			}
		}
		if len(rest) > 0 {
			one := tx.StmtContext(ctx, s.writes[wLogLine])
			for _, l := range rest {
				if _, err := one.ExecContext(ctx, l.Instance, l.Service, l.Stream, nanos(l.At), l.Text); err != nil {
					return fmt.Errorf("append log line of %s: %w", l.Instance, err)
				}
			}
		}
		for _, c := range tallies {
			inst := c.Instance
			var kept, keptBytes int64
			if err := tx.StmtContext(ctx, s.writes[wLogCount]).QueryRowContext(ctx, inst, c.Lines, c.Bytes, now).Scan(&kept, &keptBytes); err != nil {
				return fmt.Errorf("count log lines of %s: %w", inst, err)
			}
			if kept > s.logLimits.Lines || keptBytes > s.logLimits.Bytes {
				if err := s.trim(ctx, tx, inst, kept, keptBytes); err != nil {
					return err
				}
			}
		}
		return s.trimTotal(ctx, tx)
	})
}

// trimTotal removes the oldest lines of any instance while all of them
// together hold more than the total, down to sim.TrimTo of it, and counts them
// as each instance's trimmed lines.
func (s *Store) trimTotal(ctx context.Context, tx *sql.Tx) error {
	var total int64
	if err := tx.QueryRowContext(ctx, `SELECT coalesce(sum(bytes), 0) FROM log_state`).Scan(&total); err != nil {
		return fmt.Errorf("count log text: %w", err)
	}
	if total <= s.logLimits.TotalBytes {
		return nil
	}
	over := total - int64(float64(s.logLimits.TotalBytes)*sim.TrimTo)
	return trimLogs(ctx, tx, "", func(_, b int64) bool { return b >= over })
}

// trim removes an instance's oldest lines until it holds sim.TrimTo of its
// bounds, and counts them.
func (s *Store) trim(ctx context.Context, tx *sql.Tx, inst string, kept, keptBytes int64) error {
	wantLines := int64(float64(s.logLimits.Lines) * sim.TrimTo)
	wantBytes := int64(float64(s.logLimits.Bytes) * sim.TrimTo)
	return trimLogs(ctx, tx, inst, func(n, b int64) bool { return kept-n <= wantLines && keptBytes-b <= wantBytes })
}

// trimLogs removes the oldest lines (of inst, or of every instance when
// inst is "") until enough says the job lines and bytes removed so far
// are enough, and counts them as each instance's trimmed lines.
// normsim's own notes (StreamNormsim) go with the lines around them,
// uncounted, as they were never counted as kept.
func trimLogs(ctx context.Context, tx *sql.Tx, inst string, enough func(n, b int64) bool) error {
	q, args := `SELECT seq, instance, length(CAST(text AS BLOB)), stream FROM logs ORDER BY seq`, []any{}
	if inst != "" {
		q, args = `SELECT seq, instance, length(CAST(text AS BLOB)), stream FROM logs WHERE instance = ? ORDER BY seq`, []any{inst}
	}
	rows, err := tx.QueryContext(ctx, q, args...)
	if err != nil {
		return fmt.Errorf("trim logs: %w", err)
	}
	type cut struct{ n, b int64 }
	cuts := map[string]*cut{}
	var cutoff, n, b int64
	for !enough(n, b) && rows.Next() {
		var seq, size int64
		var of, stream string
		if err := rows.Scan(&seq, &of, &size, &stream); err != nil {
			rows.Close()
			return fmt.Errorf("trim logs: %w", err)
		}
		cutoff = seq
		if stream == sim.StreamNormsim {
			continue
		}
		c := cuts[of]
		if c == nil {
			c = &cut{}
			cuts[of] = c
		}
		c.n, c.b = c.n+1, c.b+size
		n, b = n+1, b+size
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return fmt.Errorf("trim logs: %w", err)
	}
	if cutoff == 0 {
		return nil
	}
	del, dargs := `DELETE FROM logs WHERE seq <= ?`, []any{cutoff}
	if inst != "" {
		del, dargs = `DELETE FROM logs WHERE instance = ? AND seq <= ?`, []any{inst, cutoff}
	}
	if _, err := tx.ExecContext(ctx, del, dargs...); err != nil {
		return fmt.Errorf("trim logs: %w", err)
	}
	for of, c := range cuts {
		if _, err := tx.ExecContext(ctx, `UPDATE log_state SET lines = lines - ?, bytes = bytes - ?, trimmed = trimmed + ?, trimmed_bytes = trimmed_bytes + ? WHERE instance = ?`,
			c.n, c.b, c.n, c.b, of); err != nil {
			return fmt.Errorf("trim logs of %s: %w", of, err)
		}
	}
	return nil
}

// CountOverflow adds n lines of inst that the capture could not keep.
func (s *Store) CountOverflow(ctx context.Context, inst string, n int64) error {
	_, err := s.pool().ExecContext(ctx, `INSERT INTO log_state (instance, overflowed, updated_at) VALUES (?,?,?)
		ON CONFLICT(instance) DO UPDATE SET overflowed = overflowed + excluded.overflowed`, inst, n, time.Now().UnixNano())
	if err != nil {
		return fmt.Errorf("count lost log lines of %s: %w", inst, err)
	}
	return nil
}

// RegisterLogs records that the instances exist, in one transaction, and
// forgets the logs of the instances that printed longest ago past the
// store's bound on instances.
func (s *Store) RegisterLogs(ctx context.Context, instances ...string) error {
	if len(instances) == 0 {
		return nil
	}
	if err := s.prepareWrites(); err != nil {
		return err
	}
	return s.atomically(ctx, func(ctx context.Context, tx *sql.Tx) error {
		st, _ := s.stmt(ctx, tx, wRegisterLogs)
		now := time.Now().UnixNano()
		added := false
		for _, inst := range instances {
			res, err := st.ExecContext(ctx, inst, now)
			if err != nil {
				return fmt.Errorf("register logs of %s: %w", inst, err)
			}
			if n, _ := res.RowsAffected(); n > 0 {
				added = true
			}
		}
		if !added {
			return nil
		}
		// Counting is cheap (SQLite counts a table's pages, not its rows)
		// and the oldest are the front of the updated_at index, so only
		// the rows forgotten are read: ordering every row past the bound
		// on each registration was a fifth of the sim's CPU at 10,000 jobs.
		var count int
		st, _ = s.stmt(ctx, tx, wCountLogStates)
		if err := st.QueryRowContext(ctx).Scan(&count); err != nil {
			return fmt.Errorf("register logs: %w", err)
		}
		over := count - s.logLimits.Instances
		if over <= 0 {
			return nil
		}
		var old []string
		st, _ = s.stmt(ctx, tx, wOldestLogStates)
		rows, err := st.QueryContext(ctx, over)
		if err != nil {
			return fmt.Errorf("register logs: %w", err)
		}
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				rows.Close()
				return err
			}
			old = append(old, id)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		for _, id := range old {
			if err := s.exec(ctx, tx, wForgetLogs, id); err != nil {
				return fmt.Errorf("forget logs of %s: %w", id, err)
			}
			if err := s.exec(ctx, tx, wForgetLogState, id); err != nil {
				return fmt.Errorf("forget logs of %s: %w", id, err)
			}
		}
		return nil
	})
}

// ReadLogs returns the lines q selects, oldest first, with what is kept
// and what was lost of the instance.
func (s *Store) ReadLogs(ctx context.Context, q sim.LogQuery) (*sim.LogPage, error) {
	page := &sim.LogPage{Lines: []sim.LogLine{}}
	err := s.pool().QueryRowContext(ctx, `SELECT lines, bytes, trimmed, trimmed_bytes, overflowed,
		COALESCE((SELECT min(seq) FROM logs WHERE instance = ?), 0) FROM log_state WHERE instance = ?`, q.Instance, q.Instance).
		Scan(&page.Kept.Lines, &page.Kept.Bytes, &page.Lost.Trimmed, &page.Lost.TrimmedBytes, &page.Lost.Overflowed, &page.Kept.FirstSeq)
	if errors.Is(err, sql.ErrNoRows) {
		return page, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read logs of %s: %w", q.Instance, err)
	}
	page.Known = true
	sel := `SELECT seq, service, stream, at, text FROM logs WHERE instance = ? AND seq > ?`
	args := []any{q.Instance, q.AfterSeq}
	if !q.Since.IsZero() {
		sel += ` AND at >= ?`
		args = append(args, nanos(q.Since))
	}
	if !q.Until.IsZero() {
		sel += ` AND at < ?`
		args = append(args, nanos(q.Until))
	}
	if q.Tail > 0 {
		count := `SELECT count(*)` + sel[len(`SELECT seq, service, stream, at, text`):]
		if err := s.pool().QueryRowContext(ctx, count, args...).Scan(&page.Matched); err != nil {
			return nil, fmt.Errorf("count logs of %s: %w", q.Instance, err)
		}
	}
	switch {
	case q.Tail > 0:
		sel += fmt.Sprintf(` ORDER BY seq DESC LIMIT %d`, q.Tail)
	case q.Limit > 0:
		sel += fmt.Sprintf(` ORDER BY seq LIMIT %d`, q.Limit)
	default:
		sel += ` ORDER BY seq`
	}
	rows, err := s.pool().QueryContext(ctx, sel, args...)
	if err != nil {
		return nil, fmt.Errorf("read logs of %s: %w", q.Instance, err)
	}
	defer rows.Close()
	for rows.Next() {
		l := sim.LogLine{Instance: q.Instance}
		var at int64
		if err := rows.Scan(&l.Seq, &l.Service, &l.Stream, &at, &l.Text); err != nil {
			// A damaged line is said where it was, in normsim's words,
			// and a follow reads on past it (its seq is read first).
			page.Lost.Unreadable++
			l.Service, l.Stream, l.At = "", sim.StreamNormsim, time.Time{}
			l.Text = "normsim: a line of this log could not be read: " + damagedRecord(s.path, fmt.Sprintf("log line %d", l.Seq), err, fmt.Sprintf("DELETE FROM logs WHERE seq = %d", l.Seq)).Error()
			page.Lines = append(page.Lines, l)
			continue
		}
		l.At = fromNanos(at)
		page.Lines = append(page.Lines, l)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read logs of %s: %w", q.Instance, err)
	}
	if q.Tail <= 0 {
		page.Matched = int64(len(page.Lines))
	}
	if q.Tail > 0 {
		slices.Reverse(page.Lines)
		if q.Limit > 0 && len(page.Lines) > q.Limit {
			page.Lines = page.Lines[:q.Limit]
		}
	}
	return page, nil
}
