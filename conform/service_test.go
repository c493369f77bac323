package conform

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/normsim/normsim/sim"
)

// The service's bookkeeping, with a runner whose cases end when the test
// says: the end-to-end runs against a real simulator are in package web.

type fakeSim struct {
	bus       *sim.Bus
	templates map[string]*sim.Template
	runtimes  []string
	def       string
}

func newFakeSim() *fakeSim {
	return &fakeSim{bus: sim.NewBus(), def: sim.RuntimeProcess,
		runtimes: []string{sim.RuntimeExternal, sim.RuntimeProcess},
		templates: map[string]*sim.Template{
			"counter": {Name: "counter", Valid: true, Strategy: sim.Handover},
			"plain":   {Name: "plain", Valid: true, Strategy: sim.StopThenStart},
			"broken":  {Name: "broken", Error: &sim.TemplateError{Code: sim.EManifestInvalid, Message: "manifest.json: target: required"}},
		}}
}

func (f *fakeSim) Catalog() sim.Catalog   { return fakeCatalog{f} }
func (f *fakeSim) DefaultRuntime() string { return f.def }
func (f *fakeSim) Runtimes() []string     { return f.runtimes }
func (f *fakeSim) Bus() *sim.Bus          { return f.bus }

type fakeCatalog struct{ f *fakeSim }

func (c fakeCatalog) List() []*sim.Template { return nil }
func (c fakeCatalog) Get(name string) (*sim.Template, error) {
	if t, ok := c.f.templates[name]; ok {
		return t, nil
	}
	return nil, sim.Errorf(sim.ENotFound, "template %q not found", name)
}
func (c fakeCatalog) Launch(string, sim.LaunchInput) (*sim.LaunchSpec, error) { return nil, nil }
func (c fakeCatalog) CheckParams(name string, params map[string]string) error {
	if v, ok := params["RATE"]; ok && v != "50" {
		return sim.Errorf(sim.EParamsInvalid, "params.RATE: must be 50; got %q", v)
	}
	return nil
}

// stepRunner ends its cases one by one, each with the grade the test sends.
type stepRunner struct {
	cfg    Config
	grades chan Grade
}

func (r *stepRunner) Cases(ctx context.Context) ([]Case, error) {
	return Matrix(sim.Handover, r.cfg.Timeouts), nil
}

func (r *stepRunner) Run(ctx context.Context, cases []Case, each func(*Result)) *Report {
	rep := &Report{Template: r.cfg.Template, Parallel: r.cfg.Parallel}
	for _, c := range cases {
		select {
		case <-ctx.Done():
			rep.Interrupted = true
			rep.Count()
			return rep
		case g := <-r.grades:
			if g == "panic" {
				panic("the runner broke")
			}
			res := &Result{Case: c, Grade: g, Why: "because the test said " + string(g)}
			rep.Results = append(rep.Results, res)
			each(res)
		}
	}
	rep.Count()
	return rep
}

type fixture struct {
	svc    *Service
	sim    *fakeSim
	grades chan Grade
	mu     sync.Mutex
	cfgs   []Config
}

func newFixture(t *testing.T) *fixture {
	f := &fixture{sim: newFakeSim(), grades: make(chan Grade)}
	f.svc = NewService(ServiceConfig{URL: "http://127.0.0.1:1", Sim: f.sim})
	f.svc.newRunner = func(c Config) caseRunner {
		f.mu.Lock()
		f.cfgs = append(f.cfgs, c)
		f.mu.Unlock()
		return &stepRunner{cfg: c, grades: f.grades}
	}
	t.Cleanup(func() { f.svc.Close() })
	return f
}

