package web_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/normsim/normsim/protocol"
	"github.com/normsim/normsim/sim"
)

func TestOverviewShowsNodesTemplatesAndInstances(t *testing.T) {
	f := newFake()
	now := time.Now()
	f.add(sim.Instance{ID: "counter-aaa111", JobID: "job-1", Node: "a", Template: "counter", Runtime: sim.RuntimeProcess,
		State: sim.InstanceRunning, Connected: true, Token: "TOKEN-must-not-show", CreatedAt: now})
	f.add(sim.Instance{ID: "counter-bbb222", JobID: "job-1", Node: "b", Template: "counter", Runtime: sim.RuntimeProcess,
		State: sim.InstanceStarting, CreatedAt: now, MigrationID: "mig-1"})
	f.add(sim.Instance{ID: "ghost-1", JobID: "job-9", Node: "zz", Template: "plain", State: sim.InstanceStopped})
	f.addMig(&sim.Migration{ID: "mig-1", JobID: "job-1", Strategy: sim.Handover, State: sim.MigrationRunning, Phase: "place-target",
		Source: sim.MigrationEndpoint{Instance: "counter-aaa111", Node: "a"}, Target: sim.MigrationEndpoint{Instance: "counter-bbb222", Node: "b"}})
	s := newServer(t, f, nil)

	r := get(t, s, "/")
	if r.Status != http.StatusOK || !strings.HasPrefix(r.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("GET / = %d %s\n%s", r.Status, r.Header.Get("Content-Type"), r.Body)
	}
	mustContain(t, r,
		// nodes: listener, capability, socket up or not
		"ws://127.0.0.1:6797", "ws://127.0.0.1:6798", protocol.Capability, "socket up", "no job socket",
		// instances per node, state, connection, logs link, instance link
		`href="/instances/counter-aaa111"`, `data-state="running"`, "connected", "not connected",
		`href="/instances/counter-aaa111#logs"`, `data-state="starting"`,
		// an instance on a node this run does not have is still listed
		"ghost-1", "not a node of this run",
		// the running migration, on the banner and on both instances
		`href="/migrations/mig-1"`, "Migrating now", "migrating · source", "migrating · target",
		// templates: valid with strategy and allowed ones; invalid with the error
		"Declares <strong>handover</strong>", "<code>stopThenStart</code>", "MANIFEST_INVALID", `target: must be "docker-compose"`,
		// the launch form: every parameter with its type, bounds, default, choices
		`action="/ui/instances"`, `name="param.RATE"`, `type="number"`, `step="1"`, `min="1"`, `max="1000"`, `value="50"`,
		"int · 1–1000 · default &#34;50&#34;", `name="param.MODE"`, "<option>fast</option>", "one of fast, slow", "required",
		`name="param.API_KEY" type="password"`, `name="param.SRT_PORT"`, "auto picks from 5000",
		`name="node"`, `<option selected>a</option>`, `name="runtime"`, "process (default)", `name="csrf"`,
		// accessible labels
		`<label for="launch-counter-RATE">`, `aria-describedby="launch-counter-RATE-hint"`,
	)
	// A secret parameter's default is not printed, and no token ever is.
	mustNotContain(t, r, "hunter2-default", "TOKEN-must-not-show")
	// The invalid template has no launch form.
	if strings.Contains(r.Body, `id="launch-broken"`) {
		t.Error("an invalid template has a launch button")
	}
}

func TestPagesSendSafetyHeaders(t *testing.T) {
	f := newFake()
	f.add(sim.Instance{ID: "i1", Node: "a", Template: "counter", Runtime: sim.RuntimeProcess, State: sim.InstanceRunning})
	f.addMig(&sim.Migration{ID: "m1", State: sim.MigrationCompleted, StartedAt: time.Now()})
	s := newServer(t, f, nil)
	for _, p := range []string{"/", "/instances/i1", "/migrations", "/migrations/m1", "/nowhere"} {
		r := get(t, s, p)
		csp := r.Header.Get("Content-Security-Policy")
		if !strings.Contains(csp, "script-src 'self'") || !strings.Contains(csp, "frame-ancestors 'none'") || r.Header.Get("X-Frame-Options") != "DENY" {
			t.Errorf("GET %s: CSP %q, X-Frame-Options %q", p, csp, r.Header.Get("X-Frame-Options"))
		}
		// Assets come from this server only: no CDN, no inline script.
		if strings.Contains(r.Body, "https://") || strings.Contains(r.Body, "<script>") {
			t.Errorf("GET %s references an outside resource or has an inline script", p)
		}
	}
}

