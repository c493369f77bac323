package wired_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/normsim/normsim/sim"
	"github.com/normsim/normsim/sim/jobsocket"
	"github.com/normsim/normsim/sim/manager"
)

// TestDeleteRacingAMigrateHasOneWinner (issue 34 item 5): a DELETE and a
// stopThenStart migrate of the same instance, sent at once, are never both
// accepted. Whichever wins, what is left agrees with the answers: a
// removed job runs nowhere, and a migrated one runs as its target.
func TestDeleteRacingAMigrateHasOneWinner(t *testing.T) {
	ctx := context.Background()
	var mgr *manager.Manager
	nodes := socketNodes(t, func(ev jobsocket.Event) { mgr.OnSocketEvent(ev) })
	mgr = runtimeManager(t, nodes, manager.External{})
	deleted, migrated := 0, 0
	for round := range 100 {
		in, err := mgr.Launch(ctx, sim.LaunchRequest{Template: "counter", Node: "a"})
		if err != nil {
			t.Fatal(err)
		}
		waitUntil(t, "the source to run", func() bool { got, _ := mgr.Instance(ctx, in.ID); return got.State == sim.InstanceRunning })
		var wg sync.WaitGroup
		var delErr, migErr error
		var m *sim.Migration
		wg.Add(2)
		go func() { defer wg.Done(); delErr = mgr.Stop(ctx, in.ID) }()
		go func() {
			defer wg.Done()
			m, migErr = mgr.Migrate(ctx, in.ID, manager.MigrateRequest{Strategy: string(sim.StopThenStart)})
		}()
		wg.Wait()
		what := fmt.Sprintf("round %d: DELETE: %v; migrate: %v", round, delErr, migErr)
		switch {
		case delErr == nil && migErr == nil:
			t.Fatalf("%s: both were accepted", what)
		case delErr == nil:
			deleted++
			if running := mgr.RunningInstanceOf(in.JobID); running != "" {
				t.Fatalf("%s: the job was removed, yet %s runs", what, running)
			}
		case migErr == nil:
			migrated++
			done := endedMigration(t, mgr, m.ID)
			if done.State != sim.MigrationCompleted {
				break
			}
			// The DELETE that lost named where the job runs; the stopped
			// source is removed as its record only when that is asked.
			if err := mgr.Stop(ctx, in.ID); sim.ErrorCode(err) != sim.EConflict || !strings.Contains(err.Error(), "now runs as "+done.Target.Instance) {
				t.Fatalf("%s: a later DELETE of the moved source: %v", what, err)
			}
			if err := mgr.RemoveStopped(ctx, done.Target.Instance); sim.ErrorCode(err) != sim.EConflict {
				t.Fatalf("%s: stopped=true of the running target: %v", what, err)
			}
			if err := mgr.RemoveStopped(ctx, in.ID); err != nil {
				t.Fatalf("%s: remove the moved source's record: %v", what, err)
			}
			if err := mgr.Stop(ctx, done.Target.Instance); err != nil {
				t.Fatal(err)
			}
		default:
			t.Fatalf("%s: neither was accepted", what)
		}
	}
	t.Logf("%d deleted first, %d migrated first", deleted, migrated)
}
