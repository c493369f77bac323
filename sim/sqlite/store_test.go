package sqlite_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/normsim/normsim/sim/sqlite"
	"github.com/normsim/normsim/sim/storetest"
)

func MustOpen(tb testing.TB, path string) *sqlite.Store {
	tb.Helper()
	s, err := sqlite.Open(context.Background(), path)
	if err != nil {
		tb.Fatalf("open %s: %v", path, err)
	}
	tb.Cleanup(func() { s.Close() })
	return s
}

// TestRecordsSurviveReopen: a store file holds every kind of record, each
// field as written, once it is closed and opened again.
func TestRecordsSurviveReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state", "normsim.db")
	s := MustOpen(t, path)
	storetest.WriteRecords(t, s)
	s.Close()
	storetest.CheckRecords(t, MustOpen(t, path))
}

func TestFileStoreUsesWAL(t *testing.T) {
	path := filepath.Join(t.TempDir(), "n.db")
	MustOpen(t, path).Close()
	s := MustOpen(t, path) // reopening must not re-apply migrations
	mode, err := sqlite.JournalMode(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	if mode != "wal" {
		t.Fatalf("journal mode = %q, want wal", mode)
	}
}
