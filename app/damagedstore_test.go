package app_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/normsim/normsim/apiclient"
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
	now := time.Now()
	path := damagedStore(t, func(s *sqlite.Store) error {
		return s.SaveInstance(ctx, runningInstance(now))
	}, damageInstances)

	err := openOn(t, path)
	if err == nil || !strings.Contains(err.Error(), "store "+path) || !strings.Contains(err.Error(), "damaged or was edited") || !strings.Contains(err.Error(), "move it aside") {
		t.Fatalf("open on a store with a damaged record: %v; want the file, what is wrong and the fix named", err)
	}
}

// TestADamagedMigrationCostsItselfNotTheList (issue 34, left open by round
// 10a): one migration record that no longer decodes made the list, its
// pages and the dashboard answer 500. The list now serves the rest, says
// how many were left out and why (X-Unreadable-Count, X-Unreadable; the
// dashboard's alert), and the damaged one alone answers with its error.
func TestADamagedMigrationCostsItselfNotTheList(t *testing.T) {
	ctx := context.Background()
	now := time.Now()
	path := damagedStore(t, func(s *sqlite.Store) error {
		for i, id := range []string{"mig-good", "mig-bad"} {
			end := now.Add(time.Duration(i) * time.Second)
			if err := s.SaveMigration(ctx, &sim.Migration{ID: id, JobID: "job-1", State: sim.MigrationCompleted, Strategy: sim.Handover,
				StartedAt: end, EndedAt: &end}); err != nil {
				return err
			}
		}
		stopped := runningInstance(now)
		stopped.State = sim.InstanceStopped
		return s.SaveInstance(ctx, stopped)
	}, `UPDATE migrations SET doc = '{"id": 7}' WHERE id = 'mig-bad'`)

	opts := testOptions(t)
	opts.DB = path
	m, _, stop := runUp(t, opts)
	defer stop()
	resp, err := http.Get(m.URL() + "/api/v1/migrations")
	if err != nil {
		t.Fatal(err)
	}
	var list []sim.Migration
	json.NewDecoder(resp.Body).Decode(&list)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || len(list) != 1 || list[0].ID != "mig-good" || resp.Header.Get("X-Total-Count") != "2" ||
		resp.Header.Get("X-Unreadable-Count") != "1" || !strings.Contains(resp.Header.Get("X-Unreadable"), "migration mig-bad") {
		t.Fatalf("list with a damaged record: %d, %d listed, header %v", resp.StatusCode, len(list), resp.Header)
	}
	page, err := apiclient.New(m.URL(), nil).MigrationPage(ctx, sim.MigrationFilter{})
	if err != nil || len(page.Items) != 1 || page.Unreadable != 1 || !strings.Contains(page.Damage, path) {
		t.Fatalf("the client's page: %+v, %v", page, err)
	}
	if code, body := getText(t, m.URL()+"/migrations"); code != http.StatusOK || !strings.Contains(body, `id="unreadable-records"`) || !strings.Contains(body, "mig-good") {
		t.Fatalf("the dashboard's history with a damaged record: %d\n%s", code, body)
	}
	// The instance's page lists its job's migrations: it said "None yet."
	// with a damaged one among them (attack round 11, B7).
	if code, body := getText(t, m.URL()+"/instances/counter-1a2b3c"); code != http.StatusOK || !strings.Contains(body, `id="unreadable-job-migrations"`) || !strings.Contains(body, "mig-good") {
		t.Fatalf("the instance's page with a damaged migration of its job: %d\n%s", code, body)
	}
	resp, err = http.Get(m.URL() + "/api/v1/migrations/mig-bad")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusInternalServerError {
		t.Fatalf("the damaged record itself: %d, want 500 with its error", resp.StatusCode)
	}
}

