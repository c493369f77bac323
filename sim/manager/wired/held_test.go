package wired_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/normsim/normsim/internal/testjob"
	"github.com/normsim/normsim/protocol"
	"github.com/normsim/normsim/sim"
	"github.com/normsim/normsim/sim/manager"
)

// heldPastTimeout holds frame for twice the state timeout: the phase gives
// up on it half way through its hold.
func heldPastTimeout(frame string) manager.MigrateRequest {
	const timeout = 150 * time.Millisecond
	return manager.MigrateRequest{Strategy: string(sim.Handover), Timeouts: sim.Timeouts{State: sim.Duration(timeout)},
		Faults: []sim.Fault{{Kind: "delay-frame", Frame: frame, Delay: sim.Duration(2 * timeout)}}}
}

// handoverSource launches a counter on node a of a manager over store,
// connects its job and returns both.
func handoverSource(t *testing.T, store sim.Store) (*manager.Manager, sim.Instance, *testjob.Job) {
	t.Helper()
	ctx := context.Background()
	var mgr *manager.Manager
	nodes := socketNodes(t, func(ev sim.SocketEvent) { mgr.OnSocketEvent(ev) })
	mgr = manager.New(manager.Config{Nodes: nodes, Store: store, Catalog: repoCatalog(t),
		Runtimes: sim.RuntimeSet{Runtimes: map[string]sim.Runtime{sim.RuntimeExternal: manager.External{}}, Default: sim.RuntimeExternal}})
	t.Cleanup(func() { mgr.Close() })
	launched, err := mgr.Launch(ctx, sim.LaunchRequest{Template: "counter", Node: "a"})
	if err != nil {
		t.Fatal(err)
	}
	in, err := mgr.Instance(ctx, launched.ID)
	if err != nil {
		t.Fatal(err)
	}
	return mgr, in, testjob.Dial(t, in.Env["counter"])
}

// TestHeldFramePastItsTimeoutIsLate (issue 29 item 8): a frame a
// delay-frame fault holds past its phase's timeout is recorded, when its
// hold ends, as late on its migration's timeline, saying how long it was
// held, how late it came and what became of it: also once the migration
// has ended and left memory for the store.
func TestHeldFramePastItsTimeoutIsLate(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		frame string
		want  string
		then  string
	}{
		{protocol.TypeGetState, "late get-state to the source: held 300ms by a delay-frame fault, it came ", "; sent; an answer to it is late"},
		{protocol.TypeState, "late state from the source: held 300ms by a delay-frame fault, it came ", "; ignored"},
	} {
		t.Run(tt.frame, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			store := newMemStore(t)
			mgr, src, j := handoverSource(t, store)
			m, err := mgr.Migrate(ctx, src.ID, heldPastTimeout(tt.frame))
			if err != nil {
				t.Fatal(err)
			}
			if tt.frame == protocol.TypeState {
				j.Expect(protocol.TypeGetState)
				j.Send(protocol.JobFrame{Type: protocol.TypeState, Payload: json.RawMessage(`1`)})
			}
			deadline := time.Now().Add(10 * time.Second)
			for {
				stored, err := store.GetMigration(ctx, m.ID)
				if err == nil && stored.State == sim.MigrationAborted {
					for _, ev := range stored.Events {
						if strings.HasPrefix(ev.Detail, tt.want) && strings.HasSuffix(ev.Detail, tt.then) && strings.Contains(ev.Detail, " after ") {
							return
						}
					}
				}
				if time.Now().After(deadline) {
					var lines []string
					if stored != nil {
						for _, ev := range stored.Events {
							lines = append(lines, ev.Side+": "+ev.Detail)
						}
					}
					t.Fatalf("the stored timeline has no %q…%q; it is:\n%s", tt.want, tt.then, strings.Join(lines, "\n"))
				}
				time.Sleep(10 * time.Millisecond)
			}
		})
	}
}

