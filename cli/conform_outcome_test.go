package cli

import (
	"strings"
	"testing"

	"github.com/normsim/normsim/conform"
)

// A chaos run that broke invariants says so in its own terms, not as "0 of
// 0 case(s) failed" (issue 34 round 6, F9).
func TestConformOutcomeSpeaksOfWhatRan(t *testing.T) {
	chaos := &conform.Report{Chaos: &conform.ChaosReport{Runs: 3, Violations: []*conform.Violation{{}, {}},
		Trials: []*conform.Trial{{Run: 0}, {Run: 1}, {Run: 2}}}}
	chaos.Count()
	err := conformOutcome(chaos)
	if err == nil || !strings.Contains(err.Error(), "conform --chaos: 2 of 3 run(s) broke an invariant, 0 could not be run") {
		t.Errorf("chaos with violations: %v", err)
	}
	clean := &conform.Report{Chaos: &conform.ChaosReport{Runs: 1, Trials: []*conform.Trial{{Run: 0}}}}
	clean.Count()
	if err := conformOutcome(clean); err != nil {
		t.Errorf("chaos that held: %v", err)
	}
	cases := &conform.Report{Results: []*conform.Result{{Grade: conform.GradeFail}, {Grade: conform.GradePass}}}
	cases.Count()
	if err := conformOutcome(cases); err == nil || !strings.Contains(err.Error(), "conform: 1 of 2 case(s) failed") {
		t.Errorf("a failed case: %v", err)
	}
}
