package sqlite_test

import (
	"context"
	"encoding/json"
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
