package sqlite_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/normsim/normsim/sim"
	"github.com/normsim/normsim/sim/sqlite"
)

// TestMigrationCapDropsTheOldestFinished saves six finished migrations of
// two jobs and one running under a cap of three: the three newest finished
// and the running one stay, the others go with their timelines, and the
// events and frames recorded before the oldest migration kept go too.
func TestMigrationCapDropsTheOldestFinished(t *testing.T) {
	ctx := context.Background()
	s, err := sqlite.Open(ctx, sqlite.Memory)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.SetMigrationCap(3)
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
		if err := s.SaveMigration(ctx, m); err != nil {
			t.Fatal(err)
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
	if _, err := s.GetMigration(ctx, "m1"); err == nil {
		t.Error("m1 is still there")
	}
	evs, err := s.ListEvents(ctx, sim.EventFilter{})
	if err != nil {
		t.Fatal(err)
	}
	var evMigs []string
	for _, ev := range evs {
		evMigs = append(evMigs, ev.Migration)
	}
	if fmt.Sprint(evMigs) != "[m4 m5 m6]" && fmt.Sprint(evMigs) != "[m6 m5 m4]" {
		t.Errorf("events kept of migrations %v, want those of m4, m5 and m6", evMigs)
	}
	kept, err := s.GetMigration(ctx, "m4")
	if err != nil || len(kept.Events) != 1 {
		t.Errorf("m4 kept with %v events, %v", kept, err)
	}
	// The oldest migration kept is m4 (started at 40s): the frames before
	// it go (j1's at 11s and 31s, j0's at 21s), the later ones stay, and
	// so do the events.
	for job, want := range map[string]int{"j0": 2, "j1": 1} {
		frs, err := s.ListFrames(ctx, sim.FrameFilter{JobID: job})
		if err != nil {
			t.Fatal(err)
		}
		if len(frs) != want {
			t.Errorf("job %s keeps %d frames, want %d: %+v", job, len(frs), want, frs)
		}
	}
}
