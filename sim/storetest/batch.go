package storetest

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/normsim/normsim/sim"
)

var batchTests = []test{
	{"BatchCommitsEachWriteOnItsOwnMerits", testBatchCommitsEachWriteOnItsOwnMerits},
	{"BatchBeforeAnyOtherWrite", testBatchBeforeAnyOtherWrite},
	{"ManyRowsInOrder", testManyRowsInOrder},
	{"BatchEndedByItsContextIsUndone", testBatchEndedByItsContextIsUndone},
	{"BatchIsNotSeenHalfDone", testBatchIsNotSeenHalfDone},
	{"UndoneBatchUndoesTrimsAndPrunes", testUndoneBatchUndoesTrimsAndPrunes},
}

// testBatchCommitsEachWriteOnItsOwnMerits: the writes of a batch are
// committed together; one that fails (events for a migration that does
// not exist) is undone alone, every event it tried included, and the
// writes around it are kept.
func testBatchCommitsEachWriteOnItsOwnMerits(t *testing.T, open Opener) {
	ctx := context.Background()
	now := time.Unix(1700000000, 0).UTC()
	s := open(t)
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
	if len(details) != 3 || details[0] != "one" || details[1] != "two" || details[2] != "three" {
		t.Errorf("m1 events = %q, want one two three", details)
	}
	if _, err := s.GetMigration(ctx, "nope"); sim.ErrorCode(err) != sim.ENotFound {
		t.Errorf("the failed write made a migration: %v", err)
	}
	if evs, err := s.ListEvents(ctx, sim.EventFilter{}); err != nil || len(evs) != 1 {
		t.Errorf("events = %v, %v", evs, err)
	}
	if frs, err := s.ListFrames(ctx, sim.FrameFilter{JobID: "j"}); err != nil || len(frs) != 2 {
		t.Errorf("frames = %v, %v", frs, err)
	}
}

// testBatchBeforeAnyOtherWrite: the first write of a fresh store may come
// in a batch.
func testBatchBeforeAnyOtherWrite(t *testing.T, open Opener) {
	s := open(t)
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
	if evs, err := s.ListEvents(context.Background(), sim.EventFilter{}); err != nil || len(evs) != 1 {
		t.Fatalf("events after the batch: %v, %v", evs, err)
	}
}

