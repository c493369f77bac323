package app_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/normsim/normsim/sim"
)

// TestAPrunedMigrationSaysHowItEnded: under --keep-migrations a client that
// reads its migration after newer ones pushed it out of the store (bench
// and ci runs with more handovers at once than the cap) gets how it ended
// and why the record is gone, not a 404 as for a migration never known.
func TestAPrunedMigrationSaysHowItEnded(t *testing.T) {
	opts := testOptions(t)
	opts.KeepMigrations = 1
	m, hs, _ := handedOver(t, opts, 2)
	first := hs[0]

	get := func(id string) (int, map[string]string) {
		t.Helper()
		// The journal writes behind: the first is pruned once the second
		// is stored.
		for deadline := time.Now().Add(10 * time.Second); ; {
			resp, err := http.Get(m.URL() + "/api/v1/migrations/" + id)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			var eb struct{ Error map[string]string }
			json.Unmarshal(body, &eb)
			if resp.StatusCode != http.StatusOK || time.Now().After(deadline) {
				return resp.StatusCode, eb.Error
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	status, e := get(first.MigrationID)
	if status != http.StatusGone || e["code"] != sim.EGone || e["ended"] != string(sim.MigrationCompleted) || !strings.Contains(e["message"], "--keep-migrations 1") {
		t.Errorf("the pruned migration: %d %v; want 410 GONE, ended completed, naming --keep-migrations 1", status, e)
	}
	if status, e := get("mig-0000000000"); status != http.StatusNotFound || e["code"] != sim.ENotFound {
		t.Errorf("a migration never known: %d %v; want 404 NOT_FOUND", status, e)
	}
}
