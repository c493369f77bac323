package sqlite_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/normsim/normsim/sim"
	"github.com/normsim/normsim/sim/sqlite"
)

func MustOpen(tb testing.TB, path string) *sqlite.Store {
	tb.Helper()
	s, err := sqlite.Open(context.Background(), path)
	if err != nil {
		tb.Fatalf("open %s: %v", path, err)
	}
	tb.Cleanup(func() { s.Close() })
	return s
}

func TestRecordsSurviveReopen(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "state", "normsim.db")
	now := time.Unix(1700000000, 123456789).UTC()

	s := MustOpen(t, path)
	in := &sim.Instance{ID: "counter-1", JobID: "job-1", Role: "counter-1", Node: "a", Template: "counter",
		Runtime: sim.RuntimeProcess, State: sim.InstanceRunning, Params: map[string]string{"RATE": "5"},
		Token: "secret", Ports: map[string]int{"PORT": 9000}, Connected: true, CreatedAt: now, UpdatedAt: now,
		Adjustments: []string{"services.app.container_name: renamed"}}
	if err := s.SaveInstance(ctx, in); err != nil {
		t.Fatal(err)
	}
	m := &sim.Migration{ID: "m1", JobID: "job-1", Strategy: sim.Handover, State: sim.MigrationRunning, StartedAt: now,
		Source: sim.MigrationEndpoint{Instance: "counter-1", Node: "a"}}
	if err := s.SaveMigration(ctx, m); err != nil {
		t.Fatal(err)
	}
	evs := []sim.MigrationEvent{
		{Seq: 1, At: now, Phase: "get-state", Side: "manager", Kind: sim.TimelineRequested, Detail: "asked source for state"},
		{Seq: 2, At: now.Add(time.Millisecond), Phase: "get-state", Side: "source", Detail: "state",
			Frame: &sim.FrameInfo{Direction: "in", Type: "state", Size: 30, Payload: json.RawMessage(`{"next":7}`)}},
	}
	if err := s.AppendMigrationEvents(ctx, "m1", evs); err != nil {
		t.Fatal(err)
	}
	if err := s.AppendEvents(ctx, []sim.Event{{At: now, Kind: "instance.state", Instance: "counter-1", Data: json.RawMessage(`{"state":"running"}`)}}); err != nil {
		t.Fatal(err)
	}
	if err := s.RecordFrames(ctx, []sim.FrameRecord{{At: now, Node: "a", JobID: "job-1", Role: "counter-1", Direction: "in", Type: "hello", Size: 20}}); err != nil {
		t.Fatal(err)
	}
	s.Close()

	s = MustOpen(t, path)
	got, err := s.GetInstance(ctx, "counter-1")
	if err != nil {
		t.Fatal(err)
	}
	if got.State != sim.InstanceRunning || got.Token != "secret" || got.Params["RATE"] != "5" || got.Ports["PORT"] != 9000 || len(got.Adjustments) != 1 || !got.Connected || !got.CreatedAt.Equal(now) {
		t.Fatalf("instance after reopen = %+v", got)
	}
	gm, err := s.GetMigration(ctx, "m1")
	if err != nil {
		t.Fatal(err)
	}
	if len(gm.Events) != 2 || gm.Events[1].Frame == nil || string(gm.Events[1].Frame.Payload) != `{"next":7}` ||
		gm.Events[0].Kind != sim.TimelineRequested || gm.Events[1].Kind != "" || gm.Events[0].Phase != sim.PhaseGetState {
		t.Fatalf("migration events after reopen = %+v", gm.Events)
	}
	if sum, err := s.GetMigrationSummary(ctx, "m1"); err != nil || sum.ID != "m1" || sum.State != gm.State || sum.Events != nil {
		t.Fatalf("summary after reopen = %+v, %v; want m1 as stored, without events", sum, err)
	}
	list, err := s.ListMigrations(ctx, sim.MigrationFilter{State: sim.MigrationRunning})
	if err != nil || len(list) != 1 {
		t.Fatalf("running migrations = %v, %v", list, err)
	}
	evl, err := s.ListEvents(ctx, sim.EventFilter{Instance: "counter-1"})
	if err != nil || len(evl) != 1 || evl[0].Kind != "instance.state" {
		t.Fatalf("events = %v, %v", evl, err)
	}
	frs, err := s.ListFrames(ctx, sim.FrameFilter{JobID: "job-1"})
	if err != nil || len(frs) != 1 || frs[0].Type != "hello" {
		t.Fatalf("frames = %v, %v", frs, err)
	}
}

