package manager_test

import (
	"testing"
	"time"

	"github.com/normsim/normsim/normsimtest"
	"github.com/normsim/normsim/sim"
)

// TestCounterMigratesWithEachStrategy runs the counter example as host
// processes and migrates it a→b→a with each strategy it may use, checking
// what the output sink saw at each seam.
func TestCounterMigratesWithEachStrategy(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes")
	}
	for _, tc := range []struct {
		template string
		strategy sim.Strategy
		check    func(t *testing.T, m *sim.Migration)
	}{
		{"counter", sim.Handover, func(t *testing.T, m *sim.Migration) {
			normsimtest.RequireSeamless(t, m)
		}},
		{"counter", sim.StopThenStart, func(t *testing.T, m *sim.Migration) {
			o := m.Output
			if o == nil || o.Verdict != sim.VerdictGap || o.GapMs == nil || *o.GapMs <= 0 || o.Lost <= 0 {
				t.Fatalf("stopThenStart output %+v, want a positive gap with lost packets\n%s", o, normsimtest.Timeline(m))
			}
		}},
		{"relay-overlap", sim.Overlap, func(t *testing.T, m *sim.Migration) {
			o := m.Output
			if o == nil || o.Verdict != sim.VerdictOverlap || o.OverlapMs == nil || *o.OverlapMs <= 0 || o.Duplicated <= 0 {
				t.Fatalf("overlap output %+v, want overlap with duplicated packets\n%s", o, normsimtest.Timeline(m))
			}
		}},
	} {
		t.Run(string(tc.strategy), func(t *testing.T) {
			s := startSim(t, normsimtest.Options{Runtime: sim.RuntimeProcess})
			in := s.Launch(t, sim.LaunchRequest{Template: tc.template, Node: "a", Params: map[string]string{"RATE": "100"}})
			if in.Runtime != sim.RuntimeProcess {
				t.Fatalf("runtime %s", in.Runtime)
			}
			s.WaitConnected(t, in.ID)
			time.Sleep(300 * time.Millisecond) // let it produce before moving it
			id := in.ID
			for _, to := range []string{"b", "a"} {
				m := s.MigrateAndWait(t, id, sim.MigrateRequest{To: to, Strategy: string(tc.strategy)})
				normsimtest.RequireCompleted(t, m)
				if m.Target.Node != to || m.JobID != in.JobID {
					t.Fatalf("migrated to %s (job %s), want %s (job %s)", m.Target.Node, m.JobID, to, in.JobID)
				}
				tc.check(t, m)
				t.Logf("%s to %s: %s (%s)", tc.strategy, to, m.Output.Verdict, m.Output.Detail)
				if src := s.Instance(t, id); src.State != sim.InstanceStopped {
					t.Fatalf("source %s is %s after the migration", id, src.State)
				}
				id = m.Target.Instance
				s.WaitConnected(t, id)
				time.Sleep(300 * time.Millisecond)
			}
		})
	}
}
