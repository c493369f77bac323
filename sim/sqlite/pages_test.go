package sqlite_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/normsim/normsim/sim"
	"github.com/normsim/normsim/sim/sqlite"
)

// TestMigrationsPageNewestFirst: ListMigrations pages newest first (ties
// by id), CountMigrations counts the same filter without the page, and
// Except leaves migrations out of both.
func TestMigrationsPageNewestFirst(t *testing.T) {
	ctx := context.Background()
	s := MustOpen(t, sqlite.Memory)
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
		{sim.MigrationFilter{JobID: "job-1", Limit: 2, Offset: 1}, []string{"m7", "m5"}, 5},
		{sim.MigrationFilter{State: sim.MigrationFailed}, []string{"m9", "m6", "m3", "m0"}, 4},
		{sim.MigrationFilter{Except: []string{"m9", "m4", "nope"}, Limit: 4}, []string{"m8", "m7", "m6", "m5"}, 8},
		{sim.MigrationFilter{State: sim.MigrationFailed, Except: []string{"m6"}, Offset: 1}, []string{"m3", "m0"}, 3},
	} {
		if got := ids(tc.f); !slices.Equal(got, tc.want) {
			t.Errorf("ListMigrations(%+v) = %v, want %v", tc.f, got, tc.want)
		}
		if got := count(tc.f); got != tc.total {
			t.Errorf("CountMigrations(%+v) = %d, want %d", tc.f, got, tc.total)
		}
	}
}
