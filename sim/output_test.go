package sim

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"
)

func pk(inst string, seq int64, ms int) Packet {
	return Packet{At: at(ms), Instance: inst, Seq: seq}
}

func at(ms int) time.Time { return time.Unix(0, 0).Add(time.Duration(ms) * time.Millisecond) }

// every returns packets of inst with seqs from..to, one every step ms from
// the first at start.
func every(inst string, from, to int64, start, step int) []Packet {
	var out []Packet
	for s := from; s <= to; s++ {
		out = append(out, pk(inst, s, start+int(s-from)*step))
	}
	return out
}

// sentOf is what the sink's ranges would hold had it heard only pkts.
func sentOf(pkts []Packet) SentRanges {
	seqs := map[string][]int64{}
	for _, p := range pkts {
		seqs[p.Instance] = append(seqs[p.Instance], p.Seq)
	}
	s := SentRanges{ByInstance: map[string][]SeqRange{}}
	for inst, xs := range seqs {
		slices.Sort(xs)
		var rs []SeqRange
		for _, x := range xs {
			switch n := len(rs); {
			case n > 0 && x <= rs[n-1].To:
			case n > 0 && x == rs[n-1].To+1:
				rs[n-1].To = x
			default:
				rs = append(rs, SeqRange{From: x, To: x})
			}
		}
		s.ByInstance[inst] = rs
	}
	return s
}

func cat(ps ...[]Packet) []Packet {
	var out []Packet
	for _, p := range ps {
		out = append(out, p...)
	}
	return out
}

