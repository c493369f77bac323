package e2e_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/normsim/normsim/internal/testjob"
	"github.com/normsim/normsim/normsimtest"
	"github.com/normsim/normsim/protocol"
	"github.com/normsim/normsim/sim"
)

// toCutoverReady launches an external counter, starts a handover with the
// timeouts given, plays the source (raw) and the target up to the
// source's cutover-ready, and returns them.
func toCutoverReady(t *testing.T, s *normsimtest.Sim, timeouts sim.Timeouts) (*sim.Migration, *rawSource, *testjob.Job) {
	t.Helper()
	in := s.Launch(t, sim.LaunchRequest{Template: "counter", Node: "a", Runtime: sim.RuntimeExternal})
	sj := dialRawSource(t, in.Env["counter"])
	s.WaitConnected(t, in.ID)
	m, err := s.Migrate(in.ID, sim.MigrateRequest{Strategy: string(sim.Handover), Timeouts: timeouts})
	if err != nil {
		t.Fatal(err)
	}
	sj.expect(protocol.TypeGetState)
	sj.Write(testjob.Text(`{"type":"state","migrationId":` + quote(m.ID) + `,"payload":{"next":41}}`))
	_, env := targetEnv(t, s, m.ID)
	tj := testjob.Dial(t, env)
	tj.Expect(protocol.TypeInitialState)
	tj.Send(protocol.JobFrame{Type: protocol.TypeTargetReady})
	sj.expect(protocol.TypeCutoverReady)
	return m, sj, tj
}

func stoppedOutput(m *sim.Migration) []byte {
	return testjob.Text(`{"type":"source-stopped-output","migrationId":` + quote(m.ID) + `,"payload":{"last":40}}`)
}

// Attack round 16, A-F1: a socket that drops (no close frame) is heard at
// once, while a frame the other job sent just before may still wait to be
// read; the drop was taken first. A good handover whose source dropped
// right after the target's target-applied failed (17 of 30), and one whose
// target dropped right after the source's source-stopped-output was rolled
// back past its point of no return (7 of 20). The other socket is read up
// to the drop, and what it sent first is heard first.
func TestAFrameSentBeforeTheOtherSocketDroppedIsHeardFirst(t *testing.T) {
	runs := 10
	if testing.Short() {
		runs = 3
	}
	s := startSim(t, normsimtest.Options{})
	t.Run("the source drops right after the target's target-applied", func(t *testing.T) {
		for i := range runs {
			m, sj, tj := toCutoverReady(t, s, sim.Timeouts{})
			sj.Write(stoppedOutput(m))
			tj.Expect(protocol.TypeCutoverApply)
			tj.Send(protocol.JobFrame{Type: protocol.TypeTargetApplied})
			sj.Conn.Close()
			done := s.WaitMigration(t, m.ID, 30*time.Second)
			if done.State != sim.MigrationCompleted {
				t.Fatalf("run %d of %d: %s (%s); want completed: the source went once the target had taken over\n%s",
					i+1, runs, done.State, done.Reason, normsimtest.Timeline(done))
			}
			tj.Conn().CloseNow()
		}
	})
	t.Run("the target drops right after the source's source-stopped-output", func(t *testing.T) {
		for i := range runs {
			m, sj, tj := toCutoverReady(t, s, sim.Timeouts{})
			sj.Write(stoppedOutput(m))
			tj.Conn().CloseNow()
			done := s.WaitMigration(t, m.ID, 30*time.Second)
			if done.State != sim.MigrationFailed || !strings.Contains(done.Reason, "on cutover-apply") {
				t.Fatalf("run %d of %d: %s (%s); want failed on cutover-apply: the point of no return came before the drop\n%s",
					i+1, runs, done.State, done.Reason, normsimtest.Timeline(done))
			}
			sj.Conn.Close()
		}
	})
}

// Attack round 16, A-F2: an answer written before its deadline behind a
// burst of empty pings was read after the deadline (normsim answers a
// ping in about 20 µs) and judged late, the job at fault. It is dated by
// when it arrived, and at the deadline what waits unread is read first.
func TestAnAnswerInBeforeItsDeadlineBehindAPingBurstIsOnTime(t *testing.T) {
	runs := 5
	if testing.Short() {
		runs = 2
	}
	const stop = 300 * time.Millisecond
	burst := slices.Repeat(testjob.Frame(testjob.OpPing, nil), 3000)
	s := startSim(t, normsimtest.Options{})
	judged := 0
	for i := range runs {
		m, sj, tj := toCutoverReady(t, s, sim.Timeouts{Stop: sim.Duration(stop)})
		asked := time.Now()
		time.Sleep(stop - 40*time.Millisecond)
		sj.Write(slices.Concat(burst, stoppedOutput(m)))
		if written := time.Since(asked); written >= stop-5*time.Millisecond {
			t.Logf("run %d: written %s after cutover-ready, too near the deadline to judge; skipped", i+1, written)
			continue
		}
		tj.Expect(protocol.TypeCutoverApply)
		tj.Send(protocol.JobFrame{Type: protocol.TypeTargetApplied})
		done := s.WaitMigration(t, m.ID, 30*time.Second)
		if done.State != sim.MigrationCompleted {
			t.Fatalf("run %d of %d: %s (%s); want completed: the answer was in before its deadline\n%s",
				i+1, runs, done.State, done.Reason, normsimtest.Timeline(done))
		}
		judged++
		tj.Conn().CloseNow()
		sj.Conn.Close()
	}
	if judged == 0 {
		t.Fatalf("none of %d runs wrote its answer clear of the deadline: nothing was judged", runs)
	}
}
