package memstore

import (
	"cmp"
	"container/heap"
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/normsim/normsim/sim"
)

// eventRow is an event; data is nil for none.
type eventRow struct {
	seq, at                   int64
	kind, instance, migration string
	data                      *string
}

// AppendEvents records changes, in order, all or none. Each is given the
// next seq (never one given before, unless the write was undone).
func (s *Store) AppendEvents(ctx context.Context, evs []sim.Event) error {
	if len(evs) == 0 {
		return nil
	}
	unlock, err := s.lock(ctx)
	if err != nil {
		return fmt.Errorf("append %d events from %s: %w", len(evs), evs[0].Kind, err)
	}
	defer unlock()
	rows := s.events
	seq := s.eventSeq
	for _, ev := range evs {
		seq++
		r := eventRow{seq: seq, at: nanos(ev.At), kind: string(ev.Kind), instance: ev.Instance, migration: ev.Migration}
		if len(ev.Data) > 0 {
			d := string(ev.Data)
			r.data = &d
		}
		rows = append(rows, r)
	}
	assign(s, &s.events, s.boundEvents(rows, evs))
	assign(s, &s.eventSeq, seq)
	return nil
}

// SetEventLimits changes the bound (before the store is used).
func (s *Store) SetEventLimits(l sim.EventLimits) {
	if l.PerInstance <= 0 || l.Total < 0 {
		panic(fmt.Sprintf("memstore: event limits must be positive: %+v", l))
	}
	s.eventLimits = l
}

// EventsTrimmed is how many events the bound let go of.
func (s *Store) EventsTrimmed() int64 { return s.eventsTrimmed.Load() }

// boundEvents lets go of the oldest events of each instance of evs that
// rows hold past the bound, as sim/sqlite does; its counts only say when
// to look (a trim counts exactly), so an undone batch leaves them high at
// worst. s.mu is held.
func (s *Store) boundEvents(rows []eventRow, evs []sim.Event) []eventRow {
	for _, inst := range s.eventLimits.CountEvents(s.eventCounts, evs) {
		var n int64
		for _, r := range rows {
			if r.instance == inst {
				n++
			}
		}
		keep, ok := s.eventLimits.EventsKept(n)
		s.eventCounts[inst] = keep
		if !ok {
			s.eventCounts[inst] = n
			continue
		}
		drop := n - keep
		// Counted even if a batch it is in is undone, as sim/sqlite counts.
		s.eventsTrimmed.Add(drop)
		out := make([]eventRow, 0, len(rows)-int(drop))
		for _, r := range rows {
			if r.instance == inst && drop > 0 {
				drop--
				continue
			}
			out = append(out, r)
		}
		rows = out
	}
	if keep, ok := s.eventLimits.TotalKept(int64(len(rows))); ok {
		drop := int64(len(rows)) - keep
		s.eventsTrimmed.Add(drop)
		rows = slices.Clone(rows[drop:])
	}
	return rows
}

// ListEvents returns events oldest first.
func (s *Store) ListEvents(ctx context.Context, f sim.EventFilter) ([]sim.Event, error) {
	unlock, err := s.lock(ctx)
	if err != nil {
		return nil, fmt.Errorf("list events: %w", err)
	}
	defer unlock()
	from, _ := slices.BinarySearchFunc(s.events, f.AfterSeq+1, func(r eventRow, seq int64) int { return cmp.Compare(r.seq, seq) })
	var rows []eventRow
	for _, r := range s.events[from:] {
		if (f.Instance == "" || r.instance == f.Instance) && (f.Migration == "" || r.migration == f.Migration) {
			rows = append(rows, r)
		}
	}
	rows = page(rows, f.Limit, f.Tail)
	var out []sim.Event
	for _, r := range rows {
		ev := sim.Event{Seq: r.seq, At: fromNanos(r.at), Kind: sim.EventKind(r.kind), Instance: r.instance, Migration: r.migration}
		if r.data != nil {
			ev.Data = json.RawMessage(*r.data)
		}
		out = append(out, ev)
	}
	return out, nil
}

// page is the first limit of rows, or the last with tail; all of them for
// a limit of 0 or less.
func page[T any](rows []T, limit int, tail bool) []T {
	switch {
	case limit <= 0 || len(rows) <= limit:
		return rows
	case tail:
		return rows[len(rows)-limit:]
	}
	return rows[:limit]
}

// frameKey is whose frames a record is; the zero key is also the totals'
// (as in sim/sqlite's frame_state, where an instance of no job and no role
// shares the totals' row).
type frameKey struct{ job, role string }

// totalsKey is frameState's entry of totals.
var totalsKey = frameKey{}

// frameRow is a frame record.
type frameRow struct {
	seq, at                           int64
	node, jobID, role, direction, typ string
	size                              int
	data                              string
}

