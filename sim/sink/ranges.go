package sink

import (
	"cmp"
	"math"
	"slices"
	"sort"

	"github.com/normsim/normsim/sim"
)

// maxRanges bounds the ranges the sink keeps of one job's numbers, all
// its instances together: a job that counts without a hole costs one per
// instance, so only a job numbering with holes, or one migrated about a
// thousand times, reaches it.
const maxRanges = 1024

// history is what a job's instances sent over the job's whole life, as
// merged ranges of sequence numbers (sim.SentRanges, kept).
type history struct {
	inst    map[string]*instRanges
	earlier []sim.SeqRange
	// n is how many ranges inst and earlier hold together.
	n         int
	coalesced int64
	heard     int64 // instances heard from, to order them
}

type instRanges struct {
	first  int64 // the order in which the instance was first heard
	ranges []sim.SeqRange
}

func newHistory() *history { return &history{inst: map[string]*instRanges{}} }

// add records that the instance sent seq, then keeps within max ranges.
func (h *history) add(instance string, seq int64, max int) {
	ir := h.inst[instance]
	if ir == nil {
		h.heard++
		ir = &instRanges{first: h.heard}
		h.inst[instance] = ir
	}
	before := len(ir.ranges)
	ir.ranges = insertSeq(ir.ranges, seq)
	h.n += len(ir.ranges) - before
	if h.n > max {
		h.bound(max)
	}
}

// insertSeq adds seq to rs (sorted, each range apart from the next by a
// hole of at least one number), keeping it so.
func insertSeq(rs []sim.SeqRange, seq int64) []sim.SeqRange {
	// The common case: a job counting on.
	if n := len(rs); n > 0 && rs[n-1].To != math.MaxInt64 && rs[n-1].To+1 == seq {
		rs[n-1].To = seq
		return rs
	}
	// The first range that holds seq or ends just before it.
	below := seq != math.MinInt64 // seq-1 is a number
	above := seq != math.MaxInt64 // seq+1 is a number
	i := sort.Search(len(rs), func(i int) bool { return rs[i].To >= seq || below && rs[i].To == seq-1 })
	switch {
	case i < len(rs) && rs[i].From <= seq && seq <= rs[i].To:
		return rs // sent before
	case i < len(rs) && below && rs[i].To == seq-1:
		rs[i].To = seq
		if i+1 < len(rs) && above && rs[i+1].From == seq+1 {
			rs[i].To = rs[i+1].To
			rs[i].Coalesced = rs[i].Coalesced || rs[i+1].Coalesced
			rs = slices.Delete(rs, i+1, i+2)
		}
		return rs
	case i < len(rs) && above && rs[i].From == seq+1:
		rs[i].From = seq
		return rs
	}
	return slices.Insert(rs, i, sim.SeqRange{From: seq, To: seq})
}

// bound brings the history back within max ranges. First it folds the
// instances first heard longest ago into earlier, which loses no number,
// only which instance sent it: a seam needs the target's numbers apart
// from the rest, and a target is the instance first heard last. The two
// first heard last stay apart, so that a folded source heard again (it
// then counts as new) cannot push the target into earlier. Then, as a
// last resort, it fills the smallest holes, counted, down to three
// quarters of max, so that a job numbering with holes pays for that once
// in a while rather than on every packet.
func (h *history) bound(max int) {
	for h.n > max && len(h.inst) > 2 {
		var oldest string
		var first int64 = math.MaxInt64
		for name, ir := range h.inst {
			if ir.first < first {
				oldest, first = name, ir.first
			}
		}
		before := len(h.earlier) + len(h.inst[oldest].ranges)
		h.earlier = union(h.earlier, h.inst[oldest].ranges)
		delete(h.inst, oldest)
		h.n += len(h.earlier) - before
	}
	if h.n <= max {
		return
	}
	h.fill(h.n - max*3/4)
}

// union merges two range lists into one, sorted and apart.
func union(a, b []sim.SeqRange) []sim.SeqRange {
	all := append(slices.Clone(a), b...)
	slices.SortFunc(all, func(x, y sim.SeqRange) int { return cmp.Compare(x.From, y.From) })
	out := all[:0]
	for _, r := range all {
		if n := len(out); n > 0 && (r.From <= out[n-1].To || out[n-1].To != math.MaxInt64 && r.From == out[n-1].To+1) {
			out[n-1].To = max(out[n-1].To, r.To)
			out[n-1].Coalesced = out[n-1].Coalesced || r.Coalesced
			continue
		}
		out = append(out, r)
	}
	return out
}

// fill removes k ranges by filling the k smallest holes between
// neighbouring ranges of one list (an instance's, or earlier); each merged
// range is marked Coalesced and each fill counted.
func (h *history) fill(k int) {
	type hole struct {
		list *[]sim.SeqRange
		i    int // the hole after (*list)[i]
		size uint64
	}
	lists := []*[]sim.SeqRange{&h.earlier}
	for _, ir := range h.inst {
		lists = append(lists, &ir.ranges)
	}
	var holes []hole
	for _, l := range lists {
		for i := 0; i+1 < len(*l); i++ {
			holes = append(holes, hole{l, i, uint64((*l)[i+1].From) - uint64((*l)[i].To)})
		}
	}
	slices.SortFunc(holes, func(a, b hole) int { return cmp.Compare(a.size, b.size) })
	if k > len(holes) {
		k = len(holes)
	}
	fillAfter := map[*[]sim.SeqRange]map[int]bool{}
	for _, x := range holes[:k] {
		if fillAfter[x.list] == nil {
			fillAfter[x.list] = map[int]bool{}
		}
		fillAfter[x.list][x.i] = true
	}
	for l, after := range fillAfter {
		rs := *l
		out := rs[:1]
		for i := 1; i < len(rs); i++ {
			if after[i-1] {
				out[len(out)-1].To = rs[i].To
				out[len(out)-1].Coalesced = true
				continue
			}
			out = append(out, rs[i])
		}
		*l = out
	}
	h.n -= k
	h.coalesced += int64(k)
}

// sent is the history as sim reads it, copied.
func (h *history) sent() sim.SentRanges {
	s := sim.SentRanges{ByInstance: make(map[string][]sim.SeqRange, len(h.inst)), Earlier: slices.Clone(h.earlier), Coalesced: h.coalesced}
	for name, ir := range h.inst {
		s.ByInstance[name] = slices.Clone(ir.ranges)
	}
	return s
}
