package storetest

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/normsim/normsim/sim"
)

var migrationTests = []test{
	{"MigrationsPageNewestFirst", testMigrationsPageNewestFirst},
	{"MigrationSavedAgain", testMigrationSavedAgain},
	{"TimelineInSeqOrder", testTimelineInSeqOrder},
}

// testMigrationsPageNewestFirst: ListMigrations pages newest first (ties
// by id), CountMigrations counts the same filter without the page, and
// Except leaves migrations out of both.
func testMigrationsPageNewestFirst(t *testing.T, open Opener) {
	ctx := context.Background()
	s := open(t)
	if list, err := s.ListMigrations(ctx, sim.MigrationFilter{}); err != nil || list == nil || len(list) != 0 {
		t.Fatalf("an empty store lists %#v, %v; want an empty list, not nil", list, err)
	}
	at := time.Unix(1700000000, 0).UTC()
	// m0 … m9, one a second; m4 and m5 start at the same time.
	for i := range 10 {
		started := at.Add(time.Duration(i) * time.Second)
		if i == 5 {
			started = at.Add(4 * time.Second)
		}
		state := sim.MigrationCompleted
		if i%3 == 0 {
			state = sim.MigrationFailed
		}
		m := &sim.Migration{ID: fmt.Sprint("m", i), JobID: fmt.Sprint("job-", i%2), State: state, StartedAt: started}
		if err := s.SaveMigration(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	ids := func(f sim.MigrationFilter) []string {
		t.Helper()
		list, err := s.ListMigrations(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, m := range list {
			out = append(out, m.ID)
		}
		return out
	}
	count := func(f sim.MigrationFilter) int {
		t.Helper()
		n, err := s.CountMigrations(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	for _, tc := range []struct {
		f     sim.MigrationFilter
		want  []string
		total int
	}{
		{sim.MigrationFilter{}, []string{"m9", "m8", "m7", "m6", "m4", "m5", "m3", "m2", "m1", "m0"}, 10},
		{sim.MigrationFilter{Limit: 3}, []string{"m9", "m8", "m7"}, 10},
		{sim.MigrationFilter{Limit: 3, Offset: 3}, []string{"m6", "m4", "m5"}, 10},
		{sim.MigrationFilter{Offset: 8}, []string{"m1", "m0"}, 10},
		{sim.MigrationFilter{Limit: 5, Offset: 10}, nil, 10},
		{sim.MigrationFilter{Limit: 2, Offset: -3}, []string{"m9", "m8"}, 10},
		{sim.MigrationFilter{Limit: -1, Offset: -1}, []string{"m9", "m8", "m7", "m6", "m4", "m5", "m3", "m2", "m1", "m0"}, 10},
		{sim.MigrationFilter{JobID: "job-1", Limit: 2, Offset: 1}, []string{"m7", "m5"}, 5},
		{sim.MigrationFilter{State: sim.MigrationFailed}, []string{"m9", "m6", "m3", "m0"}, 4},
		{sim.MigrationFilter{Except: []string{"m9", "m4", "nope"}, Limit: 4}, []string{"m8", "m7", "m6", "m5"}, 8},
		{sim.MigrationFilter{State: sim.MigrationFailed, Except: []string{"m6"}, Offset: 1}, []string{"m3", "m0"}, 3},
		{sim.MigrationFilter{JobID: "job-9"}, nil, 0},
	} {
		if got := ids(tc.f); !slices.Equal(got, tc.want) {
			t.Errorf("ListMigrations(%+v) = %v, want %v", tc.f, got, tc.want)
		}
		if got := count(tc.f); got != tc.total {
			t.Errorf("CountMigrations(%+v) = %d, want %d", tc.f, got, tc.total)
		}
	}
}

// testMigrationSavedAgain: a migration saved again is replaced (its state,
// its document) but keeps its place: the start it was first saved with.
// Its timeline stays.
func testMigrationSavedAgain(t *testing.T, open Opener) {
	ctx := context.Background()
	s := open(t)
	at := time.Unix(1700000000, 0).UTC()
	for i, id := range []string{"a", "b"} {
		if err := s.SaveMigration(ctx, &sim.Migration{ID: id, JobID: "j", State: sim.MigrationRunning, StartedAt: at.Add(time.Duration(i) * time.Second)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.AppendMigrationEvents(ctx, "a", []sim.MigrationEvent{{Seq: 1, At: at, Detail: "kept"}}); err != nil {
		t.Fatal(err)
	}
	later := at.Add(time.Minute)
	if err := s.SaveMigration(ctx, &sim.Migration{ID: "a", JobID: "j2", State: sim.MigrationCompleted, Reason: "done", StartedAt: later}); err != nil {
		t.Fatal(err)
	}
	list, err := s.ListMigrations(ctx, sim.MigrationFilter{})
	if err != nil || len(list) != 2 || list[0].ID != "b" || list[1].ID != "a" {
		t.Fatalf("listed %v, %v; want b then a (a keeps its first start's place)", list, err)
	}
	a, err := s.GetMigration(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	if a.State != sim.MigrationCompleted || a.Reason != "done" || a.JobID != "j2" || !a.StartedAt.Equal(later) || len(a.Events) != 1 || a.Events[0].Detail != "kept" {
		t.Fatalf("a saved again = %+v", a)
	}
	for f, want := range map[string]int{"j": 1, "j2": 1} {
		if n, _ := s.CountMigrations(ctx, sim.MigrationFilter{JobID: f}); n != want {
			t.Errorf("job %s has %d migrations, want %d", f, n, want)
		}
	}
	if n, _ := s.CountMigrations(ctx, sim.MigrationFilter{State: sim.MigrationRunning}); n != 1 {
		t.Errorf("%d running, want 1", n)
	}
}

// testTimelineInSeqOrder: a timeline reads in Seq order whatever order it
// was written in, an event of a Seq already there replaces it, a
// migration with none has an empty timeline (not nil), and events for a
// migration not saved are refused, none kept.
func testTimelineInSeqOrder(t *testing.T, open Opener) {
	ctx := context.Background()
	s := open(t)
	at := time.Unix(1700000000, 0).UTC()
	if err := s.SaveMigration(ctx, &sim.Migration{ID: "m", State: sim.MigrationRunning, StartedAt: at}); err != nil {
		t.Fatal(err)
	}
	m, err := s.GetMigration(ctx, "m")
	if err != nil || m.Events == nil || len(m.Events) != 0 {
		t.Fatalf("a migration without events reads %#v, %v; want an empty timeline", m, err)
	}
	for _, evs := range [][]sim.MigrationEvent{
		{{Seq: 2, At: at, Detail: "two"}, {Seq: 5, At: at, Detail: "five"}},
		{{Seq: 1, At: at, Detail: "one"}, {Seq: 2, At: at, Detail: "two again", Side: "target"}},
		{{Seq: 3, At: at, Detail: "three"}},
		nil,
	} {
		if err := s.AppendMigrationEvents(ctx, "m", evs); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.AppendMigrationEvents(ctx, "nope", []sim.MigrationEvent{{Seq: 1, At: at}}); err == nil {
		t.Fatal("events for a migration never saved were taken")
	}
	m, _ = s.GetMigration(ctx, "m")
	var got []string
	for _, ev := range m.Events {
		got = append(got, fmt.Sprint(ev.Seq, ":", ev.Detail, ":", ev.Side))
	}
	if fmt.Sprint(got) != "[1:one: 2:two again:target 3:three: 5:five:]" {
		t.Fatalf("timeline = %v", got)
	}
	if err := s.SaveMigration(ctx, &sim.Migration{ID: "nope", State: sim.MigrationRunning, StartedAt: at}); err != nil {
		t.Fatal(err)
	}
	if m, _ := s.GetMigration(ctx, "nope"); len(m.Events) != 0 {
		t.Fatalf("the refused events were kept: %+v", m.Events)
	}
}