func TestNotFoundCarriesCode(t *testing.T) {
	s := MustOpen(t, sqlite.Memory)
	_, err := s.GetInstance(context.Background(), "nope")
	if sim.ErrorCode(err) != sim.ENotFound {
		t.Fatalf("code = %s (%v)", sim.ErrorCode(err), err)
	}
	_, err = s.GetMigration(context.Background(), "nope")
	if sim.ErrorCode(err) != sim.ENotFound {
		t.Fatalf("code = %s (%v)", sim.ErrorCode(err), err)
	}
	_, err = s.GetMigrationSummary(context.Background(), "nope")
	if sim.ErrorCode(err) != sim.ENotFound {
		t.Fatalf("summary: code = %s (%v)", sim.ErrorCode(err), err)
	}
}

func TestFileStoreUsesWAL(t *testing.T) {
	path := filepath.Join(t.TempDir(), "n.db")
	MustOpen(t, path).Close()
	s := MustOpen(t, path) // reopening must not re-apply migrations
	mode, err := sqlite.JournalMode(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	if mode != "wal" {
		t.Fatalf("journal mode = %q, want wal", mode)
	}
}

// TestBatchCommitsEachWriteOnItsOwnMerits: the writes of a batch share one
// transaction; one that fails (events for a migration that does not exist
// break the foreign key) is undone alone, every event it tried included,
// and the writes around it are committed and survive a reopen.
func TestBatchCommitsEachWriteOnItsOwnMerits(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "normsim.db")
	now := time.Unix(1700000000, 0).UTC()
	s := MustOpen(t, path)
	var errs []error
	err := s.Batch(ctx, func(ctx context.Context) {
		errs = append(errs,
			s.SaveInstance(ctx, &sim.Instance{ID: "i1", JobID: "j", Role: "r", State: sim.InstanceRunning, CreatedAt: now, UpdatedAt: now}),
			s.SaveMigration(ctx, &sim.Migration{ID: "m1", JobID: "j", State: sim.MigrationRunning, StartedAt: now}),
			s.AppendMigrationEvents(ctx, "m1", []sim.MigrationEvent{{Seq: 1, At: now, Detail: "one"}}),
			s.AppendMigrationEvents(ctx, "nope", []sim.MigrationEvent{{Seq: 1, At: now}, {Seq: 2, At: now}}),
			s.AppendMigrationEvents(ctx, "m1", []sim.MigrationEvent{{Seq: 2, At: now, Detail: "two"}, {Seq: 3, At: now, Detail: "three"}}),
			s.AppendEvents(ctx, []sim.Event{{At: now, Kind: "instance.state", Instance: "i1"}}),
			s.RecordFrames(ctx, []sim.FrameRecord{{At: now, JobID: "j", Type: "hello"}, {At: now, JobID: "j", Type: "state"}}),
		)
	})
	if err != nil {
		t.Fatalf("batch: %v", err)
	}
	for i, e := range errs {
		if (e != nil) != (i == 3) {
			t.Errorf("write %d: err = %v (only write 3 should fail)", i, e)
		}
	}
	s.Close()

	s = MustOpen(t, path)
	if _, err := s.GetInstance(ctx, "i1"); err != nil {
		t.Errorf("instance: %v", err)
	}
	m, err := s.GetMigration(ctx, "m1")
	if err != nil {
		t.Fatal(err)
	}
	var details []string
	for _, ev := range m.Events {
		details = append(details, ev.Detail)
	}
	if len(details) != 3 || details[0] != "one" || details[2] != "three" {
		t.Errorf("m1 events = %q, want one two three", details)
	}
	if evs, err := s.ListEvents(ctx, sim.EventFilter{}); err != nil || len(evs) != 1 {
		t.Errorf("events = %v, %v", evs, err)
	}
	if frs, err := s.ListFrames(ctx, sim.FrameFilter{JobID: "j"}); err != nil || len(frs) != 2 {
		t.Errorf("frames = %v, %v", frs, err)
	}
}

