package conform

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"os"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/normsim/normsim/sim"
)

// Sim is what the conformance service asks of the simulator it runs in
// besides its HTTP API (*manager.Manager implements it): the templates to
// check a request against, the runtimes, and the bus that tells the
// dashboard a run moved on.
type Sim interface {
	Catalog() sim.Catalog
	DefaultRuntime() string
	Runtimes() []string
	Bus() *sim.Bus
}

// ServiceConfig configures a Service.
type ServiceConfig struct {
	// URL is the simulator's own API base URL: the runs drive the sim
	// through its API exactly as `normsim conform` does from outside.
	URL        string
	Sim        Sim
	HTTPClient *http.Client
	// Timeouts are the runs' per-phase timeouts over Timeouts.
	Timeouts sim.Timeouts
	// KeepRuns bounds the ended runs kept (the oldest go first); default
	// DefaultKeepRuns.
	KeepRuns int
	// Version is the sim's version, which the reports name.
	Version string
	Logger  *slog.Logger
	Now     func() time.Time
}

// DefaultKeepRuns is how many ended runs a Service keeps by default: a
// report holds every case's timelines and logs, so the memory of a
// long-lived sim stays bounded.
const DefaultKeepRuns = 50

// MaxParallel bounds a run's cases at once: each case launches its job on
// the sim's nodes, and beyond a few the cases' phase timeouts measure the
// machine's load rather than the job.
const MaxParallel = 16

// caseRunner is what the service needs of a Runner; tests put a fake in.
type caseRunner interface {
	Cases(ctx context.Context) ([]Case, error)
	Run(ctx context.Context, cases []Case, each func(*Result)) *Report
}

// Service runs conformance matrices inside the simulator's process, one
// goroutine per run, and keeps the runs and their reports in memory for the
// life of the process. It implements sim.ConformanceService.
type Service struct {
	cfg       ServiceConfig
	newRunner func(Config) caseRunner
	log       *slog.Logger
	// ctx is every run's parent: Close cancels it.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu   sync.Mutex
	seq  int
	runs []*serviceRun // oldest first
	// dropped counts the ended runs prune let go.
	dropped int
	closed  bool
}

// serviceRun is one run: its view (guarded by Service.mu) and, once it has
// ended, its report.
type serviceRun struct {
	view   sim.ConformanceRun
	report *Report
	cancel context.CancelFunc
}

var _ sim.ConformanceService = (*Service)(nil)

