package web_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/normsim/normsim/sim"
	"github.com/normsim/normsim/web"
)

// The conformance API and pages over a fake service: how the web layer
// answers, refuses and renders. The runs against a real simulator are in
// conformance_sim_test.go.

type fakeConformance struct {
	mu       sync.Mutex
	runs     []sim.ConformanceRun
	started  []sim.ConformanceRequest
	startErr error
	dropped  int
}

func (f *fakeConformance) StartConformance(ctx context.Context, req sim.ConformanceRequest) (sim.ConformanceRun, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.started = append(f.started, req)
	if f.startErr != nil {
		return sim.ConformanceRun{}, f.startErr
	}
	run := sim.ConformanceRun{ID: fmt.Sprintf("c%d", len(f.runs)+1), Template: req.Template, Strategy: sim.Handover, State: sim.ConformanceRunning,
		Cases: 3, Counts: map[string]int{}, StartedAt: time.Now()}
	f.runs = append(f.runs, run)
	return run, nil
}

func (f *fakeConformance) ConformanceDropped() int { return f.dropped }

func (f *fakeConformance) ConformanceRuns() []sim.ConformanceRun {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]sim.ConformanceRun(nil), f.runs...)
}

func (f *fakeConformance) ConformanceRun(id string) (sim.ConformanceRun, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, r := range f.runs {
		if r.ID == id {
			return r, nil
		}
	}
	return sim.ConformanceRun{}, sim.Errorf(sim.ENotFound, "conformance run %q not found", id)
}

func (f *fakeConformance) CancelConformance(id string) error {
	_, err := f.ConformanceRun(id)
	return err
}

func (f *fakeConformance) WriteConformanceReport(id, format string, w io.Writer) error {
	r, err := f.ConformanceRun(id)
	if err != nil {
		return err
	}
	if !r.State.Ended() {
		return sim.Errorf(sim.EConflict, "conformance run %s is still running", id)
	}
	_, err = fmt.Fprintf(w, "<report of %s as %s>", id, format)
	return err
}

func newConformanceServer(t *testing.T, conf sim.ConformanceService) *web.Server {
	t.Helper()
	return web.New(web.Config{Service: newFake(), Addr: host, Version: "test", Conformance: conf})
}

