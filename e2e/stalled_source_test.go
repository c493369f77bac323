package e2e_test

import (
	"encoding/json"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/normsim/normsim/internal/testjob"
	"github.com/normsim/normsim/normsimtest"
	"github.com/normsim/normsim/protocol"
	"github.com/normsim/normsim/sim"
	"github.com/normsim/normsim/sim/sink"
)

// output sends a job's JSON packets, numbered from..to, to its sink, every
// 10 ms, as the instance the env names.
func output(t *testing.T, env map[string]string, job, instance string, from, to int64) {
	t.Helper()
	conn, err := net.Dial("udp", env[sink.EnvAddr])
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for seq := from; seq <= to; seq++ {
		fmt.Fprintf(conn, `{"job":%q,"instance":%q,"seq":%d}`, job, instance, seq)
		time.Sleep(10 * time.Millisecond)
	}
}

// TestAnEarlyTargetIsBlamedBesideAStalledSource is issue 29 item 5: the
// job the test plays has one bug, a target that starts its output as soon
// as it has its initial state, before cutover-apply. Its source had
// stalled, sending nothing in the seam's window, and the target continues
// at the right number, so only the moments show the bug. The early target
// used to go unblamed in that branch; it is blamed and the judgement fails.
func TestAnEarlyTargetIsBlamedBesideAStalledSource(t *testing.T) {
	if testing.Short() {
		t.Skip("waits out the seam's window")
	}
	s := startSim(t, normsimtest.Options{})
	src, sj := launchExternal(t, s, "a")
	output(t, src.Env["counter"], src.JobID, src.ID, 0, 24)
	time.Sleep(2500 * time.Millisecond) // the source stalls: nothing in the window

	m, err := s.Migrate(src.ID, sim.MigrateRequest{})
	if err != nil {
		t.Fatal(err)
	}
	sj.Expect(protocol.TypeGetState)
	sj.Send(protocol.JobFrame{Type: protocol.TypeState, Payload: json.RawMessage(`{"next":25}`)})
	tgtID, env := targetEnv(t, s, m.ID)
	tj := testjob.Dial(t, env)
	tj.Expect(protocol.TypeInitialState)
	output(t, env, src.JobID, tgtID, 25, 29) // the bug: producing before cutover-apply
	tj.Send(protocol.JobFrame{Type: protocol.TypeTargetReady, Payload: json.RawMessage(`null`)})
	sj.Expect(protocol.TypeCutoverReady)
	sj.Send(protocol.JobFrame{Type: protocol.TypeSourceStoppedOutput, Payload: json.RawMessage(`{"last":24}`)})
	tj.Expect(protocol.TypeCutoverApply)
	tj.Send(protocol.JobFrame{Type: protocol.TypeTargetApplied, Applied: []string{"counter"}})
	output(t, env, src.JobID, tgtID, 30, 40)

	done := s.WaitMigration(t, m.ID, 30*time.Second)
	normsimtest.RequireState(t, done, sim.MigrationCompleted)
	tl := normsimtest.Timeline(done)
	if o := done.Output; o == nil || o.TargetBeforeApply != 5 || o.AtFault != "target" ||
		!strings.Contains(o.Detail, "the sink saw 0 packets from the source") || !strings.Contains(o.Detail, "the target sent 5 packets before cutover-apply") {
		t.Fatalf("the early target is not counted and blamed: %+v\n%s", o, tl)
	}
	if j := done.Judged(); j.Grade != sim.GradeFail || j.AtFault != "target" {
		t.Fatalf("judgement %s, want fail with the target at fault\n%s", sim.FormatJudgement(j), tl)
	}
}