func (f *fixture) waitRun(t *testing.T, id string, what string, cond func(sim.ConformanceRun) bool) sim.ConformanceRun {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		r, err := f.svc.ConformanceRun(id)
		if err != nil {
			t.Fatal(err)
		}
		if cond(r) {
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s never %s: %+v", id, what, r)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestServiceRefusesBadRequests(t *testing.T) {
	f := newFixture(t)
	f.sim.runtimes = append(f.sim.runtimes, sim.RuntimeDocker)
	for _, tc := range []struct {
		name string
		req  sim.ConformanceRequest
		code string
		says []string
	}{
		{"no template", sim.ConformanceRequest{}, sim.EInvalid, []string{"template: required"}},
		{"unknown template", sim.ConformanceRequest{Template: "nope"}, sim.ENotFound, []string{`"nope" not found`}},
		{"invalid template", sim.ConformanceRequest{Template: "broken"}, sim.ETemplateInvalid, []string{"broken is invalid", "target: required"}},
		{"negative parallel", sim.ConformanceRequest{Template: "counter", Parallel: -1}, sim.EUnprocessable, []string{"parallel: must be from 1 to 16", "got -1"}},
		{"too parallel", sim.ConformanceRequest{Template: "counter", Parallel: 17}, sim.EUnprocessable, []string{"got 17"}},
		{"refused params", sim.ConformanceRequest{Template: "counter", Params: map[string]string{"RATE": "7"}}, sim.EParamsInvalid, []string{"params.RATE"}},
		{"external runtime", sim.ConformanceRequest{Template: "counter", Runtime: "external"}, sim.EUnprocessable, []string{"external cannot run conformance", "(process, docker)"}},
		{"unknown runtime", sim.ConformanceRequest{Template: "counter", Runtime: "podman"}, sim.EUnprocessable, []string{`got "podman"`, "process, docker"}},
		{"pattern matching nothing", sim.ConformanceRequest{Template: "counter", Case: "9.9"}, sim.EUnprocessable,
			[]string{`case: "9.9" matches none of the`, "handover matrix of counter", "IDs 1.1 to "}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := f.svc.StartConformance(context.Background(), tc.req)
			if err == nil {
				t.Fatalf("%+v was accepted", tc.req)
			}
			if got := sim.ErrorCode(err); got != tc.code {
				t.Errorf("code %s, want %s (%v)", got, tc.code, err)
			}
			for _, s := range tc.says {
				if !strings.Contains(sim.ErrorMessage(err), s) {
					t.Errorf("message %q does not say %q", sim.ErrorMessage(err), s)
				}
			}
		})
	}
	if runs := f.svc.ConformanceRuns(); len(runs) != 0 {
		t.Errorf("refused requests left runs: %+v", runs)
	}
}

func TestServiceExternalDefaultRuntimeIsRefused(t *testing.T) {
	f := newFixture(t)
	f.sim.def = sim.RuntimeExternal
	_, err := f.svc.StartConformance(context.Background(), sim.ConformanceRequest{Template: "counter"})
	if sim.ErrorCode(err) != sim.EUnprocessable || !strings.Contains(sim.ErrorMessage(err), "default runtime is external") {
		t.Fatalf("got %v, want the external default explained", err)
	}
}