func postJSON(t *testing.T, h http.Handler, path, body string) response {
	t.Helper()
	req := httptest.NewRequest(http.MethodPost, path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	return do(t, h, req)
}

func TestConformanceAPIWithoutAService(t *testing.T) {
	srv := newConformanceServer(t, nil)
	for _, r := range []response{
		get(t, srv, "/api/v1/conformance"),
		postJSON(t, srv, "/api/v1/conformance", `{"template":"counter"}`),
		get(t, srv, "/api/v1/conformance/c1/report.html"),
	} {
		if code, msg := apiError(t, r); r.Status != http.StatusServiceUnavailable || code != sim.EUnavailable || !strings.Contains(msg, "not available") {
			t.Errorf("%d %s %q, want 503 saying conformance is not available", r.Status, code, msg)
		}
	}
	p := get(t, srv, "/conformance")
	if p.Status != http.StatusOK {
		t.Fatalf("GET /conformance: %d", p.Status)
	}
	mustContain(t, p, `id="conformance-unavailable"`, "normsim conform TEMPLATE")
	mustNotContain(t, p, `action="/ui/conformance"`)
}

func TestConformanceAPIStartsListsAndRefuses(t *testing.T) {
	conf := &fakeConformance{}
	srv := newConformanceServer(t, conf)

	r := postJSON(t, srv, "/api/v1/conformance", `{"template":"counter","case":"1.1","parallel":2,"params":{"RATE":"50"},"runtime":"process"}`)
	if r.Status != http.StatusAccepted || r.Header.Get("Location") != "/api/v1/conformance/c1" {
		t.Fatalf("start: %d %v\n%s", r.Status, r.Header, r.Body)
	}
	if got := conf.started[0]; got.Template != "counter" || got.Case != "1.1" || got.Parallel != 2 || got.Params["RATE"] != "50" || got.Runtime != "process" {
		t.Errorf("the service got %+v", got)
	}
	if l := get(t, srv, "/api/v1/conformance"); l.Status != http.StatusOK || !strings.Contains(l.Body, `"id": "c1"`) {
		t.Errorf("list: %d\n%s", l.Status, l.Body)
	}
	if g := get(t, srv, "/api/v1/conformance/c1"); g.Status != http.StatusOK || !strings.Contains(g.Body, `"state": "running"`) {
		t.Errorf("get: %d\n%s", g.Status, g.Body)
	}

	for _, tc := range []struct {
		name, body string
		status     int
		code, says string
	}{
		{"wrong key case", `{"Template":"counter"}`, 400, sim.EInvalid, `did you mean "template"`},
		{"unknown field", `{"template":"counter","cases":"1.1"}`, 400, sim.EInvalid, `unknown field "cases"`},
		{"two objects", `{"template":"counter"}{}`, 400, sim.EInvalid, "one JSON object expected"},
		{"empty body", ``, 400, sim.EInvalid, "is empty"},
	} {
		r := postJSON(t, srv, "/api/v1/conformance", tc.body)
		if code, msg := apiError(t, r); r.Status != tc.status || code != tc.code || !strings.Contains(msg, tc.says) {
			t.Errorf("%s: %d %s %q, want %d %s saying %q", tc.name, r.Status, code, msg, tc.status, tc.code, tc.says)
		}
	}
	conf.startErr = sim.Errorf(sim.EUnprocessable, "case: \"9.9\" matches none of the 72 cases")
	r = postJSON(t, srv, "/api/v1/conformance", `{"template":"counter","case":"9.9"}`)
	if code, msg := apiError(t, r); r.Status != 422 || code != sim.EUnprocessable || !strings.Contains(msg, "matches none") {
		t.Errorf("the service's refusal: %d %s %q", r.Status, code, msg)
	}

	// A page of another origin may not start a run.
	req := httptest.NewRequest(http.MethodPost, "/api/v1/conformance", strings.NewReader(`{"template":"counter"}`))
	req.Header.Set("Origin", "http://evil.example")
	if r := do(t, srv, req); r.Status != http.StatusForbidden {
		t.Errorf("a foreign origin's start: %d", r.Status)
	}

	if r := get(t, srv, "/api/v1/conformance/c1/report.json"); r.Status != http.StatusConflict {
		t.Errorf("the report of a running run: %d\n%s", r.Status, r.Body)
	}
	if r := get(t, srv, "/api/v1/conformance/c7"); r.Status != http.StatusNotFound {
		t.Errorf("an unknown run: %d", r.Status)
	}
}

func TestConformanceReportHeaders(t *testing.T) {
	conf := &fakeConformance{runs: []sim.ConformanceRun{{ID: "c1", Template: "counter", State: sim.ConformancePassed, Cases: 1, Done: 1, HasReport: true,
		Counts: map[string]int{"pass": 1}}}}
	srv := newConformanceServer(t, conf)
	for path, ctype := range map[string]string{
		"/api/v1/conformance/c1/report.json":      "application/json",
		"/api/v1/conformance/c1/report.html":      "text/html; charset=utf-8",
		"/api/v1/conformance/c1/report.junit.xml": "application/xml; charset=utf-8",
	} {
		r := get(t, srv, path)
		if r.Status != http.StatusOK || r.Header.Get("Content-Type") != ctype {
			t.Errorf("%s: %d %q, want 200 %q", path, r.Status, r.Header.Get("Content-Type"), ctype)
		}
	}
	h := get(t, srv, "/api/v1/conformance/c1/report.html").Header
	if csp := h.Get("Content-Security-Policy"); !strings.Contains(csp, "frame-ancestors 'self'") || !strings.Contains(csp, "sandbox") {
		t.Errorf("the HTML report's CSP %q does not let only this origin frame it, sandboxed", csp)
	}
	if xfo := h.Get("X-Frame-Options"); xfo != "SAMEORIGIN" {
		t.Errorf("X-Frame-Options %q", xfo)
	}
	page := get(t, srv, "/conformance/c1")
	if csp := page.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "frame-src 'self'") || !strings.Contains(csp, "frame-ancestors 'none'") {
		t.Errorf("the run page's CSP %q does not let it frame its report", csp)
	}
	mustContain(t, page, `id="report-frame"`, `src="/api/v1/conformance/c1/report.html"`)
	if csp := get(t, srv, "/conformance").Header.Get("Content-Security-Policy"); strings.Contains(csp, "frame-src") {
		t.Errorf("the runs page may frame: %q", csp)
	}
}

