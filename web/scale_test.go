package web_test

import (
	"fmt"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/normsim/normsim/normsimtest"
	"github.com/normsim/normsim/sim"
)

// The dashboard and the API at 10,000 instances (issue 19): a real sim on
// the external runtime, where a launch places an instance nobody starts,
// so 10,000 of them take seconds and no job connects.
const (
	scaleInstances = 10_000
	// scaleMigrations of the instances are the targets of completed
	// stopThenStart migrations, so the history has more than a page too.
	scaleMigrations = 1_000
)

// startScaleSim runs a sim holding scaleInstances instances on nodes a and
// b, scaleMigrations of them placed by completed migrations.
func startScaleSim(tb testing.TB) *normsimtest.Sim {
	tb.Helper()
	s := startSim(tb, normsimtest.Options{Runtime: sim.RuntimeExternal})
	ctx := tb.Context()
	mgr := s.Main.Manager
	started := time.Now()
	ids := make([]string, scaleInstances-scaleMigrations)
	each(tb, len(ids), func(i int) error {
		in, err := mgr.Launch(ctx, sim.LaunchRequest{Template: "plain", Node: []string{"a", "b"}[i%2]})
		ids[i] = in.ID
		return err
	})
	launched := time.Since(started)
	each(tb, scaleMigrations, func(i int) error {
		// Only a running instance migrates; a launch answers while it starts.
		if _, err := mgr.AwaitInstance(ctx, ids[i], sim.UntilRunning); err != nil {
			return err
		}
		_, err := mgr.Migrate(ctx, ids[i], sim.MigrateRequest{Strategy: string(sim.StopThenStart)})
		return err
	})
	waitFor(tb, 2*time.Minute, "the migrations to end", func() bool {
		running, err := mgr.Migrations(ctx, sim.MigrationFilter{State: sim.MigrationRunning, Limit: 1})
		return err == nil && len(running) == 0
	})
	all, err := mgr.Instances(ctx)
	if err != nil || len(all) != scaleInstances {
		tb.Fatalf("%d instances (%v), want %d", len(all), err, scaleInstances)
	}
	tb.Logf("%d launches in %v, then %d stopThenStart migrations; ready after %v",
		len(ids), launched.Round(time.Millisecond), scaleMigrations, time.Since(started).Round(time.Millisecond))
	return s
}

// each runs do(0..n-1) on 8 goroutines and fails tb with the first error.
func each(tb testing.TB, n int, do func(i int) error) {
	tb.Helper()
	work := make(chan int)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var first error
	for range 8 {
		wg.Go(func() {
			for i := range work {
				if err := do(i); err != nil {
					mu.Lock()
					if first == nil {
						first = fmt.Errorf("%d: %w", i, err)
					}
					mu.Unlock()
				}
			}
		})
	}
	for i := range n {
		work <- i
	}
	close(work)
	wg.Wait()
	if first != nil {
		tb.Fatal(first)
	}
}

// BenchmarkAPIList10k: GET /api/v1/instances and /api/v1/migrations with
// 10,000 instances and 1,000 migrations in the sim, whole and a page of
// 100 deep in the list (KB/op: the answer's size).
//
//	go test -run '^$' -bench APIList10k ./web/
func BenchmarkAPIList10k(b *testing.B) {
	s := startScaleSim(b)
	for _, tc := range []struct{ name, path string }{
		{"instances", "/api/v1/instances"},
		{"instances-page", "/api/v1/instances?limit=100&offset=5000"},
		{"migrations", "/api/v1/migrations"},
		{"migrations-page", "/api/v1/migrations?limit=100&offset=500"},
	} {
		b.Run(tc.name, func(b *testing.B) {
			var size int64
			for b.Loop() {
				resp, err := http.Get(s.URL + tc.path)
				if err != nil {
					b.Fatal(err)
				}
				size, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					b.Fatalf("GET %s = %d", tc.path, resp.StatusCode)
				}
			}
			b.ReportMetric(float64(size)/1024, "KB/op")
		})
	}
}