// testManyRowsInOrder: many events and timeline events in one write are
// kept in order, in a batch or alone, and a write that fails says so
// without failing the batch's others.
func testManyRowsInOrder(t *testing.T, open Opener) {
	ctx := context.Background()
	s := open(t)
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

// testBatchEndedByItsContextIsUndone: a batch whose context ends before
// it commits is undone whole (it is one transaction), says so, and the
// writes it makes after the end fail; the store goes on as if it had
// never run, numbering events from where it was. A batch begun with an
// ended context does not run.
func testBatchEndedByItsContextIsUndone(t *testing.T, open Opener) {
	ctx := context.Background()
	s := open(t)
	now := time.Unix(1700000000, 0).UTC()
	ended, cancel := context.WithCancel(ctx)
	cancel()
	ran := false
	if err := s.Batch(ended, func(context.Context) { ran = true }); err == nil || ran {
		t.Fatalf("a batch begun with an ended context: err %v, fn ran %v; want an error and no run", err, ran)
	}

	bctx, cancel := context.WithCancel(ctx)
	var before, after error
	err := s.Batch(bctx, func(ctx context.Context) {
		before = s.AppendEvents(ctx, []sim.Event{{At: now, Kind: "a"}})
		s.SaveInstance(ctx, &sim.Instance{ID: "i1", CreatedAt: now, UpdatedAt: now})
		s.SaveMigration(ctx, &sim.Migration{ID: "m1", State: sim.MigrationRunning, StartedAt: now})
		s.RecordFrames(ctx, []sim.FrameRecord{{At: now, JobID: "j", Role: "r", Data: "x"}})
		s.AppendLogs(ctx, []sim.LogLine{{Instance: "i1", At: now, Text: "l"}})
		cancel()
		time.Sleep(200 * time.Millisecond) // sim/sqlite rolls back as it sees the end
		after = s.AppendEvents(ctx, []sim.Event{{At: now, Kind: "b"}})
	})
	if err == nil || before != nil || after == nil {
		t.Fatalf("batch ended by its context: err %v, write before the end %v, after %v; want an error, nil and an error", err, before, after)
	}
	if evs, err := s.ListEvents(ctx, sim.EventFilter{}); err != nil || len(evs) != 0 {
		t.Fatalf("events after the undone batch: %v, %v", evs, err)
	}
	if _, err := s.GetInstance(ctx, "i1"); sim.ErrorCode(err) != sim.ENotFound {
		t.Fatalf("instance after the undone batch: %v", err)
	}
	if n, err := s.CountMigrations(ctx, sim.MigrationFilter{}); err != nil || n != 0 {
		t.Fatalf("migrations after the undone batch: %d, %v", n, err)
	}
	if c, err := s.FrameCounts(ctx, "", ""); err != nil || c != (sim.FrameCounts{}) {
		t.Fatalf("frame totals after the undone batch: %+v, %v", c, err)
	}
	if p, err := s.ReadLogs(ctx, sim.LogQuery{Instance: "i1"}); err != nil || p.Known {
		t.Fatalf("logs after the undone batch: %+v, %v", p, err)
	}
	if err := s.AppendEvents(ctx, []sim.Event{{At: now, Kind: "c"}}); err != nil {
		t.Fatal(err)
	}
	if evs, _ := s.ListEvents(ctx, sim.EventFilter{}); len(evs) != 1 || evs[0].Seq != 1 {
		t.Fatalf("the first event after the undone batch: %+v, want seq 1", evs)
	}
}

// testBatchIsNotSeenHalfDone: a caller outside a running batch waits for
// it to end, and then sees all of it.
func testBatchIsNotSeenHalfDone(t *testing.T, open Opener) {
	ctx := context.Background()
	s := open(t)
	now := time.Unix(1700000000, 0).UTC()
	read := make(chan int, 1)
	err := s.Batch(ctx, func(bctx context.Context) {
		s.AppendEvents(bctx, []sim.Event{{At: now, Kind: "a"}})
		go func() {
			evs, _ := s.ListEvents(ctx, sim.EventFilter{})
			read <- len(evs)
		}()
		select {
		case n := <-read:
			t.Errorf("a reader outside the batch read %d events before it ended", n)
		case <-time.After(100 * time.Millisecond):
		}
		s.AppendEvents(bctx, []sim.Event{{At: now, Kind: "b"}})
	})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case n := <-read:
		if n != 2 {
			t.Fatalf("the reader read %d events once the batch ended, want 2", n)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the reader never read")
	}
}

// testUndoneBatchUndoesTrimsAndPrunes: what the bounds and the migration
// cap let go of in a batch that is undone is all there again, counts
// included (the same batch committed in another store shows it lets go).
func testUndoneBatchUndoesTrimsAndPrunes(t *testing.T, open Opener) {
	ctx := context.Background()
	at := time.Unix(1700000000, 0).UTC()
	bounded := func() Store {
		s := open(t)
		s.SetFrameLimits(sim.FrameLimits{PerInstance: 5, PerInstanceBytes: 1 << 20, Total: 8, TotalBytes: 1 << 20})
		s.SetLogLimits(sim.LogLimits{Lines: 5, Bytes: 1 << 20, Instances: 2})
		s.SetMigrationCap(1)
		return s
	}
	write := func(ctx context.Context, s Store, from int) {
		for i := from; i < from+4; i++ {
			t := at.Add(time.Duration(i) * time.Second)
			s.SaveMigration(ctx, &sim.Migration{ID: fmt.Sprint("m", i), State: sim.MigrationCompleted, StartedAt: t})
			s.SaveSeamCapture(ctx, sim.SeamCapture{MigrationID: fmt.Sprint("m", i), TS: []byte{byte(i)}})
			s.AppendEvents(ctx, []sim.Event{{At: t, Kind: "k", Migration: fmt.Sprint("m", i)}})
			s.RecordFrames(ctx, []sim.FrameRecord{{At: t, JobID: "j", Role: fmt.Sprint("r", i%2), Data: fmt.Sprint(i)}, {At: t, JobID: "j", Role: "r0", Data: "x"}})
			s.AppendLogs(ctx, logLines(fmt.Sprint("i", i%3), i*3, 3, t))
			s.RegisterLogs(ctx, fmt.Sprint("i", i%3))
			if from == 0 { // sim/sqlite's CountOverflow is not one of a batch's writes
				s.CountOverflow(ctx, fmt.Sprint("i", i%3), 1)
			}
		}
	}
	state := func(s Store) string {
		t.Helper()
		var b []byte
		add := func(v any, err error) {
			t.Helper()
			if err != nil {
				t.Fatal(err)
			}
			j, _ := json.Marshal(v)
			b = append(append(b, j...), '\n')
		}
		add(s.ListMigrations(ctx, sim.MigrationFilter{}))
		add(s.ListEvents(ctx, sim.EventFilter{}))
		add(s.ListFrames(ctx, sim.FrameFilter{}))
		for _, k := range [][2]string{{"", ""}, {"j", "r0"}, {"j", "r1"}} {
			add(s.FrameCounts(ctx, k[0], k[1]))
		}
		for i := range 3 {
			add(s.ReadLogs(ctx, sim.LogQuery{Instance: fmt.Sprint("i", i)}))
		}
		for i := range 8 {
			c, err := s.SeamCapture(ctx, fmt.Sprint("m", i))
			if sim.ErrorCode(err) == sim.ENotFound {
				err = nil
			}
			add(c, err)
		}
		return string(b)
	}
	s, committed := bounded(), bounded()
	write(ctx, s, 0)
	write(ctx, committed, 0)
	before, pruned := state(s), s.MigrationsPruned()
	if err := committed.Batch(ctx, func(ctx context.Context) { write(ctx, committed, 4) }); err != nil {
		t.Fatal(err)
	}
	if state(committed) == before {
		t.Fatal("the batch, committed, changed nothing")
	}
	bctx, cancel := context.WithCancel(ctx)
	err := s.Batch(bctx, func(ctx context.Context) {
		write(ctx, s, 4)
		cancel()
	})
	if err == nil {
		t.Fatal("a batch ended by its context committed")
	}
	if after := state(s); after != before {
		t.Fatalf("after the undone batch:\n%s\nbefore it:\n%s", after, before)
	}
	// The count of what the cap dropped is not undone (sim/sqlite counts
	// as it saves).
	if s.MigrationsPruned() != pruned+4 || committed.MigrationsPruned() != pruned+4 {
		t.Fatalf("pruned %d, then %d after the undone batch and %d after the committed one; want 4 more", pruned, s.MigrationsPruned(), committed.MigrationsPruned())
	}
}
