package e2e_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/normsim/normsim/internal/testjob"
	"github.com/normsim/normsim/normsimtest"
	"github.com/normsim/normsim/protocol"
	"github.com/normsim/normsim/sim"
)

// Issue 34 round 5, F2: a state nested 20,000 deep is a valid frame (the
// contract's payload is any JSON value, and a 64 KiB frame nests up to
// 32,768 deep, as JSON.parse reads it), so it is relayed unchanged; but
// encoding/json refuses past 10,000, and the API answered 500 for the
// running migration while the event stream dropped the entry. The record
// keeps such a payload as its text, and says so.
func TestAPayloadDeeperThanTheRecordCanNestIsKeptAsText(t *testing.T) {
	h := startHandover(t, sim.MigrateRequest{})
	deep := strings.Repeat("[", 20000) + strings.Repeat("]", 20000)
	h.sj.Expect(protocol.TypeGetState)
	h.sj.Send(protocol.JobFrame{Type: protocol.TypeState, Payload: json.RawMessage(deep)})
	_, env := targetEnv(h.t, h.s, h.m.ID) // the API answers while the migration runs
	h.tj = testjob.Dial(h.t, env)
	if f := h.tj.Expect(protocol.TypeInitialState); string(f.Payload) != deep {
		t.Fatalf("the target's initial-state is %d bytes, want the source's state unchanged", len(f.Payload))
	}
	h.ready()
	h.sj.Expect(protocol.TypeCutoverReady)
	h.sj.Send(protocol.JobFrame{Type: protocol.TypeSourceStoppedOutput, Payload: json.RawMessage(`{"n":1}`)})
	h.tj.Expect(protocol.TypeCutoverApply)
	h.tj.Send(protocol.JobFrame{Type: protocol.TypeTargetApplied, Payload: json.RawMessage(`{}`)})
	done := h.end()
	normsimtest.RequireState(t, done, sim.MigrationCompleted)
	kept := 0
	for _, ev := range done.Events {
		if ev.Frame == nil || ev.Frame.Size < 40000 {
			continue
		}
		var text string
		if err := json.Unmarshal(ev.Frame.Payload, &text); err != nil || text != deep || !strings.Contains(ev.Frame.PayloadNote, "20000 levels") {
			t.Errorf("%s %s: payload %.40q…, note %q", ev.Frame.Direction, ev.Frame.Type, ev.Frame.Payload, ev.Frame.PayloadNote)
		}
		kept++
	}
	if kept != 2 { // the state in, the initial-state out
		t.Errorf("%d deep frames on the timeline, want 2:\n%s", kept, sim.FormatTimeline(done))
	}
}
