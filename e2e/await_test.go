package e2e_test

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/normsim/normsim/normsimtest"
	"github.com/normsim/normsim/protocol"
	"github.com/normsim/normsim/sim"
)

// TestAwaitMigrationAnswersAtTheNextStep: a client waiting on a migration
// past the last event it has seen (?wait&after) is answered by the next
// step, with it in the timeline; one waiting for nothing that comes gets
// the migration as it is when its wait ends; one waiting for the end
// (?wait without after) is answered with the ended migration.
func TestAwaitMigrationAnswersAtTheNextStep(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, api, in, job := externalCounter(t, ctx)
	// The source answers get-state only when the test says so: a state
	// timeout far past the test's own keeps a slow machine from ending
	// the migration meanwhile.
	m, err := api.Migrate(ctx, in.ID, sim.MigrateRequest{To: "b", Strategy: string(sim.Handover),
		Timeouts: sim.Timeouts{State: sim.Duration(5 * time.Minute)}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := job.Expect(ctx, protocol.TypeGetState); err != nil {
		t.Fatal(err)
	}
	// The source holds its state back: once get-state is on the timeline,
	// nothing more happens until it answers.
	var last int
	for {
		cur, err := api.AwaitMigration(ctx, m.ID, last, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if cur.State.Ended() {
			t.Fatalf("the migration ended before the source answered get-state: %s\n%s", cur.State, sim.FormatTimeline(cur))
		}
		last = cur.Events[len(cur.Events)-1].Seq
		if ev := cur.Events[len(cur.Events)-1]; ev.Frame != nil && ev.Frame.Type == protocol.TypeGetState {
			break
		}
		if slices.ContainsFunc(cur.Events, func(ev sim.MigrationEvent) bool { return ev.Frame != nil && ev.Frame.Type == protocol.TypeGetState }) {
			t.Fatalf("something followed get-state while the source held its state back:\n%s", sim.FormatTimeline(cur))
		}
	}
	still, err := api.AwaitMigration(ctx, m.ID, last, 50*time.Millisecond)
	if err != nil {
		t.Fatalf("a wait that nothing ended: %v, want the migration as it is", err)
	}
	if n := len(still.Events); n != last || still.State != sim.MigrationRunning {
		t.Fatalf("after a wait with nothing new: %s with %d events, want running with %d", still.State, n, last)
	}

	type answer struct {
		m   *sim.Migration
		err error
	}
	next := make(chan answer, 1)
	go func() {
		m, err := api.AwaitMigration(ctx, m.ID, last, 30*time.Second)
		next <- answer{m, err}
	}()
	ended := make(chan answer, 1)
	go func() {
		m, err := api.WaitMigrationState(ctx, m.ID)
		ended <- answer{m, err}
	}()
	if err := job.Send(ctx, protocol.JobFrame{Type: protocol.TypeState, Payload: json.RawMessage(`{"next":1}`)}); err != nil {
		t.Fatal(err)
	}
	a := <-next
	if a.err != nil {
		t.Fatal(a.err)
	}
	seen := false
	for _, ev := range a.m.Events {
		if ev.Seq > last && ev.Frame != nil && ev.Frame.Type == protocol.TypeState && ev.Frame.Direction == "in" {
			seen = true
		}
	}
	if !seen {
		t.Fatalf("woken with %d events past %d, none the source's state: %+v", len(a.m.Events)-last, last, a.m.Events[last:])
	}

	// Nobody starts the target, whose placement times out only much
	// later: the end comes when the source's job goes away.
	select {
	case a := <-ended:
		t.Fatalf("the wait for the end answered while the migration runs: %+v", a)
	default:
	}
	job.Close()
	a = <-ended
	if a.err != nil {
		t.Fatal(a.err)
	}
	normsimtest.RequireState(t, a.m, sim.MigrationAborted)
}