func TestStaticAssetsAreEmbedded(t *testing.T) {
	s := newServer(t, newFake(), nil)
	page := get(t, s, "/")
	for _, tc := range []struct{ path, ctype, has string }{
		{"/static/app.css", "text/css", "--accent"},
		{"/static/app.js", "text/javascript", "EventSource('/api/v1/events')"},
		{"/static/favicon.svg", "image/svg+xml", "<svg"},
	} {
		r := get(t, s, tc.path)
		if r.Status != http.StatusOK || !strings.HasPrefix(r.Header.Get("Content-Type"), tc.ctype) || !strings.Contains(r.Body, tc.has) {
			t.Errorf("GET %s = %d %s", tc.path, r.Status, r.Header.Get("Content-Type"))
		}
		if r.Header.Get("Cache-Control") != "no-cache" {
			t.Errorf("GET %s without version: Cache-Control %q", tc.path, r.Header.Get("Cache-Control"))
		}
	}
	// The page links the assets with their version, which may be cached.
	i := strings.Index(page.Body, "/static/app.js?v=")
	if i < 0 {
		t.Fatal("the page does not link /static/app.js?v=...")
	}
	ref := page.Body[i : i+strings.Index(page.Body[i:], `"`)]
	if r := get(t, s, ref); r.Status != http.StatusOK || !strings.Contains(r.Header.Get("Cache-Control"), "immutable") {
		t.Errorf("GET %s = %d, Cache-Control %q", ref, r.Status, r.Header.Get("Cache-Control"))
	}
	if r := get(t, s, "/static/nope.js"); r.Status != http.StatusNotFound {
		t.Errorf("GET /static/nope.js = %d", r.Status)
	}
}

func TestInstancePageHidesSecretsOfNonExternalInstances(t *testing.T) {
	f := newFake()
	f.add(sim.Instance{ID: "counter-p1", JobID: "job-1", Node: "a", Template: "counter", Runtime: sim.RuntimeProcess,
		State: sim.InstanceRunning, Connected: true, Token: "tok-SECRET-123",
		Params: map[string]string{"RATE": "20", "API_KEY": "sk-live-PARAM"},
		Env: map[string]map[string]string{"counter": {
			"NORSK_WORKER_TOKEN":  "tok-SECRET-123",
			"NORSK_WORKER_WS_URL": "ws://127.0.0.1:6797/instances/job-1/counter-p1",
			"COUNTER_RATE":        "20",
			"API_KEY":             "sk-live-PARAM",
		}}})
	s := newServer(t, f, nil)
	r := get(t, s, "/instances/counter-p1")
	if r.Status != http.StatusOK {
		t.Fatalf("GET = %d", r.Status)
	}
	mustContain(t, r, "counter-p1", `data-state="running"`, "COUNTER_RATE", "NORSK_WORKER_TOKEN", "NORSK_WORKER_WS_URL", "hidden",
		`data-src="/api/v1/instances/counter-p1/logs?follow=1"`, "job-1")
	mustNotContain(t, r, "tok-SECRET-123", "/instances/job-1/counter-p1", "sk-live-PARAM")
}

func TestInstancePageShowsAdjustments(t *testing.T) {
	f := newFake()
	f.add(sim.Instance{ID: "media-1", JobID: "job-1", Node: "a", Template: "media", Runtime: sim.RuntimeDocker, State: sim.InstanceRunning,
		Adjustments: []string{`services.engine.container_name: "engine" runs as "normsim-media-1-engine"`}})
	s := newServer(t, f, nil)
	r := get(t, s, "/instances/media-1")
	mustContain(t, r, `id="adjustments"`, "services.engine.container_name: &#34;engine&#34; runs as &#34;normsim-media-1-engine&#34;")
}

