package web_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/normsim/normsim/sim"
)

// TestMigrationWaitParameters: ?wait and ?after are checked, and a bad one
// is a 400 that names it.
func TestMigrationWaitParameters(t *testing.T) {
	f := newFake()
	f.addMig(&sim.Migration{ID: "m1", JobID: "job-1", State: sim.MigrationRunning, StartedAt: time.Now(),
		Events: []sim.MigrationEvent{{Seq: 1, Phase: sim.PhaseRequested, Side: "manager"}}})
	h := newServer(t, f, nil)
	for q, want := range map[string]string{
		"wait=soon":        "wait: must be a duration from 0s to 1m0s",
		"wait=-1s":         "wait: must be a duration",
		"wait=2m":          "wait: must be a duration",
		"wait=1s&after=x":  "after: must be a timeline seq, 0 or more",
		"wait=1s&after=-1": "after: must be a timeline seq",
		"after=1":          "after: says what to wait past; give wait too",
	} {
		r := get(t, h, "/api/v1/migrations/m1?"+q)
		if r.Status != http.StatusBadRequest || !strings.Contains(r.Body, want) {
			t.Errorf("?%s: %d %s, want 400 saying %q", q, r.Status, r.Body, want)
		}
	}
	// An event past after is there already: the answer comes at once.
	if r := get(t, h, "/api/v1/migrations/m1?wait=1m&after=0"); r.Status != http.StatusOK || !strings.Contains(r.Body, `"id": "m1"`) {
		t.Errorf("?wait=1m&after=0: %d %s", r.Status, r.Body)
	}
	// Nothing happens within the wait: the migration as it is, not an error.
	if r := get(t, h, "/api/v1/migrations/m1?wait=10ms&after=1"); r.Status != http.StatusOK || !strings.Contains(r.Body, `"state": "running"`) {
		t.Errorf("?wait=10ms&after=1 on a migration that does not change: %d %s", r.Status, r.Body)
	}
	if r := get(t, h, "/api/v1/migrations/nope?wait=1m"); r.Status != http.StatusNotFound {
		t.Errorf("waiting on an unknown migration: %d %s, want 404 at once", r.Status, r.Body)
	}
}

// TestMigrationWaitEndsAtShutdown: a request waiting on a migration
// answers when the server shuts down (EndWaits), with the migration as it
// is, instead of holding the shutdown up.
func TestMigrationWaitEndsAtShutdown(t *testing.T) {
	f := newFake()
	f.addMig(&sim.Migration{ID: "m1", JobID: "job-1", State: sim.MigrationRunning, StartedAt: time.Now()})
	h := newServer(t, f, nil)
	answered := make(chan response, 1)
	go func() { answered <- get(t, h, "/api/v1/migrations/m1?wait=1m") }()
	h.EndWaits()
	select {
	case r := <-answered:
		if r.Status != http.StatusOK || !strings.Contains(r.Body, `"state": "running"`) {
			t.Errorf("answer at shutdown: %d %s", r.Status, r.Body)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("a request waiting a minute on a migration was not answered at shutdown")
	}
}

// TestInstanceWait: GET /api/v1/instances/{id}?wait=…&until=… answers when
// the instance gets there, at once when it is there or has ended, with
// the instance as it is when the wait passes, and 400 naming a bad
// parameter.
func TestInstanceWait(t *testing.T) {
	f := newFake()
	f.add(sim.Instance{ID: "i1", JobID: "job-1", Node: "a", Template: "counter", State: sim.InstanceStarting})
	f.add(sim.Instance{ID: "gone", JobID: "job-2", Node: "a", Template: "counter", State: sim.InstanceFailed, Error: "exit 1"})
	h := newServer(t, f, nil)
	for q, want := range map[string]string{
		"wait=soon&until=running": "wait: must be a duration above 0s up to 1m0s",
		"wait=0s&until=running":   "wait: must be a duration",
		"wait=2m&until=running":   "wait: must be a duration",
		"wait=1s":                 "give until too: until=running or until=connected",
		"until=connected":         "until: says what to wait for; give wait too",
		"wait=1s&until=ready":     `until: must be running or connected; got \"ready\"`,
	} {
		r := get(t, h, "/api/v1/instances/i1?"+q)
		if r.Status != http.StatusBadRequest || !strings.Contains(r.Body, want) {
			t.Errorf("?%s: %d %s, want 400 saying %q", q, r.Status, r.Body, want)
		}
	}
	// Nothing happens within the wait: the instance as it is.
	if r := get(t, h, "/api/v1/instances/i1?wait=20ms&until=running"); r.Status != http.StatusOK || !strings.Contains(r.Body, `"state": "starting"`) {
		t.Errorf("a wait that passes: %d %s", r.Status, r.Body)
	}
	// Ended: it will not run, so the answer comes at once.
	start := time.Now()
	if r := get(t, h, "/api/v1/instances/gone?wait=1m&until=connected"); r.Status != http.StatusOK || !strings.Contains(r.Body, `"state": "failed"`) || time.Since(start) > 30*time.Second {
		t.Errorf("waiting on a failed instance: %d %s after %v", r.Status, r.Body, time.Since(start))
	}
	if r := get(t, h, "/api/v1/instances/nope?wait=1m&until=running"); r.Status != http.StatusNotFound {
		t.Errorf("waiting on an unknown instance: %d %s, want 404 at once", r.Status, r.Body)
	}
	// Running, then connected: each wait answers when it holds.
	answered := make(chan response, 1)
	go func() { answered <- get(t, h, "/api/v1/instances/i1?wait=1m&until=connected") }()
	time.Sleep(20 * time.Millisecond)
	f.setInstance(sim.Instance{ID: "i1", JobID: "job-1", Node: "a", Template: "counter", State: sim.InstanceRunning})
	select {
	case r := <-answered:
		t.Fatalf("answered before the job connected: %d %s", r.Status, r.Body)
	case <-time.After(50 * time.Millisecond):
	}
	f.setInstance(sim.Instance{ID: "i1", JobID: "job-1", Node: "a", Template: "counter", State: sim.InstanceRunning, Connected: true})
	select {
	case r := <-answered:
		if r.Status != http.StatusOK || !strings.Contains(r.Body, `"connected": true`) {
			t.Errorf("answer once connected: %d %s", r.Status, r.Body)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no answer 30 s after the job connected")
	}
}