// frameState is what is kept of an instance's frames (or of all), and
// what was let go of.
type frameState struct {
	frames, bytes, trimmed, trimmedBytes int64
}

// frameCount is a number of frame records and the bytes of their text.
type frameCount struct {
	k            frameKey
	frames, size int64
}

// SetFrameLimits changes the bounds (before the store is used).
func (s *Store) SetFrameLimits(l sim.FrameLimits) {
	if l.PerInstance <= 0 || l.PerInstanceBytes <= 0 || l.Total <= 0 || l.TotalBytes <= 0 {
		panic(fmt.Sprintf("memstore: frame limits must be positive: %+v", l))
	}
	s.mu.Lock()
	s.frameLimits = l
	s.mu.Unlock()
}

// RecordFrames stores frames, all or none, and keeps each instance and
// the store within their bounds (SetFrameLimits), letting go of the
// oldest first and counting what went (FrameCounts).
func (s *Store) RecordFrames(ctx context.Context, frs []sim.FrameRecord) error {
	if len(frs) == 0 {
		return nil
	}
	unlock, err := s.lock(ctx)
	if err != nil {
		return fmt.Errorf("record frames: %w", err)
	}
	defer unlock()
	seq := s.frameSeq
	for _, f := range frs {
		seq++
		k := frameKey{f.JobID, f.Role}
		put(s, s.frames, k, append(roomForOne(s.frames[k]), frameRow{seq: seq, at: nanos(f.At), node: f.Node, jobID: f.JobID, role: f.Role,
			direction: f.Direction, typ: f.Type, size: f.Size, data: f.Data}))
	}
	assign(s, &s.frameSeq, seq)
	s.boundFrames(frs)
	return nil
}

// roomForOne is rows with room for one more, grown by a quarter (append
// doubles a short slice): an instance keeps a handful of frames, and at
// 10,000 jobs the room append left was megabytes of the live heap.
func roomForOne(rows []frameRow) []frameRow {
	if len(rows) < cap(rows) {
		return rows
	}
	grown := make([]frameRow, len(rows), len(rows)+len(rows)/4+2)
	copy(grown, rows)
	return grown
}

// boundFrames counts frames just stored and trims an instance past its
// bound, then the store past its total, oldest first, counting what went.
// Each instance's trim touches only its own frames, so counting and
// trimming one instance at a time ends as sim/sqlite's statements of many
// instances do.
func (s *Store) boundFrames(frs []sim.FrameRecord) {
	tallies, sum := sim.TallyFrames(frs)
	lim := s.frameLimits
	for _, c := range tallies {
		k := frameKey{c.JobID, c.Role}
		if n, size, ok := lim.InstanceOverflow(s.countFrames(k, c.Frames, c.Bytes)); ok {
			s.trimInstanceFrames(k, n, size)
		}
	}
	if n, size, ok := lim.TotalOverflow(s.countFrames(totalsKey, sum.Frames, sum.Bytes)); ok {
		s.trimOldestFrames(n, size)
	}
}