func TestInstancePageShowsTheEnvToPasteForExternalInstances(t *testing.T) {
	f := newFake()
	f.add(sim.Instance{ID: "counter-x1", JobID: "job-1", Node: "a", Template: "counter", Runtime: sim.RuntimeExternal,
		State: sim.InstanceRunning, Token: "tok-EXT",
		Env: map[string]map[string]string{"counter": {"NORSK_WORKER_TOKEN": "tok-EXT", "NORSK_WORKER_WS_URL": "ws://127.0.0.1:6797/instances/job-1/counter-x1"}}})
	s := newServer(t, f, nil)
	r := get(t, s, "/instances/counter-x1")
	mustContain(t, r, "NORSK_WORKER_TOKEN=tok-EXT\n", "NORSK_WORKER_WS_URL=ws://127.0.0.1:6797/instances/job-1/counter-x1\n",
		`"NORSK_WORKER_TOKEN": "tok-EXT"`, "VS Code", `data-copy="#env-dotenv"`)
}

func TestInstancePageMigrateButtons(t *testing.T) {
	for _, tc := range []struct {
		template string
		allowed  []sim.Strategy
		refused  map[sim.Strategy]string
	}{
		{"counter", []sim.Strategy{sim.StopThenStart, sim.Handover}, map[sim.Strategy]string{
			sim.Overlap: "the template declares handover, so a migration may use handover or stopThenStart; the product never promised overlap"}},
		{"plain", []sim.Strategy{sim.StopThenStart}, map[sim.Strategy]string{
			sim.Overlap:  "the template promises only stopThenStart (the default when a manifest declares no strategy); overlap needs the manifest to declare it",
			sim.Handover: "handover needs the manifest to declare it"}},
	} {
		t.Run(tc.template, func(t *testing.T) {
			f := newFake()
			f.add(sim.Instance{ID: "i1", JobID: "job-1", Node: "a", Template: tc.template, Runtime: sim.RuntimeProcess, State: sim.InstanceRunning, Connected: true})
			r := get(t, newServer(t, f, nil), "/instances/i1")
			for _, st := range tc.allowed {
				mustContain(t, r, `value="`+string(st)+`" id="migrate-`+string(st)+`"`)
				if strings.Contains(r.Body, `id="migrate-`+string(st)+`" class="primary" disabled`) || strings.Contains(r.Body, `id="migrate-`+string(st)+`" class="" disabled`) {
					t.Errorf("%s is disabled", st)
				}
			}
			for st, why := range tc.refused {
				mustContain(t, r, `id="migrate-`+string(st)+`" class="" disabled aria-describedby="why-`+string(st)+`"`, `id="why-`+string(st)+`">`, why)
			}
			// Target node choice: the other nodes, one without a socket marked.
			mustContain(t, r, `<option value="b">b — job socket ws://127.0.0.1:6798</option>`, `<option value="c">c — no job socket (handover impossible)</option>`,
				`name="timeout.targetReady"`, `placeholder="30000"`, `action="/ui/instances/i1/migrate"`, `action="/ui/instances/i1/stop"`)
			if strings.Contains(r.Body, `<option value="a">`) {
				t.Error("the source's own node is offered as a target")
			}
		})
	}
}

// The migrate form's placeholders are the run's timeouts (normsim up
// --timeouts), not the built-in defaults, so an empty field means what it
// shows.
func TestMigrateFormShowsTheRunsTimeouts(t *testing.T) {
	f := newFake()
	f.timeouts = sim.Timeouts{TargetStart: sim.Duration(10 * time.Minute)}
	f.add(sim.Instance{ID: "i1", JobID: "job-1", Node: "a", Template: "counter", Runtime: sim.RuntimeExternal, State: sim.InstanceRunning, Connected: true})
	r := get(t, newServer(t, f, nil), "/instances/i1")
	mustContain(t, r, `id="timeout-targetStart" name="timeout.targetStart" type="number" min="0" step="1" inputmode="numeric" placeholder="600000"`,
		`id="timeout-targetReady" name="timeout.targetReady" type="number" min="0" step="1" inputmode="numeric" placeholder="30000"`)
}

