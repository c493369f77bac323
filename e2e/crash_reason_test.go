package e2e_test

import (
	"testing"

	"github.com/normsim/normsim/normsimtest"
	"github.com/normsim/normsim/sim"
)

// TestCrashGivesOneStableReason: a target that exits with code 3 on
// cutover-apply drops its socket and exits at about the same moment, and
// which of the two normsim hears first varies. The reason does not: it is
// the exit, every time, on both runtimes that report exits.
func TestCrashGivesOneStableReason(t *testing.T) {
	const runs = 20
	const want = "the target's service counter exited with code 3 on cutover-apply"
	onExitingRuntimes(t, "crash-on-apply", func(t *testing.T, s *normsimtest.Sim, in sim.Instance) {
		for i := range runs {
			m := s.MigrateAndWait(t, in.ID, sim.MigrateRequest{})
			normsimtest.RequireState(t, m, sim.MigrationFailed)
			if m.Reason != want {
				t.Fatalf("run %d of %d: reason %q, want %q\n%s", i+1, runs, m.Reason, want, normsimtest.Timeline(m))
			}
		}
	})
}