// NewService returns a service that runs conformance against the sim at
// cfg.URL.
func NewService(cfg ServiceConfig) *Service {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.KeepRuns <= 0 {
		cfg.KeepRuns = DefaultKeepRuns
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Service{cfg: cfg, log: cfg.Logger, ctx: ctx, cancel: cancel,
		newRunner: func(c Config) caseRunner { return New(c) }}
}

// StartConformance checks req, lists the template's matrix, and starts the
// run in the background.
func (s *Service) StartConformance(ctx context.Context, req sim.ConformanceRequest) (sim.ConformanceRun, error) {
	t, rt, err := s.check(req)
	if err != nil {
		return sim.ConformanceRun{}, err
	}
	parallel := max(req.Parallel, 1)
	req.Params = maps.Clone(req.Params)
	r := s.newRunner(Config{URL: s.cfg.URL, Template: req.Template, Params: req.Params, Runtime: rt,
		Timeouts: s.cfg.Timeouts, Parallel: parallel, HTTPClient: s.cfg.HTTPClient, Now: s.cfg.Now})
	all, err := r.Cases(ctx)
	if err != nil {
		return sim.ConformanceRun{}, fmt.Errorf("conformance of %s: list its cases: %w", req.Template, err)
	}
	cases := Select(all, req.Case)
	if len(cases) == 0 {
		return sim.ConformanceRun{}, sim.Errorf(sim.EUnprocessable, "case: %q matches none of the %d cases of the %s matrix of %s (IDs %s); "+
			"give a case ID or glob (1.1, 3.*) or words of a case's name (kill)", req.Case, len(all), t.Strategy, req.Template, idRange(all))
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return sim.ConformanceRun{}, sim.Errorf(sim.EUnavailable, "normsim is closing: no conformance run can start")
	}
	for _, o := range s.runs {
		if !o.view.State.Ended() {
			return sim.ConformanceRun{}, sim.Errorf(sim.EConflict, "conformance run %s of %s is still running (%d of %d cases done): "+
				"one run at a time, since the cases of two runs would share the nodes and time each other's phases; wait for it or cancel it",
				o.view.ID, o.view.Template, o.view.Done, o.view.Cases)
		}
	}
	s.seq++
	runCtx, cancel := context.WithCancel(s.ctx)
	sr := &serviceRun{cancel: cancel, view: sim.ConformanceRun{
		ID: "c" + strconv.Itoa(s.seq), Template: req.Template, Strategy: t.Strategy, Runtime: rt, Params: req.Params,
		Case: req.Case, Parallel: parallel, State: sim.ConformanceRunning, Cases: len(cases),
		StartedAt: s.cfg.Now(), Counts: zeroCounts(), Results: []sim.ConformanceResult{},
	}}
	s.runs = append(s.runs, sr)
	s.publish(sr)
	s.log.Info("conformance run started", "run", sr.view.ID, "template", req.Template, "cases", len(cases), "runtime", rt)
	s.wg.Add(1)
	go s.run(runCtx, sr, r, cases)
	return copyRun(sr.view), nil
}

// check judges a request before anything runs: the template, its params,
// the parallel and the runtime. It returns the template and the runtime
// the cases launch on.
func (s *Service) check(req sim.ConformanceRequest) (*sim.Template, string, error) {
	if strings.TrimSpace(req.Template) == "" {
		return nil, "", sim.Errorf(sim.EInvalid, "template: required; name the template to run the conformance matrix of")
	}
	if req.Parallel < 0 || req.Parallel > MaxParallel {
		return nil, "", sim.Errorf(sim.EUnprocessable, "parallel: must be from 1 to %d cases at once (0 means 1); got %d", MaxParallel, req.Parallel)
	}
	cat := s.cfg.Sim.Catalog()
	t, err := cat.Get(req.Template)
	if err != nil {
		return nil, "", err
	}
	if !t.Valid {
		msg := "it failed validation"
		if t.Error != nil {
			msg = t.Error.Error()
		}
		return nil, "", sim.Errorf(sim.ETemplateInvalid, "template %s is invalid, so it has no conformance to run: %s", t.Name, msg)
	}
	if !slices.Contains(sim.Strategies, t.Strategy) {
		return nil, "", sim.Errorf(sim.EUnprocessable, "template %s declares strategy %q, which has no conformance matrix (overlap, stopThenStart, handover)", t.Name, t.Strategy)
	}
	if err := cat.CheckParams(req.Template, req.Params); err != nil {
		return nil, "", err
	}
	rt := req.Runtime
	if rt == "" {
		rt = s.cfg.Sim.DefaultRuntime()
	}
	var usable []string
	for _, name := range s.cfg.Sim.Runtimes() {
		if name != sim.RuntimeExternal {
			usable = append(usable, name)
		}
	}
	switch {
	case rt == sim.RuntimeExternal && req.Runtime == "":
		return nil, "", sim.Errorf(sim.EUnprocessable, "runtime: this normsim's default runtime is external, and conformance launches, kills and pauses the job itself; "+
			"name a runtime normsim runs jobs on (%s)", runtimeList(usable))
	case rt == sim.RuntimeExternal:
		return nil, "", sim.Errorf(sim.EUnprocessable, "runtime: external cannot run conformance cases, which launch, kill and pause the job themselves; "+
			"use a runtime normsim runs jobs on (%s)", runtimeList(usable))
	case !slices.Contains(usable, rt):
		return nil, "", sim.Errorf(sim.EUnprocessable, "runtime: must be one of this normsim's runtimes (%s); got %q", runtimeList(usable), rt)
	}
	return t, rt, nil
}

func runtimeList(names []string) string {
	if len(names) == 0 {
		return "none is available here"
	}
	return strings.Join(names, ", ")
}

// idRange says which case IDs a matrix has: "1.1 to 7.12".
func idRange(cases []Case) string {
	if len(cases) == 0 {
		return "none"
	}
	return cases[0].ID + " to " + cases[len(cases)-1].ID
}

// run carries one run out and records its end. A panic of the runner ends
// the run in error instead of taking the simulator down with it.
func (s *Service) run(ctx context.Context, sr *serviceRun, r caseRunner, cases []Case) {
	defer s.wg.Done()
	defer sr.cancel()
	var rep *Report
	var failure string
	func() {
		defer func() {
			if p := recover(); p != nil {
				s.log.Error("conformance run panicked", "run", sr.view.ID, "panic", p, "stack", string(debug.Stack()))
				failure = fmt.Sprintf("the conformance runner panicked: %v (see normsim's log)", p)
			}
		}()
		rep = r.Run(ctx, cases, func(res *Result) { s.caseEnded(sr, res) })
	}()
	s.ended(sr, rep, failure, ctx.Err() != nil)
}

// caseEnded counts a case as it ends.
func (s *Service) caseEnded(sr *serviceRun, res *Result) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v := &sr.view
	v.Done++
	v.Counts[string(res.Grade)]++
	v.Results = append(v.Results, sim.ConformanceResult{ID: res.ID, Group: res.Group, Name: res.Name,
		Grade: string(res.Grade), Why: res.Why, DurationMs: res.DurationMs})
	s.log.Debug("conformance case ended", "run", v.ID, "case", res.ID, "grade", res.Grade, "done", v.Done, "cases", v.Cases)
	s.publish(sr)
}

