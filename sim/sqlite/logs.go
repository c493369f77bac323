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

// LogLimits bound what the store keeps of an instance's output (whichever
// comes first), and of how many instances it keeps any.
type LogLimits struct {
	Lines     int64
	Bytes     int64
	Instances int
}

// DefaultLogLimits keep 20,000 lines or 4 MiB of text per instance, of the
// 500 instances that printed last.
var DefaultLogLimits = LogLimits{Lines: 20000, Bytes: 4 << 20, Instances: 500}

// logRows is how many lines one insert statement writes.
const logRows = 64

// trimTo is the share of a bound a trim leaves, so that a chatty instance
// is trimmed once per tenth of its bound rather than on every batch.
const trimTo = 0.9

// SetLogLimits changes the bounds (before the store is used).
func (s *Store) SetLogLimits(l LogLimits) {
	if l.Lines <= 0 || l.Bytes <= 0 || l.Instances <= 0 {
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
	type count struct{ lines, bytes int64 }
	per := map[string]*count{}
	var order []string
	for _, l := range lines {
		c := per[l.Instance]
		if c == nil {
			c = &count{}
			per[l.Instance] = c
			order = append(order, l.Instance)
		}
		c.lines++
		c.bytes += int64(len(l.Text))
	}
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
		for _, inst := range order {
			c := per[inst]
			var kept, keptBytes int64
			if err := tx.StmtContext(ctx, s.writes[wLogCount]).QueryRowContext(ctx, inst, c.lines, c.bytes, now).Scan(&kept, &keptBytes); err != nil {
				return fmt.Errorf("count log lines of %s: %w", inst, err)
			}
			if kept > s.logLimits.Lines || keptBytes > s.logLimits.Bytes {
				if err := s.trim(ctx, tx, inst, kept, keptBytes); err != nil {
					return err
				}
			}
		}
		return nil
	})
}

// trim removes an instance's oldest lines until it holds trimTo of its
// bounds, and counts them.
func (s *Store) trim(ctx context.Context, tx *sql.Tx, inst string, kept, keptBytes int64) error {
	wantLines := int64(float64(s.logLimits.Lines) * trimTo)
	wantBytes := int64(float64(s.logLimits.Bytes) * trimTo)
	rows, err := tx.QueryContext(ctx, `SELECT seq, length(CAST(text AS BLOB)) FROM logs WHERE instance = ? ORDER BY seq`, inst)
	if err != nil {
		return fmt.Errorf("trim logs of %s: %w", inst, err)
	}
	var cutoff, n, b int64
	for rows.Next() && (kept-n > wantLines || keptBytes-b > wantBytes) {
		var seq, size int64
		if err := rows.Scan(&seq, &size); err != nil {
			rows.Close()
			return fmt.Errorf("trim logs of %s: %w", inst, err)
		}
		cutoff = seq
		n++
		b += size
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("trim logs of %s: %w", inst, err)
	}
	if n == 0 {
		return nil
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM logs WHERE instance = ? AND seq <= ?`, inst, cutoff); err != nil {
		return fmt.Errorf("trim logs of %s: %w", inst, err)
	}
	_, err = tx.ExecContext(ctx, `UPDATE log_state SET lines = lines - ?, bytes = bytes - ?, trimmed = trimmed + ?, trimmed_bytes = trimmed_bytes + ? WHERE instance = ?`,
		n, b, n, b, inst)
	if err != nil {
		return fmt.Errorf("trim logs of %s: %w", inst, err)
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
			return nil, fmt.Errorf("read logs of %s: %w", q.Instance, err)
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
