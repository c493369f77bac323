package e2e_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/normsim/normsim/normsimtest"
	"github.com/normsim/normsim/sim"
)

// TestMisbehavingJobsGetTheirVerdict runs each misbehaving example job as a
// host process and checks normsim's verdict on its handover.
func TestMisbehavingJobsGetTheirVerdict(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes")
	}
	s := startSim(t, normsimtest.Options{Runtime: sim.RuntimeProcess,
		Templates: []string{templatesDir, filepath.Join("..", "examples", "templates")}})
	for _, tt := range []struct {
		template string
		state    sim.MigrationState
		phase    sim.Phase
		seam     string
		grade    sim.Grade // "": not asserted here
	}{
		{"refuser", sim.MigrationRefused, "get-state", "", ""},
		// It owed target-ready: the judgement blames the target.
		{"never-ready", sim.MigrationAborted, "target-ready", "", sim.GradeFail},
		// It ended on its own while it was moved: the target is blamed.
		{"crash-on-apply", sim.MigrationFailed, "cutover-apply", "", sim.GradeFail},
		{"wrong-position", sim.MigrationCompleted, "stop-source", sim.VerdictDuplicate, sim.GradeFail},
		{"keeps-running", sim.MigrationCompleted, "stop-source", sim.VerdictOverlap, sim.GradeFail},
		// Its seam is seamless; what it could not apply is reported.
		{"apply-fails", sim.MigrationCompleted, "stop-source", sim.VerdictSeamless, sim.GradeTolerated},
	} {
		t.Run(tt.template, func(t *testing.T) {
			in := s.Launch(t, sim.LaunchRequest{Template: tt.template, Node: "a", Params: map[string]string{"RATE": "100"}})
			s.WaitConnected(t, in.ID)
			time.Sleep(200 * time.Millisecond)
			m := s.MigrateAndWait(t, in.ID, sim.MigrateRequest{Timeouts: sim.Timeouts{TargetReady: sim.Duration(2 * time.Second)}})
			normsimtest.RequireState(t, m, tt.state)
			if m.Phase != tt.phase {
				t.Fatalf("ended in phase %s, want %s\n%s", m.Phase, tt.phase, normsimtest.Timeline(m))
			}
			if tt.seam != "" && (m.Output == nil || m.Output.Verdict != tt.seam) {
				t.Fatalf("seam %+v, want %s\n%s", m.Output, tt.seam, normsimtest.Timeline(m))
			}
			if tt.grade != "" {
				normsimtest.RequireJudgement(t, m, tt.grade)
			}
			t.Logf("%s: %s %s; %s", tt.template, m.State, m.Reason, normsimtest.Describe(m))
		})
	}
}
