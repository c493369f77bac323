package sqlite_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/normsim/normsim/sim"
	"github.com/normsim/normsim/sim/sqlite"
)

func logLines(inst string, from, n int, at time.Time) []sim.LogLine {
	var out []sim.LogLine
	for i := from; i < from+n; i++ {
		out = append(out, sim.LogLine{Instance: inst, Service: "app", Stream: sim.StreamStdout, At: at.Add(time.Duration(i) * time.Millisecond), Text: fmt.Sprintf("line %d", i)})
	}
	return out
}

// TestLogsTrimCountAndSurviveReopen: an instance over its bound loses its
// oldest lines, counted exactly; tail, since and after select; a reopened
// store serves the same.
func TestLogsTrimCountAndSurviveReopen(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "s.db")
	s, err := sqlite.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	s.SetLogLimits(sqlite.LogLimits{Lines: 100, Bytes: 1 << 20, Instances: 10})
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for b := 0; b < 5; b++ {
		if err := s.AppendLogs(ctx, logLines("i1", b*30, 30, at)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.AppendLogs(ctx, logLines("i2", 0, 3, at)); err != nil {
		t.Fatal(err)
	}
	check := func(s *sqlite.Store) {
		t.Helper()
		p, err := s.ReadLogs(ctx, sim.LogQuery{Instance: "i1"})
		if err != nil {
			t.Fatal(err)
		}
		kept := int64(len(p.Lines))
		if !p.Known || kept > 100 || kept+p.Lost.Trimmed != 150 || p.Kept.Lines != kept {
			t.Fatalf("kept %d (state %d) + trimmed %d, want 150 in all and at most 100 kept", kept, p.Kept.Lines, p.Lost.Trimmed)
		}
		if first := p.Lines[0]; first.Text != fmt.Sprintf("line %d", p.Lost.Trimmed) || first.Seq != p.Kept.FirstSeq {
			t.Errorf("oldest kept %q (seq %d, first %d), want line %d", first.Text, first.Seq, p.Kept.FirstSeq, p.Lost.Trimmed)
		}
		tail, _ := s.ReadLogs(ctx, sim.LogQuery{Instance: "i1", Tail: 2})
		if len(tail.Lines) != 2 || tail.Lines[0].Text != "line 148" || tail.Lines[1].Text != "line 149" {
			t.Errorf("tail 2 = %+v", tail.Lines)
		}
		since, _ := s.ReadLogs(ctx, sim.LogQuery{Instance: "i1", Since: at.Add(147 * time.Millisecond), Until: at.Add(149 * time.Millisecond)})
		if len(since.Lines) != 2 || since.Lines[0].Text != "line 147" {
			t.Errorf("since/until = %+v", since.Lines)
		}
		after, _ := s.ReadLogs(ctx, sim.LogQuery{Instance: "i1", AfterSeq: tail.Lines[0].Seq})
		if len(after.Lines) != 1 || after.Lines[0].Text != "line 149" {
			t.Errorf("after = %+v", after.Lines)
		}
		other, _ := s.ReadLogs(ctx, sim.LogQuery{Instance: "i2"})
		if len(other.Lines) != 3 || other.Lost.Trimmed != 0 {
			t.Errorf("i2 = %+v", other)
		}
		none, _ := s.ReadLogs(ctx, sim.LogQuery{Instance: "never"})
		if none.Known || len(none.Lines) != 0 {
			t.Errorf("an unknown instance: %+v", none)
		}
	}
	check(s)
	if err := s.CountOverflow(ctx, "i1", 7); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s, err = sqlite.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	check(s)
	if p, _ := s.ReadLogs(ctx, sim.LogQuery{Instance: "i1"}); p.Lost.Overflowed != 7 {
		t.Errorf("overflowed %d after reopening, want 7", p.Lost.Overflowed)
	}
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
