package e2e_test

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/normsim/normsim/internal/testjob"
	"github.com/normsim/normsim/protocol"
	"github.com/normsim/normsim/sim"
)

// TestKilledMidHandoverRecovers SIGKILLs a real normsim process while a
// handover waits for target-ready, starts it again over the same store, and
// checks the migration is failed "interrupted" with every event kept.
func TestKilledMidHandoverRecovers(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs normsim")
	}
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
	_, env := targetEnv(t, api, m.ID)
	tj := testjob.Dial(t, env)
	tj.Expect(protocol.TypeInitialState)
	before := api.Migration(t, m.ID)
	time.Sleep(300 * time.Millisecond) // the journal writes within milliseconds

	first.Process.Kill()
	first.Wait()
	up()

	after := api.Migration(t, m.ID)
	if after.State != sim.MigrationFailed || after.Reason != sim.ReasonInterrupted {
		t.Fatalf("after restart: %s (%s), want failed (interrupted)", after.State, after.Reason)
	}
	if len(after.Events) < len(before.Events)+1 {
		t.Fatalf("events after restart %d, before the kill %d (plus the interruption)", len(after.Events), len(before.Events))
	}
	for i, ev := range before.Events {
		if after.Events[i].Detail != ev.Detail || after.Events[i].Seq != ev.Seq {
			t.Fatalf("event %d changed: %+v vs %+v", i, after.Events[i], ev)
		}
	}
	var running []*sim.Migration
	api.Do(http.MethodGet, "/api/v1/migrations?state=running", nil, &running)
	if len(running) != 0 {
		t.Fatalf("migrations still running after restart: %+v", running)
	}
	// External instances stay registered with their tokens: the source job
	// reconnects and is connected again.
	sj2 := testjob.Dial(t, src.Env["counter"])
	_ = sj2
	api.WaitConnected(t, src.ID)
}
