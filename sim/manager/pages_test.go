package manager

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/normsim/normsim/sim"
)

// TestMigrationPageMergesMemoryAndStore: migrations running here (in
// memory, some with a stale copy in the store, some not written yet) and
// those of the store's history interleave in time. Every page of every
// filter is the slice of the whole list, newest first, that the page
// asks for, each migration once with its state in memory, and Total
// counts the whole list.
func TestMigrationPageMergesMemoryAndStore(t *testing.T) {
	ctx := context.Background()
	m, all := mergedMigrations(t)
	for _, f := range mergedFilters {
		want := mergedIDs(all, f)
		for _, limit := range []int{0, 1, 3, 7, 100} {
			for offset := 0; offset <= len(want)+1; offset++ {
				pf := f
				pf.Limit, pf.Offset = limit, offset
				checkMergedPage(t, m, pf, want)
			}
		}
	}
	// Migrations, the whole list, agrees.
	list, err := m.Migrations(ctx, sim.MigrationFilter{})
	if err != nil || len(list) != len(all) {
		t.Fatalf("Migrations = %d, %v; want %d", len(list), err, len(all))
	}
}

// FuzzMigrationPage (issue 34 item 9): any limit and offset, however
// large or negative, cut the merged list of migrations in memory and in
// the store as sim.PageOf cuts the whole list, never past its ends.
func FuzzMigrationPage(f *testing.F) {
	for _, seed := range [][2]int{{0, 0}, {1, 1}, {7, 3}, {100, 59}, {math.MaxInt, 1}, {math.MaxInt, 0}, {1, math.MaxInt},
		{5, math.MaxInt - 1}, {math.MinInt, 0}, {0, math.MinInt}, {-1, -1}, {math.MaxInt, math.MaxInt}, {2, 61}} {
		for i := range mergedFilters {
			f.Add(seed[0], seed[1], uint8(i))
		}
	}
	m, all := mergedMigrations(f)
	f.Fuzz(func(t *testing.T, limit, offset int, which uint8) {
		pf := mergedFilters[int(which)%len(mergedFilters)]
		pf.Limit, pf.Offset = limit, offset
		checkMergedPage(t, m, pf, mergedIDs(all, pf))
	})
}

// mergedFilters are the filters the merge is tried with.
var mergedFilters = []sim.MigrationFilter{{}, {State: sim.MigrationRunning}, {State: sim.MigrationCompleted}, {JobID: "job-1"}, {JobID: "job-2", State: sim.MigrationRunning}}

// mergedIDs is the whole list f asks for (its page aside), as
// "id/state", newest first.
func mergedIDs(all []sim.Migration, f sim.MigrationFilter) []string {
	var want []string
	for _, mig := range all {
		if (f.JobID == "" || mig.JobID == f.JobID) && (f.State == "" || mig.State == f.State) {
			want = append(want, mig.ID+"/"+string(mig.State))
		}
	}
	return want
}

// checkMergedPage checks that MigrationPage(pf) is pf's page of want.
func checkMergedPage(t *testing.T, m *Manager, pf sim.MigrationFilter, want []string) {
	t.Helper()
	p, err := m.MigrationPage(context.Background(), pf)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, mig := range p.Items {
		got = append(got, mig.ID+"/"+string(mig.State))
	}
	page := sim.PageOf(want, pf.Offset, pf.Limit)
	if !slices.Equal(got, page.Items) || p.Total != len(want) {
		t.Fatalf("MigrationPage(%+v) = %v of %d, want %v of %d", pf, got, p.Total, page.Items, len(want))
	}
}

