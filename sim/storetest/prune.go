package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/normsim/normsim/sim"
)

var captureTests = []test{
	{"SeamCapturesAreKeptAndGoWithTheirMigrations", testSeamCapturesAreKeptAndGoWithTheirMigrations},
	{"SeamCaptureWithoutTS", testSeamCaptureWithoutTS},
}

var pruneTests = []test{
	{"MigrationCapDropsTheOldestFinished", testMigrationCapDropsTheOldestFinished},
	{"LateWritesOfAPrunedMigrationGo", testLateWritesOfAPrunedMigrationGo},
	{"NoMigrationCapKeepsEveryOne", testNoMigrationCapKeepsEveryOne},
	{"MigrationCapForgetsRemovedInstancesWithNothingLeft", testMigrationCapForgetsRemovedInstances},
	{"MigrationCapKeepsTheHistoryOfLiveInstances", testMigrationCapKeepsLiveHistory},
}

// testMigrationCapKeepsLiveHistory (attack round 11, B3): other jobs'
// migrations pruned the history of a live instance that never migrated,
// uncounted: `normsim events` said "nothing recorded yet" and `frames`
// "its job has not connected" of a connected job. A live instance's
// events and frames are bounded per instance; only removed instances'
// history goes with the migrations.
func testMigrationCapKeepsLiveHistory(t *testing.T, open Opener) {
	ctx := context.Background()
	s := open(t)
	s.SetMigrationCap(1)
	t0 := time.Unix(1_800_000_000, 0)
	for _, id := range []string{"live", "gone"} {
		if err := s.SaveInstance(ctx, &sim.Instance{ID: id, JobID: "job-" + id, Role: id, State: sim.InstanceRunning, CreatedAt: t0, UpdatedAt: t0}); err != nil {
			t.Fatal(err)
		}
		if err := s.AppendEvents(ctx, []sim.Event{{At: t0, Kind: sim.EventInstanceState, Instance: id}}); err != nil {
			t.Fatal(err)
		}
		if err := s.RecordFrames(ctx, []sim.FrameRecord{{At: t0, Node: "a", JobID: "job-" + id, Role: id, Direction: "in", Type: "hello", Data: "{}"}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.DeleteInstance(ctx, "gone"); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 3; i++ {
		at := t0.Add(time.Duration(i) * time.Minute)
		// Later history, so the prune has a front to cut at.
		if err := s.AppendEvents(ctx, []sim.Event{{At: at, Kind: sim.EventInstanceState, Instance: "other"}}); err != nil {
			t.Fatal(err)
		}
		if err := s.RecordFrames(ctx, []sim.FrameRecord{{At: at, Node: "a", JobID: "job-other", Role: "other", Direction: "in", Type: "hello", Data: "{}"}}); err != nil {
			t.Fatal(err)
		}
		if err := s.SaveMigration(ctx, &sim.Migration{ID: fmt.Sprintf("m%d", i), JobID: "other", State: sim.MigrationCompleted, StartedAt: at}); err != nil {
			t.Fatal(err)
		}
	}
	evs, err := s.ListEvents(ctx, sim.EventFilter{Instance: "live"})
	if err != nil || len(evs) != 1 {
		t.Errorf("the live instance's events after the prune: %d, %v; want its one event", len(evs), err)
	}
	frs, err := s.ListFrames(ctx, sim.FrameFilter{JobID: "job-live", Role: "live"})
	if err != nil || len(frs) != 1 {
		t.Errorf("the live instance's frames after the prune: %d, %v; want its one frame", len(frs), err)
	}
	if frs, _ := s.ListFrames(ctx, sim.FrameFilter{JobID: "job-gone", Role: "gone"}); len(frs) != 0 {
		t.Errorf("the removed instance's frames outlived the prune: %d", len(frs))
	}
	if evs, _ := s.ListEvents(ctx, sim.EventFilter{Instance: "gone"}); len(evs) != 0 {
		t.Errorf("the removed instance's events outlived the prune: %d", len(evs))
	}
}

// testMigrationCapForgetsRemovedInstances: with migrations capped, what is
// kept of a removed instance whose frames and lines are all gone goes too
// (its counts read as an unknown instance's), so a store that hands jobs
// over for ever stays flat; a live instance's counts stay.
func testMigrationCapForgetsRemovedInstances(t *testing.T, open Opener) {
	ctx := context.Background()
	s := open(t)
	s.SetMigrationCap(1)
	t0 := time.Unix(1_800_000_000, 0)
	for i := 1; i <= 3; i++ {
		at := t0.Add(time.Duration(10*i) * time.Second)
		id := fmt.Sprintf("inst-%d", i)
		if err := s.SaveInstance(ctx, &sim.Instance{ID: id, JobID: "job", Role: id, State: sim.InstanceRunning, CreatedAt: at, UpdatedAt: at}); err != nil {
			t.Fatal(err)
		}
		if err := s.RecordFrames(ctx, []sim.FrameRecord{{At: at, Node: "a", JobID: "job", Role: id, Direction: "in", Type: "hello", Data: "{}"}}); err != nil {
			t.Fatal(err)
		}
		if i < 3 {
			if err := s.DeleteInstance(ctx, id); err != nil {
				t.Fatal(err)
			}
		}
		m := &sim.Migration{ID: fmt.Sprintf("m%d", i), JobID: "job", State: sim.MigrationCompleted, StartedAt: at.Add(-time.Second)}
		if err := s.SaveMigration(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	gone, err := s.FrameCounts(ctx, "job", "inst-1")
	if err != nil {
		t.Fatal(err)
	}
	if gone != (sim.FrameCounts{}) {
		t.Errorf("a removed instance with no frame left still counts %+v", gone)
	}
	live, err := s.FrameCounts(ctx, "job", "inst-3")
	if err != nil {
		t.Fatal(err)
	}
	if live.Kept+live.Dropped != 1 {
		t.Errorf("the live instance counts %+v, want its one frame kept or counted dropped", live)
	}
}

// testSeamCapturesAreKeptAndGoWithTheirMigrations: a capture reads back
// as saved (a second replaces the first), a migration without one is
// ENotFound, and a pruned migration's capture goes with it, as does one
// of a migration never saved.
func testSeamCapturesAreKeptAndGoWithTheirMigrations(t *testing.T, open Opener) {
	ctx := context.Background()
	s := open(t)
	s.SetMigrationCap(1)
	t0 := time.Unix(1_800_000_000, 0).UTC()
	if err := s.SaveSeamCapture(ctx, sim.SeamCapture{MigrationID: "ghost", TS: []byte{1}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SeamCapture(ctx, "ghost"); err != nil {
		t.Fatalf("a capture of a migration not yet saved: %v", err)
	}
	for i := 1; i <= 2; i++ {
		id := fmt.Sprintf("m%d", i)
		at := t0.Add(time.Duration(i) * time.Minute)
		if err := s.SaveMigration(ctx, &sim.Migration{ID: id, JobID: "j", State: sim.MigrationRunning, StartedAt: at}); err != nil {
			t.Fatal(err)
		}
		if err := s.SaveSeamCapture(ctx, sim.SeamCapture{MigrationID: id, TS: []byte{9}, Datagrams: 1}); err != nil {
			t.Fatal(err)
		}
		ts := bytes.Repeat([]byte{0x47, byte(i)}, 94)
		rtp := []byte{0, 2, 0x80, byte(i)}
		if err := s.SaveSeamCapture(ctx, sim.SeamCapture{MigrationID: id, From: at, To: at.Add(6 * time.Second), Datagrams: 3, TS: ts, TargetTS: ts[188:], RTP: rtp}); err != nil {
			t.Fatal(err)
		}
		got, err := s.SeamCapture(ctx, id)
		if err != nil || got.MigrationID != id || !bytes.Equal(got.TS, ts) || !bytes.Equal(got.TargetTS, ts[188:]) || !bytes.Equal(got.RTP, rtp) || got.Datagrams != 3 || !got.From.Equal(at) || got.To.Sub(got.From) != 6*time.Second {
			t.Fatalf("capture of %s: %+v, %v", id, got, err)
		}
		if err := s.SaveMigration(ctx, &sim.Migration{ID: id, JobID: "j", State: sim.MigrationCompleted, StartedAt: at}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.SeamCapture(ctx, "m1"); sim.ErrorCode(err) != sim.ENotFound {
		t.Fatalf("m1 was pruned, its capture: %v", err)
	}
	if _, err := s.SeamCapture(ctx, "ghost"); sim.ErrorCode(err) != sim.ENotFound {
		t.Fatalf("a capture of a migration never saved outlived a prune: %v", err)
	}
	if _, err := s.SeamCapture(ctx, "m2"); err != nil {
		t.Fatalf("m2 kept, its capture: %v", err)
	}
}

// testSeamCaptureWithoutTS: a capture must have a TS, if an empty one;
// empty ones read back as nil.
func testSeamCaptureWithoutTS(t *testing.T, open Opener) {
	ctx := context.Background()
	s := open(t)
	if err := s.SaveSeamCapture(ctx, sim.SeamCapture{MigrationID: "a"}); err == nil {
		t.Fatal("a capture with no TS was taken")
	}
	if _, err := s.SeamCapture(ctx, "a"); sim.ErrorCode(err) != sim.ENotFound {
		t.Fatalf("the refused capture: %v", err)
	}
	if err := s.SaveSeamCapture(ctx, sim.SeamCapture{MigrationID: "b", TS: []byte{}, TargetTS: []byte{}}); err != nil {
		t.Fatal(err)
	}
	c, err := s.SeamCapture(ctx, "b")
	if err != nil || c.TS != nil || c.TargetTS != nil || c.Datagrams != 0 {
		t.Fatalf("an empty capture reads %+v, %v; want nil TS and TargetTS", c, err)
	}
}

// testMigrationCapDropsTheOldestFinished saves six finished migrations of
// two jobs and one running under a cap of three: the three newest finished
// and the running one stay, the others go with their timelines, and the
// events and frames recorded before the oldest migration kept go too.
func testMigrationCapDropsTheOldestFinished(t *testing.T, open Opener) {
	ctx := context.Background()
	s := open(t)
	s.SetMigrationCap(3)
	if s.MigrationCap() != 3 {
		t.Fatalf("cap %d, want 3", s.MigrationCap())
	}
	t0 := time.Unix(1_800_000_000, 0)
	at := func(i int) time.Time { return t0.Add(time.Duration(i) * time.Second) }

	// A running migration, started between m5 and m6: never dropped.
	running := &sim.Migration{ID: "m-run", JobID: "jr", State: sim.MigrationRunning, StartedAt: at(55)}
	if err := s.SaveMigration(ctx, running); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 6; i++ {
		job := fmt.Sprintf("j%d", i%2)
		m := &sim.Migration{ID: fmt.Sprintf("m%d", i), JobID: job, State: sim.MigrationRunning, StartedAt: at(10 * i)}
		if err := s.SaveMigration(ctx, m); err != nil {
			t.Fatal(err)
		}
		if err := s.AppendMigrationEvents(ctx, m.ID, []sim.MigrationEvent{{Seq: 0, At: m.StartedAt, Phase: sim.PhaseRequested, Side: "manager", Detail: "requested"}}); err != nil {
			t.Fatal(err)
		}
		if err := s.AppendEvents(ctx, []sim.Event{{At: m.StartedAt, Kind: sim.EventMigrationEnded, Migration: m.ID}}); err != nil {
			t.Fatal(err)
		}
		// One frame during each migration.
		if err := s.RecordFrames(ctx, []sim.FrameRecord{{At: m.StartedAt.Add(time.Second), Node: "a", JobID: job, Role: "source", Direction: "in", Type: "hello"}}); err != nil {
			t.Fatal(err)
		}
		m.State = sim.MigrationCompleted
		if i == 1 {
			m.State = sim.MigrationFailed
		}
		if err := s.SaveMigration(ctx, m); err != nil {
			t.Fatal(err)
		}
		if want := int64(max(0, i-3)); s.MigrationsPruned() != want {
			t.Fatalf("after m%d finished, pruned %d, want %d", i, s.MigrationsPruned(), want)
		}
	}

	list, err := s.ListMigrations(ctx, sim.MigrationFilter{})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, m := range list {
		ids = append(ids, m.ID)
	}
	if fmt.Sprint(ids) != "[m6 m-run m5 m4]" {
		t.Errorf("kept %v, want [m6 m-run m5 m4]", ids)
	}
	if got := s.MigrationsPruned(); got != 3 {
		t.Errorf("pruned %d, want 3", got)
	}
	// A read of a pruned migration says how it ended and why its record
	// is gone: a client waiting for its end learns it (GONE, 410).
	for _, get := range []func(context.Context, string) (*sim.Migration, error){s.GetMigration, s.GetMigrationSummary} {
		_, err := get(ctx, "m1")
		var e *sim.Error
		if !errors.As(err, &e) || e.Code != sim.EGone || e.Ended != sim.MigrationFailed || !strings.Contains(e.Message, "--keep-migrations 3") {
			t.Errorf("m1: %#v, want GONE, ended failed, naming --keep-migrations 3", err)
		}
		if _, err := get(ctx, "never"); sim.ErrorCode(err) != sim.ENotFound {
			t.Errorf("a migration never saved: %v, want NOT_FOUND", err)
		}
	}
	evs, err := s.ListEvents(ctx, sim.EventFilter{})
	if err != nil {
		t.Fatal(err)
	}
	var evMigs []string
	for _, ev := range evs {
		evMigs = append(evMigs, ev.Migration)
	}
	if fmt.Sprint(evMigs) != "[m4 m5 m6]" {
		t.Errorf("events kept of migrations %v, want those of m4, m5 and m6", evMigs)
	}
	kept, err := s.GetMigration(ctx, "m4")
	if err != nil || len(kept.Events) != 1 {
		t.Errorf("m4 kept with %v events, %v", kept, err)
	}
	// The oldest migration kept is m4 (started at 40s): the frames before
	// it go (j1's at 11s and 31s, j0's at 21s), the later ones stay.
	for job, want := range map[string]int{"j0": 2, "j1": 1} {
		frs, err := s.ListFrames(ctx, sim.FrameFilter{JobID: job})
		if err != nil {
			t.Fatal(err)
		}
		if len(frs) != want {
			t.Errorf("job %s keeps %d frames, want %d: %+v", job, len(frs), want, frs)
		}
	}
	// What the prune let go of is counted, as a bound's trim is.
	if c, err := s.FrameCounts(ctx, "", ""); err != nil || c.Kept != 3 || c.Dropped != 3 {
		t.Errorf("frame totals after the prune: %+v, %v; want 3 kept and 3 dropped", c, err)
	}
	if c, err := s.FrameCounts(ctx, "j1", "source"); err != nil || c != (sim.FrameCounts{Kept: 1, Dropped: 2}) {
		t.Errorf("j1's frames after the prune: %+v, %v; want 1 kept and 2 dropped", c, err)
	}
	// A running migration is never dropped, even the oldest.
	if err := s.SaveMigration(ctx, &sim.Migration{ID: "m0", JobID: "j", State: sim.MigrationRunning, StartedAt: at(1)}); err != nil {
		t.Fatal(err)
	}
	if err := s.SaveMigration(ctx, &sim.Migration{ID: "m7", JobID: "j", State: sim.MigrationAborted, StartedAt: at(70)}); err != nil {
		t.Fatal(err)
	}
	if n, _ := s.CountMigrations(ctx, sim.MigrationFilter{}); n != 5 || s.MigrationsPruned() != 4 {
		t.Errorf("%d migrations kept, %d pruned; want 5 and 4", n, s.MigrationsPruned())
	}
	if _, err := s.GetMigrationSummary(ctx, "m0"); err != nil {
		t.Errorf("the oldest, running: %v", err)
	}
	if _, err := s.GetMigrationSummary(ctx, "m4"); sim.ErrorCode(err) != sim.EGone {
		t.Errorf("m4, the oldest finished: %v, want it gone", err)
	}
}

// testNoMigrationCapKeepsEveryOne: with no cap (the default, or 0) every
// migration and its history is kept.
func testNoMigrationCapKeepsEveryOne(t *testing.T, open Opener) {
	ctx := context.Background()
	s := open(t)
	if s.MigrationCap() != 0 {
		t.Fatalf("a new store's cap is %d, want none", s.MigrationCap())
	}
	s.SetMigrationCap(2)
	s.SetMigrationCap(0)
	at := time.Unix(1_800_000_000, 0)
	for i := range 5 {
		if err := s.AppendEvents(ctx, []sim.Event{{At: at.Add(time.Duration(i) * time.Second), Kind: "k"}}); err != nil {
			t.Fatal(err)
		}
		if err := s.SaveMigration(ctx, &sim.Migration{ID: fmt.Sprint("m", i), State: sim.MigrationCompleted, StartedAt: at.Add(time.Duration(i) * time.Second)}); err != nil {
			t.Fatal(err)
		}
	}
	if n, _ := s.CountMigrations(ctx, sim.MigrationFilter{}); n != 5 || s.MigrationsPruned() != 0 {
		t.Fatalf("%d migrations kept, %d pruned; want 5 and none", n, s.MigrationsPruned())
	}
	if evs, _ := s.ListEvents(ctx, sim.EventFilter{}); len(evs) != 5 {
		t.Fatalf("%d events kept, want 5", len(evs))
	}
}

// testLateWritesOfAPrunedMigrationGo (issue 34 round 8): with more
// migrations ending at once than the cap keeps, one was dropped while its
// last timeline events were still to be written; their append failed the
// store's keys, the journal held and retried it for ever, and the sim took
// no launch until restarted (its saves also brought the record back, to be
// dropped and counted again). A write for a migration the cap dropped is
// let go of and counted, and the store goes on.
func testLateWritesOfAPrunedMigrationGo(t *testing.T, open Opener) {
	ctx := context.Background()
	s := open(t)
	s.SetMigrationCap(1)
	t0 := time.Unix(1_800_000_000, 0)
	for i := 1; i <= 2; i++ {
		m := &sim.Migration{ID: fmt.Sprintf("m%d", i), JobID: "j", State: sim.MigrationCompleted, StartedAt: t0.Add(time.Duration(i) * time.Second)}
		if err := s.SaveMigration(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	if s.MigrationsPruned() != 1 {
		t.Fatalf("pruned %d, want 1 (m1)", s.MigrationsPruned())
	}
	late := []sim.MigrationEvent{{Seq: 7, At: t0, Phase: sim.PhaseCutoverApply, Side: "target", Detail: "late"}, {Seq: 8, At: t0, Phase: sim.PhaseCutoverApply, Side: "target", Detail: "later"}}
	if err := s.AppendMigrationEvents(ctx, "m1", late); err != nil {
		t.Fatalf("events of the pruned m1: %v, want them let go of", err)
	}
	if err := s.SaveMigration(ctx, &sim.Migration{ID: "m1", JobID: "j", State: sim.MigrationCompleted, StartedAt: t0.Add(time.Second)}); err != nil {
		t.Fatalf("a late save of m1: %v", err)
	}
	if err := s.SaveSeamCapture(ctx, sim.SeamCapture{MigrationID: "m1", From: t0, To: t0, TS: []byte{0x47}}); err != nil {
		t.Fatalf("a late seam capture of m1: %v", err)
	}
	if _, err := s.GetMigration(ctx, "m1"); sim.ErrorCode(err) != sim.EGone {
		t.Errorf("m1 came back: %v", err)
	}
	if got := s.PrunedWritesDropped(); got != 4 {
		t.Errorf("%d late records counted, want 4 (2 events, a save, a capture)", got)
	}
	if got := s.MigrationsPruned(); got != 1 {
		t.Errorf("pruned %d, want still 1", got)
	}
	// The store goes on: m3 is kept, m2 dropped.
	if err := s.SaveMigration(ctx, &sim.Migration{ID: "m3", JobID: "j", State: sim.MigrationCompleted, StartedAt: t0.Add(3 * time.Second)}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetMigration(ctx, "m3"); err != nil {
		t.Errorf("m3: %v", err)
	}
}