func TestConformanceForm(t *testing.T) {
	conf := &fakeConformance{}
	srv := newConformanceServer(t, conf)
	p := get(t, srv, "/conformance")
	// The valid templates are offered, the broken one is not; nor is the
	// external runtime, which cannot run cases.
	mustContain(t, p, `<option value="counter"`, `<option value="plain"`, `RATE (int, default "50")`)
	mustNotContain(t, p, `<option value="broken"`, `<option value="external"`)
	tok := csrfToken(t, srv, "/conformance")

	form := url.Values{"csrf": {tok}, "template": {"counter"}, "case": {" 1.1 "}, "parallel": {"2"}, "runtime": {"process"},
		"params": {"RATE=50\n\n# a comment\nMODE = fast\n"}}
	r := post(t, srv, "/ui/conformance", form)
	if r.Status != http.StatusSeeOther || r.Header.Get("Location") != "/conformance/c1" {
		t.Fatalf("start from the form: %d %v\n%s", r.Status, r.Header, r.Body)
	}
	if got := conf.started[0]; got.Case != "1.1" || got.Parallel != 2 || len(got.Params) != 2 || got.Params["MODE"] != "fast" {
		t.Errorf("the form started %+v", got)
	}

	form.Set("params", "RATE=50\nnonsense")
	r = post(t, srv, "/ui/conformance", form)
	if r.Status != http.StatusBadRequest {
		t.Errorf("a bad params line: %d", r.Status)
	}
	mustContain(t, r, `id="conformance-error"`, `params line 2: want NAME=value; got "nonsense"`, "RATE=50\nnonsense")
	form.Set("params", "")
	form.Set("parallel", "two")
	r = post(t, srv, "/ui/conformance", form)
	mustContain(t, r, `parallel: must be a whole number of cases at once; got "two"`)
	if len(conf.started) != 1 {
		t.Errorf("a refused form reached the service: %+v", conf.started)
	}

	form.Set("parallel", "1")
	conf.startErr = sim.Errorf(sim.EConflict, "conformance run c1 of counter is still running")
	r = post(t, srv, "/ui/conformance", form)
	if r.Status != http.StatusConflict {
		t.Errorf("a refused start: %d", r.Status)
	}
	mustContain(t, r, "Run refused", "c1 of counter is still running", `value="1.1"`)

	form.Del("csrf")
	if r := post(t, srv, "/ui/conformance", form); r.Status != http.StatusForbidden {
		t.Errorf("a form without its CSRF token: %d", r.Status)
	}
}

func TestConformanceRunPageWhileRunning(t *testing.T) {
	conf := &fakeConformance{runs: []sim.ConformanceRun{{ID: "c1", Template: "counter", Strategy: sim.Handover, State: sim.ConformanceRunning,
		Cases: 4, Done: 1, Counts: map[string]int{"fail": 1},
		Results: []sim.ConformanceResult{{ID: "1.1", Group: "handover", Name: "plain handover a→b", Grade: "fail", Why: "the seam had a gap"}}}}}
	srv := newConformanceServer(t, conf)
	p := get(t, srv, "/conformance/c1")
	if p.Status != http.StatusOK {
		t.Fatalf("GET /conformance/c1: %d", p.Status)
	}
	mustContain(t, p, `data-conformance="c1"`, `data-page="conformance-run"`, `id="conf-cancel"`, `<span id="run-progress">1/4</span>`,
		`data-case="1.1"`, "the seam had a gap", "The report is written when the run ends")
	mustNotContain(t, p, `id="report-frame"`, `id="report-html"`)

	tok := csrfToken(t, srv, "/conformance/c1")
	if r := post(t, srv, "/ui/conformance/c1/cancel", url.Values{"csrf": {tok}}); r.Status != http.StatusSeeOther || r.Header.Get("Location") != "/conformance/c1" {
		t.Errorf("cancel from the page: %d %v", r.Status, r.Header)
	}
	if r := post(t, srv, "/ui/conformance/c9/cancel", url.Values{"csrf": {tok}}); r.Status != http.StatusNotFound {
		t.Errorf("cancel of an unknown run: %d", r.Status)
	}
	if r := postJSON(t, srv, "/api/v1/conformance/c1/cancel", ""); r.Status != http.StatusAccepted || !strings.Contains(r.Body, `"id": "c1"`) {
		t.Errorf("cancel through the API: %d\n%s", r.Status, r.Body)
	}
	// Only a page of this normsim may cancel a run.
	for _, path := range []string{"/ui/conformance/c1/cancel", "/api/v1/conformance/c1/cancel"} {
		req := httptest.NewRequest(http.MethodPost, path, strings.NewReader(url.Values{"csrf": {tok}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", "http://evil.example")
		if r := do(t, srv, req); r.Status != http.StatusForbidden || !strings.Contains(r.Body, "ORIGIN_REFUSED") {
			t.Errorf("a foreign origin's cancel at %s: %d", path, r.Status)
		}
	}
	if r := get(t, srv, "/conformance/c9"); r.Status != http.StatusNotFound {
		t.Errorf("the page of an unknown run: %d", r.Status)
	}
}

func TestOverviewNamesTheRunningConformanceRun(t *testing.T) {
	conf := &fakeConformance{runs: []sim.ConformanceRun{
		{ID: "c1", Template: "plain", State: sim.ConformancePassed, Cases: 3, Done: 3},
		{ID: "c2", Template: "counter", State: sim.ConformanceRunning, Cases: 72, Done: 5},
	}}
	p := get(t, newConformanceServer(t, conf), "/")
	mustContain(t, p, `data-conformance-run="c2"`, `href="/conformance/c2"`, "5/72 cases")
	mustNotContain(t, p, `data-conformance-run="c1"`)
}
