package web_test

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/normsim/normsim/normsimtest"
	"github.com/normsim/normsim/sim"
)

// Conformance runs against a real simulator: the counter example on the
// process runtime, one case (1.1, a plain handover) so a run is quick.

// startConformance posts a run and fails the test on a refusal.
func startConformance(t *testing.T, s *normsimtest.Sim, req sim.ConformanceRequest) sim.ConformanceRun {
	t.Helper()
	var run sim.ConformanceRun
	if err := s.Do(http.MethodPost, "/api/v1/conformance", req, &run); err != nil {
		t.Fatalf("start conformance of %s: %v", req.Template, err)
	}
	return run
}

// waitConformance polls the run until it ends.
func waitConformance(t *testing.T, s *normsimtest.Sim, id string, timeout time.Duration) sim.ConformanceRun {
	t.Helper()
	var run sim.ConformanceRun
	waitFor(t, timeout, "conformance run "+id+" to end", func() bool {
		if err := s.Do(http.MethodGet, "/api/v1/conformance/"+id, nil, &run); err != nil {
			t.Fatalf("get conformance run %s: %v", id, err)
		}
		return run.State.Ended()
	})
	return run
}

// getRaw fetches a path of the sim and returns its status, type and body.
func getRaw(t *testing.T, s *normsimtest.Sim, path string) (int, string, []byte) {
	t.Helper()
	res, err := http.Get(s.URL + path)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	return res.StatusCode, res.Header.Get("Content-Type"), b
}

func TestConformanceRunOfCounter(t *testing.T) {
	s := startSim(t, normsimtest.Options{})
	run := startConformance(t, s, sim.ConformanceRequest{Template: "counter", Case: "1.1"})
	if run.ID == "" || run.State != sim.ConformanceRunning || run.Cases != 1 || run.Strategy != sim.Handover || run.Runtime != sim.RuntimeProcess {
		t.Fatalf("started: %+v", run)
	}
	run = waitConformance(t, s, run.ID, 3*time.Minute)
	if run.State != sim.ConformancePassed || run.Done != 1 || run.Counts["pass"] != 1 || !run.HasReport || run.EndedAt == nil {
		t.Fatalf("the plain handover of counter: %+v", run)
	}
	if len(run.Results) != 1 || run.Results[0].ID != "1.1" || run.Results[0].Grade != "pass" || run.Results[0].Why == "" {
		t.Errorf("results: %+v", run.Results)
	}
	var list []sim.ConformanceRun
	if err := s.Do(http.MethodGet, "/api/v1/conformance", nil, &list); err != nil || len(list) != 1 || list[0].ID != run.ID {
		t.Errorf("list: %+v %v", list, err)
	}

	// The report in each format.
	status, ctype, body := getRaw(t, s, "/api/v1/conformance/"+run.ID+"/report.json")
	var rep struct {
		Version  string         `json:"version"`
		Template string         `json:"template"`
		Strategy string         `json:"strategy"`
		Runtime  string         `json:"runtime"`
		Filter   string         `json:"filter"`
		Counts   map[string]int `json:"counts"`
		Results  []struct {
			ID         string            `json:"id"`
			Grade      string            `json:"grade"`
			Migrations []json.RawMessage `json:"migrations"`
		} `json:"results"`
	}
	if status != 200 || ctype != "application/json" {
		t.Fatalf("report.json: %d %s\n%s", status, ctype, body)
	}
	if err := json.Unmarshal(body, &rep); err != nil {
		t.Fatalf("report.json: %v\n%s", err, body)
	}
	if rep.Version != "dev" || rep.Template != "counter" || rep.Strategy != "handover" || rep.Filter != "1.1" || rep.Counts["pass"] != 1 ||
		len(rep.Results) != 1 || rep.Results[0].ID != "1.1" || rep.Results[0].Grade != "pass" || len(rep.Results[0].Migrations) == 0 {
		t.Errorf("report.json: %+v", rep)
	}

	status, ctype, body = getRaw(t, s, "/api/v1/conformance/"+run.ID+"/report.html")
	if status != 200 || !strings.HasPrefix(ctype, "text/html") || !bytes.Contains(body, []byte("counter")) || !bytes.Contains(bytes.ToLower(body), []byte("<html")) {
		t.Errorf("report.html: %d %s\n%.2000s", status, ctype, body)
	}

	status, ctype, body = getRaw(t, s, "/api/v1/conformance/"+run.ID+"/report.junit.xml")
	if status != 200 || !strings.HasPrefix(ctype, "application/xml") {
		t.Errorf("report.junit.xml: %d %s", status, ctype)
	}
	if cases := junitCases(t, body); len(cases) != 1 || !strings.Contains(cases[0], "1.1") {
		t.Errorf("report.junit.xml has test cases %q, want the one of case 1.1\n%.2000s", cases, body)
	}

	// The pages show it.
	page := get(t, s.Main.Web, "/conformance")
	mustContain(t, page, `href="/conformance/`+run.ID+`"`, `data-state="passed"`, "1/1")
	page = get(t, s.Main.Web, "/conformance/"+run.ID)
	mustContain(t, page, `id="report-frame"`, "plain handover")
}