// ended records a run's end: its report, and its state read from the
// grades.
func (s *Service) ended(sr *serviceRun, rep *Report, failure string, cancelled bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v := &sr.view
	now := s.cfg.Now()
	v.EndedAt = &now
	switch {
	case rep == nil:
		v.State = sim.ConformanceError
		v.Error = failure
		if v.Error == "" {
			v.Error = "the conformance runner returned no report"
		}
	default:
		if rep.Filter == "" {
			rep.Filter = v.Case
		}
		// As `normsim conform` names them, so a report reads the same
		// whoever ran it.
		if rep.Version == "" {
			rep.Version = s.cfg.Version
		}
		if rep.Hostname == "" {
			rep.Hostname, _ = os.Hostname()
		}
		if cancelled && len(rep.Results) < v.Cases {
			// Stopped short, whether or not the runner said so.
			rep.Interrupted = true
		}
		if rep.Counts == nil {
			rep.Count()
		}
		sr.report = rep
		v.HasReport = true
		// The report is what the formats show: the view counts what it
		// counts, whatever the progress calls saw.
		v.Counts = zeroCounts()
		for g, n := range rep.Counts {
			v.Counts[string(g)] = n
		}
		v.Done = len(rep.Results)
		switch {
		case rep.Interrupted:
			v.State = sim.ConformanceInterrupted
		case rep.Counts[GradeFail] > 0:
			v.State = sim.ConformanceFailed
		case rep.Counts[GradeError] > 0:
			v.State = sim.ConformanceError
			v.Error = fmt.Sprintf("normsim could not carry out %d of the %d cases; their results say why", rep.Counts[GradeError], v.Cases)
		default:
			v.State = sim.ConformancePassed
		}
	}
	s.log.Info("conformance run ended", "run", v.ID, "template", v.Template, "state", v.State, "done", v.Done, "cases", v.Cases)
	s.publish(sr)
	s.prune()
}

// prune drops the oldest ended runs past KeepRuns.
func (s *Service) prune() {
	ended := 0
	for _, r := range s.runs {
		if r.view.State.Ended() {
			ended++
		}
	}
	for i := 0; ended > s.cfg.KeepRuns && i < len(s.runs); {
		if s.runs[i].view.State.Ended() {
			s.log.Info("conformance run dropped: normsim keeps the last ended runs", "run", s.runs[i].view.ID, "keep", s.cfg.KeepRuns)
			s.runs = slices.Delete(s.runs, i, i+1)
			s.dropped++
			ended--
			continue
		}
		i++
	}
}

