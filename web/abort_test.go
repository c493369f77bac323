package web_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/normsim/normsim/sim"
)

// TestAbortAPI: POST /api/v1/migrations/{id}/abort answers 202 with the
// migration while it can roll back, 409 saying why once it cannot, 404
// for none, and 400 for a body it cannot read.
func TestAbortAPI(t *testing.T) {
	f := newFake()
	f.addMig(&sim.Migration{ID: "m1", JobID: "job-1", Strategy: sim.Handover, State: sim.MigrationRunning, StartedAt: time.Now()})
	f.addMig(&sim.Migration{ID: "m2", JobID: "job-2", Strategy: sim.Handover, State: sim.MigrationRunning, StartedAt: time.Now(),
		Events: []sim.MigrationEvent{{Seq: 1, Kind: sim.TimelinePointOfNoReturn, Side: "manager"}}})
	h := newServer(t, f, nil)
	r := postJSON(t, h, "/api/v1/migrations/m1/abort", `{"reason":"wrong target node"}`)
	if r.Status != http.StatusAccepted || !strings.Contains(r.Body, "the user asked to abort: wrong target node") || r.Header.Get("Location") != "/api/v1/migrations/m1" {
		t.Fatalf("abort: %d %v %s", r.Status, r.Header, r.Body)
	}
	if r := postJSON(t, h, "/api/v1/migrations/m2/abort", ``); r.Status != http.StatusConflict || !strings.Contains(r.Body, "past the point of no return") {
		t.Errorf("abort past the point of no return: %d %s", r.Status, r.Body)
	}
	if r := postJSON(t, h, "/api/v1/migrations/nope/abort", `{}`); r.Status != http.StatusNotFound {
		t.Errorf("abort of an unknown migration: %d %s", r.Status, r.Body)
	}
	if r := postJSON(t, h, "/api/v1/migrations/m1/abort", `{"why":"x"}`); r.Status != http.StatusBadRequest || !strings.Contains(r.Body, "why") {
		t.Errorf("abort with an unknown field: %d %s", r.Status, r.Body)
	}
}

// TestAbortButton: the migration page offers Abort while it can roll
// back, not after; a refused abort shows why on the page.
func TestAbortButton(t *testing.T) {
	f := newFake()
	running := &sim.Migration{ID: "m1", JobID: "job-1", Strategy: sim.Handover, State: sim.MigrationRunning, StartedAt: time.Now()}
	f.addMig(running)
	f.addMig(&sim.Migration{ID: "m2", JobID: "job-2", Strategy: sim.Handover, State: sim.MigrationRunning, StartedAt: time.Now(),
		Events: []sim.MigrationEvent{{Seq: 1, Kind: sim.TimelinePointOfNoReturn, Side: "manager"}}})
	f.addMig(&sim.Migration{ID: "m3", JobID: "job-3", Strategy: sim.Handover, State: sim.MigrationCompleted, StartedAt: time.Now()})
	h := newServer(t, f, nil)
	mustContain(t, get(t, h, "/migrations/m1"), `id="mig-abort"`)
	mustNotContain(t, get(t, h, "/migrations/m2"), `id="mig-abort"`)
	mustNotContain(t, get(t, h, "/migrations/m3"), `id="mig-abort"`)

	token := csrfToken(t, h, "/migrations/m1")
	r := post(t, h, "/ui/migrations/m1/abort", url.Values{"csrf": {token}})
	if r.Status != http.StatusSeeOther || r.Header.Get("Location") != "/migrations/m1" {
		t.Fatalf("abort button: %d %v", r.Status, r.Header)
	}
	page := get(t, h, "/migrations/m1")
	mustContain(t, page, "the user asked to abort")
	mustNotContain(t, page, `id="mig-abort"`) // asked once

	r = post(t, h, "/ui/migrations/m2/abort", url.Values{"csrf": {token}}) // one token serves every form
	if r.Status != http.StatusConflict {
		t.Fatalf("abort past the point of no return from the page: %d", r.Status)
	}
	mustContain(t, r, `id="abort-error"`, "Not aborted: migration m2 is past the point of no return")
}

// TestSeamColouredByTheStrategysPromise: a stopThenStart's gap and an
// overlap's overlap are what those strategies promise, not failures; the
// same verdicts on a handover, or with a side at fault, are.
func TestSeamColouredByTheStrategysPromise(t *testing.T) {
	f := newFake()
	add := func(id string, st sim.Strategy, verdict, atFault string) {
		f.addMig(&sim.Migration{ID: id, JobID: "job-" + id, Strategy: st, State: sim.MigrationCompleted, StartedAt: time.Now(),
			Output: &sim.OutputReport{Verdict: verdict, AtFault: atFault}})
	}
	add("m-sts-gap", sim.StopThenStart, sim.VerdictGap, "")
	add("m-ovl-overlap", sim.Overlap, sim.VerdictOverlap, "")
	add("m-ho-gap", sim.Handover, sim.VerdictGap, "")
	add("m-ovl-fault", sim.Overlap, sim.VerdictOverlap, "source")
	h := newServer(t, f, nil)
	for id, want := range map[string]string{"m-sts-gap": "ok", "m-ovl-overlap": "ok", "m-ho-gap": "bad", "m-ovl-fault": "bad"} {
		page := get(t, h, "/migrations/"+id)
		if !strings.Contains(page.Body, `class="stat seam `+want+`"`) {
			t.Errorf("%s: seam not coloured %s", id, want)
		}
		if promised := strings.Contains(page.Body, "promises"); promised != (want == "ok") {
			t.Errorf("%s: headline says the strategy promises it: %v", id, promised)
		}
	}
	list := get(t, h, "/migrations").Body
	for _, want := range []string{`class="verdict ok">gap<`, `class="verdict ok">overlap<`, `class="verdict bad">gap<`, `class="verdict bad">overlap<`} {
		if strings.Count(list, want) != 1 {
			t.Errorf("migrations list has %d of %s, want 1", strings.Count(list, want), want)
		}
	}
}

// TestAJSONValueOfTheWrongTypeIsSaidInJSON (attack round 11): a body whose
// field held the wrong type of value was refused in Go's words ("Go struct
// field LaunchRequest.node of type string"). The client wrote JSON: the
// answer names the field and the kinds of JSON.
func TestAJSONValueOfTheWrongTypeIsSaidInJSON(t *testing.T) {
	h := newServer(t, newFake(), nil)
	for body, want := range map[string]string{
		`{"template":"counter","node":5}`:                       "request body: node: want a string; got a number",
		`{"template":"counter","node":"a","params":[1]}`:        "request body: params: want an object; got an array",
		`{"template":"counter","node":"a","params":{"RATE":5}}`: "request body: params: each value: want a string; got a number",
		// Round 12: the whole body of the wrong type, or not JSON at all.
		`[]`:                      "request body: want an object; got an array",
		`template=counter&node=a`: "request body is not JSON (invalid character 'e' in literal true (expecting 'r')); send a JSON object with Content-Type: application/json",
	} {
		r := postJSON(t, h, "/api/v1/instances", body)
		if r.Status != http.StatusBadRequest || !strings.Contains(r.Body, want) || strings.Contains(r.Body, "Go struct") || strings.Contains(r.Body, "Go value") {
			t.Errorf("%s: %d %s; want 400 with %q", body, r.Status, r.Body, want)
		}
	}
}
