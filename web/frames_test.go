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