func TestInstancePageNotesWhyAMigrationWouldBeRefused(t *testing.T) {
	f := newFake()
	f.add(sim.Instance{ID: "i1", Node: "a", Template: "counter", Runtime: sim.RuntimeExternal, State: sim.InstanceRunning})
	f.add(sim.Instance{ID: "i2", Node: "a", Template: "counter", Runtime: sim.RuntimeProcess, State: sim.InstanceStopped})
	s := newServer(t, f, nil)
	mustContain(t, get(t, s, "/instances/i1"), "a handover needs the source connected")
	mustContain(t, get(t, s, "/instances/i2"), "This instance is stopped; only a running instance can migrate.", `data-terminal="true"`)
}

func ms(v float64) *float64 { return &v }
func seq(v int64) *int64    { return &v }

// completedMigration is a handover as the manager records one.
func completedMigration() *sim.Migration {
	t0 := time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)
	at := func(ms float64) time.Time { return t0.Add(time.Duration(ms * float64(time.Millisecond))) }
	end := at(190)
	return &sim.Migration{
		ID: "mig-ok", JobID: "job-1", Strategy: sim.Handover, State: sim.MigrationCompleted, Phase: "stop-source",
		Source:    sim.MigrationEndpoint{Instance: "counter-src", Node: "a", Runtime: sim.RuntimeProcess},
		Target:    sim.MigrationEndpoint{Instance: "counter-tgt", Node: "b", Runtime: sim.RuntimeProcess},
		Result:    sim.MigrationResult{Applied: []string{"counter"}, Failed: []sim.FailedApply{{ID: "overlay", Reason: "missing font"}}, SkewMs: ms(1.5)},
		Output:    &sim.OutputReport{Verdict: sim.VerdictSeamless, LastSource: seq(41), FirstTarget: seq(42), GapMs: ms(20)},
		Durations: sim.Durations{TotalMs: ms(190), TargetReadyMs: ms(125), CutoverMs: ms(0.9)},
		StartedAt: t0, EndedAt: &end,
		Events: []sim.MigrationEvent{
			{Seq: 1, At: at(0), Side: "manager", Detail: "handover of counter-src from node a to node b"},
			{Seq: 2, At: at(0.5), Phase: "get-state", Side: "source", Detail: "get-state", Frame: &sim.FrameInfo{Direction: "out", Type: "get-state", Size: 51}},
			{Seq: 3, At: at(0.8), Phase: "get-state", Side: "source", Detail: "state", Frame: &sim.FrameInfo{Direction: "in", Type: "state", Size: 38, Payload: json.RawMessage(`{"next":41}`)}},
			{Seq: 4, At: at(124), Phase: "place-target", Side: "target", Detail: "connected (hello accepted)"},
			{Seq: 5, At: at(125), Phase: "target-ready", Side: "target", Detail: "target-ready", Frame: &sim.FrameInfo{Direction: "in", Type: "target-ready", Size: 40, Payload: json.RawMessage(`{"ready":true}`)}},
			{Seq: 6, At: at(125.6), Phase: "cutover-apply", Side: "manager", Detail: "point of no return: the source stopped its output"},
			{Seq: 7, At: at(186), Phase: "stop-source", Side: "output", Detail: "output seamless: source stopped at 41, target continued at 42"},
			{Seq: 8, At: at(190), Phase: "stop-source", Side: "manager", Detail: "migration completed"},
		},
	}
}

