package sqlite_test

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/normsim/normsim/sim"
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

// TestADamagedMigrationRecordIsNamed (attack round 10a, M3): a migration
// whose stored document no longer decodes made the API answer a bare
// "internal error". The error names the record, the file and what to do.
//
// Round 12: a record whose row and document disagree on its state (one
// edited without the other) was read by the document's, while recovery
// and lists by state select by the row's: a start rewrote a completed
// migration as failed (interrupted) without a word. It is damaged too, as
// is a document whose state is no state.
func TestADamagedMigrationRecordIsNamed(t *testing.T) {
	for name, edit := range map[string]string{
		"a document that is not JSON": `UPDATE migrations SET doc = 'not json' WHERE id = 'mig-bad'`,
		"the row's state edited":      `UPDATE migrations SET state = 'running' WHERE id = 'mig-bad'`,
		"the document's state edited": `UPDATE migrations SET doc = json_set(doc, '$.state', 'running') WHERE id = 'mig-bad'`,
		"a state that is none":        `UPDATE migrations SET doc = json_set(doc, '$.state', 'paused'), state = 'paused' WHERE id = 'mig-bad'`,
	} {
		t.Run(name, func(t *testing.T) { testADamagedMigrationRecordIsNamed(t, edit) })
	}
}

func testADamagedMigrationRecordIsNamed(t *testing.T, edit string) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "n.db")
	s := MustOpen(t, path)
	for _, id := range []string{"mig-good", "mig-bad"} {
		if err := s.SaveMigration(ctx, &sim.Migration{ID: id, State: sim.MigrationCompleted, Strategy: sim.Handover, StartedAt: time.Now()}); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(edit); err != nil {
		t.Fatal(err)
	}
	db.Close()
	s = MustOpen(t, path)
	if _, err := s.GetMigration(ctx, "mig-good"); err != nil {
		t.Fatalf("the readable record: %v", err)
	}
	for name, read := range map[string]func() error{
		"get":  func() error { _, err := s.GetMigration(ctx, "mig-bad"); return err },
		"list": func() error { _, err := s.ListMigrations(ctx, sim.MigrationFilter{}); return err },
	} {
		err := read()
		if msg := sim.ErrorMessage(err); !strings.Contains(msg, "migration mig-bad") || !strings.Contains(msg, path) || !strings.Contains(msg, "is damaged") || !strings.Contains(msg, "restore a copy") {
			t.Errorf("%s: %v (the API says %q), want the record, the file and the fix named", name, err, msg)
		}
	}
	// A list costs the damaged record, not the list: the rest come with
	// the count of what was left out.
	list, err := s.ListMigrations(ctx, sim.MigrationFilter{})
	unreadable, ok := errors.AsType[*sim.UnreadableRecords](err)
	if !ok || unreadable.Count != 1 || len(list) != 1 || list[0].ID != "mig-good" {
		t.Fatalf("list with a damaged record: %d listed, %v; want mig-good with one record counted unreadable", len(list), err)
	}
}

// TestADamagedInstanceColumnIsNamed (attack round 11, B4): an instance
// whose params (or env, ports, runtime ref, adjustments) no longer
// decoded was read as if it had none, silently: a migration then placed
// its target with the template's defaults. It is a damaged record, named
// with the fix, in a get and in a list.
func TestADamagedInstanceColumnIsNamed(t *testing.T) {
	ctx := context.Background()
	for _, column := range []string{"params", "env", "ports", "runtime_ref", "adjustments"} {
		t.Run(column, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "n.db")
			s := MustOpen(t, path)
			in := &sim.Instance{ID: "counter-bad", JobID: "job-1", Node: "a", Template: "counter", State: sim.InstanceRunning,
				Params: map[string]string{"RATE": "7"}, CreatedAt: time.Now(), UpdatedAt: time.Now()}
			if err := s.SaveInstance(ctx, in); err != nil {
				t.Fatal(err)
			}
			s.Close()
			db, err := sql.Open("sqlite", path)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := db.Exec(`UPDATE instances SET ` + column + ` = '{"RATE":' WHERE id = 'counter-bad'`); err != nil {
				t.Fatal(err)
			}
			db.Close()
			s = MustOpen(t, path)
			for name, read := range map[string]func() error{
				"get":  func() error { _, err := s.GetInstance(ctx, "counter-bad"); return err },
				"list": func() error { _, err := s.ListInstances(ctx); return err },
			} {
				msg := sim.ErrorMessage(read())
				if !strings.Contains(msg, "instance counter-bad") || !strings.Contains(msg, column) || !strings.Contains(msg, "is damaged") {
					t.Errorf("%s: %q, want the instance, its column and the fix named", name, msg)
				}
			}
		})
	}
}

// TestADamagedTimelineFrameCostsOnlyItself (attack round 11, B5): a
// timeline event whose stored frame no longer decoded made the whole
// migration answer a bare "internal error". The event is kept, its frame
// says it could not be read, and the rest of the record reads.
func TestADamagedTimelineFrameCostsOnlyItself(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "n.db")
	s := MustOpen(t, path)
	if err := s.SaveMigration(ctx, &sim.Migration{ID: "mig-1", State: sim.MigrationCompleted, Strategy: sim.Handover, StartedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	evs := []sim.MigrationEvent{
		{Seq: 1, At: time.Now(), Side: "source", Detail: "get-state", Frame: sim.NewFrameInfo("out", "get-state", 30, nil)},
		{Seq: 2, At: time.Now(), Side: "source", Detail: "state", Frame: sim.NewFrameInfo("in", "state", 40, []byte(`{"n":1}`))},
	}
	if err := s.AppendMigrationEvents(ctx, "mig-1", evs); err != nil {
		t.Fatal(err)
	}
	s.Close()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`UPDATE migration_events SET frame = '{"direction":' WHERE seq = 1`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	s = MustOpen(t, path)
	m, err := s.GetMigration(ctx, "mig-1")
	if err != nil || len(m.Events) != 2 || m.Events[0].Frame == nil || !strings.Contains(m.Events[0].Frame.PayloadNote, "could not be read") ||
		m.Events[1].Frame == nil || string(m.Events[1].Frame.Payload) != `{"n":1}` {
		t.Fatalf("migration with a damaged frame: %+v, %v; want both events, the first's frame said unreadable", m, err)
	}
}