func TestAnalyzeSeam(t *testing.T) {
	// A handover at 25 packets/s: the source's source-stopped-output
	// arrives at 1000 ms, cutover-apply goes out at 1001 ms.
	handover := SeamMoments{SourceStopped: at(1000), ApplySent: at(1001)}
	handed := func(payload string) SeamMoments {
		m := handover
		m.Position = json.RawMessage(payload)
		return m
	}
	tests := []struct {
		name    string
		pkts    []Packet
		moments SeamMoments
		verdict string
		lost    int64
		dup     int64
		fault   string
		detail  string // a substring the detail must have
	}{
		{name: "seamless", pkts: []Packet{pk("s", 1, 0), pk("s", 2, 10), pk("t", 3, 20), pk("t", 4, 30)}, verdict: VerdictSeamless},
		{name: "gap", pkts: []Packet{pk("s", 1, 0), pk("s", 2, 10), pk("t", 6, 60)}, verdict: VerdictGap, lost: 3, detail: "3 packets lost"},
		{name: "overlap", pkts: []Packet{pk("s", 1, 0), pk("t", 2, 5), pk("s", 2, 10), pk("s", 3, 20)}, verdict: VerdictOverlap, dup: 1, detail: "1 packet duplicated"},
		{name: "duplicate", pkts: []Packet{pk("s", 1, 0), pk("s", 2, 10), pk("t", 2, 20)}, verdict: VerdictDuplicate, dup: 1, detail: "the target started at 2, going back from the 2 the source stopped at; 1 of the 1 packet seen from the target repeats a number the job had already sent"},
		{name: "no target", pkts: []Packet{pk("s", 1, 0)}, verdict: VerdictNoOutput, detail: "1 packet from the source and 0 packets from the target"},
		// x is neither side: its packet, the last before the target's, is not
		// the source's last (which would make a gap).
		{name: "other instances ignored", pkts: []Packet{pk("s", 1, 0), pk("x", 0, 1), pk("t", 2, 2)}, verdict: VerdictSeamless},

		{name: "handover seamless", moments: handover, verdict: VerdictSeamless,
			pkts: cat(every("s", 0, 24, 40, 40), every("t", 25, 30, 1010, 40))},
		{name: "handover: the source's last packet in flight, stamped just after its frame", moments: handover, verdict: VerdictSeamless,
			pkts: cat(every("s", 0, 24, 45, 40)[:24], []Packet{pk("s", 24, 1005)}, every("t", 25, 30, 1010, 40))},
		// The bug this catches: the source goes on after its frame, the
		// target continues correctly from the position it was given. By
		// numbers alone the target "repeated" 3 packets.
		{name: "handover: the source keeps producing", moments: handover, verdict: VerdictOverlap, dup: 3, fault: "source",
			pkts:   cat(every("s", 0, 27, 40, 40), every("t", 25, 30, 1030, 40)),
			detail: "the source sent 3 packets after source-stopped-output"},
		{name: "handover: the target produces before cutover-apply", moments: handover, verdict: VerdictOverlap, dup: 5, fault: "target",
			pkts:   cat(every("s", 0, 24, 40, 40), every("t", 20, 30, 900, 40)),
			detail: "the target sent 3 packets before cutover-apply"},
		{name: "handover: both break their promise", moments: handover, verdict: VerdictOverlap, dup: 8, fault: "source and target",
			pkts:   cat(every("s", 0, 27, 40, 40), every("t", 20, 30, 900, 40)),
			detail: "the source sent 3 packets after source-stopped-output (the last 120.0 ms after it); the target sent 3 packets before cutover-apply"},
		{name: "handover: a target that starts behind duplicates, naming no side", moments: handover, verdict: VerdictDuplicate, dup: 5,
			pkts:   cat(every("s", 0, 24, 40, 40), every("t", 20, 30, 1010, 40)),
			detail: "the target started at 20, going back from the 24 the source stopped at; 5 of the 11 packets seen from the target repeat numbers the job had already sent"},
		// Issue 34 round 6 (F2): where the handed-over payload proves it,
		// the side that broke the position is named.
		{name: "handover: a source that hands over a position behind what it sent", moments: handed(`{"last":20}`), verdict: VerdictDuplicate, dup: 4, fault: "source",
			pkts:   cat(every("s", 0, 24, 40, 40), every("t", 21, 30, 1010, 40)),
			detail: "the source's source-stopped-output said 20, but its packets reached 24: the target started right after the position it was handed"},
		{name: "handover: a target that skips ahead of the position it was handed", moments: handed(`{"last":24}`), verdict: VerdictGap, lost: 5, fault: "target",
			pkts:   cat(every("s", 0, 24, 40, 40), every("t", 30, 35, 1010, 40)),
			detail: "the target was handed the source's last number, 24, in cutover-apply, and did not start at 25"},
		{name: "handover: a target that restarts at zero", moments: handed(`{"state":{"last":24},"note":"x"}`), verdict: VerdictDuplicate, dup: 11, fault: "target",
			pkts:   cat(every("s", 0, 24, 40, 40), every("t", 0, 10, 1010, 40)),
			detail: "the target was handed the source's last number, 24"},
		{name: "handover: a payload that fits both names no side", moments: handed(`{"last":20,"sent":24}`), verdict: VerdictDuplicate, dup: 4,
			pkts: cat(every("s", 0, 24, 40, 40), every("t", 21, 30, 1010, 40))},
		{name: "handover: a payload without the numbers names no side", moments: handed(`"opaque"`), verdict: VerdictGap, lost: 5,
			pkts: cat(every("s", 0, 24, 40, 40), every("t", 30, 35, 1010, 40))},
		// A target killed before it produced leaves no number to prove the
		// source's late packet in flight; the position the source handed
		// over does, when it names that very packet.
		{name: "handover: the source's last packet late, its number the position handed over", moments: handed(`{"last":25}`), verdict: VerdictNoOutput,
			pkts: cat(every("s", 0, 24, 40, 40), []Packet{pk("s", 25, 1035)})},
		{name: "handover: a source that produced past the position it handed over", moments: handed(`{"last":24}`), verdict: VerdictNoOutput, fault: "source",
			pkts: cat(every("s", 0, 24, 40, 40), []Packet{pk("s", 25, 1035)}), detail: "the source sent 1 packet after source-stopped-output"},
		{name: "handover: a target that starts ahead leaves a gap", moments: handover, verdict: VerdictGap, lost: 5,
			pkts: cat(every("s", 0, 24, 40, 40), every("t", 30, 35, 1010, 40)), detail: "5 packets lost: the source stopped at 24 and the target started at 30; the target's first packet came 10.0 ms after the source's last"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := AnalyzeSeam("s", "t", tt.pkts, sentOf(tt.pkts), tt.moments)
			if r.Verdict != tt.verdict || r.Lost != tt.lost || r.Duplicated != tt.dup || r.AtFault != tt.fault {
				t.Fatalf("got verdict %s lost %d dup %d at fault %q (%s), want %s lost %d dup %d at fault %q",
					r.Verdict, r.Lost, r.Duplicated, r.AtFault, r.Detail, tt.verdict, tt.lost, tt.dup, tt.fault)
			}
			if !strings.Contains(r.Detail, tt.detail) {
				t.Fatalf("detail %q does not say %q", r.Detail, tt.detail)
			}
		})
	}
}