func TestServiceRunProgressAndReport(t *testing.T) {
	f := newFixture(t)
	sub := f.sim.bus.Subscribe(64)
	defer sub.Close()
	run, err := f.svc.StartConformance(context.Background(), sim.ConformanceRequest{Template: "counter", Case: "1.*", Params: map[string]string{"RATE": "50"}})
	if err != nil {
		t.Fatal(err)
	}
	if run.ID != "c1" || run.State != sim.ConformanceRunning || run.Cases != 3 || run.Done != 0 || run.Strategy != sim.Handover || run.Runtime != sim.RuntimeProcess || run.Parallel != 1 {
		t.Fatalf("started run: %+v", run)
	}
	if c := f.cfgs[0]; c.URL != "http://127.0.0.1:1" || c.Template != "counter" || c.Params["RATE"] != "50" || c.Runtime != sim.RuntimeProcess || c.Parallel != 1 {
		t.Errorf("runner config: %+v", c)
	}

	_, err = f.svc.StartConformance(context.Background(), sim.ConformanceRequest{Template: "plain"})
	if sim.ErrorCode(err) != sim.EConflict || !strings.Contains(sim.ErrorMessage(err), "c1 of counter is still running (0 of 3 cases done)") {
		t.Errorf("a second run while c1 runs: %v", err)
	}
	var buf bytes.Buffer
	if err := f.svc.WriteConformanceReport("c1", sim.ReportJSON, &buf); sim.ErrorCode(err) != sim.EConflict {
		t.Errorf("the report of a running run: %v", err)
	}

	f.grades <- GradePass
	f.waitRun(t, "c1", "counted its first case", func(r sim.ConformanceRun) bool { return r.Done == 1 })
	f.grades <- GradeTolerated
	f.grades <- GradeFail
	r := f.waitRun(t, "c1", "ended", func(r sim.ConformanceRun) bool { return r.State.Ended() })
	if r.State != sim.ConformanceFailed || r.Done != 3 || r.EndedAt == nil {
		t.Errorf("ended run: %+v", r)
	}
	want := map[string]int{"pass": 1, "tolerated": 1, "fail": 1, "n/a": 0, "error": 0}
	for g, n := range want {
		if r.Counts[g] != n {
			t.Errorf("counts %v, want %v", r.Counts, want)
			break
		}
	}
	if len(r.Results) != 3 || r.Results[0].ID != "1.1" || r.Results[2].Grade != "fail" || r.Results[2].Why != "because the test said fail" {
		t.Errorf("results: %+v", r.Results)
	}

	buf.Reset()
	if err := f.svc.WriteConformanceReport("c1", sim.ReportJSON, &buf); err != nil {
		t.Fatal(err)
	}
	var rep Report
	if err := json.Unmarshal(buf.Bytes(), &rep); err != nil {
		t.Fatalf("report JSON: %v\n%s", err, buf.String())
	}
	if rep.Template != "counter" || rep.Filter != "1.*" || len(rep.Results) != 3 || rep.Counts[GradeFail] != 1 {
		t.Errorf("report: %+v", rep)
	}
	if err := f.svc.WriteConformanceReport("c1", "pdf", &buf); sim.ErrorCode(err) != sim.EInvalid {
		t.Errorf("format pdf: %v", err)
	}
	if _, err := f.svc.ConformanceRun("c9"); sim.ErrorCode(err) != sim.ENotFound {
		t.Errorf("run c9: %v", err)
	}
	if err := f.svc.CancelConformance("c1"); sim.ErrorCode(err) != sim.EConflict {
		t.Errorf("cancel of an ended run: %v", err)
	}

	// The bus told of the start, each case and the end.
	var states []string
	for len(sub.C) > 0 {
		ev := <-sub.C
		if ev.Kind != sim.EventConformanceRun {
			continue
		}
		var d struct {
			ID    string
			State string
			Done  int
		}
		json.Unmarshal(ev.Data, &d)
		states = append(states, d.State+"/"+string(rune('0'+d.Done)))
	}
	if got := strings.Join(states, " "); got != "running/0 running/1 running/2 running/3 failed/3" {
		t.Errorf("events: %s", got)
	}
}