// ConformanceDropped counts the ended runs prune dropped.
func (s *Service) ConformanceDropped() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.dropped
}

// publish tells live pages the run moved on. Called with s.mu held.
func (s *Service) publish(sr *serviceRun) {
	bus := s.cfg.Sim.Bus()
	if bus == nil {
		return
	}
	data, _ := json.Marshal(map[string]any{"id": sr.view.ID, "state": sr.view.State, "done": sr.view.Done, "cases": sr.view.Cases})
	bus.Publish(sim.Event{At: s.cfg.Now(), Kind: sim.EventConformanceRun, Data: data})
}

// ConformanceRuns lists the runs kept, newest first.
func (s *Service) ConformanceRuns() []sim.ConformanceRun {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]sim.ConformanceRun, 0, len(s.runs))
	for i := len(s.runs) - 1; i >= 0; i-- {
		out = append(out, copyRun(s.runs[i].view))
	}
	return out
}

// ConformanceRun is one run.
func (s *Service) ConformanceRun(id string) (sim.ConformanceRun, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sr, err := s.find(id)
	if err != nil {
		return sim.ConformanceRun{}, err
	}
	return copyRun(sr.view), nil
}

// CancelConformance stops a running run.
func (s *Service) CancelConformance(id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	sr, err := s.find(id)
	if err != nil {
		return err
	}
	if sr.view.State.Ended() {
		return sim.Errorf(sim.EConflict, "conformance run %s has already ended (%s)", id, sr.view.State)
	}
	sr.cancel()
	return nil
}

// WriteConformanceReport writes an ended run's report.
func (s *Service) WriteConformanceReport(id, format string, w io.Writer) error {
	s.mu.Lock()
	sr, err := s.find(id)
	var rep *Report
	var view sim.ConformanceRun
	if err == nil {
		rep, view = sr.report, sr.view
	}
	s.mu.Unlock()
	if err != nil {
		return err
	}
	switch format {
	case sim.ReportJSON, sim.ReportHTML, sim.ReportJUnit:
	default:
		return sim.Errorf(sim.EInvalid, "format: must be json, html or junit; got %q", format)
	}
	if !view.State.Ended() {
		return sim.Errorf(sim.EConflict, "conformance run %s is still running (%d of %d cases done): its report is written when it ends", id, view.Done, view.Cases)
	}
	if rep == nil {
		return sim.Errorf(sim.ENotFound, "conformance run %s ended without a report: %s", id, view.Error)
	}
	switch format {
	case sim.ReportHTML:
		return rep.WriteHTML(w)
	case sim.ReportJUnit:
		return rep.WriteJUnit(w)
	}
	return rep.WriteJSON(w)
}

// find is the run id; called with s.mu held.
func (s *Service) find(id string) (*serviceRun, error) {
	for _, r := range s.runs {
		if r.view.ID == id {
			return r, nil
		}
	}
	return nil, sim.Errorf(sim.ENotFound, "conformance run %q not found (runs are kept in memory until normsim exits, the last %d that ended)", id, s.cfg.KeepRuns)
}

// Close cancels the runs still running and waits for them to end (each
// stops at its current case and keeps what ended).
func (s *Service) Close() error {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.cancel()
	s.wg.Wait()
	return nil
}

func zeroCounts() map[string]int {
	m := make(map[string]int, len(Grades))
	for _, g := range Grades {
		m[string(g)] = 0
	}
	return m
}

// copyRun is a view the caller may keep: the maps and slices the run goes
// on changing are copied.
func copyRun(v sim.ConformanceRun) sim.ConformanceRun {
	c := v
	c.Counts = maps.Clone(v.Counts)
	c.Params = maps.Clone(v.Params)
	c.Results = slices.Clone(v.Results)
	if c.Results == nil {
		c.Results = []sim.ConformanceResult{}
	}
	if v.EndedAt != nil {
		t := *v.EndedAt
		c.EndedAt = &t
	}
	return c
}
