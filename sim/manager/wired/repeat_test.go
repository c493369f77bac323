package wired_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/normsim/normsim/internal/testjob"
	"github.com/normsim/normsim/protocol"
	"github.com/normsim/normsim/sim"
	"github.com/normsim/normsim/sim/manager"
)

// TestARepeatAfterAReconnectIsDiscarded: a job that reconnects in the
// middle of a handover answers what its new connection asks, as the docs
// tell it to (contract.md, "Answer each ask once"). The target is handed
// its initial-state again and says target-ready again; the source repeats
// its state and, past the point of no return, its source-stopped-output.
// normsim read each of those answers already: the repeats are recorded
// as discarded, nobody is closed with 4400, and the handover completes.
func TestARepeatAfterAReconnectIsDiscarded(t *testing.T) {
	t.Parallel()
	mgr, in, src := handoverSource(t, newMemStore(t))
	m, err := mgr.Migrate(t.Context(), in.ID, manager.MigrateRequest{Strategy: string(sim.Handover)})
	if err != nil {
		t.Fatal(err)
	}
	src.Expect(protocol.TypeGetState)
	state := protocol.JobFrame{Type: protocol.TypeState, Payload: json.RawMessage(`{"next":1}`)}
	src.Send(state)
	env := placedTargetEnv(t, mgr, m.ID)
	tgt := testjob.Dial(t, env)
	tgt.Expect(protocol.TypeInitialState)
	ready := protocol.JobFrame{Type: protocol.TypeTargetReady, Payload: json.RawMessage(`null`)}
	tgt.Send(ready)
	src.Expect(protocol.TypeCutoverReady)

	// The target reconnects: its new connection gets initial-state again,
	// and the target answers it as it did.
	tgt2 := testjob.Dial(t, env)
	tgt2.Expect(protocol.TypeInitialState)
	tgt2.Send(ready)
	// So does the source, repeating its state.
	src2 := testjob.Dial(t, in.Env["counter"])
	src2.Send(state)
	src2.Send(protocol.JobFrame{Type: protocol.TypeSourceStoppedOutput, Payload: json.RawMessage(`{"last":0}`)})
	tgt2.Expect(protocol.TypeCutoverApply)
	// Past the point of no return the source reconnects once more and
	// repeats source-stopped-output.
	src3 := testjob.Dial(t, in.Env["counter"])
	src3.Send(protocol.JobFrame{Type: protocol.TypeSourceStoppedOutput, Payload: json.RawMessage(`{"last":0}`)})
	waitMigration(t, mgr, m.ID, func(m *sim.Migration) bool {
		return countDiscarded(m) == 3 || m.State.Ended()
	})
	tgt2.Send(protocol.JobFrame{Type: protocol.TypeTargetApplied, Applied: []string{"counter"}})
	done := endedMigration(t, mgr, m.ID)
	if done.State != sim.MigrationCompleted {
		t.Fatalf("migration %s (%s), want completed:\n%s", done.State, done.Reason, sim.FormatTimeline(done))
	}
	// The two jobs' sockets are read by two readers: each side's entries
	// keep their order, not the order between the sides.
	for _, want := range []string{
		"target: target-ready from the target: it was answered already, on the connection this one replaced; discarded",
		"source: state from the source: it was answered already, on the connection this one replaced; discarded",
		"source: source-stopped-output from the source: it was answered already, on the connection this one replaced; discarded",
	} {
		if !slices.ContainsFunc(done.Events, func(ev sim.MigrationEvent) bool { return ev.Side+": "+ev.Detail == want }) {
			t.Errorf("the timeline lacks %q:\n%s", want, sim.FormatTimeline(done))
		}
	}
}

// countDiscarded counts the timeline's discarded frames.
func countDiscarded(m *sim.Migration) int {
	n := 0
	for _, ev := range m.Events {
		if strings.HasSuffix(ev.Detail, "; discarded") {
			n++
		}
	}
	return n
}
