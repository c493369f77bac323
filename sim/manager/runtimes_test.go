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

// lateRegistry knows its runtimes once known is closed, as start-up's
// registry does when Docker is settled after ready.
type lateRegistry struct {
	known  chan struct{}
	set    sim.RuntimeSet
	engine *sim.Engine
}

func (r *lateRegistry) Wait() sim.RuntimeSet {
	<-r.known
	return r.set
}

func (r *lateRegistry) Engine() *sim.Engine {
	select {
	case <-r.known:
		return r.engine
	default:
		return nil
	}
}

// TestRuntimesLater: with a registry that learns the runtimes after New, a
// launch made before they are known waits for them and runs with the
// default they bring, and the nodes name the engine once it is known.
func TestRuntimesLater(t *testing.T) {
	ctx := context.Background()
	store, catalog := NewMemStore(t), RepoCatalog(t)
	reg := &lateRegistry{known: make(chan struct{})}
	m := New(Config{Nodes: []Node{{Node: sim.Node{Name: "a"}}}, Store: store, Catalog: catalog, Runtimes: reg})
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
	if e := m.Nodes()[0].Engine; e != nil {
		t.Fatalf("a node names engine %v before the runtimes are known", e)
	}
	// "late" stands in for a runtime found after ready; as the default it
	// must be what the waiting launch gets.
	reg.set = sim.RuntimeSet{Runtimes: map[string]sim.Runtime{"late": lateRuntime{}}, Default: "late"}
	reg.engine = &sim.Engine{Context: "default", Host: "unix:///var/run/docker.sock", Version: "28.0.0"}
	close(reg.known)
	in := <-launched
	if in.Runtime != "late" {
		t.Fatalf("launch used runtime %q, want the default that came later", in.Runtime)
	}
	if got := m.Runtimes(); !slices.Equal(got, []string{sim.RuntimeExternal, "late"}) {
		t.Fatalf("Runtimes() = %v", got)
	}
	if e := m.Nodes()[0].Engine; e != reg.engine {
		t.Fatalf("the node names engine %v, want %v", e, reg.engine)
	}
}

// TestNoRuntimes: a manager given no runtimes knows the external one only,
// and it is the default.
func TestNoRuntimes(t *testing.T) {
	m := New(Config{Store: NewMemStore(t), Catalog: RepoCatalog(t)})
	defer m.Close()
	if got, def := m.Runtimes(), m.DefaultRuntime(); !slices.Equal(got, []string{sim.RuntimeExternal}) || def != sim.RuntimeExternal {
		t.Fatalf("without runtimes: %v, default %q", got, def)
	}
}
