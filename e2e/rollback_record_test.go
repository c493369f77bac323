package e2e_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/normsim/normsim/normsimtest"
	"github.com/normsim/normsim/sim"
)

// TestATargetThatIgnoresAbortIsCaught is issue 29 item 1: a target that
// goes on producing after the rollback told it abort, and ignores SIGTERM,
// used to leave a record that said only "aborted". The record now counts
// its packets after the abort, blames the target, and the timeline says
// it was killed after the grace.
func TestATargetThatIgnoresAbortIsCaught(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes")
	}
	s := startSim(t, normsimtest.Options{Runtime: sim.RuntimeProcess,
		Templates: []string{templatesDir, filepath.Join("..", "examples", "templates")}})
	in := s.Launch(t, sim.LaunchRequest{Template: "ignores-abort", Node: "a", Params: map[string]string{"RATE": "100"}})
	s.WaitConnected(t, in.ID)
	time.Sleep(200 * time.Millisecond)
	m := s.MigrateAndWait(t, in.ID, sim.MigrateRequest{
		Timeouts: sim.Timeouts{StopGrace: sim.Duration(time.Second)},
		Faults:   []sim.Fault{{Kind: "worker-abort", On: "target-ready"}}})
	normsimtest.RequireState(t, m, sim.MigrationAborted)
	tl := normsimtest.Timeline(m)
	if m.Output == nil || m.Output.TargetAfterAbort == 0 || m.Output.AtFault != "target" {
		t.Fatalf("the target's output after its abort is not counted and blamed: %+v\n%s", m.Output, tl)
	}
	j := m.Judged()
	if j.Grade != sim.GradeFail || j.AtFault != "target" {
		t.Errorf("judgement %+v, want fail with the target at fault\n%s", j, tl)
	}
	if m.Rollback == nil || m.Rollback.Target != sim.TargetKilled || m.Rollback.Source != sim.SourceRunning {
		t.Errorf("rollback record %+v, want the target killed after the grace and the source running\n%s", m.Rollback, tl)
	}
	if !strings.Contains(tl, "did not exit on SIGTERM") {
		t.Errorf("the timeline does not say the target ignored SIGTERM:\n%s", tl)
	}
	// The stored record says the same as the live one did.
	if stored := s.Migration(t, m.ID); stored.Judgement == nil || stored.Judgement.Grade != sim.GradeFail || stored.Rollback == nil {
		t.Errorf("the stored record lost the judgement or the rollback: %+v %+v", stored.Judgement, stored.Rollback)
	}
}

// TestARollbackSaysWhatBecameOfTheSource is issue 29 item 6: "source left
// running" was written on every rollback, also when a fault had killed
// the source.
func TestARollbackSaysWhatBecameOfTheSource(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes")
	}
	s := startSim(t, normsimtest.Options{Runtime: sim.RuntimeProcess, Templates: []string{templatesDir}})
	in := s.Launch(t, sim.LaunchRequest{Template: "counter", Node: "a", Params: map[string]string{"RATE": "100"}})
	s.WaitConnected(t, in.ID)
	m := s.MigrateAndWait(t, in.ID, sim.MigrateRequest{
		// Armed on the target's hello, the kill lands as the target
		// connects, before the source can be told cutover-ready: the
		// handover rolls back with a target placed and the source dead.
		Faults: []sim.Fault{{Kind: "kill", Side: "source", On: "hello"}}})
	normsimtest.RequireState(t, m, sim.MigrationAborted)
	tl := normsimtest.Timeline(m)
	if strings.Contains(tl, "source left running") {
		t.Errorf("the timeline says the killed source was left running:\n%s", tl)
	}
	if m.Rollback == nil || m.Rollback.Source != sim.SourceGone || !strings.Contains(m.Rollback.SourceDetail, "signal 9") {
		t.Errorf("rollback record %+v, want the source gone, killed by signal 9\n%s", m.Rollback, tl)
	}
	if m.Rollback != nil && m.Rollback.Target != sim.TargetExited {
		t.Errorf("the well-behaved target was removed as %q, want exited on SIGTERM", m.Rollback.Target)
	}
}

// TestARollbackWaitsForTheExitOfASourceAFaultKilled: a worker abort armed
// on the same frame as a kill of the source ends the move at once, before
// the kill's exit is reported; the rollback record must still say the
// source is gone (it once said "running", and chaos then moved the dead
// source: conform's run 105 of 2026-12-05).
func TestARollbackWaitsForTheExitOfASourceAFaultKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes")
	}
	s := startSim(t, normsimtest.Options{Runtime: sim.RuntimeProcess, Templates: []string{templatesDir}})
	in := s.Launch(t, sim.LaunchRequest{Template: "counter", Node: "a", Params: map[string]string{"RATE": "100"}})
	s.WaitConnected(t, in.ID)
	m := s.MigrateAndWait(t, in.ID, sim.MigrateRequest{Faults: []sim.Fault{
		{Kind: "kill", Side: "source", On: "get-state"},
		{Kind: "worker-abort", On: "get-state"},
	}})
	normsimtest.RequireState(t, m, sim.MigrationAborted)
	if m.Rollback == nil || m.Rollback.Source != sim.SourceGone || !strings.Contains(m.Rollback.SourceDetail, "signal 9") {
		t.Errorf("rollback record %+v, want the source gone, killed by signal 9\n%s", m.Rollback, normsimtest.Timeline(m))
	}
	got, err := s.Client.Instance(context.Background(), in.ID)
	if err != nil || got.State == sim.InstanceRunning {
		t.Errorf("the killed source is %+v, %v; want it not running", got, err)
	}
}
