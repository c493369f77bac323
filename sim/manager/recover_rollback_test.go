package manager

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/normsim/normsim/sim"
)

// stopRecorder is a recovering runtime that adopts every instance and
// records what it is told to stop.
type stopRecorder struct {
	recoverer
	mu      sync.Mutex
	stopped []string
}

func (r *stopRecorder) Recover(_ context.Context, _ string, stored []sim.Instance) (map[string]sim.Recovery, error) {
	out := map[string]sim.Recovery{}
	for _, in := range stored {
		out[in.ID] = sim.Recovery{Adopted: true}
	}
	return out, nil
}

func (r *stopRecorder) Stop(_ context.Context, id string, _ time.Duration) (sim.StopReport, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stopped = append(r.stopped, id)
	return sim.StopReport{}, nil
}

// recovered starts a manager of nodes a and b on store, whose runtime
// ("fake") adopts every instance and records what it stops, and
// recovers what store holds.
func recovered(t *testing.T, store sim.Store) (*Manager, *stopRecorder) {
	t.Helper()
	rt := &stopRecorder{recoverer: recoverer{name: "fake"}}
	m := New(Config{Nodes: []Node{{Node: sim.Node{Name: "a"}}, {Node: sim.Node{Name: "b"}}}, Store: store, Catalog: RepoCatalog(t),
		Runtimes: sim.RuntimeSet{Runtimes: map[string]sim.Runtime{"fake": rt}, Default: "fake"}})
	t.Cleanup(func() { m.Close() })
	if err := m.Recover(t.Context()); err != nil {
		t.Fatal(err)
	}
	return m, rt
}

// TestRecoverRollsBackWhatHadNotPassedItsPoint: a migration normsim was
// killed during is rolled back at the next start when its mark says it
// had not passed its point of no return (aborted, "interrupted", the
// target stopped and removed, the source left running, the rollback
// recorded as made at the restart, judged "not judged"); one marked past
// it, one not marked at all, and one whose stored timeline shows it past
// whatever its mark says, are failed with both instances left. The
// marks are cleared once each has ended.
func TestRecoverRollsBackWhatHadNotPassedItsPoint(t *testing.T) {
	ctx := context.Background()
	store := NewMarkedStore(t)
	now := time.Now()
	for _, id := range []string{"src-short", "tgt-short", "src-past", "tgt-past", "src-unmarked", "tgt-unmarked", "src-recorded", "tgt-recorded"} {
		job := "job-" + id[strings.IndexByte(id, '-')+1:]
		in := &sim.Instance{ID: id, JobID: job, Role: id, Node: "a", Template: "plain", Runtime: "fake",
			State: sim.InstanceRunning, CreatedAt: now, UpdatedAt: now}
		if id[:3] == "tgt" {
			in.Node = "b"
		}
		if err := store.SaveInstance(ctx, in); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"short", "past", "unmarked", "recorded"} {
		mig := &sim.Migration{ID: "mig-" + name, JobID: "job-" + name, Strategy: sim.Handover, State: sim.MigrationRunning,
			Phase:  sim.PhaseCutoverReady,
			Source: sim.MigrationEndpoint{Instance: "src-" + name, Node: "a", Runtime: "fake"},
			Target: sim.MigrationEndpoint{Instance: "tgt-" + name, Node: "b", Runtime: "fake"}, StartedAt: now}
		if err := store.SaveMigration(ctx, mig); err != nil {
			t.Fatal(err)
		}
		ev := sim.MigrationEvent{Seq: 1, At: now, Phase: sim.PhaseRequested, Side: sideManager, Kind: sim.TimelineRequested, Detail: "handover"}
		evs := []sim.MigrationEvent{ev}
		if name == "recorded" {
			evs = append(evs, sim.MigrationEvent{Seq: 2, At: now, Phase: sim.PhaseCutoverApply, Side: sideManager,
				Kind: sim.TimelinePointOfNoReturn, Detail: "point of no return: the source stopped its output"})
		}
		if err := store.AppendMigrationEvents(ctx, mig.ID, evs); err != nil {
			t.Fatal(err)
		}
	}
	store.MarkBegun("mig-short")
	store.MarkBegun("mig-recorded") // its passed mark lost, its timeline says otherwise
	store.MarkBegun("mig-past")
	store.MarkPassed("mig-past")

	m, rt := recovered(t, store)

	short, err := store.GetMigration(ctx, "mig-short")
	if err != nil {
		t.Fatal(err)
	}
	rb := short.Rollback
	if short.State != sim.MigrationAborted || short.Reason != sim.ReasonInterrupted || rb == nil || !rb.AtRestart ||
		rb.Source != sim.SourceRunning || rb.Target != sim.TargetExited || len(rb.Told) != 0 || short.EndedAt == nil {
		t.Fatalf("short of its point: %s (%s), rollback %+v", short.State, short.Reason, rb)
	}
	if j := short.Judged(); j.Grade != sim.GradeTolerated || !strings.Contains(j.Why, "not judged") {
		t.Fatalf("short of its point judged %+v", j)
	}
	var kinds []sim.TimelineKind
	for _, ev := range short.Events {
		kinds = append(kinds, ev.Kind)
	}
	if want := []sim.TimelineKind{sim.TimelineRequested, "", sim.TimelineTargetRemoved, "", sim.TimelineEnded}; !slices.Equal(kinds, want) {
		t.Fatalf("timeline kinds %q, want %q", kinds, want)
	}
	if !slices.Equal(rt.stopped, []string{"tgt-short"}) {
		t.Fatalf("stopped %v, want the short migration's target alone", rt.stopped)
	}
	if _, err := m.Instance(ctx, "tgt-short"); sim.ErrorCode(err) != sim.ENotFound {
		t.Fatalf("rolled-back target still listed: %v", err)
	}
	if in, err := m.Instance(ctx, "src-short"); err != nil || in.State != sim.InstanceRunning {
		t.Fatalf("rolled-back source: %+v %v", in, err)
	}

	for _, name := range []string{"past", "unmarked", "recorded"} {
		got, err := store.GetMigration(ctx, "mig-"+name)
		if err != nil || got.State != sim.MigrationFailed || got.Reason != sim.ReasonInterrupted || got.Rollback != nil {
			t.Fatalf("%s: %+v %v, want failed (interrupted) with no rollback", name, got, err)
		}
		for _, id := range []string{"src-" + name, "tgt-" + name} {
			if in, err := m.Instance(ctx, id); err != nil || in.State != sim.InstanceRunning {
				t.Fatalf("%s after recovery: %+v %v, want left running", id, in, err)
			}
		}
	}
	if !store.Cleared() {
		t.Fatal("the marks were not cleared once every interrupted migration had ended")
	}
}

