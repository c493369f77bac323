package memstore

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/normsim/normsim/sim"
)

// logRow is one kept line of an instance's.
type logRow struct {
	seq, at               int64
	service, stream, text string
}

// logState is what is kept of an instance's lines and what was lost.
type logState struct {
	lines, bytes, trimmed, trimmedBytes, overflowed int64
	updated                                         int64
	// row orders states updated at the same moment: the older first.
	row int64
}

// SetLogLimits changes the bounds (before the store is used). A
// TotalBytes of 0 is sim.DefaultLogLimits'.
func (s *Store) SetLogLimits(l sim.LogLimits) {
	if l.TotalBytes == 0 {
		l.TotalBytes = sim.DefaultLogLimits.TotalBytes
	}
	if l.Lines <= 0 || l.Bytes <= 0 || l.Instances <= 0 || l.TotalBytes < 0 {
		panic(fmt.Sprintf("memstore: log limits must be positive: %+v", l))
	}
	s.mu.Lock()
	s.logLimits = l
	s.mu.Unlock()
}

// newLogState is a new instance's state, first updated at now.
func (s *Store) newLogState(now int64) logState {
	assign(s, &s.logStateRow, s.logStateRow+1)
	return logState{updated: now, row: s.logStateRow}
}

// AppendLogs stores lines in order, all or none, and trims each instance
// that passed its bound back under sim.TrimTo of it, then the store past its
// total, oldest lines first. normsim's own notes (StreamNormsim) are kept
// but not counted.
func (s *Store) AppendLogs(ctx context.Context, lines []sim.LogLine) error {
	if len(lines) == 0 {
		return nil
	}
	tallies := sim.TallyLogs(lines)
	now := time.Now().UnixNano()
	unlock, err := s.lock(ctx)
	if err != nil {
		return fmt.Errorf("append log lines: %w", err)
	}
	defer unlock()
	seq := s.logSeq
	for _, l := range lines {
		seq++
		put(s, s.logs, l.Instance, append(s.logs[l.Instance], logRow{seq: seq, at: nanos(l.At), service: l.Service, stream: l.Stream, text: l.Text}))
	}
	assign(s, &s.logSeq, seq)
	for _, c := range tallies {
		inst := c.Instance
		st, ok := s.logState[inst]
		if !ok {
			st = s.newLogState(now)
		}
		st.lines += c.Lines
		st.bytes += c.Bytes
		st.updated = now
		put(s, s.logState, inst, st)
		if st.lines > s.logLimits.Lines || st.bytes > s.logLimits.Bytes {
			wantLines := int64(float64(s.logLimits.Lines) * sim.TrimTo)
			wantBytes := int64(float64(s.logLimits.Bytes) * sim.TrimTo)
			kept, keptBytes := st.lines, st.bytes
			s.trimLogs(inst, func(n, b int64) bool { return kept-n <= wantLines && keptBytes-b <= wantBytes })
		}
	}
	var total int64
	for _, st := range s.logState {
		total += st.bytes
	}
	if total > s.logLimits.TotalBytes {
		over := total - int64(float64(s.logLimits.TotalBytes)*sim.TrimTo)
		s.trimLogs("", func(_, b int64) bool { return b >= over })
	}
	return nil
}

// trimLogs removes the oldest lines (of inst, or of every instance when
// inst is "") until enough says the job lines and bytes removed so far
// are enough, and counts them as each instance's trimmed lines. normsim's
// notes go with the lines around them, uncounted.
func (s *Store) trimLogs(inst string, enough func(n, b int64) bool) {
	type cut struct{ n, b int64 }
	cuts := map[string]*cut{}
	gone := map[string]int{} // rows removed, notes included
	var n, b int64
	take := func(of string, r logRow) {
		gone[of]++
		if r.stream == sim.StreamNormsim {
			return
		}
		c := cuts[of]
		if c == nil {
			c = &cut{}
			cuts[of] = c
		}
		size := int64(len(r.text))
		c.n, c.b = c.n+1, c.b+size
		n, b = n+1, b+size
	}
	if inst != "" {
		rows := s.logs[inst]
		for i := 0; !enough(n, b) && i < len(rows); i++ {
			take(inst, rows[i])
		}
	} else {
		// Every instance's lines, oldest first.
		type head struct {
			inst string
			rows []logRow
		}
		var heads []head
		for of, rows := range s.logs {
			if len(rows) > 0 {
				heads = append(heads, head{of, rows})
			}
		}
		for !enough(n, b) && len(heads) > 0 {
			oldest := 0
			for i := range heads {
				if heads[i].rows[0].seq < heads[oldest].rows[0].seq {
					oldest = i
				}
			}
			h := &heads[oldest]
			take(h.inst, h.rows[0])
			if h.rows = h.rows[1:]; len(h.rows) == 0 {
				heads = slices.Delete(heads, oldest, oldest+1)
			}
		}
	}
	for of, k := range gone {
		if rest := s.logs[of][k:]; len(rest) > 0 {
			put(s, s.logs, of, rest)
		} else {
			del(s, s.logs, of)
		}
	}
	for of, c := range cuts {
		if st, ok := s.logState[of]; ok {
			st.lines, st.bytes = st.lines-c.n, st.bytes-c.b
			st.trimmed, st.trimmedBytes = st.trimmed+c.n, st.trimmedBytes+c.b
			put(s, s.logState, of, st)
		}
	}
}