// junitCases are the names of a JUnit report's test cases; the report
// must be well-formed XML.
func junitCases(t *testing.T, body []byte) []string {
	t.Helper()
	dec := xml.NewDecoder(bytes.NewReader(body))
	var names []string
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			return names
		}
		if err != nil {
			t.Fatalf("report.junit.xml is not XML: %v\n%.2000s", err, body)
		}
		if se, ok := tok.(xml.StartElement); ok && se.Name.Local == "testcase" {
			for _, a := range se.Attr {
				if a.Name.Local == "name" {
					names = append(names, a.Value)
				}
			}
		}
	}
}

func TestConformanceRefusesBadRequests(t *testing.T) {
	s := startSim(t, normsimtest.Options{})
	for _, tc := range []struct {
		name   string
		req    sim.ConformanceRequest
		status int
		code   string
		says   string
	}{
		{"unknown template", sim.ConformanceRequest{Template: "nope"}, 404, sim.ENotFound, `"nope"`},
		{"pattern matching no case", sim.ConformanceRequest{Template: "counter", Case: "9.9"}, 422, sim.EUnprocessable, `case: "9.9" matches none of the`},
		{"negative parallel", sim.ConformanceRequest{Template: "counter", Parallel: -1}, 422, sim.EUnprocessable, "parallel: must be from 1 to 16"},
		{"refused params", sim.ConformanceRequest{Template: "counter", Params: map[string]string{"RATE": "fast"}}, 422, sim.EParamsInvalid, "params.RATE"},
		{"unknown param", sim.ConformanceRequest{Template: "counter", Params: map[string]string{"NOPE": "1"}}, 422, sim.EParamsInvalid, "NOPE"},
		{"external runtime", sim.ConformanceRequest{Template: "counter", Runtime: sim.RuntimeExternal}, 422, sim.EUnprocessable, "external cannot run conformance"},
		{"unknown runtime", sim.ConformanceRequest{Template: "counter", Runtime: "podman"}, 422, sim.EUnprocessable, `got "podman"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := s.Do(http.MethodPost, "/api/v1/conformance", tc.req, nil)
			var apiErr *normsimtest.APIError
			if !errors.As(err, &apiErr) {
				t.Fatalf("%+v: %v, want a refusal", tc.req, err)
			}
			if apiErr.Status != tc.status || apiErr.Code != tc.code || !strings.Contains(apiErr.Message, tc.says) {
				t.Errorf("%d %s %q, want %d %s saying %q", apiErr.Status, apiErr.Code, apiErr.Message, tc.status, tc.code, tc.says)
			}
		})
	}
	var list []sim.ConformanceRun
	if err := s.Do(http.MethodGet, "/api/v1/conformance", nil, &list); err != nil || len(list) != 0 {
		t.Errorf("refused requests left runs: %+v %v", list, err)
	}
	if status, _, body := getRaw(t, s, "/api/v1/conformance/c1/report.html"); status != 404 || !strings.Contains(string(body), "NOT_FOUND") {
		t.Errorf("the report of no run: %d %s", status, body)
	}
}

// TestConformanceCloseInterruptsRuns: closing the sim stops a run at its
// case and waits for it; the run says it was interrupted.
func TestConformanceCloseInterruptsRuns(t *testing.T) {
	s := startSim(t, normsimtest.Options{})
	// The whole matrix: it cannot have ended by the time Close is called.
	run := startConformance(t, s, sim.ConformanceRequest{Template: "counter"})
	if err := s.Main.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	got, err := s.Main.Conformance.ConformanceRun(run.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.State != sim.ConformanceInterrupted || got.Done >= got.Cases {
		t.Errorf("after Close the run is %s with %d of %d cases done, want interrupted short", got.State, got.Done, got.Cases)
	}
}

// TestConformanceCancel: a cancelled run ends interrupted, and its report
// keeps the cases that ended and says so.
func TestConformanceCancel(t *testing.T) {
	s := startSim(t, normsimtest.Options{})
	run := startConformance(t, s, sim.ConformanceRequest{Template: "counter"})
	var cancelled sim.ConformanceRun
	if err := s.Do(http.MethodPost, "/api/v1/conformance/"+run.ID+"/cancel", nil, &cancelled); err != nil {
		t.Fatalf("cancel: %v", err)
	}
	run = waitConformance(t, s, run.ID, 2*time.Minute)
	if run.State != sim.ConformanceInterrupted || run.Done >= run.Cases || !run.HasReport {
		t.Fatalf("cancelled run: %s, %d of %d cases, report %v", run.State, run.Done, run.Cases, run.HasReport)
	}
	status, _, body := getRaw(t, s, "/api/v1/conformance/"+run.ID+"/report.json")
	var rep struct {
		Interrupted bool              `json:"interrupted"`
		Results     []json.RawMessage `json:"results"`
	}
	if err := json.Unmarshal(body, &rep); status != 200 || err != nil || !rep.Interrupted || len(rep.Results) != run.Done {
		t.Errorf("report of the cancelled run: %d %v interrupted=%v results=%d, want %d\n%.1000s", status, err, rep.Interrupted, len(rep.Results), run.Done, body)
	}
	err := s.Do(http.MethodPost, "/api/v1/conformance/"+run.ID+"/cancel", nil, nil)
	var apiErr *normsimtest.APIError
	if !errors.As(err, &apiErr) || apiErr.Status != http.StatusConflict {
		t.Errorf("cancel of an ended run: %v, want 409", err)
	}
}
