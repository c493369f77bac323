package manager

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"weak"

	"github.com/normsim/normsim/sim"
)

// TestJournalWritesTheLastSnapshotInTheFirstPlace: of several writes of
// one record in a burst only the last is made, where the first was, so a
// migration's row still precedes its events (their foreign key needs it);
// writes without a key all happen, in order, and a flush is told after.
func TestJournalWritesTheLastSnapshotInTheFirstPlace(t *testing.T) {
	var got []string
	w := func(key, what string) journalOp {
		return journalOp{key: key, write: func(context.Context) error { got = append(got, what); return nil }}
	}
	flushed := make(chan struct{})
	j := &journal{log: slog.New(slog.DiscardHandler)}
	j.write([]journalOp{
		w("migration m1", "m1 v1"),
		w("", "m1 event 1"),
		w("instance i1", "i1 v1"),
		w("migration m1", "m1 v2"),
		w("", "m1 event 2"),
		{flushed: flushed},
		w("instance i1", "i1 deleted"),
		w("migration m1", "m1 v3"),
		w("instance i2", "i2 v1"),
	})
	want := []string{"m1 v3", "m1 event 1", "i1 deleted", "m1 event 2", "i2 v1"}
	if !slices.Equal(got, want) {
		t.Fatalf("written %q\nwant    %q", got, want)
	}
	select {
	case <-flushed:
	default:
		t.Fatal("the flush in the batch was not told")
	}
}

// TestJournalHoldsWhatTheStoreCannotWrite: writes that fail are held, in
// order, and written (not twice) once the store writes again; meanwhile
// the journal says the store is failing. Past maxHeld the oldest are
// given up and counted.
func TestJournalHoldsWhatTheStoreCannotWrite(t *testing.T) {
	var got []string
	broken := errors.New("disk full")
	var fail error = broken
	w := func(key, what string) journalOp {
		return journalOp{key: key, write: func(context.Context) error {
			if fail != nil {
				return fail
			}
			got = append(got, what)
			return nil
		}}
	}
	j := &journal{log: slog.New(slog.DiscardHandler)}
	j.write([]journalOp{w("", "event 1"), w("migration m1", "m1 v1")})
	j.write([]journalOp{w("", "event 2"), w("migration m1", "m1 v2")})
	if !errors.Is(j.Failing(), broken) || len(got) != 0 {
		t.Fatalf("failing %v, written %q", j.Failing(), got)
	}
	// m1's second snapshot replaced its first, where the first was.
	if held, lost := j.Held(); held != 3 || lost != 0 {
		t.Fatalf("held %d lost %d, want 3 held", held, lost)
	}
	fail = nil
	j.write(nil) // the retry
	if want := []string{"event 1", "m1 v2", "event 2"}; !slices.Equal(got, want) {
		t.Fatalf("written after the store came back %q, want %q", got, want)
	}
	if j.Failing() != nil {
		t.Fatalf("still failing: %v", j.Failing())
	}
	if held, _ := j.Held(); held != 0 {
		t.Fatalf("%d still held", held)
	}

	fail = broken
	ops := make([]journalOp, maxHeld+5)
	for i := range ops {
		ops[i] = w("", "x")
	}
	j.write(ops)
	if held, lost := j.Held(); held != maxHeld || lost != 5 {
		t.Fatalf("held %d lost %d, want %d and 5", held, lost, maxHeld)
	}
}

// TestJournalToldWhenStored: what a write is to do once stored runs after
// it is written, for a snapshot replaced in its burst too, and for a write
// the store failed only once it is finally written.
func TestJournalToldWhenStored(t *testing.T) {
	var written, told []string
	var fail error
	w := func(key, what string, stored bool) journalOp {
		op := journalOp{key: key, write: func(context.Context) error {
			if fail != nil {
				return fail
			}
			written = append(written, what)
			return nil
		}}
		if stored {
			op.stored = func() {
				if !slices.Contains(written, what) && !slices.Contains(written, what+" v2") {
					t.Errorf("%s told before it was written (written %q)", what, written)
				}
				told = append(told, what)
			}
		}
		return op
	}
	j := &journal{log: slog.New(slog.DiscardHandler)}
	j.write([]journalOp{w("migration m1", "m1", true), w("", "event", false), w("migration m1", "m1 v2", false)})
	if want := []string{"m1"}; !slices.Equal(told, want) {
		t.Fatalf("told %q, want %q (m1's replaced snapshot)", told, want)
	}

	fail = errors.New("disk full")
	j.write([]journalOp{w("migration m2", "m2", true)})
	if len(told) != 1 {
		t.Fatalf("told %q while m2 was held", told)
	}
	fail = nil
	j.write(nil) // the retry
	if want := []string{"m1", "m2"}; !slices.Equal(told, want) {
		t.Fatalf("told %q after the retry, want %q", told, want)
	}
}