func TestMigrationPageShowsTheTimeline(t *testing.T) {
	f := newFake()
	f.addMig(completedMigration())
	r := get(t, newServer(t, f, nil), "/migrations/mig-ok")
	if r.Status != http.StatusOK {
		t.Fatalf("GET = %d", r.Status)
	}
	mustContain(t, r,
		`data-migration="mig-ok"`, " data-ended", `data-state="completed"`, "completed",
		// swimlanes and the axis
		`data-lane="manager"`, `data-lane="source"`, `data-lane="target"`, `data-lane="output"`, `class="tick"`, ">100 ms<",
		// frames with direction and size, clickable to their payload
		`class="mark frame out"`, `class="mark frame in"`, "→ get-state", "← state", `data-seq="3"`, "job → worker", "51 B",
		`<template id="payload-3">`, "&#34;next&#34;: 41", `<template id="payload-5">`,
		// the point of no return and phases
		`class="ponr"`, `title="get-state"`, `>place-target<`,
		// durations and the seam
		`id="d-total">190.0 ms<`, `id="d-ready">125.0 ms<`, `id="d-cutover">0.9 ms<`,
		`data-verdict="seamless"`, "Seamless", "source last <strong class=\"mono\">41</strong>", "target first <strong class=\"mono\">42</strong>",
		// the result
		"overlay", "missing font", "1.5 ms",
	)
	if strings.Contains(r.Body, `class="alert bad end-reason"`) {
		t.Error("a completed migration is highlighted as failed")
	}

	// Zoomed on the cutover, the page keeps its zoom across live refreshes.
	r = get(t, newServer(t, f, nil), "/migrations/mig-ok?zoom=cutover")
	mustContain(t, r, `data-refresh="/migrations/mig-ok?zoom=cutover"`, `id="zoom-cutover" aria-current="true"`, "115.2 ms – 199.8 ms")
}

func TestMigrationPageHighlightsAnEndThatWentWrong(t *testing.T) {
	for _, tc := range []struct {
		state        sim.MigrationState
		reason, says string
		rollback     *sim.RollbackReport
	}{
		{sim.MigrationAborted, "timed out after 30s waiting for target-ready", "Rolled back before the point of no return", nil},
		{sim.MigrationAborted, sim.ReasonInterrupted, "its next start rolled it back, telling no job",
			&sim.RollbackReport{Source: sim.SourceRunning, Target: sim.TargetExited, TargetDetail: "target removed: it exited on SIGTERM", Told: []string{}, AtRestart: true}},
		{sim.MigrationFailed, "the target's service counter exited with code 3", "past the point of no return nothing rolls back", nil},
		{sim.MigrationRefused, "busy recording", "The source declined", nil},
	} {
		t.Run(string(tc.state)+" "+tc.reason, func(t *testing.T) {
			m := completedMigration()
			m.ID, m.State, m.Reason, m.Output, m.Phase, m.Rollback = "mig-x", tc.state, tc.reason, nil, "target-ready", tc.rollback
			f := newFake()
			f.addMig(m)
			r := get(t, newServer(t, f, nil), "/migrations/mig-x")
			mustContain(t, r, `class="alert bad end-reason"`, tc.reason, tc.says, `data-state="`+string(tc.state)+`"`, "in phase <code>target-ready</code>")
		})
	}
}

func TestRunningMigrationPageIsLive(t *testing.T) {
	m := completedMigration()
	m.ID, m.State, m.EndedAt, m.Output = "mig-run", sim.MigrationRunning, nil, nil
	m.StartedAt = time.Now().Add(-time.Second)
	f := newFake()
	f.addMig(m)
	r := get(t, newServer(t, f, nil), "/migrations/mig-run")
	mustContain(t, r, `data-migration="mig-run"`, `data-live`, `id="elapsed"`, `class="now"`, "Waiting", `data-state="running"`)
	mustNotContain(t, r, " data-ended")
}

func TestMigrationsPageFiltersByJobAndState(t *testing.T) {
	f := newFake()
	a, b := completedMigration(), completedMigration()
	b.ID, b.JobID, b.State = "mig-2", "job-2", sim.MigrationAborted
	f.addMig(a)
	f.addMig(b)
	s := newServer(t, f, nil)

	r := get(t, s, "/migrations")
	mustContain(t, r, `href="/migrations/mig-ok"`, `href="/migrations/mig-2"`, "2 migrations", `<option value="job-2">`)

	r = get(t, s, "/migrations?job=job-2&state=aborted")
	mustContain(t, r, `href="/migrations/mig-2"`, `value="job-2"`, "<option selected>aborted</option>", "1 migration of job")
	mustNotContain(t, r, `href="/migrations/mig-ok"`)
	last := f.filters[len(f.filters)-1]
	if last.JobID != "job-2" || last.State != sim.MigrationAborted {
		t.Errorf("filter = %+v", last)
	}

	r = get(t, s, "/migrations?state=done")
	if r.Status != http.StatusBadRequest {
		t.Errorf("unknown state = %d", r.Status)
	}
	mustContain(t, r, `state: must be one of running, completed, refused, aborted, failed; got "done"`)

	r = get(t, s, "/migrations?job=nope")
	mustContain(t, r, "No migrations match this filter")
}