// TestARollbackAtRestartFindsATargetTheRecordDidNotName (round 13, B7):
// killed while placing the target, normsim had stored the target's record
// (naming its migration) but not yet the migration's naming it. After the
// restart the rolled-back record said target "", while the target was
// listed failed under that migration. The rollback finds it by its
// migration, removes it as any rolled-back target, and the record names
// it.
func TestARollbackAtRestartFindsATargetTheRecordDidNotName(t *testing.T) {
	ctx := context.Background()
	store := NewMarkedStore(t)
	now := time.Now()
	for _, in := range []*sim.Instance{
		{ID: "src", JobID: "job", Role: "src", Node: "a", Template: "plain", Runtime: "fake", State: sim.InstanceRunning, CreatedAt: now, UpdatedAt: now},
		{ID: "tgt", JobID: "job", Role: "tgt", Node: "b", Template: "plain", Runtime: "fake", State: sim.InstanceStarting, MigrationID: "mig-placing", CreatedAt: now, UpdatedAt: now},
	} {
		if err := store.SaveInstance(ctx, in); err != nil {
			t.Fatal(err)
		}
	}
	mig := &sim.Migration{ID: "mig-placing", JobID: "job", Strategy: sim.Handover, State: sim.MigrationRunning, Phase: sim.PhasePlaceTarget,
		Source: sim.MigrationEndpoint{Instance: "src", Node: "a", Runtime: "fake"}, Target: sim.MigrationEndpoint{Node: "b", Runtime: "fake"}, StartedAt: now}
	if err := store.SaveMigration(ctx, mig); err != nil {
		t.Fatal(err)
	}
	store.MarkBegun("mig-placing")
	m, rt := recovered(t, store)
	got, err := store.GetMigration(ctx, "mig-placing")
	if err != nil {
		t.Fatal(err)
	}
	if got.State != sim.MigrationAborted || got.Target.Instance != "tgt" || got.Rollback == nil || got.Rollback.Target == "" {
		t.Fatalf("rolled back at restart: %s, target %q, rollback %+v; want aborted naming target tgt and its removal", got.State, got.Target.Instance, got.Rollback)
	}
	if !slices.Equal(rt.stopped, []string{"tgt"}) {
		t.Fatalf("stopped %v, want the target the record did not name", rt.stopped)
	}
	if _, err := m.Instance(ctx, "tgt"); sim.ErrorCode(err) != sim.ENotFound {
		t.Fatalf("the rolled-back target is still listed: %v", err)
	}
}
