package e2e_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/normsim/normsim/internal/testjob"
	"github.com/normsim/normsim/normsimtest"
	"github.com/normsim/normsim/protocol"
	"github.com/normsim/normsim/sim"
)

// Attack round 15, A-F6: a source that quotes its token in its state,
// and a target that quotes its own in target-ready, hand them to the
// other side as they are (the relay changes no payload), but neither
// the migration's timeline nor any side's frame records keep them.
func TestATokenQuotedInARelayedPayloadIsKeptNowhere(t *testing.T) {
	s := startSim(t, normsimtest.Options{})
	src, sj := launchExternal(t, s, "a")
	srcToken := src.Env["counter"][protocol.EnvToken]
	m, err := s.Migrate(src.ID, sim.MigrateRequest{})
	if err != nil {
		t.Fatal(err)
	}
	sj.Expect(protocol.TypeGetState)
	state := json.RawMessage(`{"next":1,"mine":"` + srcToken + `"}`)
	sj.Send(protocol.JobFrame{Type: protocol.TypeState, Payload: state})
	tgtID, env := targetEnv(t, s, m.ID)
	tgtToken := env[protocol.EnvToken]
	tj := testjob.Connect(t, env[protocol.EnvURL], nil)
	tj.SendText(`{"type":"hello","token":"` + tgtToken + `"}`)
	tj.Expect(protocol.TypeHelloAck)
	if is := tj.Expect(protocol.TypeInitialState); string(is.Payload) != string(state) {
		t.Fatalf("initial-state %s, want the source's state unchanged, %s", is.Payload, state)
	}
	ready := json.RawMessage(`{"echo":"` + tgtToken + `"}`)
	tj.Send(protocol.JobFrame{Type: protocol.TypeTargetReady, Payload: ready})
	if cr := sj.Expect(protocol.TypeCutoverReady); string(cr.Payload) != string(ready) {
		t.Fatalf("cutover-ready %s, want the target's payload unchanged, %s", cr.Payload, ready)
	}
	sj.Send(protocol.JobFrame{Type: protocol.TypeSourceStoppedOutput, Payload: json.RawMessage(`{"last":1}`)})
	tj.Expect(protocol.TypeCutoverApply)
	tj.Send(protocol.JobFrame{Type: protocol.TypeTargetApplied, Applied: []string{"counter"}})
	done := s.WaitMigration(t, m.ID, 30*time.Second)
	normsimtest.RequireCompleted(t, done)

	leaks := func(where, text string) {
		t.Helper()
		for name, token := range map[string]string{"source": srcToken, "target": tgtToken} {
			if strings.Contains(text, token) {
				t.Errorf("%s keeps the %s's token: %s", where, name, text)
			}
		}
	}
	timeline, _ := json.Marshal(done.Events)
	leaks("the timeline", string(timeline))
	if !strings.Contains(string(timeline), `"mine":"\u003credacted\u003e"`) && !strings.Contains(string(timeline), `"mine":"<redacted>"`) {
		t.Errorf("the timeline shows no redacted state payload: %s", timeline)
	}
	for _, id := range []string{src.ID, tgtID} {
		var frames []sim.FrameRecord
		// The recorder writes in batches: read until the last frame is in.
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			if err := s.Do("GET", "/api/v1/instances/"+id+"/frames", nil, &frames); err != nil {
				t.Fatal(err)
			}
			if len(frames) >= 4 {
				break
			}
		}
		if len(frames) < 4 {
			t.Fatalf("%s has %d frame records, want its handover's", id, len(frames))
		}
		all, _ := json.Marshal(frames)
		leaks(id+"'s frame records", string(all))
	}
}
