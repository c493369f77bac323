package sqlite_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/normsim/normsim/sim"
	"github.com/normsim/normsim/sim/sqlite"
	"github.com/normsim/normsim/sim/storetest"
)

// BenchmarkRecordFrames writes frame records into a file store in the
// recorder's batches of 256 (many rows per statement) and in batches of
// 31 (below one multi-row statement: one statement per row), side by side,
// under a deadline as the recorder's writes are; frames/s is what the
// store keeps up with.
//
//	go test -run '^$' -bench BenchmarkRecordFrames ./sim/sqlite/
func BenchmarkRecordFrames(b *testing.B) {
	for _, c := range []struct {
		n      int
		spread bool
	}{{256, false}, {31, false}, {256, true}} {
		n, spread := c.n, c.spread
		name := fmt.Sprintf("batch=%d", n)
		if spread {
			name += ",instances=256"
		}
		b.Run(name, func(b *testing.B) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
			defer cancel()
			s, err := sqlite.Open(ctx, filepath.Join(b.TempDir(), "s.db"))
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			batch := storetest.FrameRecords(n, time.Now())
			if spread {
				// A busy sim's batch: every record another instance's.
				for i := range batch {
					batch[i].Role = fmt.Sprintf("counter-%d", i)
				}
			}
			for b.Loop() {
				if err := s.RecordFrames(ctx, batch); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N*len(batch))/b.Elapsed().Seconds(), "frames/s")
		})
	}
}

// BenchmarkJournalTimeline appends timeline events the way the journal
// does under load: batches of 64 migrations, each saved and given 3
// events, each append its own savepoint inside the batch's transaction,
// under a deadline as the journal's batches are.
//
//	go test -run '^$' -bench BenchmarkJournalTimeline ./sim/sqlite/
func BenchmarkJournalTimeline(b *testing.B) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	s, err := sqlite.Open(ctx, sqlite.Memory)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	at := time.Now()
	seq := 0
	n := 0
	for b.Loop() {
		err := s.Batch(ctx, func(ctx context.Context) {
			for i := range 64 {
				id := fmt.Sprintf("m%d", n*64+i)
				if err := s.SaveMigration(ctx, &sim.Migration{ID: id, JobID: "j", StartedAt: at}); err != nil {
					b.Fatal(err)
				}
				evs := []sim.MigrationEvent{
					{Seq: seq, At: at, Phase: sim.PhaseRequested, Side: "manager", Detail: "requested"},
					{Seq: seq + 1, At: at, Phase: sim.PhaseRequested, Side: "source", Detail: "get-state sent"},
					{Seq: seq + 2, At: at, Phase: sim.PhaseRequested, Side: "source", Detail: "state received"},
				}
				if err := s.AppendMigrationEvents(ctx, id, evs); err != nil {
					b.Fatal(err)
				}
			}
		})
		if err != nil {
			b.Fatal(err)
		}
		n++
	}
	b.ReportMetric(float64(b.N*64*3)/b.Elapsed().Seconds(), "events/s")
}

// BenchmarkAppendEvents writes a journal batch's 512 events into the
// events table one statement each (as the journal did) and all in one
// call (as it does): the ratio of the two events/s is the figure.
//
//	go test -run '^$' -bench BenchmarkAppendEvents ./sim/sqlite/
func BenchmarkAppendEvents(b *testing.B) {
	for _, tc := range []struct {
		name string
		per  int
	}{{"one-per-statement", 1}, {"together", 512}} {
		b.Run(tc.name, func(b *testing.B) {
			ctx := context.Background()
			s, err := sqlite.Open(ctx, sqlite.Memory)
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			evs := make([]sim.Event, 512)
			for i := range evs {
				evs[i] = sim.Event{At: time.Now(), Kind: sim.EventInstanceState, Instance: fmt.Sprintf("counter-%06x", i*7919%65536),
					Migration: fmt.Sprintf("mig-%010x", i/16), Data: json.RawMessage(`{"from":"starting","node":"b","to":"running"}`)}
			}
			for b.Loop() {
				err := s.Batch(ctx, func(ctx context.Context) {
					for from := 0; from < len(evs); from += tc.per {
						if err := s.AppendEvents(ctx, evs[from:from+tc.per]); err != nil {
							b.Fatal(err)
						}
					}
				})
				if err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N*len(evs))/b.Elapsed().Seconds(), "events/s")
		})
	}
}