func TestUnknownThingsAreHTML404s(t *testing.T) {
	s := newServer(t, newFake(), nil)
	for _, tc := range []struct{ path, says string }{
		{"/instances/nope", `instance "nope" not found`},
		{"/migrations/nope", `migration "nope" not found`},
		{"/no/such/page", "There is no page at /no/such/page."},
	} {
		r := get(t, s, tc.path)
		if r.Status != http.StatusNotFound || !strings.HasPrefix(r.Header.Get("Content-Type"), "text/html") {
			t.Errorf("GET %s = %d %s", tc.path, r.Status, r.Header.Get("Content-Type"))
		}
		mustContain(t, r, tc.says, `id="error-message"`)
	}
	// The API keeps answering JSON.
	r := get(t, s, "/api/v1/instances/nope")
	if code, _ := apiError(t, r); r.Status != http.StatusNotFound || code != sim.ENotFound {
		t.Errorf("API 404 = %d %s", r.Status, code)
	}
	// A GET on a form endpoint explains itself.
	r = get(t, s, "/ui/instances")
	if r.Status != http.StatusMethodNotAllowed {
		t.Errorf("GET /ui/instances = %d", r.Status)
	}
}

// TestMigrationPageNamesTheSideAtFault: a handover whose source kept
// producing says so on the page, with the count, and a seam left unproven
// by unreadable packets says why.
func TestMigrationPageNamesTheSideAtFault(t *testing.T) {
	m := completedMigration()
	m.ID = "mig-late"
	m.Output = &sim.OutputReport{Verdict: sim.VerdictOverlap, AtFault: "source", SourceAfterStop: 3, Duplicated: 3,
		LastSource: seq(41), FirstTarget: seq(42), OverlapMs: ms(80),
		Detail: "the source sent 3 packets after source-stopped-output (the last 120.0 ms after it) (3 packets duplicated)"}
	u := completedMigration()
	u.ID = "mig-unread"
	u.Output = &sim.OutputReport{Verdict: sim.VerdictUnknown, LastSource: seq(41), FirstTarget: seq(42),
		Unreadable: &sim.UnreadablePackets{Count: 2, FromJob: 2, Reasons: map[string]int64{"not a JSON object": 2}},
		Detail:     "the readable packets are seamless (…), but not all of the job's packets could be read; 2 packets could not be read: 2 not a JSON object"}
	f := newFake()
	f.addMig(m)
	f.addMig(u)
	s := newServer(t, f, nil)
	mustContain(t, get(t, s, "/migrations/mig-late"), "Overlap · source at fault · 3 duplicated", "the source sent 3 packets after source-stopped-output")
	mustContain(t, get(t, s, "/migrations/mig-unread"), "Not proven: some packets could not be read", "2 packets could not be read")
}

func TestInstancePageShowsWhatItPublishesWhere(t *testing.T) {
	f := newFake()
	f.nodes[0].Address = "127.0.1.1"
	f.nodes[1].Address = "127.0.1.2"
	f.add(sim.Instance{ID: "counter-d1", JobID: "job-1", Node: "a", Template: "counter", Runtime: "docker", State: sim.InstanceRunning,
		Published: []sim.PublishedPort{{Service: "counter", ContainerPort: 1935, Protocol: "tcp", HostIP: "127.0.1.1", HostPort: 19350}}})
	f.add(sim.Instance{ID: "counter-p1", JobID: "job-2", Node: "b", Template: "counter", Runtime: sim.RuntimeProcess, State: sim.InstanceRunning})
	s := newServer(t, f, nil)
	r := get(t, s, "/instances/counter-d1")
	mustContain(t, r, `<span class="mono" id="node-address">127.0.1.1</span>`,
		`<code class="published-port">127.0.1.1:19350-&gt;1935/tcp</code> <span class="subtle">service counter</span>`,
		`b — job socket ws://127.0.0.1:6798 · publishes on 127.0.1.2`)
	mustNotContain(t, r, "shared with other nodes")
	mustContain(t, get(t, s, "/"), `<code class="node-address">127.0.1.2</code>`)
	r = get(t, s, "/instances/counter-p1")
	mustContain(t, r, "no ports (a host process binds what it binds itself", "NORMSIM_NODE_ADDR")
}

