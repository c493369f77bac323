package manager

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/normsim/normsim/sim"
	"github.com/normsim/normsim/sim/memstore"
)

// readCountingStore counts the reads of a migration with its timeline
// and without.
type readCountingStore struct {
	*memstore.Store
	full, summary atomic.Int32
}

func (s *readCountingStore) GetMigration(ctx context.Context, id string) (*sim.Migration, error) {
	s.full.Add(1)
	return s.Store.GetMigration(ctx, id)
}

func (s *readCountingStore) GetMigrationSummary(ctx context.Context, id string) (*sim.Migration, error) {
	s.summary.Add(1)
	return s.Store.GetMigrationSummary(ctx, id)
}

// TestMigrationSummaryReadsNoTimeline: a stored migration asked for
// without its timeline (GET …?events=false, at once or after a wait) is
// read without it, not read whole and cut; asked for whole, it has it.
func TestMigrationSummaryReadsNoTimeline(t *testing.T) {
	ctx := context.Background()
	store := &readCountingStore{Store: NewMemStore(t)}
	m := newExternalManager(t, store)
	at := time.Unix(1700000000, 0).UTC()
	if err := store.SaveMigration(ctx, &sim.Migration{ID: "m1", JobID: "j", State: sim.MigrationCompleted, Phase: sim.PhaseStopSource, StartedAt: at}); err != nil {
		t.Fatal(err)
	}
	if err := store.AppendMigrationEvents(ctx, "m1", []sim.MigrationEvent{{Seq: 0, At: at, Detail: "requested"}, {Seq: 1, At: at, Detail: "ended"}}); err != nil {
		t.Fatal(err)
	}
	for name, read := range map[string]func() (*sim.Migration, error){
		"MigrationSummary":      func() (*sim.Migration, error) { return m.MigrationSummary(ctx, "m1") },
		"AwaitMigrationSummary": func() (*sim.Migration, error) { return m.AwaitMigrationSummary(ctx, "m1", -1) },
	} {
		got, err := read()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if got.State != sim.MigrationCompleted || got.Events != nil {
			t.Errorf("%s: state %s with %d events, want completed and no timeline", name, got.State, len(got.Events))
		}
	}
	if full, summary := store.full.Load(), store.summary.Load(); full != 0 || summary != 2 {
		t.Errorf("the store read the migration whole %d times and without its timeline %d times, want 0 and 2", full, summary)
	}
	whole, err := m.Migration(ctx, "m1")
	if err != nil || len(whole.Events) != 2 {
		t.Fatalf("Migration: %v with %v, want its 2 events", whole, err)
	}
}
