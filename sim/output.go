package sim

import (
	"fmt"
	"sort"
	"strings"
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
	// VerdictUnknown: the readable packets alone would say seamless, but
	// some of the job's packets could not be read, so normsim cannot
	// vouch for the seam.
	VerdictUnknown = "unknown"
)

// SeamMoments are the moments of a handover at which the protocol fixes
// who may produce: the source nothing after its source-stopped-output
// arrived, the target nothing before cutover-apply was sent to it. Both
// are zero for overlap and stopThenStart, which promise no such moment.
type SeamMoments struct {
	SourceStopped time.Time
	ApplySent     time.Time
}

// InFlight is how long after source-stopped-output a source packet may
// still arrive without proving anything: the packet and the frame travel
// different sockets to different goroutines, so one the source sent just
// before the frame can be stamped just after it. A source that kept
// producing sends more than that: once one of its packets arrives later
// than InFlight, every packet after the frame is counted against it.
const InFlight = 20 * time.Millisecond

// AnalyzeSeam judges output continuity across a migration from the packets
// the sink saw for the job: which sequence numbers each side sent, and
// when. With the moments of a handover, each packet is first judged
// against them (a source producing after source-stopped-output, a target
// before cutover-apply) and the side at fault is named; otherwise the
// target's first number is compared with the source's last: exactly one
// after is seamless, a jump is a gap, a repeat a duplicate, and (without
// moments) source output after the target's first packet an overlap.
func AnalyzeSeam(source, target string, pkts []Packet, at SeamMoments) *OutputReport {
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
	sort.SliceStable(src, func(i, j int) bool { return src[i].At.Before(src[j].At) })
	sort.SliceStable(tgt, func(i, j int) bool { return tgt[i].At.Before(tgt[j].At) })
	if len(src) == 0 || len(tgt) == 0 {
		r.Verdict = VerdictNoOutput
		r.Detail = fmt.Sprintf("the sink saw %s from the source and %s from the target", Plural(int64(len(src)), "packet"), Plural(int64(len(tgt)), "packet"))
		// A source that broke its promise is named even when there is
		// no target output to compare with (a target that died).
		if late := lateSource(src, at); len(late) > 0 {
			r.SourceAfterStop, r.AtFault = int64(len(late)), "source"
			r.Detail += fmt.Sprintf("; the source sent %s after source-stopped-output (the last %.1f ms after it)",
				Plural(r.SourceAfterStop, "packet"), float64(late[len(late)-1].At.Sub(at.SourceStopped))/float64(time.Millisecond))
		}
		return r
	}
	ms := func(d time.Duration) *float64 { v := float64(d) / float64(time.Millisecond); return &v }

	// Judged against the handover's moments first.
	before := src // the source's packets up to its source-stopped-output
	var faults []string
	if late := lateSource(src, at); len(late) > 0 {
		r.SourceAfterStop = int64(len(late))
		before = src[:len(src)-len(late)]
		faults = append(faults, fmt.Sprintf("the source sent %s after source-stopped-output (the last %.1f ms after it)",
			Plural(r.SourceAfterStop, "packet"), float64(late[len(late)-1].At.Sub(at.SourceStopped))/float64(time.Millisecond)))
	}
	if !at.ApplySent.IsZero() {
		for _, p := range tgt {
			if p.At.Before(at.ApplySent) {
				r.TargetBeforeApply++
			}
		}
		if r.TargetBeforeApply > 0 {
			faults = append(faults, fmt.Sprintf("the target sent %s before cutover-apply", Plural(r.TargetBeforeApply, "packet")))
		}
	}
	if len(before) == 0 {
		before = src[:1] // it produced nothing in time; its first packet is all there is to compare
	}
	lastSrc, firstTgt := before[len(before)-1], tgt[0]
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
	overlap := src[len(src)-1].At.Sub(firstTgt.At)
	if overlap > 0 {
		r.OverlapMs = ms(overlap)
	} else {
		r.GapMs = ms(-overlap)
	}

	switch {
	case len(faults) > 0:
		r.Verdict = VerdictOverlap
		switch {
		case r.SourceAfterStop > 0 && r.TargetBeforeApply > 0:
			r.AtFault = "source and target"
		case r.SourceAfterStop > 0:
			r.AtFault = "source"
		default:
			r.AtFault = "target"
		}
		r.Detail = strings.Join(faults, "; ") + fmt.Sprintf(" (%s duplicated)", Plural(r.Duplicated, "packet"))
	case at.SourceStopped.IsZero() && overlap > 0:
		r.Verdict = VerdictOverlap
		r.Detail = fmt.Sprintf("source and target both produced for %.1f ms; %s duplicated", *r.OverlapMs, Plural(r.Duplicated, "packet"))
	case r.Duplicated > 0:
		r.Verdict = VerdictDuplicate
		r.Detail = fmt.Sprintf("the target started at %d, repeating %s the source had sent (the source stopped at %d)", ft, Plural(r.Duplicated, "packet"), ls)
	case r.Lost > 0:
		r.Verdict = VerdictGap
		r.Detail = fmt.Sprintf("%s lost between %d and %d over %.1f ms", Plural(r.Lost, "packet"), ls, ft, *r.GapMs)
	case ft == ls+1:
		r.Verdict = VerdictSeamless
		r.Detail = fmt.Sprintf("source stopped at %d, target continued at %d", ls, ft)
	default:
		r.Verdict = VerdictGap
		r.Detail = fmt.Sprintf("target started at %d after source stopped at %d", ft, ls)
	}
	return r
}

