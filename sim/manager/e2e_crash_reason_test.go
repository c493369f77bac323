package manager_test

import (
	"path/filepath"
	"testing"

	"github.com/normsim/normsim/normsimtest"
	"github.com/normsim/normsim/sim"
)

// TestCrashGivesOneStableReason: a target that exits with code 3 on
// cutover-apply drops its socket and exits at about the same moment, and
// which of the two normsim hears first varies. The reason does not: it is
// the exit, every time, on both runtimes that report exits.
func TestCrashGivesOneStableReason(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes and containers")
	}
	const runs = 20
	examples := filepath.Join("..", "..", "examples")
	for _, rt := range []string{sim.RuntimeProcess, sim.RuntimeDocker} {
		t.Run(rt, func(t *testing.T) {
			t.Parallel()
			if rt == sim.RuntimeDocker {
				normsimtest.BuildJobImage(t, "normsim/crash-on-apply:dev", filepath.Join(examples, "jobs", "crash-on-apply"))
			}
			s := startSim(t, normsimtest.Options{Runtime: rt, Templates: []string{filepath.Join(examples, "templates")}})
			in := s.Launch(t, sim.LaunchRequest{Template: "crash-on-apply", Node: "a", Params: map[string]string{"RATE": "25"}})
			s.WaitConnected(t, in.ID)
			const want = "the target's service counter exited with code 3 on cutover-apply"
			for i := range runs {
				m := s.MigrateAndWait(t, in.ID, sim.MigrateRequest{})
				normsimtest.RequireState(t, m, sim.MigrationFailed)
				if m.Reason != want {
					t.Fatalf("run %d of %d: reason %q, want %q\n%s", i+1, runs, m.Reason, want, normsimtest.Timeline(m))
				}
			}
		})
	}
}
