package e2e_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/normsim/normsim/internal/testjob"
	"github.com/normsim/normsim/normsimtest"
	"github.com/normsim/normsim/protocol"
	"github.com/normsim/normsim/sim"
)

// TestATargetReadyRightAfterHelloIsLegal: a target may write target-ready
// in the same breath as its hello, before it has read hello-ack and
// initial-state. That is legal on the wire, and a judgement made stricter
// (issue 29) must not fail it: the handover completes and passes.
func TestATargetReadyRightAfterHelloIsLegal(t *testing.T) {
	s := startSim(t, normsimtest.Options{})
	src, sj := launchExternal(t, s, "a")
	m, err := s.Migrate(src.ID, sim.MigrateRequest{})
	if err != nil {
		t.Fatal(err)
	}
	sj.Expect(protocol.TypeGetState)
	sj.Send(protocol.JobFrame{Type: protocol.TypeState, Payload: json.RawMessage(`{"next":1}`)})
	_, env := targetEnv(t, s, m.ID)
	tj := testjob.Connect(t, env[protocol.EnvURL], nil)
	tj.SendText(`{"type":"hello","token":"` + env[protocol.EnvToken] + `"}`)
	tj.SendText(`{"type":"target-ready","payload":{"eager":true}}`)
	if f := tj.Read(); f.Type != protocol.TypeHelloAck {
		t.Fatalf("first frame %s, want hello-ack", f.Type)
	}
	if f := tj.Read(); f.Type != protocol.TypeInitialState {
		t.Fatalf("second frame %s, want initial-state", f.Type)
	}
	sj.Expect(protocol.TypeCutoverReady)
	sj.Send(protocol.JobFrame{Type: protocol.TypeSourceStoppedOutput, Payload: json.RawMessage(`{"last":1}`)})
	tj.Expect(protocol.TypeCutoverApply)
	tj.Send(protocol.JobFrame{Type: protocol.TypeTargetApplied, Applied: []string{"counter"}})
	done := s.WaitMigration(t, m.ID, 30*time.Second)
	normsimtest.RequireCompleted(t, done)
	if j := done.Judged(); j.Grade != sim.GradePass {
		t.Fatalf("judged %s: %s\n%s", j.Grade, j.Why, normsimtest.Timeline(done))
	}
}
