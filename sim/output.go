package sim

import (
	"fmt"
	"sort"
	"time"
)

// Packet is one output packet a job sent to normsim's output sink.
type Packet struct {
	At       time.Time `json:"at"`
	JobID    string    `json:"job"`
	Instance string    `json:"instance"`
	Seq      int64     `json:"seq"`
}

// Output verdicts.
const (
	VerdictSeamless  = "seamless"
	VerdictGap       = "gap"
	VerdictOverlap   = "overlap"
	VerdictDuplicate = "duplicate"
	VerdictNoOutput  = "no-output"
)

// AnalyzeSeam judges output continuity across a migration from the packets
// the sink saw for the job: which sequence numbers each side sent, and when.
// A seamless seam is the target's first number exactly one after the
// source's last, with no number sent twice and no source output after the
// target's first packet.
func AnalyzeSeam(source, target string, pkts []Packet) *OutputReport {
	var src, tgt []Packet
	for _, p := range pkts {
		switch p.Instance {
		case source:
			src = append(src, p)
		case target:
			tgt = append(tgt, p)
		}
	}
	r := &OutputReport{}
	if len(src) == 0 || len(tgt) == 0 {
		r.Verdict = VerdictNoOutput
		r.Detail = fmt.Sprintf("the sink saw %d packets from the source and %d from the target", len(src), len(tgt))
		return r
	}
	sort.SliceStable(src, func(i, j int) bool { return src[i].At.Before(src[j].At) })
	sort.SliceStable(tgt, func(i, j int) bool { return tgt[i].At.Before(tgt[j].At) })
	lastSrc, firstTgt := src[len(src)-1], tgt[0]
	ls, ft := lastSrc.Seq, firstTgt.Seq
	r.LastSource, r.FirstTarget = &ls, &ft

	seen := make(map[int64]bool, len(src))
	for _, p := range src {
		seen[p.Seq] = true
	}
	for _, p := range tgt {
		if seen[p.Seq] {
			r.Duplicated++
		}
	}
	if ft > ls+1 {
		r.Lost = ft - ls - 1
	}
	ms := func(d time.Duration) *float64 { v := float64(d) / float64(time.Millisecond); return &v }
	overlap := lastSrc.At.Sub(firstTgt.At)
	switch {
	case overlap > 0:
		r.OverlapMs = ms(overlap)
	default:
		r.GapMs = ms(-overlap)
	}
	switch {
	case overlap > 0:
		r.Verdict = VerdictOverlap
		r.Detail = fmt.Sprintf("source and target both produced for %.1f ms; %d packets duplicated", *r.OverlapMs, r.Duplicated)
	case r.Duplicated > 0:
		r.Verdict = VerdictDuplicate
		r.Detail = fmt.Sprintf("target repeated %d packets the source had sent (source stopped at %d, target started at %d)", r.Duplicated, ls, ft)
	case r.Lost > 0:
		r.Verdict = VerdictGap
		r.Detail = fmt.Sprintf("%d packets lost between %d and %d over %.1f ms", r.Lost, ls, ft, *r.GapMs)
	case ft == ls+1:
		r.Verdict = VerdictSeamless
		r.Detail = fmt.Sprintf("source stopped at %d, target continued at %d", ls, ft)
	default:
		r.Verdict = VerdictGap
		r.Detail = fmt.Sprintf("target started at %d after source stopped at %d", ft, ls)
	}
	return r
}