func TestServiceStates(t *testing.T) {
	for _, tc := range []struct {
		grades []Grade
		want   sim.ConformanceState
	}{
		{[]Grade{GradePass, GradeTolerated, GradeNotApplicable}, sim.ConformancePassed},
		{[]Grade{GradePass, GradeError, GradeNotApplicable}, sim.ConformanceError},
		{[]Grade{GradeError, GradeFail, GradePass}, sim.ConformanceFailed},
		{[]Grade{GradePass, "panic"}, sim.ConformanceError},
	} {
		f := newFixture(t)
		if _, err := f.svc.StartConformance(context.Background(), sim.ConformanceRequest{Template: "counter", Case: "1.*", Parallel: 2}); err != nil {
			t.Fatal(err)
		}
		for _, g := range tc.grades {
			f.grades <- g
			if g == "panic" {
				break
			}
		}
		r := f.waitRun(t, "c1", "ended", func(r sim.ConformanceRun) bool { return r.State.Ended() })
		if r.State != tc.want {
			t.Errorf("grades %v: state %s, want %s", tc.grades, r.State, tc.want)
		}
		if r.State == sim.ConformanceError && r.Error == "" {
			t.Errorf("grades %v: an error run says not why", tc.grades)
		}
		if tc.grades[len(tc.grades)-1] == "panic" {
			if !strings.Contains(r.Error, "the runner broke") {
				t.Errorf("a panicked run's error: %q", r.Error)
			}
			if err := f.svc.WriteConformanceReport("c1", sim.ReportJSON, &bytes.Buffer{}); sim.ErrorCode(err) != sim.ENotFound {
				t.Errorf("the report of a panicked run: %v", err)
			}
		}
	}
}

func TestServiceCancelAndClose(t *testing.T) {
	f := newFixture(t)
	if _, err := f.svc.StartConformance(context.Background(), sim.ConformanceRequest{Template: "counter", Case: "1.*"}); err != nil {
		t.Fatal(err)
	}
	f.grades <- GradePass
	f.waitRun(t, "c1", "counted its first case", func(r sim.ConformanceRun) bool { return r.Done == 1 })
	if err := f.svc.CancelConformance("c1"); err != nil {
		t.Fatal(err)
	}
	r := f.waitRun(t, "c1", "ended", func(r sim.ConformanceRun) bool { return r.State.Ended() })
	if r.State != sim.ConformanceInterrupted || r.Done != 1 {
		t.Errorf("cancelled run: %+v", r)
	}

	// A second run may start now; Close interrupts it and waits for it.
	if _, err := f.svc.StartConformance(context.Background(), sim.ConformanceRequest{Template: "counter", Case: "1.*"}); err != nil {
		t.Fatal(err)
	}
	f.svc.Close()
	r, _ = f.svc.ConformanceRun("c2")
	if r.State != sim.ConformanceInterrupted {
		t.Errorf("after Close the run is %s", r.State)
	}
	if _, err := f.svc.StartConformance(context.Background(), sim.ConformanceRequest{Template: "counter"}); sim.ErrorCode(err) != sim.EUnavailable {
		t.Errorf("a start after Close: %v", err)
	}
}

func TestServiceKeepsTheLastRuns(t *testing.T) {
	f := newFixture(t)
	f.svc.cfg.KeepRuns = 2
	for range 3 {
		run, err := f.svc.StartConformance(context.Background(), sim.ConformanceRequest{Template: "counter", Case: "1.1"})
		if err != nil {
			t.Fatal(err)
		}
		f.grades <- GradePass
		f.waitRun(t, run.ID, "ended", func(r sim.ConformanceRun) bool { return r.State.Ended() })
	}
	var ids []string
	for _, r := range f.svc.ConformanceRuns() {
		ids = append(ids, r.ID)
	}
	if got := strings.Join(ids, " "); got != "c3 c2" {
		t.Errorf("runs kept: %s, want c3 c2 (newest first)", got)
	}
	if n := f.svc.ConformanceDropped(); n != 1 {
		t.Errorf("dropped %d run(s), want 1 counted", n)
	}
}

// The seam names the grades the dashboard shows in the order conform has
// them.
func TestSeamGradesAreConformsGrades(t *testing.T) {
	if len(sim.ConformanceGrades) != len(Grades) {
		t.Fatalf("sim.ConformanceGrades %v, conform.Grades %v", sim.ConformanceGrades, Grades)
	}
	for i, g := range Grades {
		if sim.ConformanceGrades[i] != string(g) {
			t.Errorf("grade %d: sim says %q, conform %q", i, sim.ConformanceGrades[i], g)
		}
	}
}