func TestAnalyzeSeamCountsEveryLatePacket(t *testing.T) {
	// Whatever the rate and however long the source goes on, the count is
	// the number of packets it sent after its frame.
	for _, late := range []int64{1, 2, 7, 40} {
		stop := SeamMoments{SourceStopped: at(1000), ApplySent: at(1000)}
		src := every("s", 0, 24+late, 1000-24*40, 40) // seq 24 at 1000 ms exactly
		pkts := cat(src, every("t", 25, 30, 1100, 40))
		r := AnalyzeSeam("s", "t", pkts, sentOf(pkts), stop)
		if r.SourceAfterStop != late || r.AtFault != "source" {
			t.Fatalf("%d late: got %d at fault %q (%s)", late, r.SourceAfterStop, r.AtFault, r.Detail)
		}
	}
}

func TestUnreadableLeavesSeamlessUnproven(t *testing.T) {
	seamless := func() *OutputReport {
		pkts := []Packet{pk("s", 1, 0), pk("t", 2, 10)}
		return AnalyzeSeam("s", "t", pkts, sentOf(pkts), SeamMoments{})
	}
	r := seamless()
	r.AddUnreadable(&UnreadablePackets{Count: 12, FromJob: 12, Reasons: map[string]int64{"not a JSON object": 10, "with a seq that is not an integer": 2}, Example: "garbage"})
	if r.Verdict != VerdictUnknown {
		t.Fatalf("verdict %s with 12 of the job's packets unread", r.Verdict)
	}
	want := `12 packets could not be read: 10 not a JSON object, 2 with a seq that is not an integer (first: "garbage")`
	if !strings.Contains(r.Detail, want) {
		t.Fatalf("detail %q\nwant it to say %q", r.Detail, want)
	}
	// Noise from senders tied to no job is reported, but does not make
	// the job's own seam unproven.
	r = seamless()
	r.AddUnreadable(&UnreadablePackets{Count: 1, Unattributed: 1, Reasons: map[string]int64{"not a JSON object": 1}})
	if r.Verdict != VerdictSeamless || !strings.Contains(r.Detail, "1 packet could not be read: 1 not a JSON object (1 from senders not tied to any job)") {
		t.Fatalf("got %s: %s", r.Verdict, r.Detail)
	}
}

func TestPlural(t *testing.T) {
	for n, want := range map[int64]string{0: "0 packets", 1: "1 packet", 2: "2 packets"} {
		if got := Plural(n, "packet"); got != want {
			t.Errorf("Plural(%d) = %q, want %q", n, got, want)
		}
	}
}

// A target that produced nothing (it died) leaves no seam to judge, but a
// source that kept producing after source-stopped-output is still named.
func TestNoTargetOutputStillNamesALateSource(t *testing.T) {
	stop := SeamMoments{SourceStopped: at(1000), ApplySent: at(1000)}
	pkts := every("s", 0, 30, 1000-24*40, 40) // 6 packets after the frame
	r := AnalyzeSeam("s", "t", pkts, sentOf(pkts), stop)
	if r.Verdict != VerdictNoOutput || r.SourceAfterStop != 6 || r.AtFault != "source" ||
		!strings.Contains(r.Detail, "the source sent 6 packets after source-stopped-output") {
		t.Fatalf("got %+v", r)
	}
	pkts = every("s", 0, 24, 1000-24*40, 40) // stopped in time
	r = AnalyzeSeam("s", "t", pkts, sentOf(pkts), stop)
	if r.Verdict != VerdictNoOutput || r.SourceAfterStop != 0 || r.AtFault != "" {
		t.Fatalf("a source that stopped in time: got %+v", r)
	}
}

