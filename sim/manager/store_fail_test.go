package manager

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/normsim/normsim/sim"
	"github.com/normsim/normsim/sim/memstore"
)

// failingStore is a real store whose writes fail while broken is set, as
// a full disk makes them.
type failingStore struct {
	*memstore.Store
	broken atomic.Bool
}

var errDiskFull = errors.New("database or disk is full")

func (s *failingStore) fail() error {
	if s.broken.Load() {
		return errDiskFull
	}
	return nil
}

func (s *failingStore) SaveInstance(ctx context.Context, in *sim.Instance) error {
	if err := s.fail(); err != nil {
		return err
	}
	return s.Store.SaveInstance(ctx, in)
}

func (s *failingStore) SaveMigration(ctx context.Context, m *sim.Migration) error {
	if err := s.fail(); err != nil {
		return err
	}
	return s.Store.SaveMigration(ctx, m)
}

func (s *failingStore) AppendEvents(ctx context.Context, evs []sim.Event) error {
	if err := s.fail(); err != nil {
		return err
	}
	return s.Store.AppendEvents(ctx, evs)
}

func (s *failingStore) DeleteInstance(ctx context.Context, id string) error {
	if err := s.fail(); err != nil {
		return err
	}
	return s.Store.DeleteInstance(ctx, id)
}

func (s *failingStore) AppendMigrationEvents(ctx context.Context, id string, evs []sim.MigrationEvent) error {
	if err := s.fail(); err != nil {
		return err
	}
	return s.Store.AppendMigrationEvents(ctx, id, evs)
}

// Batch is left to the embedded store: each write in it fails on its own.

// TestStoreThatCannotWriteRefusesWorkAndLosesNothing: while the store
// cannot write, launches and migrations are refused with 503 saying why,
// and what happened meanwhile is held; once it writes again, the held
// records reach it and work is taken again.
func TestStoreThatCannotWriteRefusesWorkAndLosesNothing(t *testing.T) {
	ctx := context.Background()
	store := &failingStore{Store: NewMemStore(t)}
	m := newExternalManager(t, store)
	in, err := m.Launch(ctx, sim.LaunchRequest{Template: "plain", Node: "a"})
	if err != nil {
		t.Fatal(err)
	}
	m.Flush()
	store.broken.Store(true)
	// Something to record while the disk is full: the instance is stopped.
	if err := m.Stop(ctx, in.ID); err != nil {
		t.Fatal(err)
	}
	m.Flush()
	if !errors.Is(m.StoreError(), errDiskFull) {
		t.Fatalf("StoreError = %v while the store fails", m.StoreError())
	}
	_, err = m.Launch(ctx, sim.LaunchRequest{Template: "plain", Node: "a"})
	if sim.ErrorCode(err) != sim.EUnavailable || !strings.Contains(err.Error(), "the store cannot write (database or disk is full)") {
		t.Fatalf("launch while the store fails: %v, want 503 saying why", err)
	}
	if _, err := m.Migrate(ctx, in.ID, sim.MigrateRequest{}); sim.ErrorCode(err) != sim.EUnavailable {
		t.Fatalf("migrate while the store fails: %v, want 503", err)
	}
	// The store has not heard of the stop yet…
	if _, err := store.Store.GetInstance(ctx, in.ID); err != nil {
		t.Fatalf("the instance vanished from the store: %v", err)
	}
	store.broken.Store(false)
	// …and does once it can write: the retry needs no new record.
	for deadline := time.Now().Add(10 * time.Second); m.StoreError() != nil; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the store never recovered")
		}
	}
	m.Flush()
	if _, err := store.Store.GetInstance(ctx, in.ID); sim.ErrorCode(err) != sim.ENotFound {
		t.Fatalf("the stop held while the disk was full did not reach the store: %v", err)
	}
	if _, err := m.Launch(ctx, sim.LaunchRequest{Template: "plain", Node: "a"}); err != nil {
		t.Fatalf("launch after the store came back: %v", err)
	}
}

// TestCloseReportsWhatTheStoreCouldNotKeep: what the store cannot write
// at the end is no silent loss: MarkAllStopped says which instance it
// could not record, and Close how many records the journal gave up, and
// why.
func TestCloseReportsWhatTheStoreCouldNotKeep(t *testing.T) {
	ctx := context.Background()
	store := &failingStore{Store: NewMemStore(t)}
	m := New(Config{Nodes: []Node{{Node: sim.Node{Name: "a"}}}, Store: store, Catalog: RepoCatalog(t)})
	in, err := m.Launch(ctx, sim.LaunchRequest{Template: "plain", Node: "a"})
	if err != nil {
		t.Fatal(err)
	}
	m.Flush()
	store.broken.Store(true)
	err = m.MarkAllStopped()
	if !errors.Is(err, errDiskFull) || !strings.Contains(err.Error(), "record instance "+in.ID+" as stopped") {
		t.Fatalf("MarkAllStopped on a full disk: %v", err)
	}
	// Something the journal must hold: the instance is stopped.
	if err := m.Stop(ctx, in.ID); err != nil {
		t.Fatal(err)
	}
	m.Flush()
	err = m.Close()
	if !errors.Is(err, errDiskFull) || !strings.Contains(err.Error(), "records lost") {
		t.Fatalf("Close with records the store could not write: %v", err)
	}
}

// TestCloseWithNothingLost: a manager whose store wrote everything closes
// without an error.
func TestCloseWithNothingLost(t *testing.T) {
	m := New(Config{Nodes: []Node{{Node: sim.Node{Name: "a"}}}, Store: NewMemStore(t), Catalog: RepoCatalog(t)})
	if _, err := m.Launch(context.Background(), sim.LaunchRequest{Template: "plain", Node: "a"}); err != nil {
		t.Fatal(err)
	}
	if err := m.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
}

// damagedStore is a real store whose file the check at open found damaged.
type damagedStore struct{ *memstore.Store }

func (damagedStore) Damaged() error {
	return errors.New("the store file x.db is damaged (PRAGMA quick_check: *** in database main *** Page 7: btreeInitPage() returns error code 11)")
}

// TestADamagedStoreRefusesNewWork (issue 34 item 10): a store found
// damaged at open is said as a store that cannot write is, and new work
// is refused rather than recorded where it may be lost.
func TestADamagedStoreRefusesNewWork(t *testing.T) {
	m := New(Config{Nodes: []Node{{Node: sim.Node{Name: "a"}}}, Store: damagedStore{NewMemStore(t)}, Catalog: RepoCatalog(t),
		Runtimes: sim.RuntimeSet{Runtimes: map[string]sim.Runtime{sim.RuntimeExternal: External{}}, Default: sim.RuntimeExternal}})
	defer m.Close()
	if err := m.StoreError(); err == nil || !strings.Contains(err.Error(), "is damaged") {
		t.Fatalf("StoreError() = %v", err)
	}
	_, err := m.Launch(context.Background(), sim.LaunchRequest{Template: "counter", Node: "a"})
	if sim.ErrorCode(err) != sim.EUnavailable || !strings.Contains(err.Error(), "is damaged") {
		t.Fatalf("a launch on a damaged store: %v", err)
	}
}
