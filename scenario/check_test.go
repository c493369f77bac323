package scenario

import (
	"strings"
	"testing"

	"github.com/normsim/normsim/sim"
)

func f64(v float64) *float64 { return &v }

func TestJudge(t *testing.T) {
	completed := func(o *sim.OutputReport) *sim.Migration {
		return &sim.Migration{ID: "mig-1", State: sim.MigrationCompleted, Phase: "stop-source", Output: o,
			Durations: sim.Durations{TotalMs: f64(180)}}
	}
	seamless := &sim.OutputReport{Verdict: sim.VerdictSeamless, GapMs: f64(9.5), Detail: "source stopped at 9, target continued at 10"}
	gap := &sim.OutputReport{Verdict: sim.VerdictGap, GapMs: f64(1340), Lost: 134, Detail: "134 packets lost"}
	overlap := &sim.OutputReport{Verdict: sim.VerdictOverlap, OverlapMs: f64(250), Duplicated: 25, Detail: "both produced for 250 ms"}
	handover := func(o *sim.OutputReport) *sim.Migration {
		m := completed(o)
		m.Strategy = sim.Handover
		return m
	}
	no, yes := false, true
	midGOP := &sim.OutputReport{Verdict: sim.VerdictGlitch, AtFault: "target", Detail: "media: target joined mid-GOP",
		Media: &sim.MediaReport{Verdict: sim.VerdictGlitch, KeyframeAtJoin: &no, Detail: "target joined mid-GOP: picture missing 760 ms",
			Defects: []sim.MediaDefect{{Check: sim.MediaCheckKeyframe, Stream: "PID 256", AtFault: "target"}}}}
	onKey := &sim.OutputReport{Verdict: sim.VerdictSeamless, Media: &sim.MediaReport{Verdict: sim.VerdictSeamless, KeyframeAtJoin: &yes, Detail: "continued"}}
	aborted := &sim.Migration{ID: "mig-2", State: sim.MigrationAborted, Phase: "target-ready", Reason: "the target aborted: not ready"}
	refusal := &APIError{Status: 422, Code: sim.EUnprocessable, Message: `strategy "overlap" is not allowed`}

	for _, tc := range []struct {
		name   string
		expect Expect
		out    Outcome
		want   []string // the failure messages, in order; none means it held
	}{
		{"completed", Expect{State: sim.MigrationCompleted}, Outcome{Migration: completed(seamless)}, nil},
		{"completed and seamless", Expect{State: sim.MigrationCompleted, Seam: sim.VerdictSeamless, MaxGapMs: f64(50), MaxTotalMs: f64(200)},
			Outcome{Migration: completed(seamless)}, nil},
		{"aborted where expected", Expect{State: sim.MigrationAborted, Phase: "target-ready", Reason: "not ready"}, Outcome{Migration: aborted}, nil},
		{"overlap long enough", Expect{State: sim.MigrationCompleted, Seam: sim.VerdictOverlap, MinOverlapMs: f64(1)}, Outcome{Migration: completed(overlap)}, nil},
		{"refused as expected", Expect{Error: 422, Reason: "not allowed"}, Outcome{Refusal: refusal}, nil},
		{"joined on a keyframe", Expect{State: sim.MigrationCompleted, Seam: sim.VerdictSeamless, KeyframeAtJoin: &yes}, Outcome{Migration: completed(onKey)}, nil},
		{"a glitch proved", Expect{State: sim.MigrationCompleted, Seam: sim.VerdictGlitch, KeyframeAtJoin: &no, AtFault: "target", Judgement: "fail"}, Outcome{Migration: handover(midGOP)}, nil},
		{"joined mid-GOP", Expect{State: sim.MigrationCompleted, KeyframeAtJoin: &yes}, Outcome{Migration: completed(midGOP)},
			[]string{"expected keyframeAtJoin true, got false (media glitch: target joined mid-GOP: picture missing 760 ms)"}},
		{"no media seam", Expect{State: sim.MigrationCompleted, KeyframeAtJoin: &yes}, Outcome{Migration: completed(seamless)},
			[]string{"expected keyframeAtJoin true, but the migration has no media seam"}},
		{"the media defect proved", Expect{State: sim.MigrationCompleted, MediaDefects: []string{sim.MediaCheckKeyframe}}, Outcome{Migration: handover(midGOP)}, nil},
		{"a glitch of another kind", Expect{State: sim.MigrationCompleted, MediaDefects: []string{sim.MediaCheckKeyframe, sim.MediaCheckCC}}, Outcome{Migration: handover(midGOP)},
			[]string{"expected the media defect Continuity_count_error, but the seam's defects are: keyframe at join (media glitch: target joined mid-GOP: picture missing 760 ms)"}},
		{"no media defect without a media seam", Expect{State: sim.MigrationCompleted, MediaDefects: []string{sim.MediaCheckSSRC}}, Outcome{Migration: completed(seamless)},
			[]string{"expected the media defect SSRC change, but the migration has no media seam"}},

		{"aborted instead of completed", Expect{State: sim.MigrationCompleted}, Outcome{Migration: aborted},
			[]string{"expected state completed, got aborted in phase target-ready: the target aborted: not ready"}},
		{"seamless instead of gap", Expect{State: sim.MigrationCompleted, Seam: sim.VerdictGap}, Outcome{Migration: completed(seamless)},
			[]string{"expected seam gap, got seamless (source stopped at 9, target continued at 10)"}},
		{"gap too long", Expect{State: sim.MigrationCompleted, Seam: sim.VerdictGap, MaxGapMs: f64(1000)}, Outcome{Migration: completed(gap)},
			[]string{"expected a gap of at most 1000 ms, got 1340.0 ms (gap: 134 packets lost)"}},
		{"no overlap", Expect{State: sim.MigrationCompleted, MinOverlapMs: f64(1)}, Outcome{Migration: completed(seamless)},
			[]string{"expected an overlap of at least 1 ms, got 0.0 ms (seamless: source stopped at 9, target continued at 10)"}},
		{"too slow", Expect{State: sim.MigrationCompleted, MaxTotalMs: f64(100)}, Outcome{Migration: completed(seamless)},
			[]string{"expected the migration to take at most 100 ms, got 180.0 ms (completed)"}},
		{"every failure is reported", Expect{State: sim.MigrationAborted, Phase: "cutover-ready", Reason: "timeout"}, Outcome{Migration: aborted},
			[]string{"expected phase cutover-ready, got target-ready (state aborted: the target aborted: not ready)",
				`expected a reason containing "timeout", got "the target aborted: not ready" (state aborted)`}},
		{"no seam verdict", Expect{State: sim.MigrationCompleted, Seam: sim.VerdictSeamless}, Outcome{Migration: completed(nil)},
			[]string{"expected seam seamless, got no seam verdict (the migration ended completed; the seam is judged when"}},
		{"refused request instead of a migration", Expect{State: sim.MigrationCompleted}, Outcome{Refusal: refusal},
			[]string{`expected state completed, got the request refused: 422 UNPROCESSABLE: strategy "overlap" is not allowed`}},
		{"a migration instead of a refusal", Expect{Error: 422}, Outcome{Migration: aborted},
			[]string{"expected the request to be refused with 422, but migration mig-2 started and ended aborted in phase target-ready: the target aborted: not ready"}},
		{"refused with another status", Expect{Error: 409, Reason: "busy"}, Outcome{Refusal: refusal},
			[]string{`expected the request to be refused with 409, got 422 UNPROCESSABLE: strategy "overlap" is not allowed`,
				`expected a refusal containing "busy", got "strategy \"overlap\" is not allowed"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cs := Judge(&tc.expect, tc.out)
			var got []string
			for _, c := range cs {
				if !c.OK {
					got = append(got, c.Message)
				} else if c.Message != "" {
					t.Errorf("a check that held carries a message: %+v", c)
				}
			}
			if Failed(cs) != (len(tc.want) > 0) {
				t.Fatalf("Failed = %v for %+v", Failed(cs), cs)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("failures %q, want %q", got, tc.want)
			}
			for i := range got {
				if !strings.HasPrefix(got[i], tc.want[i]) {
					t.Errorf("failure %d:\n got %s\nwant %s", i, got[i], tc.want[i])
				}
			}
			if msg := FailureMessage(cs); len(tc.want) > 0 && !strings.HasPrefix(msg, tc.want[0]) {
				t.Errorf("failure message %q", msg)
			}
		})
	}
}

func ids(v ...string) *[]string {
	if v == nil {
		v = []string{}
	}
	return &v
}

// TestJudgeTargetAppliedAndTheJudgement: applied and failed are exact
// sets of what target-applied reported, atFault and judgement are
// sim.Judge's, and a step silent on the seam fails a judgement of fail.
func TestJudgeTargetAppliedAndTheJudgement(t *testing.T) {
	seq := func(v int64) *int64 { return &v }
	handover := func(o *sim.OutputReport, failed ...sim.FailedApply) *sim.Migration {
		return &sim.Migration{ID: "mig-1", Strategy: sim.Handover, State: sim.MigrationCompleted, Phase: "stop-source", Output: o,
			Result: sim.MigrationResult{Applied: []string{"counter"}, Failed: failed, SkewMs: f64(4)}}
	}
	seamless := &sim.OutputReport{Verdict: sim.VerdictSeamless, LastSource: seq(9), FirstTarget: seq(10), Detail: "source stopped at 9, target continued at 10"}
	duplicate := &sim.OutputReport{Verdict: sim.VerdictDuplicate, Duplicated: 5, Detail: "the target started at 5, repeating 5 packets"}
	late := &sim.OutputReport{Verdict: sim.VerdictOverlap, AtFault: "source", SourceAfterStop: 3, Detail: "the source sent 3 packets after source-stopped-output"}
	overlay := sim.FailedApply{ID: "overlay", Reason: "font missing"}
	aborted := &sim.Migration{ID: "mig-2", Strategy: sim.Handover, State: sim.MigrationAborted, Phase: "target-ready", Reason: "timed out"}

	for _, tc := range []struct {
		name   string
		expect Expect
		m      *sim.Migration
		want   []string
	}{
		{"a participant not applied, as expected", Expect{State: sim.MigrationCompleted, Applied: ids("counter"), Failed: ids("overlay"), AtFault: "none", Judgement: "tolerated"},
			handover(seamless, overlay), nil},
		{"none failed, as expected", Expect{State: sim.MigrationCompleted, Failed: ids(), Judgement: "pass"}, handover(seamless), nil},
		{"order aside", Expect{State: sim.MigrationCompleted, Applied: ids("b", "a")}, &sim.Migration{Strategy: sim.Handover, State: sim.MigrationCompleted,
			Result: sim.MigrationResult{Applied: []string{"a", "b"}}}, nil},
		{"failed when none was expected", Expect{State: sim.MigrationCompleted, Failed: ids()}, handover(seamless, overlay),
			[]string{"expected the target to report failed [], got [overlay] (target-applied: applied counter; failed overlay (font missing); skewMs 4)"}},
		{"applied missing one", Expect{State: sim.MigrationCompleted, Applied: ids("counter", "overlay")}, handover(seamless, overlay),
			[]string{"expected the target to report applied [counter, overlay], got [counter] (target-applied: applied counter; failed overlay (font missing); skewMs 4)"}},
		{"no target-applied", Expect{State: sim.MigrationCompleted, Applied: ids("counter")}, aborted,
			[]string{"expected state completed, got aborted", "expected the target to report applied [counter], but it sent no target-applied (the migration ended aborted in phase target-ready: timed out)"}},
		{"another side at fault", Expect{State: sim.MigrationCompleted, AtFault: "target"}, handover(late),
			[]string{"expected at fault: target, got source (judgement fail (at fault: source): the source sent 3 packets after source-stopped-output)"}},
		{"another grade", Expect{State: sim.MigrationCompleted, Judgement: "pass"}, handover(seamless, overlay),
			[]string{"expected judgement pass, got tolerated (at fault: none): the target could not apply 1 participant: overlay (font missing)"}},
		// The rule for a step silent on the seam.
		{"silent on the seam, a broken promise fails", Expect{State: sim.MigrationCompleted}, handover(duplicate),
			[]string{"the judgement is fail (at fault: none): numbers repeated at the seam: the target started at 5, repeating 5 packets; a step that means to prove a broken promise says so"}},
		{"the seam expected", Expect{State: sim.MigrationCompleted, Seam: sim.VerdictDuplicate}, handover(duplicate), nil},
		{"the judgement expected", Expect{State: sim.MigrationCompleted, Judgement: "fail"}, handover(duplicate), nil},
		{"silent on the seam, tolerated passes", Expect{State: sim.MigrationCompleted}, handover(seamless, overlay), nil},
		// issue 29 item 3: a limit in time says nothing of lost or repeated
		// numbers, so it does not silence the rule.
		{"a time limit alone, a broken promise fails", Expect{State: sim.MigrationCompleted, MaxGapMs: new(500.0)}, handover(duplicate),
			[]string{"the judgement is fail (at fault: none): numbers repeated at the seam"}},
		{"a keyframe expected at the join, a broken promise fails", Expect{State: sim.MigrationCompleted, KeyframeAtJoin: new(true)}, handover(duplicate),
			[]string{"expected keyframeAtJoin true, but the migration has no media seam", "the judgement is fail (at fault: none): numbers repeated at the seam"}},
		{"the side at fault expected", Expect{State: sim.MigrationCompleted, AtFault: "none"}, handover(duplicate), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cs := Judge(&tc.expect, Outcome{Migration: tc.m})
			var got []string
			for _, c := range cs {
				if !c.OK {
					got = append(got, c.Message)
				}
			}
			if len(got) != len(tc.want) {
				t.Fatalf("failures %q, want %q", got, tc.want)
			}
			for i := range got {
				if !strings.HasPrefix(got[i], tc.want[i]) {
					t.Errorf("failure %d:\n got %s\nwant %s", i, got[i], tc.want[i])
				}
			}
		})
	}
	// The implicit check is in the report, marked, also when it holds.
	cs := Judge(&Expect{State: sim.MigrationCompleted}, Outcome{Migration: handover(seamless)})
	if last := cs[len(cs)-1]; !last.Implicit || last.Expect != "judgement" || last.Got != "pass" || !last.OK {
		t.Errorf("implicit check %+v", last)
	}
}