// TestAnalyzeSeamKnowsTheJobsWholeLife: the packets AnalyzeSeam gets start
// 2 s before the migration, but what the job sent before them is in the
// sink's ranges: a target that goes back is a duplicate whatever the
// distance, with its repeats counted against everything the job sent.
func TestAnalyzeSeamKnowsTheJobsWholeLife(t *testing.T) {
	handover := SeamMoments{SourceStopped: at(3000), ApplySent: at(3001)}
	// A source at 100 packets/s for 3 s (0..299); the sink's window holds
	// its last 2 s.
	ran := every("s", 0, 299, 10, 10)
	window := ran[100:]
	r := func(from, to int64) SeqRange { return SeqRange{From: from, To: to} }
	life := func(ranges map[string][]SeqRange) SentRanges { return SentRanges{ByInstance: ranges} }
	tests := []struct {
		name       string
		pkts       []Packet
		sent       SentRanges
		verdict    string
		last, firs int64
		lost, dup  int64
		maybe      int64
		detail     []string // substrings the detail must have
		notDetail  []string // and must not
	}{
		{name: "a target that restarts at 0 after a source that ran 3 s",
			pkts: cat(window, every("t", 0, 5, 3010, 10)), sent: sentOf(cat(ran, every("t", 0, 5, 3010, 10))),
			verdict: VerdictDuplicate, last: 299, firs: 0, dup: 6,
			detail:    []string{"the target started at 0, going back from the 299 the source stopped at", "6 of the 6 packets seen from the target repeat numbers the job had already sent"},
			notDetail: []string{"gap", "lost"}},
		{name: "a target that goes back below anything sent repeats nothing, but went back",
			pkts: cat(every("s", 5100, 5299, 1010, 10), every("t", 0, 5, 3010, 10)), sent: life(map[string][]SeqRange{"s": {r(5000, 5299)}, "t": {r(0, 5)}}),
			verdict: VerdictDuplicate, last: 5299, firs: 0,
			detail:    []string{"going back from the 5299 the source stopped at", "no number it sent had been sent before (6 packets seen from it), but its numbering went back"},
			notDetail: []string{"gap", "lost"}},
		{name: "a target that continues its source but repeats what an earlier instance sent",
			pkts: cat(window, every("t", 300, 305, 3010, 10)), sent: life(map[string][]SeqRange{"a": {r(0, 500)}, "s": {r(0, 299)}, "t": {r(300, 305)}}),
			verdict: VerdictDuplicate, last: 299, firs: 300, dup: 6,
			detail: []string{"the target continued at 300 after the source's last 299, but the job's earlier instances had sent up to 500", "6 of the 6 packets seen from the target repeat"}},
		{name: "a target that skips ahead of its source, but not of an earlier instance",
			pkts: cat(window, every("t", 305, 310, 3010, 10)), sent: life(map[string][]SeqRange{"a": {r(0, 500)}, "s": {r(0, 299)}, "t": {r(305, 310)}}),
			verdict: VerdictDuplicate, last: 299, firs: 305, lost: 5, dup: 6,
			detail: []string{"the target started at 305 after the source's last 299, but the job's earlier instances had sent up to 500", "it also skipped 5 numbers after the source's last"}},
		{name: "instances folded together count as earlier",
			pkts: cat(window, every("t", 300, 305, 3010, 10)), sent: SentRanges{ByInstance: map[string][]SeqRange{"s": {r(0, 299)}, "t": {r(300, 305)}}, Earlier: []SeqRange{r(303, 303)}},
			verdict: VerdictDuplicate, last: 299, firs: 300, dup: 1},
		{name: "seamless after earlier instances",
			pkts: cat(window, every("t", 300, 305, 3010, 10)), sent: life(map[string][]SeqRange{"a": {r(-100, -1)}, "s": {r(0, 299)}, "t": {r(300, 305)}}),
			verdict: VerdictSeamless, last: 299, firs: 300,
			detail: []string{"source stopped at 299, target continued at 300; the target's first packet came 10.0 ms after the source's last"}},
		{name: "the target's own numbers are not repeats",
			pkts: cat(window, every("t", 300, 305, 3010, 10)), sent: life(map[string][]SeqRange{"s": {r(0, 299)}, "t": {r(300, 400)}}),
			verdict: VerdictSeamless, last: 299, firs: 300},
		{name: "repeats in a stretch the sink merged are counted apart",
			pkts:    cat(window, every("t", 300, 305, 3010, 10)),
			sent:    SentRanges{ByInstance: map[string][]SeqRange{"a": {{From: 250, To: 302, Coalesced: true}}, "s": {r(0, 299)}, "t": {r(300, 305)}}, Coalesced: 4},
			verdict: VerdictDuplicate, last: 299, firs: 300, dup: 1, maybe: 2,
			detail: []string{"the job's earlier instances had sent up to 302", "1 of the 6 packets seen from the target repeats a number the job had already sent",
				"the sink filled 4 holes in it", "2 of the target's packets fall in them, so whether they repeat is not known"}},
		{name: "a target below the end of a merged stretch went back, its repeats unproven",
			pkts:    cat(window, every("t", 300, 305, 3010, 10)),
			sent:    SentRanges{ByInstance: map[string][]SeqRange{"a": {{From: -500, To: 400, Coalesced: true}}, "s": {r(0, 299)}, "t": {r(300, 305)}}, Coalesced: 1},
			verdict: VerdictDuplicate, last: 299, firs: 300, maybe: 6,
			detail:    []string{"had sent up to 400", "6 of the target's packets fall in them"},
			notDetail: []string{"no number it sent"}},
		{name: "merged stretches elsewhere leave a seamless seam seamless",
			pkts:    cat(window, every("t", 300, 305, 3010, 10)),
			sent:    SentRanges{ByInstance: map[string][]SeqRange{"a": {{From: -500, To: -2, Coalesced: true}}, "s": {r(0, 299)}, "t": {r(300, 305)}}, Coalesced: 4},
			verdict: VerdictSeamless, last: 299, firs: 300,
			detail: []string{"the sink filled 4 holes in it", "none of the target's numbers falls in them"}},
		{name: "a seamless target whose later numbers fall in a merged stretch is unknown",
			pkts:    cat(window, every("t", 300, 305, 3010, 10), []Packet{pk("t", -300, 3100)}),
			sent:    SentRanges{ByInstance: map[string][]SeqRange{"a": {{From: -500, To: -100, Coalesced: true}}, "s": {r(0, 299)}, "t": {r(-300, -300), r(300, 305)}}, Coalesced: 1},
			verdict: VerdictUnknown, last: 299, firs: 300, maybe: 1,
			detail: []string{"source stopped at 299, target continued at 300", "1 of the target's packets falls in them, so whether it repeats is not known"}},
		{name: "a gap says which gap is time",
			pkts: cat(window, every("t", 305, 310, 3060, 10)), sent: sentOf(cat(ran, every("t", 305, 310, 3060, 10))),
			verdict: VerdictGap, last: 299, firs: 305, lost: 5,
			detail: []string{"5 packets lost: the source stopped at 299 and the target started at 305", "the target's first packet came 60.0 ms after the source's last"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := AnalyzeSeam("s", "t", tt.pkts, tt.sent, handover)
			if got.Verdict != tt.verdict || got.Lost != tt.lost || got.Duplicated != tt.dup || got.MaybeDuplicated != tt.maybe ||
				got.LastSource == nil || *got.LastSource != tt.last || got.FirstTarget == nil || *got.FirstTarget != tt.firs {
				t.Fatalf("got %s last %v first %v lost %d dup %d maybe %d (%s)\nwant %s last %d first %d lost %d dup %d maybe %d",
					got.Verdict, deref(got.LastSource), deref(got.FirstTarget), got.Lost, got.Duplicated, got.MaybeDuplicated, got.Detail,
					tt.verdict, tt.last, tt.firs, tt.lost, tt.dup, tt.maybe)
			}
			for _, s := range tt.detail {
				if !strings.Contains(got.Detail, s) {
					t.Errorf("detail %q does not say %q", got.Detail, s)
				}
			}
			for _, s := range tt.notDetail {
				if strings.Contains(got.Detail, s) {
					t.Errorf("detail %q says %q", got.Detail, s)
				}
			}
			if tt.sent.Coalesced != got.CoalescedRanges {
				t.Errorf("the report counts %d coalesced ranges, the sink %d", got.CoalescedRanges, tt.sent.Coalesced)
			}
		})
	}
}

