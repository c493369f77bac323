package manager

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/normsim/normsim/sim"
	"github.com/normsim/normsim/sim/sqlite"
	"github.com/normsim/normsim/sim/template"
)

// The parts a manager test builds a Manager from; exported for the
// manager_test package too.

// NewMemStore is a fresh in-memory store, closed when the test ends.
func NewMemStore(tb testing.TB) *sqlite.Store {
	tb.Helper()
	store, err := sqlite.Open(context.Background(), sqlite.Memory)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { store.Close() })
	return store
}

// newExternalManager is a manager of nodes a and b over store, with the
// repository's templates on the external runtime, closed when the test
// ends.
func newExternalManager(tb testing.TB, store sim.Store) *Manager {
	tb.Helper()
	m := New(Config{Nodes: []Node{{Node: sim.Node{Name: "a"}}, {Node: sim.Node{Name: "b"}}}, Store: store, Catalog: RepoCatalog(tb),
		Runtimes: sim.RuntimeSet{Runtimes: map[string]sim.Runtime{sim.RuntimeExternal: External{}}, Default: sim.RuntimeExternal}})
	tb.Cleanup(func() { m.Close() })
	return m
}

// RepoCatalog is the repository's templates (../../templates).
func RepoCatalog(tb testing.TB) *template.Catalog {
	tb.Helper()
	catalog, err := template.LoadDirs(filepath.Join("..", "..", "templates"))
	if err != nil {
		tb.Fatal(err)
	}
	return catalog
}