// TestPagesSayTheStoreCannotWrite: while the store fails, every page says
// so.
func TestPagesSayTheStoreCannotWrite(t *testing.T) {
	f := newFake()
	f.storeErr = errors.New("disk I/O error: no space left on device")
	s := newServer(t, f, nil)
	for _, path := range []string{"/", "/migrations"} {
		mustContain(t, get(t, s, path), `id="store-problem"`, "The store cannot write (disk I/O error: no space left on device)")
	}
}

// TestMigrationPageShowsTheJudgementAndTargetApplied: beside the seam, the
// summary has normsim's judgement (grade, at fault, why) and target-applied
// whole (applied, each failed id with its reason, skewMs); the history
// lists the grade; the API's migration carries the judgement.
func TestMigrationPageShowsTheJudgementAndTargetApplied(t *testing.T) {
	f := newFake()
	f.addMig(completedMigration()) // its target reports overlay failed: missing font
	late := completedMigration()
	late.ID, late.JobID = "mig-late", "job-2"
	late.Result = sim.MigrationResult{Applied: []string{"counter"}, Failed: []sim.FailedApply{}}
	late.Output = &sim.OutputReport{Verdict: sim.VerdictOverlap, AtFault: "source", SourceAfterStop: 3, Duplicated: 3,
		Detail: "the source sent 3 packets after source-stopped-output"}
	f.addMig(late)
	s := newServer(t, f, nil)

	mustContain(t, get(t, s, "/migrations/mig-ok"),
		`id="judgement" data-grade="tolerated"`, `class="stat judgement warn"`, `id="judgement-grade">tolerated<`, "at fault: <strong>none</strong>",
		`id="judgement-why">the target could not apply 1 participant: overlay (missing font)<`,
		`<code class="chip">counter</code>`, `<div data-failed="overlay"><code class="chip bad">overlay</code> missing font</div>`, `id="result-skew">1.5 ms<`)
	mustContain(t, get(t, s, "/migrations/mig-late"),
		`id="judgement-grade">fail<`, "at fault: <strong>source</strong>", "the source sent 3 packets after source-stopped-output",
		`id="result-failed"><span class="subtle">none</span>`, `id="result-skew">not reported<`)

	// A running migration is not judged yet.
	run := completedMigration()
	run.ID, run.State, run.EndedAt, run.Output = "mig-run", sim.MigrationRunning, nil, nil
	f.addMig(run)
	mustNotContain(t, get(t, s, "/migrations/mig-run"), `id="judgement"`, `id="judgement-why"`)

	mustContain(t, get(t, s, "/migrations"), `data-grade="tolerated" title="the target could not apply 1 participant: overlay (missing font)"`, `data-grade="fail"`)

	var m sim.Migration
	if r := get(t, s, "/api/v1/migrations/mig-ok"); r.Status != http.StatusOK || json.Unmarshal([]byte(r.Body), &m) != nil {
		t.Fatalf("GET the migration: %d %s", r.Status, r.Body)
	}
	if m.Judgement == nil || m.Judgement.Grade != sim.GradeTolerated || !strings.Contains(m.Judgement.Why, "overlay (missing font)") {
		t.Errorf("the API's migration has judgement %+v", m.Judgement)
	}
	var list []sim.Migration
	if r := get(t, s, "/api/v1/migrations"); json.Unmarshal([]byte(r.Body), &list) != nil || len(list) != 3 {
		t.Fatalf("list: %s", r.Body)
	}
	for _, l := range list {
		if (l.Judgement == nil) != (l.State == sim.MigrationRunning) {
			t.Errorf("listed %s %s with judgement %+v", l.ID, l.State, l.Judgement)
		}
	}
}

