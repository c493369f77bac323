package e2e_test

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/normsim/normsim/normsimtest"
	"github.com/normsim/normsim/normsimtest/normsimdocker"
	"github.com/normsim/normsim/sim"
)

// TestLingerCatchesASourceThatKeepsProducing hands the keeps-running job
// (it goes on producing after its source-stopped-output) back and forth
// at 25 packets/s, on the runtimes that stop a source right after
// target-applied: with the default linger, every handover is judged an
// overlap with the source at fault, and never a seamless one.
// onExitingRuntimes runs body for the example job (its template and image
// of the same name) launched on node a at 25 packets/s, on each runtime
// that stops and reports jobs itself: the process and the Docker runtime.
func onExitingRuntimes(t *testing.T, job string, body func(t *testing.T, s *normsimtest.Sim, in sim.Instance)) {
	t.Helper()
	if testing.Short() {
		t.Skip("runs real processes and containers")
	}
	examples := filepath.Join("..", "examples")
	for _, rt := range []string{sim.RuntimeProcess, sim.RuntimeDocker} {
		t.Run(rt, func(t *testing.T) {
			t.Parallel()
			if rt == sim.RuntimeDocker {
				normsimdocker.BuildSourceImage(t, "normsim/"+job, filepath.Join(examples, "jobs", job))
			}
			s := startSim(t, normsimtest.Options{Runtime: rt, Templates: []string{filepath.Join(examples, "templates")}})
			in := s.Launch(t, sim.LaunchRequest{Template: job, Node: "a", Params: map[string]string{"RATE": "25"}})
			s.WaitConnected(t, in.ID)
			// Its output has begun: the bodies judge what the source sent
			// (a source moved before its first packet hands over nothing).
			time.Sleep(200 * time.Millisecond)
			body(t, s, in)
		})
	}
}

func TestLingerCatchesASourceThatKeepsProducing(t *testing.T) {
	const handovers = 20
	onExitingRuntimes(t, "keeps-running", func(t *testing.T, s *normsimtest.Sim, in sim.Instance) {
		id := in.ID
		for i := range handovers {
			m := s.MigrateAndWait(t, id, sim.MigrateRequest{})
			normsimtest.RequireCompleted(t, m)
			o := m.Output
			if o == nil {
				t.Fatalf("handover %d of %d: no output report\n%s", i+1, handovers, normsimtest.Timeline(m))
			}
			if o.Verdict != sim.VerdictOverlap || o.AtFault != "source" || o.SourceAfterStop < 1 || !strings.Contains(o.Detail, "after source-stopped-output") {
				t.Fatalf("handover %d of %d: %s (at fault: %q): %s; want an overlap blamed on the source\n%s",
					i+1, handovers, o.Verdict, o.AtFault, o.Detail, normsimtest.Timeline(m))
			}
			t.Logf("handover %d: %s", i+1, o.Detail)
			id = m.Target.Instance
			s.WaitConnected(t, id)
		}
	})
}
