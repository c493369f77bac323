package sqlite_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/normsim/normsim/sim"
	"github.com/normsim/normsim/sim/sqlite"
	"github.com/normsim/normsim/sim/storetest"
)

func logLines(inst string, from, n int, at time.Time) []sim.LogLine {
	var out []sim.LogLine
	for i := from; i < from+n; i++ {
		out = append(out, sim.LogLine{Instance: inst, Service: "app", Stream: sim.StreamStdout, At: at.Add(time.Duration(i) * time.Millisecond), Text: fmt.Sprintf("line %d", i)})
	}
	return out
}

// TestLogsTrimCountAndSurviveReopen: what the contract's log test writes
// (lines trimmed past the bound, counted, overflows counted) is served the
// same by a store file once it is closed and opened again.
func TestLogsTrimCountAndSurviveReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.db")
	s := MustOpen(t, path)
	storetest.WriteLogs(t, s)
	storetest.CheckLogs(t, s)
	s.Close()
	storetest.CheckLogs(t, MustOpen(t, path))
}

// BenchmarkAppendLogs stores lines in the capture's batches of 2,000 into
// a file store; lines/s is what the store keeps up with.
//
//	go test -run '^$' -bench BenchmarkAppendLogs ./sim/sqlite/
func BenchmarkAppendLogs(b *testing.B) {
	ctx := context.Background()
	s, err := sqlite.Open(ctx, filepath.Join(b.TempDir(), "s.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	at := time.Now()
	batch := logLines("i1", 0, 2000, at)
	for i := range batch {
		batch[i].Text = fmt.Sprintf("time=2026-12-01T12:00:00Z level=INFO msg=chatty n=%d", i)
	}
	b.ResetTimer()
	for b.Loop() {
		if err := s.AppendLogs(ctx, batch); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*len(batch))/b.Elapsed().Seconds(), "lines/s")
}

// BenchmarkRegisterLogs registers instances into a store already at its
// bound on instances (500): each registration forgets the oldest, as every
// launch does once a sim has run 500 instances.
//
//	go test -run '^$' -bench BenchmarkRegisterLogs ./sim/sqlite/
func BenchmarkRegisterLogs(b *testing.B) {
	ctx := context.Background()
	s, err := sqlite.Open(ctx, sqlite.Memory)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	n := 0
	register := func() {
		if err := s.RegisterLogs(ctx, fmt.Sprintf("i%d", n)); err != nil {
			b.Fatal(err)
		}
		n++
	}
	for range sqlite.DefaultLogLimits.Instances {
		register()
	}
	b.ResetTimer()
	for b.Loop() {
		register()
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "registrations/s")
}
