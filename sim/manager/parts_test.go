package manager

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/normsim/normsim/sim"
	"github.com/normsim/normsim/sim/memstore"
	"github.com/normsim/normsim/sim/template"
)

// The parts a manager test builds a Manager from; exported for the
// manager_test package too.

// NewMemStore is a fresh store in memory (sim/memstore, held to the SQLite
// store's contract by sim/storetest), closed when the test ends.
func NewMemStore(tb testing.TB) *memstore.Store {
	tb.Helper()
	store := memstore.New()
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
	catalog, err := template.LoadDirs(tb.Context(), filepath.Join("..", "..", "templates"))
	if err != nil {
		tb.Fatal(err)
	}
	return catalog
}

// HoldAfterRelay makes every relay of the given frame hold the owner (and
// the run's lock) for d after it is decided, before its event is handed to
// the steps, until the test ends: a deadline then falls inside the relay.
func HoldAfterRelay(t *testing.T, relay string, d time.Duration) {
	hold := func(r string) {
		if r == relay {
			time.Sleep(d)
		}
	}
	testHookRelayed.Store(&hold)
	t.Cleanup(func() { testHookRelayed.Store(nil) })
}

// EndedTimeline is how many timeline events the ended migration that
// instance last took part in still holds in memory; false when none is
// held for it (Manager.ended).
func (m *Manager) EndedTimeline(instance string) (int, bool) {
	m.mu.Lock()
	r := m.ended[instance]
	m.mu.Unlock()
	if r == nil {
		return 0, false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.mig.Events), true
}

// StoredMigration is the migration's document as the store holds it, not
// as the run in memory has it.
func (m *Manager) StoredMigration(ctx context.Context, id string) (*sim.Migration, error) {
	return m.cfg.Store.GetMigrationSummary(ctx, id)
}
