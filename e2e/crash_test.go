package e2e_test

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/normsim/normsim/internal/testjob"
	"github.com/normsim/normsim/normsimtest"
	"github.com/normsim/normsim/protocol"
	"github.com/normsim/normsim/sim"
)

// TestKilledMidHandoverRecovers SIGKILLs a real normsim process while a
// handover waits for target-ready, short of its point of no return, and
// starts it again over the same store: the migration is rolled back at
// that start (aborted, "interrupted", the rollback made at the restart),
// every event recorded before the kill kept; its target is removed, and
// the source, left running, takes its job's reconnection.
func TestKilledMidHandoverRecovers(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs normsim")
	}
	h := toInitialStateThenKill(t)
	api, src, m, tgtID := h.api, h.src, h.m, h.tgtID
	before := api.Migration(t, m.ID)
	time.Sleep(300 * time.Millisecond) // the journal writes within milliseconds

	h.restart()

	after := api.Migration(t, m.ID)
	rb := after.Rollback
	if after.State != sim.MigrationAborted || after.Reason != sim.ReasonInterrupted || rb == nil || !rb.AtRestart ||
		rb.Source != sim.SourceRunning || rb.Target != sim.TargetClosed {
		t.Fatalf("after restart: %s (%s), rollback %+v; want aborted (interrupted), rolled back at the restart", after.State, after.Reason, rb)
	}
	keptEvents(t, before, after)
	var running []*sim.Migration
	api.Do(http.MethodGet, "/api/v1/migrations?state=running", nil, &running)
	if len(running) != 0 {
		t.Fatalf("migrations still running after restart: %+v", running)
	}
	if err := api.Do(http.MethodGet, "/api/v1/instances/"+tgtID, nil, nil); err == nil {
		t.Fatalf("the rolled-back target %s is still listed", tgtID)
	}
	// External instances stay registered with their tokens: the source job
	// reconnects and is connected again.
	testjob.Dial(t, src.Env["counter"])
	api.WaitConnected(t, src.ID)
}

// TestKilledPastThePointOfNoReturnIsNotRolledBack SIGKILLs normsim the
// moment the target has read cutover-apply: the point of no return is
// passed, however little of it the store had written, so the restart
// fails the migration ("interrupted") and leaves both instances listed.
func TestKilledPastThePointOfNoReturnIsNotRolledBack(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs normsim")
	}
	h := toInitialStateThenKill(t)
	api, src, sj, tj, m, tgtID := h.api, h.src, h.sj, h.tj, h.m, h.tgtID
	tj.Send(protocol.JobFrame{Type: protocol.TypeTargetReady, Payload: json.RawMessage(`{}`)})
	sj.Expect(protocol.TypeCutoverReady)
	sj.Send(protocol.JobFrame{Type: protocol.TypeSourceStoppedOutput, Payload: json.RawMessage(`{"last":7}`)})
	tj.Expect(protocol.TypeCutoverApply)
	h.restart() // at once: the journal may not have written the point

	after := api.Migration(t, m.ID)
	if after.State != sim.MigrationFailed || after.Reason != sim.ReasonInterrupted || after.Rollback != nil {
		t.Fatalf("after restart: %s (%s), rollback %+v; want failed (interrupted), nothing rolled back", after.State, after.Reason, after.Rollback)
	}
	for _, id := range []string{src.ID, tgtID} {
		if in := api.Instance(t, id); in.State.Terminal() {
			t.Fatalf("instance %s after restart: %s, want left as it was", id, in.State)
		}
	}
}

// keptEvents checks every event recorded before the kill is there after
// the restart, unchanged, and something was added.
func keptEvents(t *testing.T, before, after *sim.Migration) {
	t.Helper()
	if len(after.Events) < len(before.Events)+1 {
		t.Fatalf("events after restart %d, before the kill %d (plus the interruption)", len(after.Events), len(before.Events))
	}
	for i, ev := range before.Events {
		if after.Events[i].Detail != ev.Detail || after.Events[i].Seq != ev.Seq {
			t.Fatalf("event %d changed: %+v vs %+v", i, after.Events[i], ev)
		}
	}
}

// killable is a handover of an external job by a real normsim, played to
// where the target has its initial state; restart SIGKILLs that normsim
// and starts it again over the same store.
type killable struct {
	api     *normsimtest.Sim
	src     sim.Instance
	sj, tj  *testjob.Job
	m       *sim.Migration
	tgtID   string
	restart func()
}

func toInitialStateThenKill(t *testing.T) killable {
	t.Helper()
	up, addr := restartableUp(t, "external")
	first := up()
	api := normsimtestClient(addr)
	src := api.Launch(t, sim.LaunchRequest{Template: "counter", Node: "a"})
	sj := testjob.Dial(t, src.Env["counter"])
	api.WaitConnected(t, src.ID)
	m, err := api.Migrate(src.ID, sim.MigrateRequest{})
	if err != nil {
		t.Fatal(err)
	}
	sj.Expect(protocol.TypeGetState)
	sj.Send(protocol.JobFrame{Type: protocol.TypeState, Payload: json.RawMessage(`{"n":1}`)})
	tgtID, env := targetEnv(t, api, m.ID)
	tj := testjob.Dial(t, env)
	tj.Expect(protocol.TypeInitialState)
	return killable{api: api, src: src, sj: sj, tj: tj, m: m, tgtID: tgtID, restart: func() {
		first.Process.Kill()
		first.Wait()
		up()
	}}
}
