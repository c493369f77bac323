package conform

import (
	"strings"
	"testing"

	"github.com/normsim/normsim/sim"
)

// TestObservedHasTargetAppliedAndTheJudgement: a case's observed facts say
// what the last move's target reported in target-applied, whole, and
// normsim's judgement of it, as every tool prints them.
func TestObservedHasTargetAppliedAndTheJudgement(t *testing.T) {
	skew := 4.0
	seq := func(v int64) *int64 { return &v }
	m := &sim.Migration{ID: "mig-1", Strategy: sim.Handover, State: sim.MigrationCompleted,
		Output: &sim.OutputReport{Verdict: sim.VerdictSeamless, LastSource: seq(41), FirstTarget: seq(42)},
		Result: sim.MigrationResult{Applied: []string{"counter"}, Failed: []sim.FailedApply{{ID: "overlay", Reason: "font missing"}}, SkewMs: &skew}}
	o := observed(&evidence{moves: []*sim.Migration{m}})
	if o.Result == nil || len(o.Result.Failed) != 1 || o.Result.Failed[0].Reason != "font missing" || o.Judgement != sim.GradeTolerated || o.AtFault != "" {
		t.Fatalf("observed %+v", o)
	}
	text := observedText(o)
	for _, want := range []string{"  target-applied: applied counter; failed overlay (font missing); skewMs 4\n", "  judgement: tolerated (at fault: none)\n"} {
		if !strings.Contains(text, want) {
			t.Errorf("observed text lacks %q:\n%s", want, text)
		}
	}

	// A rollback's target sent no target-applied; one that produced
	// after its abort is blamed.
	aborted := &sim.Migration{Strategy: sim.Handover, State: sim.MigrationAborted,
		Output: &sim.OutputReport{Verdict: sim.VerdictOverlap, AtFault: "target", TargetAfterAbort: 7, Detail: "the target sent 7 packets after abort"}}
	o = observed(&evidence{moves: []*sim.Migration{m, aborted}})
	if o.Result != nil || o.Judgement != sim.GradeFail || o.AtFault != "target" {
		t.Fatalf("observed of a rollback %+v", o)
	}
	if text := observedText(o); !strings.Contains(text, "  target-applied: —\n") || !strings.Contains(text, "  judgement: fail (at fault: target)\n") {
		t.Errorf("observed text:\n%s", text)
	}
}