// gatedStore is a store whose migration saves wait for a gate once
// entered: a store that fell behind.
type gatedStore struct {
	sim.Store
	entered chan struct{}
	gate    chan struct{}
	once    sync.Once
	saved   []string
	mu      sync.Mutex
}

func (g *gatedStore) SaveMigration(ctx context.Context, m *sim.Migration) error {
	g.once.Do(func() { close(g.entered); <-g.gate })
	g.mu.Lock()
	g.saved = append(g.saved, string(m.Phase))
	g.mu.Unlock()
	return g.Store.SaveMigration(ctx, m)
}

// TestJournalHoldsOneSnapshotPerRecordWhileBehind: while the store is
// behind, a newer snapshot of a record replaces the one still waiting, so
// the older is not kept in memory; the newest is what is written.
func TestJournalHoldsOneSnapshotPerRecordWhileBehind(t *testing.T) {
	g := &gatedStore{Store: NewMemStore(t), entered: make(chan struct{}), gate: make(chan struct{})}
	j := newJournal(g, slog.New(slog.DiscardHandler))
	defer j.Close()
	snapshot := func(phase string) *sim.Migration {
		return &sim.Migration{ID: "m1", JobID: "job-1", State: sim.MigrationRunning, Phase: sim.Phase(phase), StartedAt: time.Now()}
	}
	j.migration(snapshot("first"))
	<-g.entered // the journal's writer is stuck in the store
	older := snapshot("older")
	gone := weak.Make(older)
	j.migration(older)
	older = nil
	j.migration(snapshot("newest"))
	runtime.GC()
	if gone.Value() != nil {
		t.Error("the journal still holds a snapshot a newer one replaced")
	}
	close(g.gate)
	j.Flush()
	g.mu.Lock()
	defer g.mu.Unlock()
	if want := []string{"first", "newest"}; !slices.Equal(g.saved, want) {
		t.Fatalf("saved %q, want %q", g.saved, want)
	}
}

// TestJournalQueuesAMigrationOnce: while the store is behind, a
// migration's new events and documents wait as one write that holds the
// run's own timeline, not a copy per event; it writes every event once,
// in order, after the document, and what was to happen once stored
// happens after the events are in the store too.
func TestJournalQueuesAMigrationOnce(t *testing.T) {
	g := &gatedStore{Store: NewMemStore(t), entered: make(chan struct{}), gate: make(chan struct{})}
	j := newJournal(g, slog.New(slog.DiscardHandler))
	defer j.Close()
	doc := func(state sim.MigrationState) *sim.Migration {
		return &sim.Migration{ID: "m1", JobID: "job-1", State: state, Phase: sim.PhaseRequested, Strategy: sim.Handover, StartedAt: time.Now()}
	}
	j.migration(doc(sim.MigrationRunning))
	<-g.entered // the journal's writer is stuck in the store

	var timeline []sim.MigrationEvent
	for i := 1; i <= 5; i++ {
		timeline = append(timeline, sim.MigrationEvent{Seq: i, At: time.Now(), Phase: sim.PhaseRequested, Side: "manager", Detail: fmt.Sprintf("event %d", i)})
		j.migrationEvent("m1", 0, timeline)
	}
	var storedEvents []int
	j.migrationThen(doc(sim.MigrationCompleted), func() {
		m, err := g.Store.GetMigration(context.Background(), "m1")
		if err != nil {
			t.Errorf("read once stored: %v", err)
			return
		}
		for _, ev := range m.Events {
			storedEvents = append(storedEvents, ev.Seq)
		}
	})
	// The first document being written, and one write for the rest.
	if n := j.Pending(); n != 2 {
		t.Errorf("%d writes pending, want 2: the first document and one for the rest", n)
	}
	close(g.gate)
	j.Flush()
	if want := []int{1, 2, 3, 4, 5}; !slices.Equal(storedEvents, want) {
		t.Fatalf("once stored, the store held events %v, want %v", storedEvents, want)
	}
	m, err := g.Store.GetMigration(context.Background(), "m1")
	if err != nil {
		t.Fatal(err)
	}
	if m.State != sim.MigrationCompleted || len(m.Events) != 5 {
		t.Fatalf("stored %s with %d events, want completed with 5", m.State, len(m.Events))
	}
	if held, lost := j.Held(); held != 0 || lost != 0 {
		t.Fatalf("held %d, lost %d", held, lost)
	}
}

