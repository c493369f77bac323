package web_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/normsim/normsim/sim"
)

// TestInstanceFrames: GET /api/v1/instances/{id}/frames lists the last
// ?tail frames, oldest first; a bad tail is a 400 naming it, an unknown
// instance a 404.
func TestInstanceFrames(t *testing.T) {
	f := newFake()
	f.add(sim.Instance{ID: "i1", JobID: "job-1", Node: "a", Template: "counter", State: sim.InstanceRunning})
	at := time.Date(2026, 12, 4, 18, 0, 0, 0, time.UTC)
	f.frames = map[string][]sim.FrameRecord{}
	for i := range 5 {
		f.frames["i1"] = append(f.frames["i1"], sim.FrameRecord{At: at.Add(time.Duration(i) * time.Millisecond), Node: "a", JobID: "job-1", Role: "i1",
			Direction: "in", Type: "state", Size: 20 + i, Data: fmt.Sprintf(`{"type":"state","payload":%d}`, i)})
	}
	h := newServer(t, f, nil)
	r := get(t, h, "/api/v1/instances/i1/frames?tail=2")
	if r.Status != http.StatusOK || !strings.Contains(r.Body, `"size": 23`) || !strings.Contains(r.Body, `"size": 24`) || strings.Contains(r.Body, `"size": 22`) {
		t.Fatalf("tail=2: %d %s", r.Status, r.Body)
	}
	if strings.Index(r.Body, `"size": 23`) > strings.Index(r.Body, `"size": 24`) {
		t.Errorf("frames not oldest first: %s", r.Body)
	}
	for q, want := range map[string]string{"tail=0": "tail: must be a number of frames from 1 to 10000", "tail=x": `got \"x\"`, "tail=10001": "tail: must be"} {
		if r := get(t, h, "/api/v1/instances/i1/frames?"+q); r.Status != http.StatusBadRequest || !strings.Contains(r.Body, want) {
			t.Errorf("?%s: %d %s, want 400 saying %q", q, r.Status, r.Body, want)
		}
	}
	if r := get(t, h, "/api/v1/instances/nope/frames"); r.Status != http.StatusNotFound {
		t.Errorf("unknown instance: %d %s", r.Status, r.Body)
	}
}

// TestInstancePageListsFrames: the instance page lists the instance's last
// frames, a job's text escaped like everything it says.
func TestInstancePageListsFrames(t *testing.T) {
	f := newFake()
	f.add(sim.Instance{ID: "i1", JobID: "job-1", Node: "a", Template: "counter", State: sim.InstanceRunning})
	f.add(sim.Instance{ID: "i2", JobID: "job-2", Node: "a", Template: "counter", State: sim.InstanceRunning})
	f.frames = map[string][]sim.FrameRecord{"i1": {
		{At: time.Now(), Node: "a", JobID: "job-1", Role: "i1", Direction: "in", Type: "hello", Size: 40, Data: `{"type":"hello","token":"<redacted>"}`},
		{At: time.Now(), Node: "a", JobID: "job-1", Role: "i1", Direction: "in", Type: "state", Size: 60, Data: `{"type":"state","payload":"<script>alert(1)</script>"}`},
	}}
	h := newServer(t, f, nil)
	r := get(t, h, "/instances/i1")
	for _, want := range []string{`id="frames"`, "<code>hello</code>", "<code>state</code>", "60 B", "&lt;script&gt;alert(1)&lt;/script&gt;"} {
		if !strings.Contains(r.Body, want) {
			t.Errorf("instance page lacks %q", want)
		}
	}
	if strings.Contains(r.Body, "<script>alert(1)") {
		t.Error("a frame's text reached the page unescaped")
	}
	if r := get(t, h, "/instances/i2"); !strings.Contains(r.Body, "None yet: its job has not said hello.") {
		t.Errorf("an instance without frames: %s", r.Body)
	}
}

// TestInstanceEventsInWords: GET /api/v1/instances/{id}/events lists an
// instance's changes with what each says in words, and its page shows them.
func TestInstanceEventsInWords(t *testing.T) {
	f := newFake()
	f.add(sim.Instance{ID: "i1", JobID: "job-1", Node: "a", Template: "counter", State: sim.InstanceRunning})
	at := time.Now()
	f.events = map[string][]sim.Event{"i1": {
		{Seq: 1, At: at, Kind: sim.EventInstanceState, Instance: "i1", Data: []byte(`{"from":"","to":"starting","node":"a"}`)},
		{Seq: 2, At: at, Kind: sim.EventInstanceRuntime, Instance: "i1", Data: []byte(`{"service":"job","kind":"exited","exitCode":3,"detail":"the engine restarts it (restart: on-failure)"}`)},
		{Seq: 3, At: at, Kind: sim.EventInstanceConnected, Instance: "i1", Data: []byte(`{"connected":false,"code":4400,"reason":"<b>late</b>"}`)},
	}}
	h := newServer(t, f, nil)
	r := get(t, h, "/api/v1/instances/i1/events?tail=2")
	if r.Status != http.StatusOK || strings.Contains(r.Body, "placed on node") ||
		!strings.Contains(r.Body, `"text": "service job exited (code 3): the engine restarts it (restart: on-failure)"`) {
		t.Fatalf("events?tail=2: %d %s", r.Status, r.Body)
	}
	if r := get(t, h, "/api/v1/instances/i1/events?tail=-1"); r.Status != http.StatusBadRequest || !strings.Contains(r.Body, "tail: must be a number of events") {
		t.Errorf("tail=-1: %d %s", r.Status, r.Body)
	}
	page := get(t, h, "/instances/i1")
	for _, want := range []string{`id="history"`, "placed on node a: starting", "its job&#39;s socket closed (4400: &lt;b&gt;late&lt;/b&gt;)"} {
		if !strings.Contains(page.Body, want) {
			t.Errorf("instance page lacks %q", want)
		}
	}
}

// TestInstancePageLinksSourceAndSuccessor: after a completed migration the
// stopped source points to where its job runs now, and the target back.
func TestInstancePageLinksSourceAndSuccessor(t *testing.T) {
	f := newFake()
	f.add(sim.Instance{ID: "counter-src", JobID: "job-1", Node: "a", Template: "counter", State: sim.InstanceStopped})
	f.add(sim.Instance{ID: "counter-tgt", JobID: "job-1", Node: "b", Template: "counter", State: sim.InstanceRunning, MigrationID: "mig-1"})
	f.addMig(&sim.Migration{ID: "mig-1", JobID: "job-1", Strategy: sim.Handover, State: sim.MigrationCompleted, StartedAt: time.Now(),
		Source: sim.MigrationEndpoint{Instance: "counter-src", Node: "a"}, Target: sim.MigrationEndpoint{Instance: "counter-tgt", Node: "b"}})
	h := newServer(t, f, nil)
	mustContain(t, get(t, h, "/instances/counter-src"), `id="replaced-by"`, `href="/instances/counter-tgt"`, "it now runs as")
	mustContain(t, get(t, h, "/instances/counter-tgt"), `id="moved-from"`, `href="/instances/counter-src"`, "Moved here from")
	mustNotContain(t, get(t, h, "/instances/counter-tgt"), `id="replaced-by"`)
}
