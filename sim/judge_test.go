package sim

import (
	"strings"
	"testing"
)

func TestJudge(t *testing.T) {
	i := func(v int64) *int64 { return &v }
	handover := func(state MigrationState, o *OutputReport) *Migration {
		return &Migration{Strategy: Handover, State: state, Output: o, Result: MigrationResult{Applied: []string{}, Failed: []FailedApply{}}}
	}
	for _, tt := range []struct {
		name    string
		m       *Migration
		grade   Grade
		atFault string
		why     string
	}{
		{"a seamless handover passes", handover(MigrationCompleted, &OutputReport{Verdict: VerdictSeamless, Detail: "source stopped at 41, target continued at 42"}),
			GradePass, "", "seamless"},
		// Attack round 11, C8: a source that ignored SIGTERM once the
		// handover completed was killed after the stop grace, and the
		// handover passed; a rolled-back target doing the same is
		// tolerated (conform.md: any job exits on SIGTERM).
		{"a source killed after ignoring SIGTERM is tolerated", func() *Migration {
			m := handover(MigrationCompleted, &OutputReport{Verdict: VerdictSeamless, Detail: "source stopped at 41, target continued at 42"})
			m.SourceKilled = "counter still running after the 10s stop grace"
			return m
		}(), GradeTolerated, "source", "did not exit on SIGTERM (counter still running after the 10s stop grace)"},
		// issue 29 item 3: numbers lost at a handover seam fail, as migrate --wait always said.
		{"numbers lost fail", handover(MigrationCompleted, &OutputReport{Verdict: VerdictGap, LastSource: i(41), FirstTarget: i(44), Lost: 2, Detail: "2 packets lost"}),
			GradeFail, "", "numbers lost"},
		{"a repeated position fails", handover(MigrationCompleted, &OutputReport{Verdict: VerdictDuplicate, Duplicated: 5, Detail: "repeating 5"}),
			GradeFail, "", "numbers repeated"},
		// issue 29 item 2: past the point of no return the seam is judged too.
		{"a failed handover whose source kept producing fails", handover(MigrationFailed, &OutputReport{Verdict: VerdictOverlap, SourceAfterStop: 6, AtFault: "source", Detail: "the source sent 6 packets after source-stopped-output"}),
			GradeFail, "source", "after source-stopped-output"},
		{"a failed handover that repeated numbers fails", handover(MigrationFailed, &OutputReport{Verdict: VerdictDuplicate, Duplicated: 3, Detail: "repeating 3"}),
			GradeFail, "", "numbers repeated"},
		{"a failed handover whose target died before producing is not a seam failure", handover(MigrationFailed, &OutputReport{Verdict: VerdictNoOutput, Detail: "the sink saw 40 packets from the source and 0 packets from the target"}),
			GradePass, "", "the migration failed"},
		{"a completed handover whose target sent nothing fails", handover(MigrationCompleted, &OutputReport{Verdict: VerdictNoOutput, Detail: "the sink saw 40 packets from the source and 0 packets from the target"}),
			GradeFail, "", "0 packets from the target"},
		{"a target producing before cutover-apply is blamed", handover(MigrationCompleted, &OutputReport{Verdict: VerdictOverlap, TargetBeforeApply: 4, AtFault: "target", Detail: "the target sent 4 packets before cutover-apply"}),
			GradeFail, "target", "before cutover-apply"},
		// A video job's seam is said in frames (issue 30).
		{"frames missing at a media seam fail, said as frames", handover(MigrationCompleted, &OutputReport{Verdict: VerdictGap, AtFault: "target", Detail: "media: 3 frames (120.0 ms) missing",
			Media: &MediaReport{Verdict: VerdictGap, FramesMissing: 3}}),
			GradeFail, "target", "frames missing at the seam: media: 3 frames"},
		{"frames shown again at a media seam fail, said as frames", handover(MigrationCompleted, &OutputReport{Verdict: VerdictOverlap, AtFault: "target", Detail: "media: target started at PTS 0",
			Media: &MediaReport{Verdict: VerdictOverlap, FramesRepeated: 1}}),
			GradeFail, "target", "frames presented again at the seam"},
		// Attack round 11, C5: less than a frame off is no frame missing
		// or shown again.
		{"a media seam less than a frame late fails, not said as frames missing", handover(MigrationCompleted, &OutputReport{Verdict: VerdictGap, AtFault: "target", Detail: "media: 20.0 ms late (less than a frame)",
			Media: &MediaReport{Verdict: VerdictGap}}),
			GradeFail, "target", "the pictures go on late at the seam: media: 20.0 ms late"},
		{"a media seam less than a frame early fails, not said as frames shown again", handover(MigrationCompleted, &OutputReport{Verdict: VerdictOverlap, AtFault: "target", Detail: "media: 20.0 ms early (less than a frame)",
			Media: &MediaReport{Verdict: VerdictOverlap}}),
			GradeFail, "target", "the pictures go on early at the seam"},
		{"an unreadable seam is tolerated", handover(MigrationCompleted, &OutputReport{Verdict: VerdictUnknown, Detail: "not all read"}),
			GradeTolerated, "", "cannot be vouched for"},
		{"a job without output passes, saying so", handover(MigrationCompleted, nil), GradePass, "", "received nothing from the job"},
		// issue 34, round four, F6: killed while it ran, nothing of the
		// job's output is left to judge; it was said to pass.
		{"a migration normsim was killed during is not judged", func() *Migration {
			m := handover(MigrationFailed, nil)
			m.Reason = ReasonInterrupted
			return m
		}(), GradeTolerated, "", "not judged: normsim stopped while the migration ran"},
		// issue 29 item 9: failed participants are reported, and tolerated.
		{"participants the target could not apply are tolerated", func() *Migration {
			m := handover(MigrationCompleted, &OutputReport{Verdict: VerdictSeamless})
			m.Result.Failed = []FailedApply{{ID: "overlay", Reason: "font missing"}}
			return m
		}(), GradeTolerated, "", "overlay (font missing)"},
		// issue 29 item 1: a rollback's target that produces after its abort fails.
		{"a target producing after its abort fails", func() *Migration {
			m := handover(MigrationAborted, &OutputReport{Verdict: VerdictOverlap, TargetAfterAbort: 90, TargetBeforeApply: 92, AtFault: "target", Detail: "the target sent 90 packets after it was told abort"})
			m.Rollback = &RollbackReport{Source: SourceRunning, Target: TargetKilled, TargetDetail: "target removed: it did not exit on SIGTERM"}
			return m
		}(), GradeFail, "target", "after it was told abort"},
		{"a target killed after the grace, silent otherwise, is tolerated", func() *Migration {
			m := handover(MigrationAborted, nil)
			m.Rollback = &RollbackReport{Source: SourceRunning, Target: TargetKilled, TargetDetail: "target removed: it did not exit on SIGTERM"}
			return m
		}(), GradeTolerated, "target", "did not exit on SIGTERM"},
		// issue 29 item 6: the record says the source is gone when it is.
		{"a clean rollback says what it left", func() *Migration {
			m := handover(MigrationAborted, nil)
			m.Rollback = &RollbackReport{Source: SourceGone, SourceDetail: "the source is gone, not left running: it is failed (killed by signal 9)", Target: TargetExited, TargetDetail: "target removed: it exited on SIGTERM"}
			return m
		}(), GradePass, "", "the source is gone"},
		// A black-box run: a side whose broken promise ended the migration
		// is blamed, however clean the rollback.
		{"a source that never answered get-state is at fault", func() *Migration {
			m := handover(MigrationAborted, nil)
			m.Rollback = &RollbackReport{Source: SourceRunning, Told: []string{"source"}}
			m.Broken = &BrokenPromise{Side: "source", Promise: PromiseAnswerInTime, Detail: "timed out after 10s waiting for the source's state"}
			return m
		}(), GradeFail, "source", "timed out after 10s waiting for the source's state"},
		{"a target whose socket was closed for a frame out of phase is at fault, past the point of no return too", func() *Migration {
			m := handover(MigrationFailed, nil)
			m.Broken = &BrokenPromise{Side: "target", Promise: PromiseWellFormed, Detail: "normsim closed the target's socket with 4400 (frame state is out of phase) on cutover-apply"}
			return m
		}(), GradeFail, "target", "4400 (frame state is out of phase)"},
		{"an overlap's overlap is the strategy's", &Migration{Strategy: Overlap, State: MigrationCompleted, Output: &OutputReport{Verdict: VerdictOverlap, Detail: "both produced for 80 ms"}},
			GradePass, "", "both produced"},
		{"both sides at fault are named", handover(MigrationCompleted, &OutputReport{Verdict: VerdictOverlap, SourceAfterStop: 2, TargetBeforeApply: 3, AtFault: "source and target", Detail: "both"}),
			GradeFail, "source and target", "both"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			j := Judge(tt.m)
			if j.Grade != tt.grade || j.AtFault != tt.atFault || !strings.Contains(j.Why, tt.why) {
				t.Fatalf("got %s at fault %q: %s; want %s at fault %q with %q", j.Grade, j.AtFault, j.Why, tt.grade, tt.atFault, tt.why)
			}
			for _, f := range j.Findings {
				if f.Check == "" || f.Promise == "" {
					t.Errorf("finding without its check or promise: %+v", f)
				}
			}
		})
	}
}
