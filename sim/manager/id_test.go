package manager

import (
	"context"
	"testing"
	"time"

	"github.com/normsim/normsim/sim"
)

// TestInstanceIDsNeverCollide: a drawn name that an instance here, or one
// in the store's history, already has is drawn again, so a new instance
// never replaces an older one.
func TestInstanceIDsNeverCollide(t *testing.T) {
	ctx := context.Background()
	store := NewMemStore(t)
	old := &sim.Instance{ID: "plain-000002", JobID: "job-old", Role: "plain-000002", State: sim.InstanceStopped,
		CreatedAt: time.Now(), UpdatedAt: time.Now()}
	if err := store.SaveInstance(ctx, old); err != nil {
		t.Fatal(err)
	}
	m := New(Config{Nodes: []Node{{Node: sim.Node{Name: "a"}}, {Node: sim.Node{Name: "b"}}}, Store: store, Catalog: RepoCatalog(t),
		Runtimes: sim.RuntimeSet{Runtimes: map[string]sim.Runtime{sim.RuntimeExternal: External{}}, Default: sim.RuntimeExternal}})
	defer m.Close()

	draws := []string{"000001", "000001", "000002", "000003"}
	real := randomHex
	randomHex = func(n int) string {
		if n == 3 && len(draws) > 0 {
			d := draws[0]
			draws = draws[1:]
			return d
		}
		return real(n)
	}
	defer func() { randomHex = real }()

	var ids []string
	for range 2 {
		in, err := m.Launch(ctx, sim.LaunchRequest{Template: "plain", Node: "a"})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, in.ID)
	}
	// The second launch drew 000001 (held here), then 000002 (in the
	// store's history), then 000003.
	if ids[0] != "plain-000001" || ids[1] != "plain-000003" {
		t.Fatalf("instance IDs = %v, want plain-000001 plain-000003", ids)
	}
	got, err := store.GetInstance(ctx, "plain-000002")
	if err != nil || got.JobID != "job-old" {
		t.Fatalf("the stored instance = %+v, %v", got, err)
	}
}
