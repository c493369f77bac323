package wired_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/normsim/normsim/internal/testjob"
	"github.com/normsim/normsim/protocol"
	"github.com/normsim/normsim/sim"
	"github.com/normsim/normsim/sim/manager"
)

// TestAnswerOnAReplacedSocketIsUsed (issue 29 item 7): a source that
// answers get-state on its socket just after a newer connection of it
// said hello (it sent the answer before it read the 4409) is not blamed
// for a timeout: normsim reads the answer, uses it, and says on the
// timeline that the socket was replaced and that the answer came on the
// replaced one. What that socket says out of phase is recorded as
// discarded, and the newer connection repeating the answer is not closed
// for it.
func TestAnswerOnAReplacedSocketIsUsed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var mgr *manager.Manager
	nodes := socketNodes(t, func(ev sim.SocketEvent) { mgr.OnSocketEvent(ev) })
	mgr = runtimeManager(t, nodes, manager.External{})
	in, err := mgr.Launch(ctx, sim.LaunchRequest{Template: "counter", Node: "a"})
	if err != nil {
		t.Fatal(err)
	}
	if in, err = mgr.Instance(ctx, in.ID); err != nil {
		t.Fatal(err)
	}
	old := testjob.Dial(t, in.Env["counter"])
	m, err := mgr.Migrate(ctx, in.ID, manager.MigrateRequest{Strategy: string(sim.Handover), Timeouts: sim.Timeouts{State: sim.Duration(2 * time.Second)}})
	if err != nil {
		t.Fatal(err)
	}
	old.Expect(protocol.TypeGetState)
	newer := testjob.Dial(t, in.Env["counter"]) // replaces old, which has not read its 4409
	old.Send(protocol.JobFrame{Type: protocol.TypeState, Payload: json.RawMessage(`{"next":7}`)})
	old.Send(protocol.JobFrame{Type: protocol.TypeTargetReady, Payload: json.RawMessage(`null`)})

	got := waitMigration(t, mgr, m.ID, func(m *sim.Migration) bool { return m.Target.Instance != "" || m.State != sim.MigrationRunning })
	if got.Target.Instance == "" {
		t.Fatalf("the state sent on the replaced socket was not used: migration %s (%s)", got.State, got.Reason)
	}
	// The two connections are read by two readers: what the old one read
	// is on the timeline before the newer one speaks.
	waitMigration(t, mgr, m.ID, func(m *sim.Migration) bool {
		return slices.ContainsFunc(m.Events, func(ev sim.MigrationEvent) bool { return strings.HasPrefix(ev.Detail, "target-ready from the source") })
	})
	newer.Send(protocol.JobFrame{Type: protocol.TypeState, Payload: json.RawMessage(`{"next":7}`)})
	newer.Send(protocol.JobFrame{Type: protocol.TypeAbort, Reason: "test over"})
	got = waitMigration(t, mgr, m.ID, func(m *sim.Migration) bool { return m.State != sim.MigrationRunning })
	if got.State != sim.MigrationAborted || !strings.Contains(got.Reason, "the source aborted: test over") {
		t.Fatalf("migration %s (%s); want aborted by the source's abort on its newer connection", got.State, got.Reason)
	}
	requireEvents(t, got,
		"source: socket replaced by a newer connection: normsim closed the old one with 4409 (replaced by a newer connection)",
		"source: state, read on its replaced socket",
		"source: target-ready from the source, read on its replaced socket after a newer connection took over (4409): frame target-ready is out of phase; discarded",
		"source: state from the source: it was answered already, on the connection this one replaced; discarded",
		"source: abort: test over")
}

// waitMigration polls a migration until done holds, for up to 10 s.
func waitMigration(t *testing.T, mgr *manager.Manager, id string, done func(*sim.Migration) bool) *sim.Migration {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		m, err := mgr.Migration(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if done(m) || time.Now().After(deadline) {
			return m
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// requireEvents fails unless the timeline has events starting with each of
// want ("side: detail"), in that order.
func requireEvents(t *testing.T, m *sim.Migration, want ...string) {
	t.Helper()
	var lines []string
	i := 0
	for _, ev := range m.Events {
		line := ev.Side + ": " + ev.Detail
		lines = append(lines, line)
		if i < len(want) && strings.HasPrefix(line, want[i]) {
			i++
		}
	}
	if i < len(want) {
		t.Fatalf("timeline lacks %q (in order); it is:\n%s", want[i], strings.Join(lines, "\n"))
	}
}