func deref(p *int64) any {
	if p == nil {
		return nil
	}
	return *p
}

// TestAnalyzeSeamVerdictsAreTrue: over every first target number around
// the source's last, the verdict is one of the defined ones and its
// numbers bear it out: no gap without a number lost, nothing seamless but
// exactly the next number.
func TestAnalyzeSeamVerdictsAreTrue(t *testing.T) {
	for _, moments := range []SeamMoments{{}, {SourceStopped: at(3000), ApplySent: at(3001)}} {
		for ft := int64(-3); ft <= 310; ft++ {
			pkts := cat(every("s", 100, 299, 1010, 10), every("t", ft, ft+5, 3010, 10))
			got := AnalyzeSeam("s", "t", pkts, sentOf(cat(every("s", 0, 299, 10, 10), every("t", ft, ft+5, 3010, 10))), moments)
			var ok bool
			switch got.Verdict {
			case VerdictSeamless:
				ok = ft == 300 && got.Lost == 0 && got.Duplicated == 0
			case VerdictGap:
				ok = ft > 300 && got.Lost == ft-300 && got.Duplicated == 0
			case VerdictDuplicate:
				var dup int64
				for x := ft; x <= ft+5; x++ {
					if 0 <= x && x <= 299 {
						dup++
					}
				}
				ok = ft < 300 && got.Duplicated == dup && got.Lost == 0
			}
			if !ok {
				t.Fatalf("target from %d (moments %v): %s lost %d dup %d: %s", ft, !moments.SourceStopped.IsZero(), got.Verdict, got.Lost, got.Duplicated, got.Detail)
			}
		}
	}
}