// CountOverflow adds n lines of inst that the capture could not keep.
func (s *Store) CountOverflow(ctx context.Context, inst string, n int64) error {
	now := time.Now().UnixNano()
	unlock, err := s.lock(ctx)
	if err != nil {
		return fmt.Errorf("count lost log lines of %s: %w", inst, err)
	}
	defer unlock()
	st, ok := s.logState[inst]
	if !ok {
		st = s.newLogState(now)
	}
	st.overflowed += n
	put(s, s.logState, inst, st)
	return nil
}

// RegisterLogs records that the instances exist, all or none, and forgets
// the logs of the instances that printed longest ago past the bound on
// instances.
func (s *Store) RegisterLogs(ctx context.Context, instances ...string) error {
	if len(instances) == 0 {
		return nil
	}
	now := time.Now().UnixNano()
	unlock, err := s.lock(ctx)
	if err != nil {
		return fmt.Errorf("register logs: %w", err)
	}
	defer unlock()
	added := false
	for _, inst := range instances {
		if _, ok := s.logState[inst]; !ok {
			put(s, s.logState, inst, s.newLogState(now))
			added = true
		}
	}
	if !added {
		return nil
	}
	over := len(s.logState) - s.logLimits.Instances
	if over <= 0 {
		return nil
	}
	type aged struct {
		inst         string
		updated, row int64
	}
	all := make([]aged, 0, len(s.logState))
	for inst, st := range s.logState {
		all = append(all, aged{inst, st.updated, st.row})
	}
	slices.SortFunc(all, func(a, b aged) int { return cmp.Or(cmp.Compare(a.updated, b.updated), cmp.Compare(a.row, b.row)) })
	for _, a := range all[:over] {
		del(s, s.logs, a.inst)
		del(s, s.logState, a.inst)
	}
	return nil
}

// ReadLogs returns the lines q selects, oldest first, with what is kept
// and what was lost of the instance.
func (s *Store) ReadLogs(ctx context.Context, q sim.LogQuery) (*sim.LogPage, error) {
	unlock, err := s.lock(ctx)
	if err != nil {
		return nil, fmt.Errorf("read logs of %s: %w", q.Instance, err)
	}
	defer unlock()
	p := &sim.LogPage{Lines: []sim.LogLine{}}
	st, ok := s.logState[q.Instance]
	if !ok {
		return p, nil
	}
	rows := s.logs[q.Instance]
	p.Known = true
	p.Kept = sim.LogRetention{Lines: st.lines, Bytes: st.bytes}
	if len(rows) > 0 {
		p.Kept.FirstSeq = rows[0].seq
	}
	p.Lost = sim.LogLostCounts{Trimmed: st.trimmed, TrimmedBytes: st.trimmedBytes, Overflowed: st.overflowed}
	var sel []logRow
	for _, r := range rows {
		if r.seq > q.AfterSeq && (q.Since.IsZero() || r.at >= nanos(q.Since)) && (q.Until.IsZero() || r.at < nanos(q.Until)) {
			sel = append(sel, r)
		}
	}
	switch {
	case q.Tail > 0:
		p.Matched = int64(len(sel))
		sel = page(sel, q.Tail, true)
		sel = page(sel, q.Limit, false)
	case q.Limit > 0:
		sel = page(sel, q.Limit, false)
		p.Matched = int64(len(sel))
	default:
		p.Matched = int64(len(sel))
	}
	for _, r := range sel {
		p.Lines = append(p.Lines, sim.LogLine{Seq: r.seq, Instance: q.Instance, Service: r.service, Stream: r.stream, At: fromNanos(r.at), Text: r.text})
	}
	return p, nil
}
