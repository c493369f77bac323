package scenario

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/normsim/normsim/apiclient"
	"github.com/normsim/normsim/sim"
)

// Config configures a Runner.
type Config struct {
	// URL is the simulator's API base URL, e.g. http://127.0.0.1:7788.
	URL string
	// Out receives progress: a line per step as it ends, and the timeline of
	// every migration that did not meet its expectations. nil discards it.
	Out io.Writer
	// Verbose prints every migration's timeline, not only failing ones.
	Verbose bool
	// Now is the clock for timings; default time.Now. Waits for an
	// instance or a migration are the server's (?wait), not polled.
	Now func() time.Time
	// CleanupTimeout bounds removing a run's instances; default 60 s.
	CleanupTimeout time.Duration
	// HTTPClient talks to the API; default a client with a 30 s timeout.
	HTTPClient *http.Client
	// LogTail is how many last log lines of each side a failing step
	// reports; default sim.DefaultLogTail.
	LogTail int
}

// Runner runs scenarios against a simulator, one at a time.
type Runner struct {
	cfg Config
	c   *apiclient.Client
	// d drives the steps. It asks a migrate request once: a refusal is
	// what the step's expectations judge (error: 422), so it is never
	// asked again.
	d apiclient.Driver
}

// NewRunner returns a runner with cfg's defaults filled in.
func NewRunner(cfg Config) *Runner {
	if cfg.Out == nil {
		cfg.Out = io.Discard
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.CleanupTimeout <= 0 {
		cfg.CleanupTimeout = 60 * time.Second
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{Timeout: 30 * time.Second}
	}
	if cfg.LogTail <= 0 {
		cfg.LogTail = sim.DefaultLogTail
	}
	c := apiclient.New(cfg.URL, cfg.HTTPClient)
	c.LogTail = cfg.LogTail
	return &Runner{cfg: cfg, c: c, d: apiclient.Driver{C: c}}
}

// Check compares the scenarios with the simulator: every template they
// launch must be loaded and valid. A problem points at where the template
// is named. The error is for a simulator that does not answer. Over the API
// the params cannot be judged; CheckCatalog, in the simulator's process,
// judges them too.
func (r *Runner) Check(ctx context.Context, scenarios []*Scenario) (Problems, error) {
	list, err := r.c.Templates(ctx)
	if err != nil {
		return nil, fmt.Errorf("list the templates: %w", err)
	}
	ptrs := make([]*sim.Template, len(list))
	for i := range list {
		ptrs[i] = &list[i]
	}
	probs, _ := checkTemplates(scenarios, ptrs)
	return probs, nil
}

// CheckCatalog is every check a run makes before it starts, against the
// catalog it will launch from: each template a scenario launches is loaded
// and valid, each launch step's params (the scenario's, overridden by the
// step's) are ones the launch accepts, and a launch on the process runtime
// (the step's, the scenario's, or else defaultRuntime; "" when not known)
// is of a template whose every service has an x-normsim command. normsim
// ci runs it both for --check and before a real run, so --check never
// passes a file the run rejects.
func CheckCatalog(scenarios []*Scenario, cat sim.Catalog, defaultRuntime string) Problems {
	probs, good := checkTemplates(scenarios, cat.List())
	for _, s := range scenarios {
		templateOf := map[string]string{} // job alias → its template
		for _, st := range s.Steps {
			if st.Migrate != nil {
				if p, ok := checkStrategy(s, st, cat, templateOf[st.Migrate.Job]); !ok {
					probs = append(probs, p)
				}
				continue
			}
			l := st.Launch
			if l == nil {
				continue
			}
			name := cmp.Or(l.Template, s.Template)
			templateOf[l.As] = name
			if !good[name] {
				continue // already a problem where the template is named
			}
			params := maps.Clone(s.Params)
			if params == nil {
				params = map[string]string{}
			}
			maps.Copy(params, l.Params)
			if err := cat.CheckParams(name, params); err != nil {
				probs = append(probs, Problem{File: s.File, Pos: st.Pos, Message: fmt.Sprintf("%s: template %s refuses these params: %v", st.Name, name, err)})
			}
			if cmp.Or(l.Runtime, s.Runtime, defaultRuntime) != sim.RuntimeProcess {
				continue
			}
			if t, err := cat.Get(name); err == nil && len(t.NoProcessCommand) > 0 {
				probs = append(probs, Problem{File: s.File, Pos: st.Pos, Message: fmt.Sprintf(
					"%s: template %s cannot run on the process runtime: service(s) %s have no x-normsim command; add x-normsim: {command: [...]} to each, or run it on docker",
					st.Name, name, strings.Join(t.NoProcessCommand, ", "))})
			}
		}
	}
	return probs
}

// checkStrategy refuses a migrate step that asks for a strategy its job's
// template does not allow and expects anything but the API's refusal (422),
// which is the only way such a step can end.
func checkStrategy(s *Scenario, st Step, cat sim.Catalog, template string) (Problem, bool) {
	m := st.Migrate
	if m.Strategy == "" || template == "" || st.Expect.Error == http.StatusUnprocessableEntity {
		return Problem{}, true
	}
	t, err := cat.Get(template)
	if err != nil || !t.Valid {
		return Problem{}, true // a problem where the template is named
	}
	if err := sim.CheckStrategy(t.Strategy, sim.Strategy(m.Strategy)); err != nil {
		allowed := make([]string, 0, 2)
		for _, a := range sim.AllowedStrategies(t.Strategy) {
			allowed = append(allowed, string(a))
		}
		return Problem{File: s.File, Pos: st.Pos, Message: fmt.Sprintf(
			"%s: template %s declares %s, so the API refuses strategy %s (422) and the step can only fail; use %s, or expect {error: 422} to test the refusal",
			st.Name, template, sim.DeclaredStrategy(t.Strategy), m.Strategy, strings.Join(allowed, " or "))}, false
	}
	return Problem{}, true
}

// checkTemplates finds the scenarios' templates in list; good holds the
// ones that are loaded and valid.
func checkTemplates(scenarios []*Scenario, list []*sim.Template) (probs Problems, good map[string]bool) {
	byName := map[string]*sim.Template{}
	var names []string
	for _, t := range list {
		byName[t.Name] = t
		names = append(names, t.Name)
	}
	slices.Sort(names)
	loaded := "none"
	if len(names) > 0 {
		loaded = strings.Join(names, ", ")
	}
	good = map[string]bool{}
	for _, s := range scenarios {
		tmpls := s.Templates()
		for _, name := range slices.Sorted(maps.Keys(tmpls)) {
			pos := tmpls[name]
			t, ok := byName[name]
			switch {
			case !ok:
				probs = append(probs, Problem{File: s.File, Pos: pos, Message: fmt.Sprintf("template %q is not loaded; loaded: %s (choose the directory with --templates)", name, loaded)})
			case !t.Valid:
				why := "it failed validation"
				if t.Error != nil {
					why = t.Error.Error()
				}
				probs = append(probs, Problem{File: s.File, Pos: pos, Message: fmt.Sprintf("template %q is invalid: %s (normsim validate %s says more)", name, why, t.Path)})
			default:
				good[name] = true
			}
		}
	}
	return probs, good
}

// Run runs the scenarios one after another, each repetition with its own
// instances, removed when it ends. Progress goes to Config.Out. When ctx
// ends the current step stops, the run's instances are removed, and the
// report says it was interrupted.
func (r *Runner) Run(ctx context.Context, scenarios []*Scenario) *Report {
	rep := &Report{StartedAt: r.cfg.Now(), Scenarios: []*ScenarioResult{}}
	for _, s := range scenarios {
		if ctx.Err() != nil {
			break
		}
		rep.Scenarios = append(rep.Scenarios, r.runScenario(ctx, s))
	}
	rep.Interrupted = ctx.Err() != nil
	rep.finish(r.cfg.Now())
	return rep
}

func (r *Runner) runScenario(ctx context.Context, s *Scenario) *ScenarioResult {
	res := &ScenarioResult{Name: s.Name, File: s.File, Line: s.Pos.Line, Template: s.Template, Runtime: s.Runtime,
		Nodes: s.Nodes, Repeat: s.Repeat, StartedAt: r.cfg.Now(), Steps: []*StepResult{}}
	runs := ""
	if s.Repeat > 1 {
		runs = fmt.Sprintf(", %d runs", s.Repeat)
	}
	fmt.Fprintf(r.cfg.Out, "=== %s  (%s%s)\n", s.Name, s.File, runs)
	for run := 1; run <= s.Repeat && (run == 1 || ctx.Err() == nil); run++ {
		r.runOnce(ctx, s, run, res)
	}
	res.Status = StatusPassed
	for _, st := range res.Steps {
		if st.Status != StatusPassed {
			res.Status = StatusFailed
		}
	}
	res.DurationMs = ms(r.cfg.Now().Sub(res.StartedAt))
	word := "PASS"
	if res.Status != StatusPassed {
		word = "FAIL"
	}
	fmt.Fprintf(r.cfg.Out, "--- %s %s  (%.2fs)\n\n", word, s.Name, res.DurationMs/1000)
	return res
}

// runState is what one run of a scenario knows: the current instance of
// each job.
type runState struct {
	jobs map[string]string // alias → current instance ID
}

func (r *Runner) runOnce(ctx context.Context, s *Scenario, run int, res *ScenarioResult) {
	before := map[string]bool{}
	list, listErr := r.c.Instances(ctx)
	for _, in := range list {
		before[in.ID] = true
	}
	rs := &runState{jobs: map[string]string{}}
	broken := ""
	if listErr != nil {
		broken = fmt.Sprintf("the simulator did not answer: %v", listErr)
	}
	for i, st := range s.Steps {
		sr := &StepResult{Run: run, Index: i + 1, Kind: st.Kind(), Name: st.Name, Pos: st.Pos, Expect: st.Expect, StartedAt: r.cfg.Now()}
		res.Steps = append(res.Steps, sr)
		switch {
		case ctx.Err() != nil:
			// First: an interrupt also fails the calls it cuts short,
			// and is what the reader must be told.
			sr.Status, sr.Message = StatusSkipped, "not run: interrupted"
		case broken != "":
			sr.Status, sr.Message = StatusSkipped, "not run: "+broken
		default:
			switch {
			case st.Launch != nil:
				r.launch(ctx, s, st.Launch, rs, sr)
			case st.Wait != nil:
				r.wait(ctx, st.Wait, rs, sr)
			default:
				r.migrate(ctx, st.Migrate, st.Expect, rs, sr)
			}
			if sr.Status == StatusError {
				broken = fmt.Sprintf("step %s could not be carried out", sr.Label(s.Repeat))
			}
		}
		sr.DurationMs = ms(r.cfg.Now().Sub(sr.StartedAt))
		r.printStep(s, sr)
	}
	res.Cleanup = append(res.Cleanup, r.cleanup(ctx, before)...)
}

// printStep writes a step's line, and for a failure where it is and what
// happened.
func (r *Runner) printStep(s *Scenario, sr *StepResult) {
	out := r.cfg.Out
	name := sr.Name
	if rs := []rune(name); len(rs) > 48 {
		name = string(rs[:45]) + "..."
	}
	text := sr.Message
	if sr.Status == StatusPassed {
		text = passNote(sr)
	}
	line := fmt.Sprintf("    %-5s %-5s %-48s %7.2fs  %s", statusWord(sr.Status), sr.Label(s.Repeat), name, sr.DurationMs/1000, text)
	fmt.Fprintln(out, strings.TrimRight(line, " "))
	if sr.Status == StatusFailed || sr.Status == StatusError {
		fmt.Fprintf(out, "                at %s\n", s.Location(sr.Pos))
		if sr.Detail != "" {
			fmt.Fprint(out, indent(sr.Detail, "                "))
		}
	}
	if sr.Migration != nil && (r.cfg.Verbose || sr.Status == StatusFailed || sr.Status == StatusError) {
		fmt.Fprint(out, indent(Summary(sr.Migration), "                "))
		fmt.Fprint(out, indent(sim.TimelineText(sr.Migration), "                "))
		if sr.Status == StatusFailed || sr.Status == StatusError {
			fmt.Fprint(out, indent(LogTails(sr.Migration), "                "))
		}
	}
}

func passNote(sr *StepResult) string {
	switch {
	case sr.Refusal != nil:
		return fmt.Sprintf("refused as expected: %s", sr.Refusal.Error())
	case sr.Migration != nil:
		m := sr.Migration
		note := string(m.State) + inPhase(m)
		if m.Output != nil {
			note += ", seam " + m.Output.Verdict + " (" + m.Output.Detail + ")"
		}
		if sim.AppliedReported(m) {
			note += "; target-applied: " + sim.FormatResult(m.Result)
		}
		if j := m.Judged(); j.Grade == sim.GradePass {
			note += "; judgement pass"
		} else {
			note += "; judgement " + sim.FormatJudgement(j)
		}
		return note
	}
	return sr.note
}

func indent(s, prefix string) string {
	if s == "" {
		return ""
	}
	lines := strings.SplitAfter(s, "\n")
	var b strings.Builder
	for _, l := range lines {
		if l == "" {
			continue
		}
		b.WriteString(prefix)
		b.WriteString(l)
	}
	if !strings.HasSuffix(s, "\n") {
		b.WriteString("\n")
	}
	return b.String()
}

func (sr *StepResult) fail(status, format string, args ...any) {
	sr.Status, sr.Message = status, fmt.Sprintf(format, args...)
}

func (r *Runner) launch(ctx context.Context, s *Scenario, l *Launch, rs *runState, sr *StepResult) {
	req := sim.LaunchRequest{Template: l.Template, Node: l.Node, Runtime: l.Runtime, Params: map[string]string{}}
	if req.Template == "" {
		req.Template = s.Template
	}
	if req.Runtime == "" {
		req.Runtime = s.Runtime
	}
	maps.Copy(req.Params, s.Params)
	maps.Copy(req.Params, l.Params)
	sr.Job = l.As
	var until sim.Until
	switch l.Until {
	case UntilNone:
	case UntilRunning:
		until = sim.UntilRunning
	default:
		until = sim.UntilConnected
	}
	d := r.d
	d.UpWait = l.Timeout
	in, err := d.LaunchUp(ctx, req, until)
	if in == nil {
		sr.fail(StatusError, "launch %s on %s refused: %v", req.Template, req.Node, err)
		return
	}
	rs.jobs[l.As] = in.ID
	sr.Instance = in.ID
	if err != nil {
		r.notUp(ctx, in.ID, err, sr)
	}
	if sr.Status == "" {
		sr.Status = StatusPassed
		sr.note = fmt.Sprintf("%s on %s (%s)", in.ID, in.Node, in.Runtime)
	}
}

func (r *Runner) wait(ctx context.Context, w *Wait, rs *runState, sr *StepResult) {
	if w.Sleep > 0 {
		t := time.NewTimer(w.Sleep)
		defer t.Stop()
		select {
		case <-ctx.Done():
			sr.fail(StatusError, "interrupted")
		case <-t.C:
			sr.Status = StatusPassed
		}
		return
	}
	sr.Job = w.Job
	id := rs.jobs[w.Job]
	sr.Instance = id
	until := sim.UntilRunning
	if w.Connected {
		until = sim.UntilConnected
	}
	d := r.d
	d.UpWait = w.Timeout
	if _, err := d.WaitUp(ctx, id, until); err != nil {
		r.notUp(ctx, id, err, sr)
	}
	if sr.Status == "" {
		sr.Status = StatusPassed
	}
}

// notUp fails a step whose instance did not get where it waited for it
// (running, or connected too; the server answered the moment it did): a
// failed or stopped instance, or the timeout, is a step error with the
// instance's last log lines as detail.
func (r *Runner) notUp(ctx context.Context, id string, err error, sr *StepResult) {
	var ended *apiclient.EndedError
	var notUp *apiclient.NotUpError
	switch {
	case errors.As(err, &ended):
		sr.fail(StatusError, "instance %s is %s%s", id, ended.Instance.State, colon(ended.Instance.Error))
	case ctx.Err() != nil:
		sr.fail(StatusError, "interrupted while waiting for instance %s", id)
		return
	case errors.As(err, &notUp) && notUp.Instance != nil:
		last, what := notUp.Instance, "running"
		if notUp.Until == sim.UntilConnected {
			what = "running and connected to its job socket"
		}
		sr.fail(StatusError, "instance %s is not %s after %v: state %s, connected %v%s", id, what, notUp.Wait, last.State, last.Connected, colon(last.Error))
	default:
		sr.fail(StatusError, "instance %s: %v", id, err)
		return
	}
	sr.Detail = r.logTail(ctx, id)
}

// logTail is the last lines an instance logged, for a failure's detail.
func (r *Runner) logTail(ctx context.Context, id string) string {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	p, err := r.c.LogPage(ctx, id, r.cfg.LogTail)
	if err != nil {
		return fmt.Sprintf("could not read the logs of %s: %v\n", id, err)
	}
	return sim.FormatLogTails([]sim.LogTail{{Side: "instance", Instance: id, Lines: p.Lines, Lost: p.Lost}})
}

func (r *Runner) migrate(ctx context.Context, m *Migrate, e *Expect, rs *runState, sr *StepResult) {
	sr.Job = m.Job
	id := rs.jobs[m.Job]
	sr.Instance = id
	body := m.Request()
	sr.Request = &body
	var o Outcome
	mig, err := r.d.Migrate(ctx, id, body)
	var apiErr *APIError
	switch {
	case errors.As(err, &apiErr):
		o.Refusal = apiErr
		sr.Refusal = apiErr
	case err != nil:
		sr.fail(StatusError, "migrate %s: %v", id, err)
		return
	default:
		final, done := r.waitMigration(ctx, mig, m.WaitTimeout(mig.Timeouts), sr)
		sr.Migration = final
		if !done {
			return
		}
		if final.Judgement == nil {
			// A sim that does not send it yet: the report carries the
			// judgement the checks used.
			j := final.Judged()
			final.Judgement = &j
		}
		o.Migration = final
		if final.State == sim.MigrationCompleted && final.Target.Instance != "" {
			rs.jobs[m.Job] = final.Target.Instance
			sr.Instance = final.Target.Instance
		}
	}
	sr.Checks = Judge(e, o)
	if Failed(sr.Checks) {
		sr.fail(StatusFailed, "%s", FailureMessage(sr.Checks))
		r.addLogTails(ctx, sr.Migration)
		return
	}
	sr.Status = StatusPassed
}

// addLogTails gives a failing step's migration the last lines of each side
// when the record carries none (the server adds them only to a migration
// that failed or aborted; a step fails on other expectations too).
func (r *Runner) addLogTails(ctx context.Context, m *sim.Migration) {
	if m == nil || (m.Logs != nil && len(m.Logs.Tails) > 0) {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if m.Logs == nil {
		m.Logs = &sim.MigrationLogs{Lines: []sim.MigrationLogLine{}}
	}
	for _, side := range []struct{ name, id string }{{"source", m.Source.Instance}, {"target", m.Target.Instance}} {
		if side.id == "" {
			continue
		}
		p, err := r.c.LogPage(ctx, side.id, r.cfg.LogTail)
		if err != nil {
			continue
		}
		m.Logs.Tails = append(m.Logs.Tails, sim.LogTail{Side: side.name, Instance: side.id, Lines: p.Lines, Lost: p.Lost})
	}
}

// waitMigration waits until the migration ends (the server answers when
// it does); done is false (and the step an error) when it did not end in
// time.
func (r *Runner) waitMigration(ctx context.Context, m *sim.Migration, timeout time.Duration, sr *StepResult) (*sim.Migration, bool) {
	d := r.d
	d.EndWait = timeout
	last, err := d.WaitEnd(ctx, m, nil)
	var unended *apiclient.UnendedError
	switch {
	case err == nil:
		return last, true
	case ctx.Err() != nil:
		sr.fail(StatusError, "interrupted while migration %s was %s in phase %s", m.ID, last.State, last.Phase)
	case errors.As(err, &unended):
		sr.fail(StatusError, "migration %s is still %s in phase %s after %v (set the step's timeout to wait longer)", m.ID, last.State, last.Phase, timeout)
	default:
		sr.fail(StatusError, "migration %s: %v", m.ID, err)
	}
	return last, false
}

// cleanup removes every instance created since before: it waits (bounded)
// for the run's migrations to end, then stops and removes the instances.
// What it could not do is returned, not fatal: the next run starts anyway.
func (r *Runner) cleanup(ctx context.Context, before map[string]bool) []string {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.cfg.CleanupTimeout)
	defer cancel()
	var problems []string
	running, err := r.c.Migrations(ctx, sim.MigrationFilter{State: sim.MigrationRunning})
	if err != nil {
		return []string{fmt.Sprintf("list running migrations: %v", err)}
	}
	left := 0
	for _, m := range running {
		if before[m.Source.Instance] {
			continue
		}
		// The server answers each the moment it ends.
		if _, err := r.c.WaitMigrationSummary(ctx, m.ID); err != nil {
			left++
		}
	}
	if left > 0 {
		problems = append(problems, fmt.Sprintf("%d migration(s) still running after %v", left, r.cfg.CleanupTimeout))
	}
	list, err := r.c.Instances(ctx)
	if err != nil {
		return append(problems, fmt.Sprintf("list instances: %v", err))
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, in := range list {
		if before[in.ID] {
			continue
		}
		wg.Add(1)
		go func(in sim.Instance) {
			defer wg.Done()
			// The migrations waited for above have let go of their
			// instances; one that started since (a migrate sent as the
			// run was interrupted) is waited for by Remove, which then
			// removes the instance once more.
			if err := r.d.Remove(ctx, in); err != nil {
				mu.Lock()
				problems = append(problems, fmt.Sprintf("remove instance %s: %v", in.ID, err))
				mu.Unlock()
			}
		}(in)
	}
	wg.Wait()
	slices.Sort(problems)
	for _, p := range problems {
		fmt.Fprintf(r.cfg.Out, "    cleanup: %s\n", p)
	}
	return problems
}
