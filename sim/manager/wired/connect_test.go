package wired_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/normsim/normsim/internal/testjob"
	"github.com/normsim/normsim/protocol"
	"github.com/normsim/normsim/sim"
	"github.com/normsim/normsim/sim/jobsocket"
	"github.com/normsim/normsim/sim/manager"
)

// TestConnectedBeforeHelloAck (issue 31): "connected" is one fact. The
// listener tells the manager of a connection before it writes hello-ack,
// so a job that has read hello-ack is connected in the manager's record
// too, and a migrate it asks for at once starts (it once failed with 422
// "not connected", 1 in 1,000 in normsim bench, and then waited up to 5 s
// for the news). The manager hears of the connection here a while after
// the listener knows it: the job must not read hello-ack before that.
func TestConnectedBeforeHelloAck(t *testing.T) {
	ctx := context.Background()
	var mgr *manager.Manager
	nodes := socketNodes(t, func(ev jobsocket.Event) {
		if ev.Kind == jobsocket.Connected && ev.Node == "a" {
			time.Sleep(100 * time.Millisecond)
		}
		mgr.OnSocketEvent(ev)
	})
	mgr = runtimeManager(t, nodes, manager.External{})

	in, err := mgr.Launch(ctx, sim.LaunchRequest{Template: "counter", Node: "a"})
	if err != nil {
		t.Fatal(err)
	}
	in, err = mgr.Instance(ctx, in.ID)
	if err != nil {
		t.Fatal(err)
	}
	j := testjob.Dial(t, in.Env["counter"]) // returns once hello-ack is read
	got, err := mgr.Instance(ctx, in.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !got.Connected {
		t.Fatal("the job has read hello-ack, but the manager's record says it is not connected")
	}
	m, err := mgr.Migrate(ctx, in.ID, manager.MigrateRequest{Strategy: string(sim.Handover)})
	if err != nil {
		t.Fatalf("migrate right after hello-ack: %v", err)
	}
	if gs := j.Expect(protocol.TypeGetState); gs.MigrationID != m.ID {
		t.Fatalf("get-state names migration %q, want %q", gs.MigrationID, m.ID)
	}
}

// heldStart is the external runtime with a Start that returns when the
// test lets it: the instance stays "starting" while its job connects.
type heldStart struct {
	manager.External
	release chan struct{}
}

func (h heldStart) Start(ctx context.Context, id string) error {
	select {
	case <-h.release:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// TestMigrateWhileItsStartEnds: the manager marks an instance running when
// its start goroutine gets there, which a job that connects and migrates at
// once can beat (CI saw "instance … is starting; only a running instance
// can migrate"). A connected job is running: the request waits for the
// start and then migrates.
func TestMigrateWhileItsStartEnds(t *testing.T) {
	ctx := context.Background()
	var mgr *manager.Manager
	nodes := socketNodes(t, func(ev jobsocket.Event) { mgr.OnSocketEvent(ev) })
	rt := heldStart{release: make(chan struct{})}
	mgr = runtimeManager(t, nodes, rt)

	in, err := mgr.Launch(ctx, sim.LaunchRequest{Template: "counter", Node: "a"})
	if err != nil {
		t.Fatal(err)
	}
	if in, err = mgr.Instance(ctx, in.ID); err != nil {
		t.Fatal(err)
	}
	j := testjob.Dial(t, in.Env["counter"])
	type result struct {
		m   *sim.Migration
		err error
	}
	migrated := make(chan result, 1)
	go func() {
		m, err := mgr.Migrate(ctx, in.ID, manager.MigrateRequest{Strategy: string(sim.Handover)})
		migrated <- result{m, err}
	}()
	select {
	case r := <-migrated:
		t.Fatalf("migrate answered while the start had not ended: %v, %v", r.m, r.err)
	case <-time.After(100 * time.Millisecond):
	}
	close(rt.release)
	r := <-migrated
	if r.err != nil {
		t.Fatalf("migrate once the start ended: %v", r.err)
	}
	if gs := j.Expect(protocol.TypeGetState); gs.MigrationID != r.m.ID {
		t.Fatalf("get-state names migration %q, want %q", gs.MigrationID, r.m.ID)
	}
}

// socketNodes opens a job-socket listener for each of nodes a and b,
// handing its events to onEvent, closed when the test ends.
func socketNodes(t *testing.T, onEvent func(jobsocket.Event)) []manager.Node {
	t.Helper()
	var nodes []manager.Node
	for _, name := range []string{"a", "b"} {
		l := jobsocket.New(jobsocket.Config{Node: name, OnEvent: onEvent})
		if err := l.Open("127.0.0.1:0"); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		nodes = append(nodes, manager.Node{Node: sim.Node{Name: name, SocketPort: l.Port()}, Socket: l})
	}
	return nodes
}

// runtimeManager manages nodes with an in-memory store, the repository's
// templates and rt as its one runtime (named external, the default); it
// closes before the nodes' listeners.
func runtimeManager(t *testing.T, nodes []manager.Node, rt sim.Runtime) *manager.Manager {
	t.Helper()
	mgr := manager.New(manager.Config{Nodes: nodes, Store: newMemStore(t), Catalog: repoCatalog(t),
		Runtimes: sim.RuntimeSet{Runtimes: map[string]sim.Runtime{sim.RuntimeExternal: rt}, Default: sim.RuntimeExternal}})
	t.Cleanup(func() { mgr.Close() })
	return mgr
}

// TestAStoppedInstancesCloseIsSaid (issue 34, round 12): an instance
// normsim removed closed its job's socket with 1000 "instance stopped",
// but its history said only {"connected": false}, shown as "its job's
// socket closed", no code, reason or who closed it: the listener's news
// of the close came after the manager had marked it disconnected, and
// was not published twice.
func TestAStoppedInstancesCloseIsSaid(t *testing.T) {
	ctx := context.Background()
	var mgr *manager.Manager
	nodes := socketNodes(t, func(ev jobsocket.Event) { mgr.OnSocketEvent(ev) })
	bus := sim.NewBus()
	mgr = manager.New(manager.Config{Nodes: nodes, Store: newMemStore(t), Catalog: repoCatalog(t), Bus: bus,
		Runtimes: sim.RuntimeSet{Runtimes: map[string]sim.Runtime{sim.RuntimeExternal: manager.External{}}, Default: sim.RuntimeExternal}})
	t.Cleanup(func() { mgr.Close() })
	in, err := mgr.Launch(ctx, sim.LaunchRequest{Template: "counter", Node: "a"})
	if err != nil {
		t.Fatal(err)
	}
	if in, err = mgr.Instance(ctx, in.ID); err != nil {
		t.Fatal(err)
	}
	testjob.Dial(t, in.Env["counter"])
	sub := bus.Subscribe(64)
	if err := mgr.Stop(ctx, in.ID); err != nil {
		t.Fatal(err)
	}
	for {
		select {
		case ev := <-sub.C:
			if ev.Kind != sim.EventInstanceConnected || ev.Instance != in.ID {
				continue
			}
			var d struct {
				Connected bool   `json:"connected"`
				Code      int    `json:"code"`
				Reason    string `json:"reason"`
				ClosedBy  string `json:"closedBy"`
			}
			if err := json.Unmarshal(ev.Data, &d); err != nil {
				t.Fatal(err)
			}
			if d.Connected {
				continue
			}
			if d.Code != 1000 || d.Reason != "instance stopped" || d.ClosedBy != sim.ClosedByWorker.String() {
				t.Fatalf("the close on stop is published as %s, want code 1000, reason instance stopped, closed by the worker", ev.Data)
			}
			return
		case <-time.After(5 * time.Second):
			t.Fatal("no disconnection published for the stopped instance")
		}
	}
}
