package manager

import (
	"context"
	"maps"
	"path/filepath"
	"sync"
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

// NewMarkedStore is NewMemStore with marks.
func NewMarkedStore(tb testing.TB) *MarkedStore {
	return &MarkedStore{Store: NewMemStore(tb), marks: map[string]bool{}}
}

// MarkedStore is a store in memory with point-of-no-return marks
// (sim.NoReturnMarks), read as a killed normsim would have left them.
type MarkedStore struct {
	*memstore.Store
	mu      sync.Mutex
	marks   map[string]bool
	cleared bool
	// Refuse, when set, is every mark's error, as of a disk gone bad.
	Refuse error
}

func (s *MarkedStore) MarkBegun(id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.Refuse != nil {
		return s.Refuse
	}
	s.marks[id] = false
	return nil
}

func (s *MarkedStore) MarkPassed(id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.marks[id]; ok {
		s.marks[id] = true
	}
	return nil
}

func (s *MarkedStore) MarkEnded(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.marks, id)
}

func (s *MarkedStore) Marks() (map[string]bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.marks), nil
}

// Marked is migration id's mark: whether it passed, and whether it is
// marked at all.
func (s *MarkedStore) Marked(id string) (passed, marked bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	passed, marked = s.marks[id]
	return passed, marked
}

// Cleared says whether ClearMarks ran.
func (s *MarkedStore) Cleared() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cleared
}

func (s *MarkedStore) ClearMarks() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.marks, s.cleared = map[string]bool{}, true
	return nil
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