// damagedStore is a store file holding what fill saved, then changed by
// damage, SQL run on the file as an edit or a damaged write would.
func damagedStore(t *testing.T, fill func(*sqlite.Store) error, damage string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "s.db")
	s, err := sqlite.Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	err = fill(s)
	s.Close()
	if err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(damage); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestAStartStoppedByADamagedRecordWritesNothing (issue 34, left open by
// round 10a): a start that stops on a damaged record had already failed
// the interrupted migrations it read before it, so the store was no
// longer as the user found it. Recovery now reads everything first.
func TestAStartStoppedByADamagedRecordWritesNothing(t *testing.T) {
	ctx := context.Background()
	now := time.Now()
	path := damagedStore(t, func(s *sqlite.Store) error {
		if err := s.SaveMigration(ctx, &sim.Migration{ID: "mig-1", JobID: "job-1", State: sim.MigrationRunning, Strategy: sim.Handover, StartedAt: now}); err != nil {
			return err
		}
		return s.SaveInstance(ctx, runningInstance(now))
	}, damageInstances)

	if err := openOn(t, path); err == nil || !strings.Contains(err.Error(), "damaged or was edited") {
		t.Fatalf("open on a store with a damaged record: %v", err)
	}
	s, err := sqlite.OpenToRead(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	mig, err := s.GetMigration(ctx, "mig-1")
	if err != nil || mig.State != sim.MigrationRunning || len(mig.Events) != 0 {
		t.Fatalf("the interrupted migration after the refused start: %+v, %v; want it untouched", mig, err)
	}
}

// damageInstances gives every stored instance a value of the wrong type.
const damageInstances = `UPDATE instances SET connected = 'yes'`

// runningInstance is an instance of the counter left running.
func runningInstance(now time.Time) *sim.Instance {
	return &sim.Instance{ID: "counter-1a2b3c", JobID: "job-1", Node: "a", Template: "counter", Runtime: sim.RuntimeProcess,
		State: sim.InstanceRunning, CreatedAt: now, UpdatedAt: now}
}

// openOn opens a sim on the store file at path, closes it, and says how
// the open went.
func openOn(t *testing.T, path string) error {
	t.Helper()
	opts := testOptions(t)
	opts.DB = path
	m := app.New(opts)
	err := m.Open(context.Background())
	m.Close()
	return err
}

// TestDamagedEventsFramesAndLogLinesCostThemselves (attack round 11, B5):
// a damaged row in an instance's events or frames made its list answer
// 500 "internal error", and one in its log stopped the log there. Each
// list now serves the rest and says what it left out (X-Unreadable-Count
// and X-Unreadable; the CLI's warning; the instance page's note), and a
// damaged log line is a normsim line where it was, counted.
func TestDamagedEventsFramesAndLogLinesCostThemselves(t *testing.T) {
	ctx := context.Background()
	now := time.Now()
	in := runningInstance(now)
	in.State = sim.InstanceStopped
	path := damagedStore(t, func(s *sqlite.Store) error {
		if err := s.SaveInstance(ctx, in); err != nil {
			return err
		}
		var evs []sim.Event
		var frs []sim.FrameRecord
		var lines []sim.LogLine
		for i := range 3 {
			at := now.Add(time.Duration(i) * time.Millisecond)
			evs = append(evs, sim.Event{At: at, Kind: sim.EventInstanceState, Instance: in.ID, Data: json.RawMessage(`{"from":"running","to":"stopped"}`)})
			frs = append(frs, sim.FrameRecord{At: at, Node: "a", JobID: in.JobID, Role: in.ID, Direction: "in", Type: "hello", Size: 2, Data: "{}"})
			lines = append(lines, sim.LogLine{Instance: in.ID, Service: "app", Stream: "stdout", At: at, Text: fmt.Sprintf("line %d", i)})
		}
		if err := s.AppendEvents(ctx, evs); err != nil {
			return err
		}
		if err := s.RecordFrames(ctx, frs); err != nil {
			return err
		}
		if err := s.RegisterLogs(ctx, in.ID); err != nil {
			return err
		}
		return s.AppendLogs(ctx, lines)
	}, `UPDATE events SET at = 'x' WHERE seq = 2; UPDATE frames SET at = 'x' WHERE seq = 2; UPDATE logs SET at = 'x' WHERE seq = 2`)

	opts := testOptions(t)
	opts.DB = path
	m, _, stop := runUp(t, opts)
	defer stop()
	for _, what := range []string{"events", "frames"} {
		resp, err := http.Get(m.URL() + "/api/v1/instances/" + in.ID + "/" + what)
		if err != nil {
			t.Fatal(err)
		}
		var list []json.RawMessage
		json.NewDecoder(resp.Body).Decode(&list)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || len(list) != 2 || resp.Header.Get("X-Unreadable-Count") != "1" || !strings.Contains(resp.Header.Get("X-Unreadable"), path) {
			t.Errorf("%s with a damaged record: %d, %d listed, header %v", what, resp.StatusCode, len(list), resp.Header)
		}
	}
	frs, err := apiclient.New(m.URL(), nil).Frames(ctx, in.ID, 50)
	if u, ok := errors.AsType[*sim.UnreadableRecords](err); !ok || u.Count != 1 || len(frs) != 2 {
		t.Errorf("the client's frames: %d, %v; want 2 and one record unreadable", len(frs), err)
	}
	code, body := getText(t, m.URL()+"/api/v1/instances/"+in.ID+"/logs")
	if code != http.StatusOK || !strings.Contains(body, "line 0") || !strings.Contains(body, "line 2") || !strings.Contains(body, "a line of this log could not be read") || !strings.Contains(body, "log line 2") {
		t.Errorf("the log with a damaged line: %d\n%s", code, body)
	}
	if code, body := getText(t, m.URL()+"/instances/"+in.ID); code != http.StatusOK || !strings.Contains(body, `id="history-err"`) || !strings.Contains(body, `id="frames-err"`) || !strings.Contains(body, "hello") {
		t.Errorf("the instance's page with damaged records: %d\n%s", code, body)
	}
}
