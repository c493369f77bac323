package sqlite_test

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/normsim/normsim/sim"
	"github.com/normsim/normsim/sim/sqlite"
)

// TestSeamCapturesAreKeptAndGoWithTheirMigrations: a capture reads back
// as saved, a migration without one is ENotFound with a reason, and a
// pruned migration's capture goes with it.
func TestSeamCapturesAreKeptAndGoWithTheirMigrations(t *testing.T) {
	ctx := context.Background()
	s, err := sqlite.Open(ctx, sqlite.Memory)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.SetMigrationCap(1)
	t0 := time.Unix(1_800_000_000, 0).UTC()
	for i := 1; i <= 2; i++ {
		id := fmt.Sprintf("m%d", i)
		at := t0.Add(time.Duration(i) * time.Minute)
		if err := s.SaveMigration(ctx, &sim.Migration{ID: id, JobID: "j", State: sim.MigrationRunning, StartedAt: at}); err != nil {
			t.Fatal(err)
		}
		ts := bytes.Repeat([]byte{0x47, byte(i)}, 94)
		if err := s.SaveSeamCapture(ctx, sim.SeamCapture{MigrationID: id, From: at, To: at.Add(6 * time.Second), Datagrams: 3, TS: ts, TargetTS: ts[188:]}); err != nil {
			t.Fatal(err)
		}
		got, err := s.SeamCapture(ctx, id)
		if err != nil || !bytes.Equal(got.TS, ts) || !bytes.Equal(got.TargetTS, ts[188:]) || got.Datagrams != 3 || !got.From.Equal(at) || got.To.Sub(got.From) != 6*time.Second {
			t.Fatalf("capture of %s: %+v, %v", id, got, err)
		}
		if err := s.SaveMigration(ctx, &sim.Migration{ID: id, JobID: "j", State: sim.MigrationCompleted, StartedAt: at}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.SeamCapture(ctx, "m1"); sim.ErrorCode(err) != sim.ENotFound {
		t.Fatalf("m1 was pruned, its capture: %v", err)
	}
	if _, err := s.SeamCapture(ctx, "m2"); err != nil {
		t.Fatalf("m2 kept, its capture: %v", err)
	}
}
