package web

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/normsim/normsim/sim"
)

// The conformance pages: the runs with a form to start one, and one run's
// progress and report.

type conformancePage struct {
	pageBase
	// Available is false when this normsim has no conformance service.
	Available bool
	Templates []conformanceTemplate
	Runtimes  []string
	Form      conformanceForm
	Runs      []sim.ConformanceRun
	// Dropped counts the ended runs the service no longer keeps.
	Dropped int
	Grades  []string
}

// conformanceTemplate is a template the form offers, with its parameters
// in words for the params field's hint.
type conformanceTemplate struct {
	Name     string
	Strategy sim.Strategy
	Params   string
}

// conformanceForm is the start form, as submitted when it is shown again
// with the refusal.
type conformanceForm struct {
	Template, Params, Case, Parallel, Runtime string
	Err                                       string
	Code                                      string
}

func (s *Server) conformancePage(w http.ResponseWriter, r *http.Request) {
	s.renderConformance(w, r, http.StatusOK, conformanceForm{Parallel: "1"})
}

func (s *Server) renderConformance(w http.ResponseWriter, r *http.Request, status int, f conformanceForm) {
	p := conformancePage{pageBase: s.base(r, "Conformance", "conformance", "conformance", "/conformance"),
		Available: s.cfg.Conformance != nil, Form: f, Grades: sim.ConformanceGrades}
	for _, t := range s.svc.Catalog().List() {
		if !t.Valid || !slices.Contains(sim.Strategies, t.Strategy) {
			continue
		}
		p.Templates = append(p.Templates, conformanceTemplate{Name: t.Name, Strategy: t.Strategy, Params: paramsInWords(t)})
	}
	slices.SortFunc(p.Templates, func(a, b conformanceTemplate) int { return strings.Compare(a.Name, b.Name) })
	for _, rt := range runtimeChoices(s.svc.DefaultRuntime(), s.svc.Runtimes()) {
		// The cases launch, kill and pause the job themselves.
		if rt != sim.RuntimeExternal {
			p.Runtimes = append(p.Runtimes, rt)
		}
	}
	if p.Available {
		p.Runs = s.cfg.Conformance.ConformanceRuns()
		p.Dropped = s.cfg.Conformance.ConformanceDropped()
	}
	s.render(w, status, "conformance", p)
}

// paramsInWords lists a template's parameters for the form's hint:
// "RATE (int, default 50), MODE (enum)".
func paramsInWords(t *sim.Template) string {
	var out []string
	for _, p := range t.Parameters {
		d := p.Type
		if d == "" {
			d = "string"
		}
		if p.Default != nil && !p.Secret {
			d += ", default " + strconv.Quote(*p.Default)
		}
		if p.Required && p.Default == nil {
			d += ", required"
		}
		out = append(out, p.Name+" ("+d+")")
	}
	return strings.Join(out, ", ")
}

// uiConformance starts a run from the conformance page's form.
func (s *Server) uiConformance(w http.ResponseWriter, r *http.Request) {
	pf := r.PostForm
	f := conformanceForm{Template: pf.Get("template"), Params: pf.Get("params"), Case: strings.TrimSpace(pf.Get("case")),
		Parallel: strings.TrimSpace(pf.Get("parallel")), Runtime: pf.Get("runtime")}
	req := sim.ConformanceRequest{Template: f.Template, Case: f.Case, Runtime: f.Runtime}
	err := error(nil)
	if s.cfg.Conformance == nil {
		err = errNoConformance
	}
	if err == nil {
		req.Params, err = parseParamLines(f.Params)
	}
	if err == nil && f.Parallel != "" {
		n, perr := strconv.Atoi(f.Parallel)
		if perr != nil {
			err = sim.Errorf(sim.EInvalid, "parallel: must be a whole number of cases at once; got %q", f.Parallel)
		}
		req.Parallel = n
	}
	if err == nil {
		var run sim.ConformanceRun
		run, err = s.cfg.Conformance.StartConformance(r.Context(), req)
		if err == nil {
			seeOther(w, r, "/conformance/"+url.PathEscape(run.ID))
			return
		}
	}
	s.logFormError("conformance", err)
	f.Err, f.Code = sim.ErrorMessage(err), sim.ErrorCode(err)
	s.renderConformance(w, r, statusOf(f.Code), f)
}

// parseParamLines reads the form's params, one NAME=value a line; blank
// lines and lines starting with # are skipped.
func parseParamLines(text string) (map[string]string, error) {
	var out map[string]string
	for i, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, value, ok := strings.Cut(line, "=")
		name = strings.TrimSpace(name)
		if !ok || name == "" {
			return nil, sim.Errorf(sim.EInvalid, "params line %d: want NAME=value; got %q", i+1, line)
		}
		if out == nil {
			out = map[string]string{}
		}
		out[name] = strings.TrimSpace(value)
	}
	return out, nil
}

type conformanceRunPage struct {
	pageBase
	Run    sim.ConformanceRun
	Grades []string
	// Percent is the progress, 0–100.
	Percent int
}

func (s *Server) conformanceRunPage(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Conformance == nil {
		s.renderServiceError(w, r, errNoConformance, "")
		return
	}
	run, err := s.cfg.Conformance.ConformanceRun(pathParam(r, "id"))
	if err != nil {
		s.renderServiceError(w, r, err, "The conformance page lists the runs this normsim remembers.")
		return
	}
	p := conformanceRunPage{pageBase: s.base(r, "Conformance run "+run.ID, "conformance", "conformance-run", "/conformance/"+url.PathEscape(run.ID)),
		Run: run, Grades: sim.ConformanceGrades}
	p.Conformance = run.ID
	p.Ended = run.State.Ended()
	if run.Cases > 0 {
		p.Percent = run.Done * 100 / run.Cases
	}
	s.renderFramingSelf(w, http.StatusOK, "conformance-run", p)
}

// uiCancelConformance stops a run from its page.
func (s *Server) uiCancelConformance(w http.ResponseWriter, r *http.Request) {
	id := pathParam(r, "id")
	if s.cfg.Conformance == nil {
		s.renderServiceError(w, r, errNoConformance, "")
		return
	}
	if err := s.cfg.Conformance.CancelConformance(id); err != nil && sim.ErrorCode(err) != sim.EConflict {
		// An ended run needs no cancelling: its page shows how it ended.
		s.logFormError("cancel conformance", err)
		s.renderServiceError(w, r, err, "")
		return
	}
	seeOther(w, r, "/conformance/"+url.PathEscape(id))
}

// conformanceStateTone is the colour family of a run's state.
func conformanceStateTone(st sim.ConformanceState) string {
	switch st {
	case sim.ConformancePassed:
		return "ok"
	case sim.ConformanceRunning:
		return "busy"
	case sim.ConformanceFailed:
		return "bad"
	case sim.ConformanceError:
		return "warn"
	}
	return "muted"
}

// gradeTone is the colour family of a case's grade.
func gradeTone(g string) string {
	switch g {
	case "pass":
		return "ok"
	case "tolerated", "error":
		return "warn"
	case "fail":
		return "bad"
	}
	return "muted"
}

// runCounts says a run's grades in short: "3 pass · 1 fail".
func runCounts(run sim.ConformanceRun) string {
	var out []string
	for _, g := range sim.ConformanceGrades {
		if n := run.Counts[g]; n > 0 {
			out = append(out, fmt.Sprintf("%d %s", n, g))
		}
	}
	return strings.Join(out, " · ")
}