// TestBatchBeforeAnyOtherWrite: the first write of a fresh store may come
// in a batch; preparing the writes must not wait for the connection the
// batch holds.
func TestBatchBeforeAnyOtherWrite(t *testing.T) {
	s := MustOpen(t, sqlite.Memory)
	done := make(chan error, 1)
	go func() {
		done <- s.Batch(context.Background(), func(ctx context.Context) {
			s.AppendEvents(ctx, []sim.Event{{At: time.Now(), Kind: "k"}})
		})
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a batch as the store's first write never finished")
	}
}

// TestManyRowsInOrder: events and timeline events go in several rows a
// statement, and past one statement's rows in several; either way in
// order, in a batch or alone, and a write that fails says so without
// failing the batch's others.
func TestManyRowsInOrder(t *testing.T) {
	ctx := context.Background()
	s := MustOpen(t, filepath.Join(t.TempDir(), "normsim.db"))
	now := time.Unix(1700000000, 0).UTC()
	timeline := func(n int) []sim.MigrationEvent {
		evs := make([]sim.MigrationEvent, n)
		for i := range evs {
			evs[i] = sim.MigrationEvent{Seq: i, At: now, Detail: fmt.Sprint("step ", i)}
		}
		return evs
	}
	events := func(prefix string, n int) []sim.Event {
		evs := make([]sim.Event, n)
		for i := range evs {
			evs[i] = sim.Event{At: now, Kind: sim.EventKind(fmt.Sprint(prefix, i))}
		}
		return evs
	}
	var errs []error
	err := s.Batch(ctx, func(ctx context.Context) {
		errs = append(errs,
			s.SaveMigration(ctx, &sim.Migration{ID: "m1", JobID: "j", State: sim.MigrationRunning, StartedAt: now}),
			s.AppendMigrationEvents(ctx, "m1", timeline(37)),
			s.AppendMigrationEvents(ctx, "nope", timeline(37)),
			s.AppendMigrationEvents(ctx, "nope", timeline(5)),
			s.AppendEvents(ctx, events("batch", 40)),
		)
	})
	if err != nil {
		t.Fatalf("batch: %v", err)
	}
	for i, e := range errs {
		if (e != nil) != (i == 2 || i == 3) {
			t.Errorf("write %d: err = %v (only the appends to a missing migration should fail)", i, e)
		}
	}
	if err := s.AppendEvents(ctx, events("alone", 17)); err != nil {
		t.Fatal(err)
	}
	m, err := s.GetMigration(ctx, "m1")
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Events) != 37 {
		t.Fatalf("m1 has %d events, want 37", len(m.Events))
	}
	for i, ev := range m.Events {
		if ev.Seq != i || ev.Detail != fmt.Sprint("step ", i) {
			t.Fatalf("m1 event %d is %d %q", i, ev.Seq, ev.Detail)
		}
	}
	got, err := s.ListEvents(ctx, sim.EventFilter{})
	if err != nil {
		t.Fatal(err)
	}
	want := append(events("batch", 40), events("alone", 17)...)
	if len(got) != len(want) {
		t.Fatalf("%d events, want %d", len(got), len(want))
	}
	for i := range got {
		if got[i].Kind != want[i].Kind || (i > 0 && got[i].Seq <= got[i-1].Seq) {
			t.Fatalf("event %d: %s seq %d, want %s in order", i, got[i].Kind, got[i].Seq, want[i].Kind)
		}
	}
}
