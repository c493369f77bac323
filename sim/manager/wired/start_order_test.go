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
	"github.com/normsim/normsim/sim/jobsocket"
	"github.com/normsim/normsim/sim/manager"
)

// slowStart is the external runtime whose Start returns only when the test
// says so, as a Docker start call can return after the job inside it has
// already connected.
type slowStart struct {
	manager.External
	gate chan struct{}
}

func (s slowStart) Start(ctx context.Context, id string) error {
	if strings.Contains(id, "counter") && s.gate != nil {
		select {
		case <-s.gate:
		case <-ctx.Done():
		}
	}
	return nil
}

// TestTargetStartedBeforeItConnects: the target's job connects while the
// start call is still running. It cannot have connected before it was
// started, so the timeline says "target started" before "connected", and
// no event is stamped earlier than the one before it.
func TestTargetStartedBeforeItConnects(t *testing.T) {
	ctx := context.Background()
	var mgr *manager.Manager
	rt := slowStart{}
	nodes := socketNodes(t, func(ev jobsocket.Event) { mgr.OnSocketEvent(ev) })
	mgr = runtimeManager(t, nodes, &rt)

	in, err := mgr.Launch(ctx, sim.LaunchRequest{Template: "counter", Node: "a"})
	if err != nil {
		t.Fatal(err)
	}
	in, _ = mgr.Instance(ctx, in.ID)
	src := testjob.Dial(t, in.Env["counter"])
	// Running, not only connected: its own start call must be over before
	// the gate below holds start calls.
	waitUntil(t, "the source to run and connect", func() bool {
		got, _ := mgr.Instance(ctx, in.ID)
		return got.Connected && got.State == sim.InstanceRunning
	})

	gate := make(chan struct{})
	rt.gate = gate // from here on, a start call waits for the gate
	m, err := mgr.Migrate(ctx, in.ID, manager.MigrateRequest{Strategy: string(sim.Handover)})
	if err != nil {
		t.Fatal(err)
	}
	src.Expect(protocol.TypeGetState)
	src.Send(protocol.JobFrame{Type: protocol.TypeState, Payload: json.RawMessage(`{"next":1}`)})
	tgt := testjob.Dial(t, placedTargetEnv(t, mgr, m.ID)) // connects while the start call waits
	tgt.Expect(protocol.TypeInitialState)
	close(gate)
	tgt.Send(protocol.JobFrame{Type: protocol.TypeTargetReady, Payload: json.RawMessage(`null`)})
	src.Expect(protocol.TypeCutoverReady)
	src.Send(protocol.JobFrame{Type: protocol.TypeSourceStoppedOutput, Payload: json.RawMessage(`{"last":0}`)})
	tgt.Expect(protocol.TypeCutoverApply)
	tgt.Send(protocol.JobFrame{Type: protocol.TypeTargetApplied, Applied: []string{"counter"}})
	done := endedMigration(t, mgr, m.ID)

	started, connected := -1, -1
	for i, ev := range done.Events {
		if i > 0 && ev.At.Before(done.Events[i-1].At) {
			t.Errorf("event %d (%s) is stamped before event %d (%s)", ev.Seq, ev.Detail, done.Events[i-1].Seq, done.Events[i-1].Detail)
		}
		if ev.Side != "target" {
			continue
		}
		switch {
		// The slow runtime stands in under the external runtime's name, whose
		// start event says the developer starts the job.
		case strings.HasPrefix(ev.Detail, "waiting for the developer to start the target's job") && started < 0:
			started = i
		case strings.HasPrefix(ev.Detail, "connected") && connected < 0:
			connected = i
		}
	}
	if started < 0 || connected < 0 || started > connected {
		t.Fatalf("want target started (at %d) before the target connected (at %d)\n%s", started, connected, sim.FormatTimeline(done))
	}
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// placedTargetEnv waits for the migration to place its target and returns
// the env its job connects with.
func placedTargetEnv(t *testing.T, mgr *manager.Manager, migID string) map[string]string {
	t.Helper()
	ctx := context.Background()
	var env map[string]string
	waitUntil(t, "the target to be placed", func() bool {
		got, err := mgr.Migration(ctx, migID)
		if err == nil && got.Target.Instance != "" {
			tgt, _ := mgr.Instance(ctx, got.Target.Instance)
			env = tgt.Env["counter"]
		}
		return env != nil
	})
	return env
}

// endedMigration waits for the migration to end and returns it.
func endedMigration(t *testing.T, mgr *manager.Manager, migID string) *sim.Migration {
	t.Helper()
	var done *sim.Migration
	waitUntil(t, "the migration to end", func() bool {
		done, _ = mgr.Migration(context.Background(), migID)
		return done != nil && done.State.Ended()
	})
	return done
}