// TestAbortedMigrationPageSaysWhatTheRollbackLeft (issue 29 item 6): the
// page says what the rollback record says of each side; it never says the
// source kept running when the record says it was gone.
func TestAbortedMigrationPageSaysWhatTheRollbackLeft(t *testing.T) {
	for _, tc := range []struct {
		name     string
		rollback *sim.RollbackReport
		says     []string
		never    string
	}{
		{"source left running", &sim.RollbackReport{Source: sim.SourceRunning, SourceDetail: "left running",
			Target: sim.TargetKilled, TargetDetail: "target removed: it did not exit on SIGTERM (counter still running after the 10s stop grace) and was killed (SIGKILL)"},
			[]string{"the target removed: it did not exit on SIGTERM", "the source was left running", "Nothing was cut over: the source was left running."}, "is gone"},
		{"source gone", &sim.RollbackReport{Source: sim.SourceGone, SourceDetail: "the source is gone, not left running: it is failed (exited with code 2)",
			Target: sim.TargetExited, TargetDetail: "target removed: it exited on SIGTERM"},
			[]string{"the target removed: it exited on SIGTERM; the source is gone, not left running: it is failed (exited with code 2).",
				"Nothing was cut over: the source is gone, not left running"}, "left running."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := completedMigration()
			m.ID, m.State, m.Reason, m.Output, m.Phase = "mig-rb", sim.MigrationAborted, "timed out", nil, "target-ready"
			m.Rollback = tc.rollback
			f := newFake()
			f.addMig(m)
			r := get(t, newServer(t, f, nil), "/migrations/mig-rb")
			mustContain(t, r, append([]string{`id="rolled-back"`}, tc.says...)...)
			mustNotContain(t, r, "the source kept", "kept producing", tc.never)
		})
	}
}

// TestDroppedFramesAreSaid (issue 34 item 6): what the store let go of an
// instance's frame records is counted, in the API and on its page.
func TestDroppedFramesAreSaid(t *testing.T) {
	f := newFake()
	f.add(sim.Instance{ID: "i1", JobID: "job-1", Node: "a", Template: "counter", Runtime: sim.RuntimeProcess, State: sim.InstanceRunning})
	s := newServer(t, f, nil)
	mustNotContain(t, get(t, s, "/instances/i1"), `id="frames-dropped"`)
	f.frameCounts = sim.FrameCounts{Kept: 1800, Dropped: 4200, DroppedBytes: 270000000}
	r := get(t, s, "/api/v1/instances/i1/frames/counts")
	mustContain(t, r, `"kept": 1800`, `"dropped": 4200`, `"droppedBytes": 270000000`)
	mustContain(t, get(t, s, "/instances/i1"), `id="frames-dropped"`, "4200 earlier frame record(s) (270000000 bytes) of this instance were dropped", "the last 2000 frames or 4 MiB")
	if r := get(t, s, "/api/v1/instances/nope/frames/counts"); r.Status != http.StatusNotFound {
		t.Fatalf("counts of an unknown instance = %d", r.Status)
	}
	// Attack round 11, B6: every record refused by a full store left the
	// page saying the job had not said hello.
	f.frameCounts = sim.FrameCounts{Lost: 12}
	mustContain(t, get(t, s, "/api/v1/instances/i1/frames/counts"), `"lost": 12`)
	page := get(t, s, "/instances/i1")
	mustContain(t, page, `id="frames-dropped"`, "12 frame record(s) of this instance could not be stored")
	mustNotContain(t, page, "its job has not said hello")
}

// A product name is the template author's text: a right-to-left override
// in it stays inside it (issue 34 round 6, F10).
func TestProductNamesAreIsolated(t *testing.T) {
	f := newFake()
	f.templates[0].ProductName = "Counter \u202eevil"
	s := newServer(t, f, nil)
	mustContain(t, get(t, s, "/"), "<bdi>Counter \u202eevil</bdi> <bdi>0.1.0</bdi>")
}
