package manager

import (
	"context"
	"testing"
	"time"

	"github.com/normsim/normsim/sim"
)

// adopter is a runtime that says an earlier run left instances running.
type adopter struct {
	External
	left             map[string]bool
	adopted, removed []string
}

func (a *adopter) Name() string { return sim.RuntimeDocker }

func (a *adopter) Leftovers(context.Context) (map[string]bool, error) { return a.left, nil }

func (a *adopter) Adopt(_ context.Context, id string) error {
	a.adopted = append(a.adopted, id)
	return nil
}

func (a *adopter) RemoveInstance(_ context.Context, id string) error {
	a.removed = append(a.removed, id)
	return nil
}

// TestRecoverAdoptsAContainerKilledWhileStarting: normsim was killed
// right after a launch answered, so the store still says "starting";
// the container is up, and is adopted (and running), not removed.
func TestRecoverAdoptsAContainerKilledWhileStarting(t *testing.T) {
	ctx := context.Background()
	store := NewMemStore(t)
	now := time.Now()
	in := &sim.Instance{ID: "counter-abc123", JobID: "job-1", Role: "counter-abc123", Node: "a", Template: "counter",
		Runtime: sim.RuntimeDocker, State: sim.InstanceStarting, CreatedAt: now, UpdatedAt: now}
	if err := store.SaveInstance(ctx, in); err != nil {
		t.Fatal(err)
	}
	rt := &adopter{left: map[string]bool{in.ID: true}}
	m := New(Config{Nodes: []Node{{Node: sim.Node{Name: "a"}}}, Store: store, Catalog: RepoCatalog(t),
		Runtimes: map[string]sim.Runtime{sim.RuntimeDocker: rt}, DefaultRuntime: sim.RuntimeDocker})
	defer m.Close()
	if err := m.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	if len(rt.adopted) != 1 || len(rt.removed) != 0 {
		t.Fatalf("adopted %v, removed %v; want the starting instance adopted", rt.adopted, rt.removed)
	}
	got, err := m.Instance(ctx, in.ID)
	if err != nil || got.State != sim.InstanceRunning {
		t.Fatalf("after recovery: %+v, %v", got, err)
	}
}