// TestAnalyzeSeamChecksTheMomentsInEveryBranch: a target that produced
// before cutover-apply is blamed even when the source sent nothing in the
// window (one that had stalled), and a late source even when the target
// sent nothing.
func TestAnalyzeSeamChecksTheMomentsInEveryBranch(t *testing.T) {
	handover := SeamMoments{SourceStopped: at(1000), ApplySent: at(1001)}
	early := every("t", 20, 30, 900, 40) // 3 packets before cutover-apply
	got := AnalyzeSeam("s", "t", early, sentOf(early), handover)
	if got.Verdict != VerdictNoOutput || got.TargetBeforeApply != 3 || got.AtFault != "target" ||
		!strings.Contains(got.Detail, "the sink saw 0 packets from the source and 11 packets from the target; the target sent 3 packets before cutover-apply") {
		t.Fatalf("a target early beside a silent source: %s target before apply %d at fault %q: %s", got.Verdict, got.TargetBeforeApply, got.AtFault, got.Detail)
	}
	// The same target beside a source that sent its last 5 s before: what
	// the source sent is known, so the target went back, and is blamed.
	sent := SentRanges{ByInstance: map[string][]SeqRange{"s": {{From: 0, To: 24}}, "t": {{From: 20, To: 30}}}}
	got = AnalyzeSeam("s", "t", early, sent, handover)
	if got.Verdict != VerdictDuplicate || got.Duplicated != 5 || got.TargetBeforeApply != 3 || got.AtFault != "target" || got.LastSource != nil ||
		!strings.Contains(got.Detail, "the sink saw 0 packets from the source and 11 packets from the target; the target sent 3 packets before cutover-apply; "+
			"the target started at 20, and the job had already sent numbers up to 24; 5 of the 11 packets seen from the target repeat numbers the job had already sent") {
		t.Fatalf("a target early and repeating a stalled source: %s dup %d at fault %q: %s", got.Verdict, got.Duplicated, got.AtFault, got.Detail)
	}
	// In time, and after numbers the job had not sent: nothing to compare.
	late := every("t", 25, 30, 1010, 40)
	got = AnalyzeSeam("s", "t", late, sent, handover)
	if got.Verdict != VerdictNoOutput || got.Duplicated != 0 || got.AtFault != "" {
		t.Fatalf("a target after a stalled source: %s dup %d at fault %q: %s", got.Verdict, got.Duplicated, got.AtFault, got.Detail)
	}
}

