package sim

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
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
	// VerdictGlitch (media): presentation time went on, but a receiver
	// sees a defect at the seam (MediaReport.Defects).
	VerdictGlitch = "glitch"
)

// SeamMoments are the moments of a handover at which the protocol fixes
// who may produce: the source nothing after its source-stopped-output
// arrived, the target nothing before cutover-apply was sent to it. Both
// are zero for overlap and stopThenStart, which promise no such moment.
type SeamMoments struct {
	SourceStopped time.Time
	ApplySent     time.Time
	// JudgedAt is when the receiver's window was read for the seam:
	// media that stopped arriving well before it stopped for good. Zero
	// when not known.
	JudgedAt time.Time
	// Position is the payload of the source's source-stopped-output,
	// which the target was handed as cutover-apply; nil when there was
	// none, or when a fault may have changed what the target got.
	Position json.RawMessage
}

// InFlight is how long after source-stopped-output a source packet may
// still arrive without proving anything: the packet and the frame travel
// different sockets to different goroutines, so one the source sent just
// before the frame can be stamped just after it. A source that kept
// producing sends more than that: once one of its packets arrives later
// than InFlight, every packet after the frame is counted against it.
const InFlight = 20 * time.Millisecond

// AnalyzeSeam judges output continuity across a migration from the packets
// the sink saw for the job around it (which sequence numbers each side
// sent, and when) and from what the job sent over its whole life (sent).
//
// With the moments of a handover, each packet is first judged against
// them, whatever else the packets show: a source producing after
// source-stopped-output, a target before cutover-apply, and the side at
// fault is named. Then the target's numbers are compared with what the
// job had already sent: a target whose first number is at or below any
// number the job's other instances sent, however long ago, went back and
// is a duplicate; then with the source's last: exactly one after is
// seamless, a jump a gap. Without moments, source output after the
// target's first packet is an overlap.
func AnalyzeSeam(source, target string, pkts []Packet, sent SentRanges, at SeamMoments) *OutputReport {
	var src, tgt []Packet
	for _, p := range pkts {
		switch p.Instance {
		case source:
			src = append(src, p)
		case target:
			tgt = append(tgt, p)
		}
	}
	sort.SliceStable(src, func(i, j int) bool { return src[i].At.Before(src[j].At) })
	sort.SliceStable(tgt, func(i, j int) bool { return tgt[i].At.Before(tgt[j].At) })
	r := &OutputReport{CoalescedRanges: sent.Coalesced}
	if len(tgt) > 0 {
		first := tgt[0].At
		r.SwitchAt = &first
	}

	// The handover's promises about moments, in every branch below.
	var faults []string
	late := inFlightByNumber(lateSource(src, at), tgt, at)
	if len(late) > 0 {
		r.SourceAfterStop = int64(len(late))
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
	switch {
	case r.SourceAfterStop > 0 && r.TargetBeforeApply > 0:
		r.AtFault = "source and target"
	case r.SourceAfterStop > 0:
		r.AtFault = "source"
	case r.TargetBeforeApply > 0:
		r.AtFault = "target"
	}

	// The target's numbers against everything the job sent before it.
	earlier := earlierNumbers(sent, target, src)
	for _, p := range tgt {
		switch earlier.lookup(p.Seq) {
		case sentCertainly:
			r.Duplicated++
		case sentMaybe:
			r.MaybeDuplicated++
		}
	}

	if r.Duplicated > 0 && len(tgt) > 0 {
		r.RepeatedFrom = repeatedFromOthers(sent, source, target, src, tgt)
	}

	if len(src) == 0 || len(tgt) == 0 {
		// Nothing to compare the target's first packet with but what the
		// job sent before: a target that went back to that is still a
		// duplicate (the source may have stalled before the window).
		r.Verdict = VerdictNoOutput
		parts := []string{fmt.Sprintf("the sink saw %s from the source and %s from the target", Plural(int64(len(src)), "packet"), Plural(int64(len(tgt)), "packet"))}
		parts = append(parts, faults...)
		if len(tgt) > 0 {
			ft := tgt[0].Seq
			r.FirstTarget = &ft
			if earlier.any && ft <= earlier.top || r.Duplicated > 0 {
				r.Verdict = VerdictDuplicate
				parts = append(parts, fmt.Sprintf("the target started at %d, and the job had already sent numbers up to %d", ft, earlier.top))
			} else if len(src) == 0 && !earlier.any && len(faults) == 0 && at.Position != nil &&
				slices.Contains(payloadIntegers(at.Position), ft-1) && ft != math.MinInt64 {
				// Moved before its first packet: the source handed over
				// that it had sent nothing, and the target began right
				// after that position. Nothing is lost or repeated.
				r.Verdict = VerdictSeamless
				r.Detail = joinDetail([]string{fmt.Sprintf("the source had sent nothing when it stopped its output (its position was %d), and the target started at %d, right after it", ft-1, ft)}, r.coalescedNote())
				return r
			}
		}
		if r.Duplicated > 0 {
			parts = append(parts, repeats(r.Duplicated, int64(len(tgt))))
		}
		if len(r.RepeatedFrom) > 0 {
			parts = append(parts, r.repeatedFromText())
		}
		r.Detail = joinDetail(parts, r.coalescedNote())
		return r
	}

	before := src[:len(src)-len(late)] // the source's packets up to its source-stopped-output
	if len(before) == 0 {
		before = src[:1] // it produced nothing in time; its first packet is all there is to compare
	}
	// Where the target continued is what it sent once told to apply: a
	// target that also produced before cutover-apply is blamed for that
	// above, and its early numbers say nothing of the position it took.
	ls, ft := before[len(before)-1].Seq, tgt[0].Seq
	if !at.ApplySent.IsZero() {
		if i := slices.IndexFunc(tgt, func(p Packet) bool { return !p.At.Before(at.ApplySent) }); i > 0 {
			ft = tgt[i].Seq
		}
	}
	r.LastSource, r.FirstTarget = &ls, &ft
	if ft > ls {
		// As unsigned, so that numbers far apart do not overflow.
		r.Lost = int64(min(uint64(ft)-uint64(ls)-1, math.MaxInt64))
	}
	wentBack := earlier.any && ft <= earlier.top
	ms := func(d time.Duration) *float64 { v := float64(d) / float64(time.Millisecond); return &v }
	overlap := src[len(src)-1].At.Sub(tgt[0].At)
	if overlap > 0 {
		r.OverlapMs = ms(overlap)
	} else {
		r.GapMs = ms(-overlap)
	}

	switch {
	case len(faults) > 0:
		r.Verdict = VerdictOverlap
		r.Detail = joinDetail([]string{strings.Join(append(faults, Plural(r.Duplicated, "packet")+" duplicated"), "; ")}, r.coalescedNote())
	case at.SourceStopped.IsZero() && overlap > 0:
		r.Verdict = VerdictOverlap
		r.Detail = joinDetail([]string{fmt.Sprintf("source and target both produced for %.1f ms; %s duplicated", *r.OverlapMs, Plural(r.Duplicated, "packet"))}, r.coalescedNote())
	case wentBack || r.Duplicated > 0:
		// No time here: what is wrong is the numbers.
		r.Verdict = VerdictDuplicate
		var parts []string
		switch {
		case ft <= ls:
			parts = append(parts, fmt.Sprintf("the target started at %d, going back from the %d the source stopped at", ft, ls))
		case wentBack:
			how := "started"
			if ft == ls+1 {
				how = "continued"
			}
			parts = append(parts, fmt.Sprintf("the target %s at %d after the source's last %d, but the job's earlier instances had sent up to %d", how, ft, ls, earlier.top))
		default:
			parts = append(parts, fmt.Sprintf("the target started at %d after the source's last %d, then went back", ft, ls))
		}
		switch {
		case r.Duplicated > 0:
			parts = append(parts, repeats(r.Duplicated, int64(len(tgt))))
		case r.MaybeDuplicated == 0:
			parts = append(parts, fmt.Sprintf("no number it sent had been sent before (%s seen from it), but its numbering went back", Plural(int64(len(tgt)), "packet")))
		}
		if r.Lost > 0 {
			parts = append(parts, fmt.Sprintf("it also skipped %s after the source's last", Plural(r.Lost, "number")))
		}
		if len(r.RepeatedFrom) > 0 {
			parts = append(parts, r.repeatedFromText())
		}
		r.Detail = joinDetail(parts, r.coalescedNote())
		blamePosition(r, at.Position, ls, ft)
	case r.Lost > 0:
		r.Verdict = VerdictGap
		r.Detail = joinDetail([]string{fmt.Sprintf("%s lost: the source stopped at %d and the target started at %d", Plural(r.Lost, "packet"), ls, ft), r.timing()}, r.coalescedNote())
		blamePosition(r, at.Position, ls, ft)
	case r.MaybeDuplicated > 0:
		// Seamless but for numbers the sink's record cannot vouch for.
		r.Verdict = VerdictUnknown
		r.Detail = joinDetail([]string{fmt.Sprintf("source stopped at %d, target continued at %d", ls, ft), r.timing()}, r.coalescedNote())
	default:
		// Not back (ft > every earlier number, the source's last among
		// them) and nothing lost (ft <= ls+1): exactly the next number.
		r.Verdict = VerdictSeamless
		r.Detail = joinDetail([]string{fmt.Sprintf("source stopped at %d, target continued at %d", ls, ft), r.timing()}, r.coalescedNote())
	}
	return r
}

// blamePosition names the side that broke the position, when the
// handed-over payload proves it. The payload is the job's own, but a job
// whose output is numbered hands over a number: if the payload holds the
// source's true last number and the target did not start right after it,
// the target ignored what it was handed; if it holds instead a number the
// target started right after, the source handed over a wrong one. A
// payload that fits both, or neither, names no side.
func blamePosition(r *OutputReport, position json.RawMessage, ls, ft int64) {
	if r.AtFault != "" || position == nil || ft == ls+1 {
		return
	}
	nums := payloadIntegers(position)
	told := slices.Contains(nums, ls)
	followed := slices.ContainsFunc(nums, func(n int64) bool { return n != math.MaxInt64 && n+1 == ft })
	switch {
	case told && !followed:
		r.AtFault = "target"
		r.Detail += fmt.Sprintf("; the target was handed the source's last number, %d, in cutover-apply, and did not start at %d", ls, ls+1)
	case followed && !told:
		r.AtFault = "source"
		r.Detail += fmt.Sprintf("; the source's source-stopped-output said %d, but its packets reached %d: the target started right after the position it was handed", ft-1, ls)
	}
}

// payloadIntegers are the whole numbers anywhere in a JSON payload.
func payloadIntegers(payload json.RawMessage) []int64 {
	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.UseNumber()
	var nums []int64
	for {
		tok, err := dec.Token()
		if err != nil {
			return nums
		}
		if n, ok := tok.(json.Number); ok {
			if v, err := strconv.ParseInt(string(n), 10, 64); err == nil {
				nums = append(nums, v)
			}
		}
	}
}

// repeatedFromOthers names the instances, neither source nor target,
// that sent the numbers the target repeats, when the target started
// exactly after the source's own last number and every repeated number
// came after it: the source cannot have known of them, so the handover
// kept its place and what repeats is an earlier failure's legacy. nil
// when any repeat is of the source's own numbers or the target did not
// continue from the source.
func repeatedFromOthers(sent SentRanges, source, target string, src, tgt []Packet) []string {
	own := slices.Clone(sent.ByInstance[source])
	for _, p := range src {
		own = append(own, SeqRange{From: p.Seq, To: p.Seq})
	}
	if len(own) == 0 {
		return nil
	}
	own = mergeRanges(own)
	top := own[len(own)-1].To
	if tgt[0].Seq != top+1 {
		return nil
	}
	var from []string
	folded := false
	for _, p := range tgt {
		if inRanges(own, p.Seq) {
			return nil
		}
		for inst, rs := range sent.ByInstance {
			if inst != source && inst != target && inRanges(mergeRanges(slices.Clone(rs)), p.Seq) && !slices.Contains(from, inst) {
				from = append(from, inst)
			}
		}
		folded = folded || inRanges(mergeRanges(slices.Clone(sent.Earlier)), p.Seq)
	}
	slices.Sort(from)
	if folded {
		from = append(from, "earlier instances")
	}
	return from
}

// repeatedFromText says whose numbers a duplicate repeated, when it was
// not the source's.
func (r *OutputReport) repeatedFromText() string {
	return fmt.Sprintf("the target continued exactly after the source's own last number; the numbers it repeats were sent after that by %s, which the source never heard of (the target of an earlier migration that failed past the point of no return), not lost by this handover", strings.Join(r.RepeatedFrom, ", "))
}

// timing says which way the time between the sides went, apart from the
// numbers: "the target's first packet came 21.0 ms after the source's
// last".
func (r *OutputReport) timing() string {
	if r.OverlapMs != nil {
		return fmt.Sprintf("the source's last packet came %.1f ms after the target's first", *r.OverlapMs)
	}
	return fmt.Sprintf("the target's first packet came %.1f ms after the source's last", *r.GapMs)
}

// coalescedNote says, when the sink merged holes in its record of the
// job's numbers, how many and what that leaves unknown; "" when none.
func (r *OutputReport) coalescedNote() string {
	if r.CoalescedRanges == 0 {
		return ""
	}
	s := fmt.Sprintf("to keep its record of the job's numbers bounded, the sink filled %s in it", Plural(r.CoalescedRanges, "hole"))
	switch r.MaybeDuplicated {
	case 0:
		return s + ", and none of the target's numbers falls in them"
	case 1:
		return s + ", and 1 of the target's packets falls in them, so whether it repeats is not known"
	}
	return s + fmt.Sprintf(", and %d of the target's packets fall in them, so whether they repeat is not known", r.MaybeDuplicated)
}

// repeats is "5 of the 11 packets seen from the target repeat numbers the
// job had already sent".
func repeats(n, of int64) string {
	if n == 1 {
		return fmt.Sprintf("1 of the %s seen from the target repeats a number the job had already sent", Plural(of, "packet"))
	}
	return fmt.Sprintf("%d of the %s seen from the target repeat numbers the job had already sent", n, Plural(of, "packet"))
}

func joinDetail(parts []string, note string) string {
	if note != "" {
		parts = append(parts, note)
	}
	return strings.Join(parts, "; ")
}

// How surely the job sent a number before (numberSet.lookup).
const (
	sentNot = iota
	sentMaybe
	sentCertainly
)

// numberSet is the numbers the job sent before a target, for lookups:
// exact holds the ranges the sink kept exactly and the ends of the ones
// it merged, merged the insides of those; top is the highest number sent.
type numberSet struct {
	exact, merged []SeqRange
	top           int64
	any           bool
}

// earlierNumbers is every number the job's instances but target sent: the
// sink's ranges, and the source's packets in the window (also there when
// the sink keeps no ranges).
func earlierNumbers(sent SentRanges, target string, src []Packet) numberSet {
	var ns numberSet
	add := func(r SeqRange) {
		if !ns.any || r.To > ns.top {
			ns.top, ns.any = r.To, true
		}
		if r.Coalesced {
			ns.merged = append(ns.merged, r)
			ns.exact = append(ns.exact, SeqRange{From: r.From, To: r.From}, SeqRange{From: r.To, To: r.To})
			return
		}
		ns.exact = append(ns.exact, r)
	}
	for inst, rs := range sent.ByInstance {
		if inst == target {
			continue
		}
		for _, r := range rs {
			add(r)
		}
	}
	for _, r := range sent.Earlier {
		add(r)
	}
	for _, p := range src {
		add(SeqRange{From: p.Seq, To: p.Seq})
	}
	ns.exact, ns.merged = mergeRanges(ns.exact), mergeRanges(ns.merged)
	return ns
}

// lookup says whether the job sent seq before: certainly, maybe (inside a
// range the sink merged across a hole), or not.
func (ns numberSet) lookup(seq int64) int {
	switch {
	case inRanges(ns.exact, seq):
		return sentCertainly
	case inRanges(ns.merged, seq):
		return sentMaybe
	}
	return sentNot
}

// mergeRanges sorts rs and merges the ones that overlap.
func mergeRanges(rs []SeqRange) []SeqRange {
	slices.SortFunc(rs, func(a, b SeqRange) int { return cmp.Compare(a.From, b.From) })
	out := rs[:0]
	for _, r := range rs {
		if n := len(out); n > 0 && r.From <= out[n-1].To {
			out[n-1].To = max(out[n-1].To, r.To)
			continue
		}
		out = append(out, SeqRange{From: r.From, To: r.To})
	}
	return out
}

// inRanges reports whether seq is in one of rs (sorted, apart).
func inRanges(rs []SeqRange, seq int64) bool {
	i := sort.Search(len(rs), func(i int) bool { return rs[i].To >= seq })
	return i < len(rs) && rs[i].From <= seq
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

// InFlightByNumber is how long after source-stopped-output a source packet
// may still arrive when its number proves it was sent before the frame:
// below the target's first, so within the position the source handed over.
// A loaded machine can hold such a packet back past InFlight; a source
// that went on producing sends numbers the target sends too, or goes on
// for longer than this.
const InFlightByNumber = 100 * time.Millisecond

// inFlightByNumber is late, or none when the last came within
// InFlightByNumber and every packet of it numbers below the target's
// first or, with no target packet to compare (a target killed before it
// produced), at most the position the source handed over: the payload
// holds the number of the last late packet itself, so the source says it
// sent that one before its stop.
func inFlightByNumber(late, tgt []Packet, at SeamMoments) []Packet {
	if len(late) == 0 || late[len(late)-1].At.Sub(at.SourceStopped) > InFlightByNumber {
		return late
	}
	limit := int64(math.MinInt64) // the least number a late packet may not have
	switch {
	case len(tgt) > 0:
		limit = tgt[0].Seq
	case at.Position != nil:
		top := slices.MaxFunc(late, func(a, b Packet) int { return cmp.Compare(a.Seq, b.Seq) }).Seq
		if slices.Contains(payloadIntegers(at.Position), top) && top < math.MaxInt64 {
			limit = top + 1
		}
	}
	for _, p := range late {
		if p.Seq >= limit {
			return late
		}
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

// WithArticle puts "a" or "an" before word, as it is said ("an object",
// "a number", "an aborted").
func WithArticle(word string) string {
	if word != "" && strings.ContainsRune("aeiou", rune(word[0])) {
		return "an " + word
	}
	return "a " + word
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
	// JobMediaDatagrams counts the MPEG-TS or RTP datagrams the job's media
	// address (NORMSIM_MEDIA_URL) received since, from any of its
	// instances: a receiver tells senders apart only by their address, so
	// media is counted per job, not per instance.
	JobMediaDatagrams int `json:"jobMediaDatagrams"`
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