// lateSource are the source's packets (in time order) after its
// source-stopped-output, once one of them came later than InFlight; none
// without a handover's moment.
func lateSource(src []Packet, at SeamMoments) []Packet {
	if at.SourceStopped.IsZero() {
		return nil
	}
	cut := sort.Search(len(src), func(i int) bool { return src[i].At.After(at.SourceStopped) })
	if late := src[cut:]; len(late) > 0 && late[len(late)-1].At.Sub(at.SourceStopped) > InFlight {
		return late
	}
	return nil
}

// AddUnreadable puts the packets the sink could not read into the report:
// they are counted in the detail, and packets of this job that could not
// be read leave a seamless verdict unproven (VerdictUnknown).
func (r *OutputReport) AddUnreadable(u *UnreadablePackets) {
	if u == nil || u.Count == 0 {
		return
	}
	r.Unreadable = u
	if r.Verdict == VerdictSeamless && u.FromJob > 0 {
		r.Verdict = VerdictUnknown
		r.Detail = "the readable packets are seamless (" + r.Detail + "), but not all of the job's packets could be read"
	}
	r.Detail += "; " + u.String()
}

// String says how many packets could not be read and why:
// "12 packets could not be read: 10 not JSON, 2 with a seq that is not an
// integer (first: …)".
func (u *UnreadablePackets) String() string {
	reasons := make([]string, 0, len(u.Reasons))
	for why := range u.Reasons {
		reasons = append(reasons, why)
	}
	sort.Slice(reasons, func(i, j int) bool {
		if u.Reasons[reasons[i]] != u.Reasons[reasons[j]] {
			return u.Reasons[reasons[i]] > u.Reasons[reasons[j]]
		}
		return reasons[i] < reasons[j]
	})
	for i, why := range reasons {
		reasons[i] = fmt.Sprintf("%d %s", u.Reasons[why], why)
	}
	s := fmt.Sprintf("%s could not be read: %s", Plural(u.Count, "packet"), strings.Join(reasons, ", "))
	if u.Unattributed > 0 {
		s += fmt.Sprintf(" (%d from senders not tied to any job)", u.Unattributed)
	}
	if u.Example != "" {
		s += fmt.Sprintf(" (first: %q)", u.Example)
	}
	return s
}

// Plural is n and the noun, in the singular for one: "1 packet", "3 packets".
func Plural(n int64, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// OutputSink is where jobs send their output packets, as the manager reads
// it to judge a handover's seam (sim/sink implements it).
type OutputSink interface {
	// Packets is the job's packets since then.
	Packets(jobID string, since time.Time) []Packet
	// Sent is every sequence number the job's instances sent over the
	// job's whole life, as ranges.
	Sent(jobID string) SentRanges
	// Seen reports whether the job ever sent a packet.
	Seen(jobID string) bool
	// Watch is poked whenever a packet of the job arrives, until stop.
	Watch(jobID string) (poked <-chan struct{}, stop func())
	// Unreadable counts the datagrams since then it could not read.
	Unreadable(jobID string, since time.Time) *UnreadablePackets
	// Forget drops what the sink holds of a job.
	Forget(jobID string)
}

// SeqRange is the sequence numbers From to To, both included.
type SeqRange struct {
	From, To int64
	// Coalesced: the sink merged ranges across a hole to stay within its
	// bound, so From and To were sent but not necessarily every number
	// between them.
	Coalesced bool
}

// SentRanges is what a job's instances sent to the output sink over the
// job's whole life: its sequence numbers as merged ranges, in order, so a
// job that counts without a hole costs one range per instance. It is what
// a seam is judged against when a target goes back to numbers the job
// sent long before the window of packets the sink keeps.
type SentRanges struct {
	// ByInstance are each instance's ranges.
	ByInstance map[string][]SeqRange
	// Earlier are the ranges of instances the sink no longer tells
	// apart, folded together (exactly, no number added) to stay within
	// its bound; never the instance first heard from last, which is a
	// migration's target.
	Earlier []SeqRange
	// Coalesced counts the holes the sink filled, merging two ranges,
	// once folding was not enough: numbers in such a hole may never have
	// been sent (the ranges are marked Coalesced).
	Coalesced int64
}

// OutputSummary is what one instance sent to the output sink since a
// moment: whether it is producing, and where its sequence stands.
type OutputSummary struct {
	Instance string     `json:"instance"`
	Since    time.Time  `json:"since"`
	Packets  int        `json:"packets"`
	FirstSeq *int64     `json:"firstSeq,omitempty"`
	LastSeq  *int64     `json:"lastSeq,omitempty"`
	LastAt   *time.Time `json:"lastAt,omitempty"`
}

// SummarizeOutput is instance's share of a job's packets.
func SummarizeOutput(instance string, since time.Time, pkts []Packet) OutputSummary {
	s := OutputSummary{Instance: instance, Since: since}
	for _, p := range pkts {
		if p.Instance != instance {
			continue
		}
		s.Packets++
		seq, at := p.Seq, p.At
		if s.FirstSeq == nil {
			s.FirstSeq = &seq
		}
		s.LastSeq, s.LastAt = &seq, &at
	}
	return s
}