// TestAnalyzeSeamNamesRepeatsTheSourceNeverHeardOf: after a handover that
// failed past the point of no return (its target applied, sent 21..23
// and was killed), the source is moved again from its own last number,
// 20. The new target repeats 21..23: a duplicate to a receiver, but the
// record names whose numbers they were, and the judgement does not blame
// the job. A target that went back into the source's own numbers is
// blamed as before.
func TestAnalyzeSeamNamesRepeatsTheSourceNeverHeardOf(t *testing.T) {
	handover := SeamMoments{SourceStopped: at(1000), ApplySent: at(1001)}
	sent := SentRanges{ByInstance: map[string][]SeqRange{"s": {{From: 0, To: 20}}, "dead": {{From: 21, To: 23}}, "t": {{From: 21, To: 30}}}}
	tgt := every("t", 21, 30, 1010, 40)
	got := AnalyzeSeam("s", "t", tgt, sent, handover)
	if got.Verdict != VerdictDuplicate || got.Duplicated != 3 || !slices.Equal(got.RepeatedFrom, []string{"dead"}) || got.AtFault != "" ||
		!strings.Contains(got.Detail, "sent after that by dead, which the source never heard of") {
		t.Fatalf("repeats of a dead target's numbers: %s dup %d from %v at fault %q: %s", got.Verdict, got.Duplicated, got.RepeatedFrom, got.AtFault, got.Detail)
	}
	m := &Migration{Strategy: Handover, State: MigrationCompleted, Output: got}
	if j := Judge(m); j.Grade != GradeTolerated || j.AtFault != "" {
		t.Fatalf("judged %s (at fault %q): %s", j.Grade, j.AtFault, j.Why)
	}

	// The same with the source's packets in the window.
	pkts := append(every("s", 10, 20, 600, 40), tgt...)
	got = AnalyzeSeam("s", "t", pkts, sent, handover)
	if got.Verdict != VerdictDuplicate || !slices.Equal(got.RepeatedFrom, []string{"dead"}) || Judge(&Migration{Strategy: Handover, State: MigrationCompleted, Output: got}).Grade != GradeTolerated {
		t.Fatalf("with the source in the window: %s from %v: %s", got.Verdict, got.RepeatedFrom, got.Detail)
	}

	// A target that starts inside the source's own numbers lost its place.
	back := every("t", 15, 30, 1010, 40)
	got = AnalyzeSeam("s", "t", back, sent, handover)
	if got.Verdict != VerdictDuplicate || got.RepeatedFrom != nil {
		t.Fatalf("a target going back into the source's numbers: %s from %v: %s", got.Verdict, got.RepeatedFrom, got.Detail)
	}
	if j := Judge(&Migration{Strategy: Handover, State: MigrationCompleted, Output: got}); j.Grade != GradeFail {
		t.Fatalf("a target going back into the source's numbers judged %s: %s", j.Grade, j.Why)
	}
	// Nor is a target that skipped past the source's last excused.
	skip := every("t", 22, 30, 1010, 40)
	if got = AnalyzeSeam("s", "t", skip, sent, handover); got.RepeatedFrom != nil {
		t.Fatalf("a target that skipped 21: from %v: %s", got.RepeatedFrom, got.Detail)
	}
}

