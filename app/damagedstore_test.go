package app_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/normsim/normsim/app"
	"github.com/normsim/normsim/sim"
	"github.com/normsim/normsim/sim/sqlite"
)

// TestADamagedRecordNamesTheStoreAndTheFix (attack round 10a, M4): a store
// whose file passes SQLite's own check but holds a record of the wrong
// shape (an edit, a damaged write) stopped normsim at its recovery with
// "list instances: sql: Scan error on column index 12": neither the file,
// nor that it is damaged, nor what to do.
func TestADamagedRecordNamesTheStoreAndTheFix(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "s.db")
	s, err := sqlite.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	if err := s.SaveInstance(ctx, &sim.Instance{ID: "counter-1a2b3c", JobID: "job-1", Node: "a", Template: "counter", Runtime: sim.RuntimeProcess,
		State: sim.InstanceRunning, CreatedAt: now, UpdatedAt: now}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`UPDATE instances SET connected = 'yes'`); err != nil {
		t.Fatal(err)
	}
	db.Close()

	opts := testOptions(t)
	opts.DB = path
	m := app.New(opts)
	err = m.Open(ctx)
	m.Close()
	if err == nil || !strings.Contains(err.Error(), "store "+path) || !strings.Contains(err.Error(), "damaged or was edited") || !strings.Contains(err.Error(), "move it aside") {
		t.Fatalf("open on a store with a damaged record: %v; want the file, what is wrong and the fix named", err)
	}
}
