package app_test

import (
	"slices"
	"testing"
	"time"

	"github.com/normsim/normsim/internal/testenv"
	"github.com/normsim/normsim/normsimtest"
	"github.com/normsim/normsim/sim"
)

// TestCounterInOtherLanguagesHandsOver runs the Python and the Node counter
// (examples/jobs/python-counter, examples/jobs/node-counter) as host
// processes with their templates as written, and hands each over a→b→a:
// every handover must complete with a seamless output, as the Go counter's
// does (sim/manager's TestCounterMigratesWithEachStrategy). A second
// handover moves the former target, so a job that only knew how to be one
// side would fail it. A third handover, aborted by the worker after the
// source stopped, must leave the source producing from the next number.
func TestCounterInOtherLanguagesHandsOver(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes")
	}
	for _, tc := range []struct{ template, script string }{
		{"python-counter", "run-python-job"},
		{"node-counter", "run-node-job"},
	} {
		t.Run(tc.template, func(t *testing.T) {
			testenv.RequireJobLanguage(t, "..", tc.script)
			s := normsimtest.Start(t, normsimtest.Options{Templates: []string{"../examples/templates"}, Runtime: sim.RuntimeProcess})
			in := s.Launch(t, sim.LaunchRequest{Template: tc.template, Node: "a", Params: map[string]string{"RATE": "100"}})
			s.WaitConnected(t, in.ID)
			time.Sleep(300 * time.Millisecond) // let it produce before moving it
			id := in.ID
			for _, to := range []string{"b", "a"} {
				m := s.MigrateAndWait(t, id, sim.MigrateRequest{To: to, Strategy: string(sim.Handover)})
				normsimtest.RequireCompleted(t, m)
				normsimtest.RequireSeamless(t, m)
				if m.Target.Node != to || m.JobID != in.JobID {
					t.Fatalf("migrated to %s (job %s), want %s (job %s)", m.Target.Node, m.JobID, to, in.JobID)
				}
				t.Logf("handover to %s: %s (%s)", to, m.Output.Verdict, m.Output.Detail)
				id = m.Target.Instance
				s.WaitConnected(t, id)
				time.Sleep(300 * time.Millisecond)
			}

			// Rolled back after the source stopped: the worker aborts once
			// cutover-ready has reached the source. The source must resume
			// from exactly the next number, and the target produce nothing.
			m := s.MigrateAndWait(t, id, sim.MigrateRequest{To: "b", Strategy: string(sim.Handover),
				Faults: []sim.Fault{{Kind: "worker-abort", On: "cutover-ready"}}})
			normsimtest.RequireState(t, m, sim.MigrationAborted)
			requireResumed(t, s, m)
		})
	}
}

// requireResumed waits until the source of an aborted handover has sent
// packets well after the abort, and checks that its numbers ran on without
// a gap or a repeat across it and that the target sent none.
func requireResumed(t *testing.T, s *normsimtest.Sim, m *sim.Migration) {
	t.Helper()
	after := m.EndedAt.Add(200 * time.Millisecond)
	deadline := time.Now().Add(5 * time.Second)
	for {
		var src []sim.Packet
		for _, p := range s.Main.Sink.Packets(m.JobID, m.StartedAt) {
			switch p.Instance {
			case m.Source.Instance:
				src = append(src, p)
			case m.Target.Instance:
				t.Fatalf("the aborted target sent packet %d\n%s", p.Seq, normsimtest.Timeline(m))
			}
		}
		if len(src) > 0 && src[len(src)-1].At.After(after) {
			slices.SortFunc(src, func(a, b sim.Packet) int { return a.At.Compare(b.At) })
			for i := 1; i < len(src); i++ {
				if src[i].Seq != src[i-1].Seq+1 {
					t.Fatalf("source went from %d to %d across the abort\n%s", src[i-1].Seq, src[i].Seq, normsimtest.Timeline(m))
				}
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the source sent nothing after the abort (%d packets since the migration began)\n%s", len(src), normsimtest.Timeline(m))
		}
		time.Sleep(50 * time.Millisecond)
	}
}