// TestAnalyzeSeamForgivesALoadedMachinesLatePacket: a source packet that
// reached the sink 22 ms after source-stopped-output, numbered within the
// position handed over (below the target's first), was sent before the
// frame: the seam is seamless. Numbered like the target's, or arriving
// past InFlightByNumber, it still proves the source produced on.
func TestAnalyzeSeamForgivesALoadedMachinesLatePacket(t *testing.T) {
	handover := SeamMoments{SourceStopped: at(1000), ApplySent: at(1002)}
	pkts := append(every("s", 0, 10, 890, 10), pk("s", 11, 1022))
	pkts = append(pkts, every("t", 12, 20, 1030, 10)...)
	if got := AnalyzeSeam("s", "t", pkts, sentOf(pkts), handover); got.Verdict != VerdictSeamless || got.SourceAfterStop != 0 || *got.LastSource != 11 {
		t.Fatalf("a last packet 22 ms late: %s after stop %d: %s", got.Verdict, got.SourceAfterStop, got.Detail)
	}
	dup := append(every("s", 0, 10, 890, 10), pk("s", 11, 1022), pk("s", 12, 1032))
	dup = append(dup, every("t", 12, 20, 1030, 10)...)
	if got := AnalyzeSeam("s", "t", dup, sentOf(dup), handover); got.SourceAfterStop != 2 || got.AtFault != "source" {
		t.Fatalf("a source sending the target's numbers: after stop %d at fault %q: %s", got.SourceAfterStop, got.AtFault, got.Detail)
	}
	slow := append(every("s", 0, 10, 890, 10), pk("s", 11, 1300))
	slow = append(slow, every("t", 12, 20, 1030, 10)...)
	if got := AnalyzeSeam("s", "t", slow, sentOf(slow), handover); got.SourceAfterStop != 1 {
		t.Fatalf("a packet 300 ms late: after stop %d: %s", got.SourceAfterStop, got.Detail)
	}
}

// TestAnEarlyTargetsPositionIsWhereItContinued: a target that produced
// before cutover-apply is blamed for that, but the position it took is
// what it sent once told to apply: continuing exactly after the source's
// last, it lost nothing (a black-box run saw "lost: 985" for such a
// target, counted from its early numbers).
func TestAnEarlyTargetsPositionIsWhereItContinued(t *testing.T) {
	handover := SeamMoments{SourceStopped: at(1000), ApplySent: at(1001)}
	pkts := cat(every("s", 1, 100, 0, 10), every("t", 1085, 1087, 950, 10), every("t", 101, 110, 1010, 10))
	got := AnalyzeSeam("s", "t", pkts, sentOf(pkts), handover)
	if got.TargetBeforeApply != 3 || got.AtFault != "target" || got.Lost != 0 || got.FirstTarget == nil || *got.FirstTarget != 101 {
		t.Fatalf("%s before apply %d at fault %q lost %d first %v: %s", got.Verdict, got.TargetBeforeApply, got.AtFault, got.Lost, got.FirstTarget, got.Detail)
	}
}

// TestAHandoverBeforeTheFirstPacketIsSeamless: a source moved before it
// sent anything hands over that it sent nothing ({"last":-1}); a target
// that starts at 0 continues it exactly. The seam was "no-output" and the
// judgement fail, at nobody's fault (a counter migrated 18 ms after it
// connected, in the test suite under load).
func TestAHandoverBeforeTheFirstPacketIsSeamless(t *testing.T) {
	moments := SeamMoments{SourceStopped: at(1000), ApplySent: at(1001), Position: json.RawMessage(`{"last":-1}`)}
	pkts := every("t", 0, 11, 1002, 20)
	if r := AnalyzeSeam("s", "t", pkts, sentOf(pkts), moments); r.Verdict != VerdictSeamless || !strings.Contains(r.Detail, "the source had sent nothing") {
		t.Errorf("verdict %s: %s", r.Verdict, r.Detail)
	}
	// Not when the position does not say so, nor without one.
	for _, pos := range []string{`{"last":7}`, ``} {
		m := moments
		m.Position = nil
		if pos != "" {
			m.Position = json.RawMessage(pos)
		}
		if r := AnalyzeSeam("s", "t", pkts, sentOf(pkts), m); r.Verdict != VerdictNoOutput {
			t.Errorf("position %q: verdict %s: %s", pos, r.Verdict, r.Detail)
		}
	}
}