// countFrames adds frames and bytes to k's state and returns what it
// holds now.
func (s *Store) countFrames(k frameKey, frames, bytes int64) (int64, int64) {
	st := s.frameState[k]
	st.frames += frames
	st.bytes += bytes
	put(s, s.frameState, k, st)
	return st.frames, st.bytes
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

// cutFrames lets go of the first n of an instance's frames.
func (s *Store) cutFrames(k frameKey, n int) {
	if rest := s.frames[k][n:]; len(rest) > 0 {
		put(s, s.frames, k, rest)
	} else {
		del(s, s.frames, k)
	}
}

// trimInstanceFrames lets go of an instance's oldest frames until at least
// overN of them and overBytes of their text are gone.
func (s *Store) trimInstanceFrames(k frameKey, overN, overBytes int64) {
	gone := trimmedFrames{}
	var n, bytes int64
	rows := s.frames[k]
	i := 0
	for ; (n < overN || bytes < overBytes) && i < len(rows); i++ {
		size := int64(len(rows[i].data))
		n, bytes = n+1, bytes+size
		gone.add(k, size)
	}
	if i > 0 {
		s.cutFrames(k, i)
	}
	s.countTrimmed(gone)
}

// trimOldestFrames lets go of the store's oldest frames, whoever's, until
// at least overN of them and overBytes of their text are gone.
func (s *Store) trimOldestFrames(overN, overBytes int64) {
	h := &frameHeads{}
	for k, rows := range s.frames {
		h.heads = append(h.heads, frameHead{k: k, rows: rows})
	}
	heap.Init(h)
	gone := trimmedFrames{}
	cut := map[frameKey]int{}
	var n, bytes int64
	for (n < overN || bytes < overBytes) && h.Len() > 0 {
		head := &h.heads[0]
		size := int64(len(head.rows[head.i].data))
		n, bytes = n+1, bytes+size
		gone.add(head.k, size)
		cut[head.k]++
		if head.i++; head.i == len(head.rows) {
			heap.Pop(h)
		} else {
			heap.Fix(h, 0)
		}
	}
	for k, c := range cut {
		s.cutFrames(k, c)
	}
	s.countTrimmed(gone)
}

// frameHead is where a walk of the frames oldest first is in one
// instance's; frameHeads are every instance's, the oldest frame first.
type frameHead struct {
	k    frameKey
	rows []frameRow
	i    int
}

type frameHeads struct{ heads []frameHead }

func (h *frameHeads) Len() int { return len(h.heads) }
func (h *frameHeads) Less(i, j int) bool {
	return h.heads[i].rows[h.heads[i].i].seq < h.heads[j].rows[h.heads[j].i].seq
}
func (h *frameHeads) Swap(i, j int) { h.heads[i], h.heads[j] = h.heads[j], h.heads[i] }
func (h *frameHeads) Push(x any)    { h.heads = append(h.heads, x.(frameHead)) }
func (h *frameHeads) Pop() any {
	x := h.heads[len(h.heads)-1]
	h.heads = h.heads[:len(h.heads)-1]
	return x
}

// countTrimmed moves what a trim let go of from kept to trimmed, for each
// instance and in the totals.
func (s *Store) countTrimmed(gone trimmedFrames) {
	all := frameCount{k: totalsKey}
	for _, c := range gone {
		all.frames += c.frames
		all.size += c.size
		s.moveToTrimmed(*c)
	}
	s.moveToTrimmed(all)
}

func (s *Store) moveToTrimmed(c frameCount) {
	st, ok := s.frameState[c.k]
	if !ok {
		return
	}
	st.frames -= c.frames
	st.bytes -= c.size
	st.trimmed += c.frames
	st.trimmedBytes += c.size
	put(s, s.frameState, c.k, st)
}

// pruneFrames lets go of removed instances' frames older than the oldest
// migration kept (started at oldest): those before the first, by seq,
// recorded at or after it; none when there is no such frame. They are
// counted as trimmed.
func (s *Store) pruneFrames(oldest int64) {
	first := int64(-1)
	for _, rows := range s.frames {
		for _, r := range rows {
			if r.at >= oldest {
				if first < 0 || r.seq < first {
					first = r.seq
				}
				break
			}
		}
	}
	if first < 0 {
		return
	}
	gone := trimmedFrames{}
	for k, rows := range s.frames {
		if s.instances[k.role] != nil {
			continue // a live instance's: bounded per instance
		}
		i := 0
		for ; i < len(rows) && rows[i].seq < first; i++ {
			gone.add(k, int64(len(rows[i].data)))
		}
		if i > 0 {
			s.cutFrames(k, i)
		}
	}
	s.countTrimmed(gone)
}

// ListFrames returns recorded frames oldest first.
func (s *Store) ListFrames(ctx context.Context, f sim.FrameFilter) ([]sim.FrameRecord, error) {
	unlock, err := s.lock(ctx)
	if err != nil {
		return nil, fmt.Errorf("list frames: %w", err)
	}
	defer unlock()
	var rows []frameRow
	if f.JobID != "" && f.Role != "" {
		rows = s.frames[frameKey{f.JobID, f.Role}]
	} else {
		for k, kr := range s.frames {
			if (f.JobID == "" || k.job == f.JobID) && (f.Role == "" || k.role == f.Role) {
				rows = append(rows, kr...)
			}
		}
		slices.SortFunc(rows, func(a, b frameRow) int { return cmp.Compare(a.seq, b.seq) })
	}
	var out []sim.FrameRecord
	for _, r := range page(rows, f.Limit, f.Tail) {
		out = append(out, sim.FrameRecord{At: fromNanos(r.at), Node: r.node, JobID: r.jobID, Role: r.role, Direction: r.direction,
			Type: r.typ, Size: r.size, Data: r.data})
	}
	return out, nil
}

// FrameCounts says how many of an instance's frames (jobID, role) are kept
// and how many were let go of to stay within the bounds; with both empty,
// the store's totals.
func (s *Store) FrameCounts(ctx context.Context, jobID, role string) (sim.FrameCounts, error) {
	unlock, err := s.lock(ctx)
	if err != nil {
		return sim.FrameCounts{}, fmt.Errorf("count frames: %w", err)
	}
	defer unlock()
	st := s.frameState[frameKey{jobID, role}]
	return sim.FrameCounts{Kept: st.frames, Dropped: st.trimmed, DroppedBytes: st.trimmedBytes}, nil
}
