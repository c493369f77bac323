package web_test

import (
	"bytes"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/normsim/normsim/sim"
)

// TestSeamTSServesTheCaptureAsAFile: a migration's seam capture comes back
// byte for byte as video/mp2t, named for the migration; one without a
// capture, or no such migration, is a 404 that says which.
func TestSeamTSServesTheCaptureAsAFile(t *testing.T) {
	f := newFake()
	f.addMig(&sim.Migration{ID: "m1", JobID: "job-1", State: sim.MigrationCompleted, StartedAt: time.Now()})
	f.addMig(&sim.Migration{ID: "m2", JobID: "job-1", State: sim.MigrationCompleted, StartedAt: time.Now()})
	ts := bytes.Repeat(append([]byte{0x47}, make([]byte, 187)...), 3)
	f.captures = map[string]*sim.SeamCapture{"m1": {MigrationID: "m1", TS: ts, TargetTS: ts[188:], Datagrams: 1}}
	h := newServer(t, f, nil)
	r := get(t, h, "/api/v1/migrations/m1/seam.ts")
	if r.Status != http.StatusOK || r.Body != string(ts) || r.Header.Get("Content-Type") != "video/mp2t" ||
		!strings.Contains(r.Header.Get("Content-Disposition"), `filename="m1-seam.ts"`) {
		t.Fatalf("m1: %d %v (%d bytes)", r.Status, r.Header, len(r.Body))
	}
	if r := get(t, h, "/api/v1/migrations/m1/seam.ts?side=target"); r.Status != http.StatusOK || r.Body != string(ts[188:]) ||
		!strings.Contains(r.Header.Get("Content-Disposition"), `filename="m1-seam-target.ts"`) {
		t.Fatalf("m1, the target's: %d %v (%d bytes)", r.Status, r.Header, len(r.Body))
	}
	if r := get(t, h, "/api/v1/migrations/m1/seam.ts?side=source"); r.Status != http.StatusBadRequest || !strings.Contains(r.Body, "side: must be both") {
		t.Fatalf("side=source: %d %s", r.Status, r.Body)
	}
	// Attack round 11, C3: a target whose datagrams made no frame gave
	// an empty file, 200, and no word of why.
	f.captures["m3"] = &sim.SeamCapture{MigrationID: "m3", TS: ts, Datagrams: 4}
	f.addMig(&sim.Migration{ID: "m3", JobID: "job-1", State: sim.MigrationCompleted, StartedAt: time.Now()})
	if r := get(t, h, "/api/v1/migrations/m3/seam.ts?side=target"); r.Status != http.StatusNotFound || !strings.Contains(r.Body, "nothing a player can open from the target") {
		t.Fatalf("m3, the target's, empty: %d %s", r.Status, r.Body)
	}
	if r := get(t, h, "/api/v1/migrations/m2/seam.ts"); r.Status != http.StatusNotFound || !strings.Contains(r.Body, "no seam capture") {
		t.Fatalf("m2: %d %s", r.Status, r.Body)
	}
	if r := get(t, h, "/api/v1/migrations/nope/seam.ts"); r.Status != http.StatusNotFound || !strings.Contains(r.Body, "nope") {
		t.Fatalf("nope: %d %s", r.Status, r.Body)
	}
}

// TestSeamRTPServesThePacketsAsTheyCame: a capture with RTP serves it as
// an octet stream named for the migration; one without RTP (a job that
// sent MPEG-TS straight in UDP) is a 404 pointing at seam.ts.
func TestSeamRTPServesThePacketsAsTheyCame(t *testing.T) {
	f := newFake()
	f.addMig(&sim.Migration{ID: "m1", JobID: "job-1", State: sim.MigrationCompleted, StartedAt: time.Now()})
	f.addMig(&sim.Migration{ID: "m2", JobID: "job-1", State: sim.MigrationCompleted, StartedAt: time.Now()})
	ts := bytes.Repeat(append([]byte{0x47}, make([]byte, 187)...), 3)
	rtp := []byte{0, 12, 0x80, 33, 0, 1, 0, 0, 0, 9, 0x12, 0x34, 0x56, 0x78}
	f.captures = map[string]*sim.SeamCapture{
		"m1": {MigrationID: "m1", TS: ts, RTP: rtp, Datagrams: 1},
		"m2": {MigrationID: "m2", TS: ts, Datagrams: 1},
	}
	h := newServer(t, f, nil)
	r := get(t, h, "/api/v1/migrations/m1/seam.rtp")
	if r.Status != http.StatusOK || r.Body != string(rtp) || r.Header.Get("Content-Type") != "application/octet-stream" ||
		!strings.Contains(r.Header.Get("Content-Disposition"), `filename="m1-seam.rtp"`) {
		t.Fatalf("m1: %d %v (%d bytes)", r.Status, r.Header, len(r.Body))
	}
	if r := get(t, h, "/api/v1/migrations/m2/seam.rtp"); r.Status != http.StatusNotFound || !strings.Contains(r.Body, "holds no RTP") || !strings.Contains(r.Body, "seam.ts") {
		t.Fatalf("m2: %d %s", r.Status, r.Body)
	}
	if r := get(t, h, "/api/v1/migrations/nope/seam.rtp"); r.Status != http.StatusNotFound || !strings.Contains(r.Body, "nope") {
		t.Fatalf("nope: %d %s", r.Status, r.Body)
	}
}