// mergedMigrations is a manager with 60 migrations, some running here (in
// memory, some with a stale copy in the store, some not written yet), the
// rest in the store's history, interleaved in time; and all of them as
// the manager holds them, newest first.
func mergedMigrations(tb testing.TB) (*Manager, []sim.Migration) {
	ctx := context.Background()
	store := NewMemStore(tb)
	m := New(Config{Nodes: []Node{{Node: sim.Node{Name: "a"}}, {Node: sim.Node{Name: "b"}}}, Store: store, Catalog: RepoCatalog(tb),
		Runtimes: sim.RuntimeSet{Runtimes: map[string]sim.Runtime{sim.RuntimeExternal: External{}}, Default: sim.RuntimeExternal}})
	tb.Cleanup(func() { m.Close() })

	rng := rand.New(rand.NewPCG(19, 10000))
	at := time.Unix(1700000000, 0).UTC()
	states := []sim.MigrationState{sim.MigrationCompleted, sim.MigrationFailed, sim.MigrationAborted}
	var all []sim.Migration // the truth: each once, as the manager holds it
	for i := range 60 {
		// Times collide now and then, so ties are ordered by id.
		mig := sim.Migration{ID: fmt.Sprintf("mig-%02d", i), JobID: fmt.Sprint("job-", rng.IntN(3)),
			StartedAt: at.Add(time.Duration(rng.IntN(40)) * time.Second)}
		switch rng.IntN(4) {
		case 0: // running here, its copy in the store stale
			mig.State = sim.MigrationRunning
			stale := mig
			stale.State, stale.StartedAt = sim.MigrationCompleted, at.Add(-time.Hour)
			if err := store.SaveMigration(ctx, &stale); err != nil {
				tb.Fatal(err)
			}
			m.migrations[mig.ID] = &run{id: mig.ID, mig: mig}
		case 1: // running here, not written yet
			mig.State = sim.MigrationRunning
			m.migrations[mig.ID] = &run{id: mig.ID, mig: mig}
		default: // history
			mig.State = states[rng.IntN(len(states))]
			if err := store.SaveMigration(ctx, &mig); err != nil {
				tb.Fatal(err)
			}
		}
		all = append(all, mig)
	}
	sort.Slice(all, func(i, j int) bool {
		if !all[i].StartedAt.Equal(all[j].StartedAt) {
			return all[i].StartedAt.After(all[j].StartedAt)
		}
		return all[i].ID < all[j].ID
	})
	return m, all
}

// TestInstancePageIsInstancesCut: InstancePage is Instances, on one node
// when asked, cut to the page; InstanceCounts counts each node's.
func TestInstancePageIsInstancesCut(t *testing.T) {
	ctx := context.Background()
	m := New(Config{Nodes: []Node{{Node: sim.Node{Name: "a"}}, {Node: sim.Node{Name: "b"}}}, Store: NewMemStore(t), Catalog: RepoCatalog(t),
		Runtimes: sim.RuntimeSet{Runtimes: map[string]sim.Runtime{sim.RuntimeExternal: External{}}, Default: sim.RuntimeExternal}})
	defer m.Close()
	for i := range 7 {
		if _, err := m.Launch(ctx, sim.LaunchRequest{Template: "plain", Node: []string{"a", "b", "a"}[i%3]}); err != nil {
			t.Fatal(err)
		}
	}
	all, err := m.Instances(ctx)
	if err != nil {
		t.Fatal(err)
	}
	counts, err := m.InstanceCounts(ctx)
	if err != nil || counts["a"] != 5 || counts["b"] != 2 || len(counts) != 2 {
		t.Fatalf("InstanceCounts = %v, %v; want a 5, b 2", counts, err)
	}
	for _, node := range []string{"", "a", "b", "c"} {
		var want []string
		for _, in := range all {
			if node == "" || in.Node == node {
				want = append(want, in.ID)
			}
		}
		for _, limit := range []int{0, 1, 2, 10} {
			for offset := 0; offset <= len(want)+1; offset++ {
				p, err := m.InstancePage(ctx, sim.InstanceFilter{Node: node, Limit: limit, Offset: offset})
				if err != nil {
					t.Fatal(err)
				}
				var got []string
				for _, in := range p.Items {
					got = append(got, in.ID)
				}
				page := sim.PageOf(want, offset, limit)
				if !slices.Equal(got, page.Items) || p.Total != len(want) {
					t.Fatalf("InstancePage(node %q, limit %d, offset %d) = %v of %d, want %v of %d", node, limit, offset, got, p.Total, page.Items, len(want))
				}
			}
		}
	}
}