// TestJournalWritesEventsAcrossANewSlice: a run that lets its stored
// events go appends to a new slice; events of the old slice still waiting
// and of the new one are written once each, in order.
func TestJournalWritesEventsAcrossANewSlice(t *testing.T) {
	g := &gatedStore{Store: NewMemStore(t), entered: make(chan struct{}), gate: make(chan struct{})}
	j := newJournal(g, slog.New(slog.DiscardHandler))
	defer j.Close()
	j.migration(&sim.Migration{ID: "m1", JobID: "job-1", State: sim.MigrationCompleted, Phase: sim.PhaseRequested, Strategy: sim.Handover, StartedAt: time.Now()})
	<-g.entered // the journal's writer is stuck in the store

	ev := func(seq int) sim.MigrationEvent {
		return sim.MigrationEvent{Seq: seq, At: time.Now(), Phase: sim.PhaseRequested, Side: "manager", Detail: fmt.Sprintf("event %d", seq)}
	}
	old := []sim.MigrationEvent{ev(1), ev(2)}
	j.migrationEvent("m1", 0, old[:1])
	j.migrationEvent("m1", 0, old)
	// The run let events 1 and 2 go (as once stored) and goes on afresh.
	var fresh []sim.MigrationEvent
	for seq := 3; seq <= 4; seq++ {
		fresh = append(fresh, ev(seq))
		j.migrationEvent("m1", 2, fresh)
	}
	close(g.gate)
	j.Flush()
	m, err := g.Store.GetMigration(context.Background(), "m1")
	if err != nil {
		t.Fatal(err)
	}
	var seqs []int
	for _, e := range m.Events {
		seqs = append(seqs, e.Seq)
	}
	if want := []int{1, 2, 3, 4}; !slices.Equal(seqs, want) {
		t.Fatalf("stored events %v, want %v", seqs, want)
	}
}

// TestJournalCountsHeldAndLostRecordsAlike: a migration's write held while
// the store fails counts its document and each event, as what is given
// up at Close does, so the two figures normsim reports add up.
func TestJournalCountsHeldAndLostRecordsAlike(t *testing.T) {
	j := newJournal(failingJournalStore{}, slog.New(slog.DiscardHandler))
	var timeline []sim.MigrationEvent
	j.migration(&sim.Migration{ID: "m1"})
	for i := 1; i <= 3; i++ {
		timeline = append(timeline, sim.MigrationEvent{Seq: i})
		j.migrationEvent("m1", 0, timeline)
	}
	j.Flush()
	if held, lost := j.Held(); held != 4 || lost != 0 {
		t.Fatalf("held %d, lost %d; want the document and 3 events held", held, lost)
	}
	if err := j.Close(); err == nil || !strings.Contains(err.Error(), "4 records lost") {
		t.Fatalf("Close: %v, want 4 records lost", err)
	}
	if _, lost := j.Held(); lost != 4 {
		t.Fatalf("lost %d, want 4", lost)
	}
}

// failingJournalStore fails every migration write.
type failingJournalStore struct{ sim.Store }

func (failingJournalStore) SaveMigration(context.Context, *sim.Migration) error {
	return errors.New("disk full")
}

// eventsStore records each AppendEvents call, or fails it while fail is
// set.
type eventsStore struct {
	sim.Store
	fail  error
	calls *[][]sim.EventKind
	order *[]string
}

func (s eventsStore) AppendEvents(_ context.Context, evs []sim.Event) error {
	if s.fail != nil {
		return s.fail
	}
	var kinds []sim.EventKind
	for _, ev := range evs {
		kinds = append(kinds, ev.Kind)
	}
	*s.calls = append(*s.calls, kinds)
	*s.order = append(*s.order, "events")
	return nil
}

// TestJournalWritesABatchsEventsTogether: a batch's events are one write,
// in their order, where the first of them was queued; while the store
// fails they are held and counted one record each, and written once when
// it comes back.
func TestJournalWritesABatchsEventsTogether(t *testing.T) {
	var calls [][]sim.EventKind
	var order []string
	j := &journal{log: slog.New(slog.DiscardHandler), store: eventsStore{calls: &calls, order: &order}}
	ev := func(kind string) journalOp { return journalOp{events: []sim.Event{{Kind: sim.EventKind(kind)}}} }
	other := journalOp{write: func(context.Context) error { order = append(order, "instance"); return nil }}
	j.write([]journalOp{ev("e1"), other, ev("e2"), ev("e3")})
	if len(calls) != 1 || !slices.Equal(calls[0], []sim.EventKind{"e1", "e2", "e3"}) || !slices.Equal(order, []string{"events", "instance"}) {
		t.Fatalf("calls %q, order %q; want e1 e2 e3 in one call, before the instance", calls, order)
	}

	calls, order = nil, nil
	j.store = eventsStore{calls: &calls, order: &order, fail: errors.New("disk full")}
	j.write([]journalOp{ev("e4"), ev("e5")})
	j.write([]journalOp{ev("e6")})
	if held, lost := j.Held(); held != 3 || lost != 0 || len(calls) != 0 {
		t.Fatalf("held %d, lost %d, %d calls; want 3 events held", held, lost, len(calls))
	}
	j.store = eventsStore{calls: &calls, order: &order}
	j.write([]journalOp{ev("e7")})
	if len(calls) != 1 || !slices.Equal(calls[0], []sim.EventKind{"e4", "e5", "e6", "e7"}) {
		t.Fatalf("calls after the store came back %q, want e4 to e7 once, in order", calls)
	}
	if held, _ := j.Held(); held != 0 {
		t.Fatalf("%d still held", held)
	}
}