// TestHeldFrameKeepsTheSocketsOrder (issue 29 item 8): a frame held on its
// way to a job is not overtaken on that socket by frames sent after it:
// neither by its migration's rollback abort nor by a later migration's
// get-state. One TCP connection delivers in the order written.
func TestHeldFrameKeepsTheSocketsOrder(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	mgr, src, j := handoverSource(t, newMemStore(t))
	m1, err := mgr.Migrate(ctx, src.ID, heldPastTimeout(protocol.TypeGetState))
	if err != nil {
		t.Fatal(err)
	}
	if got := waitMigration(t, mgr, m1.ID, func(m *sim.Migration) bool { return m.State != sim.MigrationRunning }); got.State != sim.MigrationAborted {
		t.Fatalf("first migration %s (%s), want aborted by the state timeout", got.State, got.Reason)
	}
	m2, err := mgr.Migrate(ctx, src.ID, manager.MigrateRequest{Strategy: string(sim.Handover)})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []struct{ typ, migration string }{
		{protocol.TypeGetState, m1.ID}, {protocol.TypeAbort, m1.ID}, {protocol.TypeGetState, m2.ID},
	} {
		if f := j.Read(); f.Type != want.typ || f.MigrationID != want.migration {
			t.Fatalf("the source read %s of %s, want %s of %s", f.Type, f.MigrationID, want.typ, want.migration)
		}
	}
	j.Send(protocol.JobFrame{Type: protocol.TypeStateRefused, Reason: "test over"})
	if got := waitMigration(t, mgr, m2.ID, func(m *sim.Migration) bool { return m.State != sim.MigrationRunning }); got.State != sim.MigrationRefused {
		t.Fatalf("second migration %s (%s), want refused", got.State, got.Reason)
	}
}

// TestHeldJobFrameKeepsTheSocketsOrder (issue 29 item 8): what a job sends
// after a frame a fault holds on its way to normsim waits behind it. A
// source that answers get-state and then aborts has its state handled
// first (the migration goes on to place the target), then its abort.
func TestHeldJobFrameKeepsTheSocketsOrder(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	mgr, src, j := handoverSource(t, newMemStore(t))
	m, err := mgr.Migrate(ctx, src.ID, manager.MigrateRequest{Strategy: string(sim.Handover), Timeouts: sim.Timeouts{State: sim.Duration(5 * time.Second)},
		Faults: []sim.Fault{{Kind: "delay-frame", Frame: protocol.TypeState, Delay: sim.Duration(200 * time.Millisecond)}}})
	if err != nil {
		t.Fatal(err)
	}
	j.Expect(protocol.TypeGetState)
	j.Send(protocol.JobFrame{Type: protocol.TypeState, Payload: json.RawMessage(`1`)})
	j.Send(protocol.JobFrame{Type: protocol.TypeAbort, Reason: "changed my mind"})
	got := waitMigration(t, mgr, m.ID, func(m *sim.Migration) bool { return m.State != sim.MigrationRunning })
	if got.State != sim.MigrationAborted || got.Target.Instance == "" {
		t.Fatalf("migration %s (%s), target %q; want the state used (a target placed), then aborted by the source", got.State, got.Reason, got.Target.Instance)
	}
	requireEvents(t, got, "manager: fault: state from the source held for 200ms", "source: state", "source: abort: changed my mind",
		"manager: migration aborted: the source aborted: changed my mind")
}

// TestHeldFrameIsLostWithItsConnection (issue 29 item 8): a frame held on
// its way to a job whose connection a newer one replaces is lost with the
// old connection, as data in flight on it is, and recorded so; it is not
// delivered on the newer connection.
func TestHeldFrameIsLostWithItsConnection(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	mgr, src, _ := handoverSource(t, newMemStore(t))
	m, err := mgr.Migrate(ctx, src.ID, manager.MigrateRequest{Strategy: string(sim.Handover), Timeouts: sim.Timeouts{State: sim.Duration(time.Second)},
		Faults: []sim.Fault{{Kind: "delay-frame", Frame: protocol.TypeGetState, Delay: sim.Duration(time.Second)}}})
	if err != nil {
		t.Fatal(err)
	}
	// The newer connection comes once get-state is held on its way to the
	// old one: dialled sooner, get-state would be on its way to the newer.
	waitMigration(t, mgr, m.ID, func(m *sim.Migration) bool {
		for _, ev := range m.Events {
			if strings.Contains(ev.Detail, "get-state to the source held for") {
				return true
			}
		}
		return false
	})
	newer := testjob.Dial(t, src.Env["counter"])
	if f := newer.Read(); f.Type != protocol.TypeAbort {
		t.Fatalf("the newer connection read %s, want only the rollback's abort", f.Type)
	}
	got := waitMigration(t, mgr, m.ID, func(m *sim.Migration) bool { return m.State != sim.MigrationRunning })
	requireEvents(t, got, "manager: fault: get-state to the source held for 1s",
		"source: socket replaced by a newer connection: normsim closed the old one with 4409",
		"manager: fault: the held get-state to the source was discarded: a newer connection replaced the one it was written to (4409)",
		"manager: migration aborted: timed out after 1s waiting for the source's state")
}
