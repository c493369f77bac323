package sim

import (
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
		{name: "duplicate", pkts: []Packet{pk("s", 1, 0), pk("s", 2, 10), pk("t", 2, 20)}, verdict: VerdictDuplicate, dup: 1, detail: "repeating 1 packet"},
		{name: "no target", pkts: []Packet{pk("s", 1, 0)}, verdict: VerdictNoOutput, detail: "1 packet from the source and 0 packets from the target"},
		{name: "other instances ignored", pkts: []Packet{pk("x", 9, 0), pk("s", 1, 1), pk("t", 2, 2)}, verdict: VerdictSeamless},

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
			detail: "the target started at 20, repeating 5 packets the source had sent (the source stopped at 24)"},
		{name: "handover: a target that starts ahead leaves a gap", moments: handover, verdict: VerdictGap, lost: 5,
			pkts: cat(every("s", 0, 24, 40, 40), every("t", 30, 35, 1010, 40)), detail: "5 packets lost between 24 and 30"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := AnalyzeSeam("s", "t", tt.pkts, tt.moments)
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
		r := AnalyzeSeam("s", "t", cat(src, every("t", 25, 30, 1100, 40)), stop)
		if r.SourceAfterStop != late || r.AtFault != "source" {
			t.Fatalf("%d late: got %d at fault %q (%s)", late, r.SourceAfterStop, r.AtFault, r.Detail)
		}
	}
}

func TestUnreadableLeavesSeamlessUnproven(t *testing.T) {
	seamless := func() *OutputReport {
		return AnalyzeSeam("s", "t", []Packet{pk("s", 1, 0), pk("t", 2, 10)}, SeamMoments{})
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
	r := AnalyzeSeam("s", "t", every("s", 0, 30, 1000-24*40, 40), stop) // 6 packets after the frame
	if r.Verdict != VerdictNoOutput || r.SourceAfterStop != 6 || r.AtFault != "source" ||
		!strings.Contains(r.Detail, "the source sent 6 packets after source-stopped-output") {
		t.Fatalf("got %+v", r)
	}
	r = AnalyzeSeam("s", "t", every("s", 0, 24, 1000-24*40, 40), stop) // stopped in time
	if r.Verdict != VerdictNoOutput || r.SourceAfterStop != 0 || r.AtFault != "" {
		t.Fatalf("a source that stopped in time: got %+v", r)
	}
}
