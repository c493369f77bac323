package manager

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/normsim/normsim/sim"
)

// lateRuntime is the external runtime under another name.
type lateRuntime struct{ External }

func (lateRuntime) Name() string { return "late" }

// TestRuntimesLater: with RuntimesLater, a launch made before the runtimes
// are known waits for them and runs with the default they bring; a manager
// closed before they come knows the external runtime only.
func TestRuntimesLater(t *testing.T) {
	ctx := context.Background()
	store, catalog := NewMemStore(t), RepoCatalog(t)
	later := make(chan RuntimeSet, 1)
	m := New(Config{Nodes: []Node{{Node: sim.Node{Name: "a"}}}, Store: store, Catalog: catalog, RuntimesLater: later})
	defer m.Close()

	launched := make(chan sim.Instance, 1)
	go func() {
		in, err := m.Launch(ctx, sim.LaunchRequest{Template: "plain", Node: "a"})
		if err != nil {
			t.Error(err)
		}
		launched <- in
	}()
	select {
	case in := <-launched:
		t.Fatalf("launch ran before the runtimes were known: %+v", in)
	case <-time.After(50 * time.Millisecond):
	}
	// "late" stands in for a runtime found after ready; as the default it
	// must be what the waiting launch gets.
	later <- RuntimeSet{Runtimes: map[string]sim.Runtime{"late": lateRuntime{}}, Default: "late"}
	in := <-launched
	if in.Runtime != "late" {
		t.Fatalf("launch used runtime %q, want the default that came later", in.Runtime)
	}
	if got := m.Runtimes(); !slices.Equal(got, []string{sim.RuntimeExternal, "late"}) {
		t.Fatalf("Runtimes() = %v", got)
	}

	closed := New(Config{Store: store, Catalog: catalog, RuntimesLater: make(chan RuntimeSet)})
	closed.Close()
	if got, def := closed.Runtimes(), closed.DefaultRuntime(); !slices.Equal(got, []string{sim.RuntimeExternal}) || def != sim.RuntimeExternal {
		t.Fatalf("closed before the runtimes came: %v, default %q", got, def)
	}
}
