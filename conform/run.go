package conform

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/normsim/normsim/apiclient"
	"github.com/normsim/normsim/sim"
)

// Config configures a Runner.
type Config struct {
	// URL is the simulator's API base URL, e.g. http://127.0.0.1:7788.
	URL      string
	Template string
	Params   map[string]string
	// Runtime is the runtime the job is launched on; "" is the sim's
	// default.
	Runtime string
	// Timeouts are the migrations' per-phase timeouts, over Timeouts.
	Timeouts sim.Timeouts
	// Parallel is how many cases run at once; default 1.
	Parallel int
	// Out receives a progress line per case as it ends; nil discards it.
	Out        io.Writer
	HTTPClient *http.Client
	// Now is the clock of the report's timings; default time.Now.
	Now func() time.Time
}

// Runner runs conformance cases against a simulator, over its API: every
// case launches the template afresh, so cases are independent and may run
// side by side.
type Runner struct {
	cfg      Config
	c        *apiclient.Client
	timeouts sim.Timeouts
	// d drives each case's job: an instance is up, and a source that lost
	// its socket connects again, within targetStart; a migrate refused
	// NOT_CONNECTED is asked again once it has (apiclient.DefaultRetry).
	d apiclient.Driver
}

// New returns a runner with cfg's defaults filled in.
func New(cfg Config) *Runner {
	if cfg.Out == nil {
		cfg.Out = io.Discard
	}
	if cfg.Parallel < 1 {
		cfg.Parallel = 1
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{Timeout: 30 * time.Second}
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	r := &Runner{cfg: cfg, c: apiclient.New(cfg.URL, cfg.HTTPClient), timeouts: cfg.Timeouts.Over(Timeouts).WithDefaults()}
	up := r.timeouts.TargetStart.D()
	r.d = apiclient.Driver{C: r.c, UpWait: up, Retry: apiclient.Retry{Asks: apiclient.DefaultRetry.Asks, Within: up}}
	return r
}

// Timeouts are the per-phase timeouts the runner's migrations use.
func (r *Runner) Timeouts() sim.Timeouts { return r.timeouts }

// Template fetches the template the runner conforms, or a clear error
// when it is not loaded or not valid.
func (r *Runner) Template(ctx context.Context) (*sim.Template, error) {
	list, err := r.c.Templates(ctx)
	if err != nil {
		return nil, err
	}
	var names []string
	for i := range list {
		t := &list[i]
		if t.Name != r.cfg.Template {
			names = append(names, t.Name)
			continue
		}
		if !t.Valid {
			msg := "it is not valid"
			if t.Error != nil {
				msg = t.Error.Message
			}
			return nil, sim.Errorf(sim.EUnprocessable, "template %q: %s", t.Name, msg)
		}
		return t, nil
	}
	return nil, sim.Errorf(sim.ENotFound, "template %q is not loaded (loaded: %v); --templates DIR adds a directory of templates", r.cfg.Template, names)
}

// Cases is the matrix for the template's declared strategy.
func (r *Runner) Cases(ctx context.Context) ([]Case, error) {
	t, err := r.Template(ctx)
	if err != nil {
		return nil, err
	}
	return Matrix(sim.DeclaredStrategy(t.Strategy), r.timeouts), nil
}

// Run runs the cases, Parallel at a time, and returns the report with the
// results in the cases' order. each (when not nil) is called as each case
// ends, one call at a time. When ctx ends, the cases not started are left
// out and the report says it was interrupted.
func (r *Runner) Run(ctx context.Context, cases []Case, each func(*Result)) *Report {
	rep := &Report{Template: r.cfg.Template, Runtime: r.cfg.Runtime, Params: r.cfg.Params, Parallel: r.cfg.Parallel,
		StartedAt: r.cfg.Now()}
	if len(cases) > 0 {
		rep.Strategy = cases[0].Strategy
	}
	results := make([]*Result, len(cases))
	var eachMu sync.Mutex
	inParallel(ctx, r.cfg.Parallel, len(cases), func(i int) {
		res := r.RunCase(ctx, cases[i])
		results[i] = res
		eachMu.Lock()
		defer eachMu.Unlock()
		r.progress(res)
		if each != nil {
			each(res)
		}
	})
	for _, res := range results {
		if res != nil {
			rep.Results = append(rep.Results, res)
		}
	}
	rep.Interrupted = ctx.Err() != nil
	rep.DurationMs = ms(r.cfg.Now().Sub(rep.StartedAt))
	rep.Count()
	return rep
}

// inParallel calls do(i) for i from 0 to n-1, at most parallel at a
// time, in order of i; once ctx ends no further i is started. It returns
// when every call started has returned.
func inParallel(ctx context.Context, parallel, n int, do func(i int)) {
	var wg sync.WaitGroup
	next := make(chan int)
	for range min(max(parallel, 1), max(n, 1)) {
		wg.Go(func() {
			for i := range next {
				do(i)
			}
		})
	}
feed:
	for i := range n {
		select {
		case next <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
}

func (r *Runner) progress(res *Result) {
	fmt.Fprintf(r.cfg.Out, "%-9s %-6s %s: %s (%.1fs)\n", res.Grade, res.ID, res.Name, res.Why, res.DurationMs/1000)
}

// RunCase runs one case and judges it. Whatever happens, the instances
// the case started are stopped before it returns.
func (r *Runner) RunCase(ctx context.Context, c Case) *Result {
	res := &Result{Case: c, StartedAt: r.cfg.Now()}
	cr := &caseRun{r: r, res: res, seen: map[string]bool{}}
	defer func() { res.DurationMs = ms(r.cfg.Now().Sub(res.StartedAt)) }()
	ev, err := cr.run(ctx)
	// Cleanup and the logs get their own time: a case cut short by ctx
	// must still remove what it started.
	done, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.timeouts.StopGrace.D()+30*time.Second)
	defer cancel()
	if cerr := cr.cleanup(done); cerr != nil && err == nil {
		err = cerr
	}
	cr.collectLogs(done)
	if err != nil {
		res.Grade, res.Rule, res.Why = GradeError, "normsim carries the case out", err.Error()
		if ctx.Err() != nil {
			res.Why = "interrupted: " + res.Why
		}
		return res
	}
	res.Grade, res.Rule, res.Why = judge(c, ev)
	return res
}

// caseRun is one case on its way.
type caseRun struct {
	r     *Runner
	res   *Result
	jobID string
	// seen are the instances the case started (the launch, each move's
	// target): whose logs it keeps.
	seen  map[string]bool
	order []string
}

func (cr *caseRun) saw(id string) {
	if id != "" && !cr.seen[id] {
		cr.seen[id] = true
		cr.order = append(cr.order, id)
	}
}

// evidence is what the judge decides from.
type evidence struct {
	moves []*sim.Migration
	// sendsOutput says the job sent output before the first move; the
	// seam and producing are only judged when it did.
	sendsOutput bool
	// running are the job's instances left running after the moves.
	running []sim.Instance
	// connected: the one instance left running is connected (a job that
	// speaks the socket).
	connected bool
	producing *bool
	// reconnected: the survivor's socket closed during the moves and it
	// is connected again.
	reconnected bool
	followUp    *sim.Migration
	// producingAfter says whether the follow-up's target produces; nil
	// without a completed follow-up or output.
	producingAfter *bool
}

func (cr *caseRun) run(ctx context.Context) (*evidence, error) {
	c, r := cr.res.Case, cr.r
	nodes, err := r.nodes(ctx)
	if err != nil {
		return nil, err
	}
	in, err := cr.launch(ctx, nodes[0], c.Strategy)
	if err != nil {
		return nil, err
	}
	ev := &evidence{}
	if ev.sendsOutput, err = cr.producing(ctx, in.ID, 3*time.Second); err != nil {
		return nil, err
	}

	cur, at := in.ID, 0
	for i, mv := range c.Moves {
		to := nodes[(at+1)%len(nodes)]
		m, err := cr.migrate(ctx, cur, to, mv.Faults)
		if err != nil {
			return nil, fmt.Errorf("move %d of %d: %w", i+1, len(c.Moves), err)
		}
		ev.moves = append(ev.moves, m)
		if m.State != sim.MigrationCompleted {
			break
		}
		cur, at = m.Target.Instance, at+1
		if i < len(c.Moves)-1 {
			// The next move starts from a target that is up, as an
			// operator's next move would.
			if _, err := cr.waitUp(ctx, cur, c.Strategy); err != nil {
				return nil, fmt.Errorf("after move %d: %w", i+1, err)
			}
			if ev.sendsOutput {
				if _, err := cr.producing(ctx, cur, 2*time.Second); err != nil {
					return nil, err
				}
			}
		}
	}

	last := ev.moves[len(ev.moves)-1]
	if err := cr.observe(ctx, ev, last); err != nil {
		return nil, err
	}
	if cr.wantsFollowUp(ev, last) {
		sv := ev.running[0]
		to := nodes[0]
		if sv.Node == nodes[0] {
			to = nodes[1]
		}
		m, err := cr.migrate(ctx, sv.ID, to, nil)
		if err != nil {
			return nil, fmt.Errorf("the follow-up handover: %w", err)
		}
		ev.followUp = m
		if m.State == sim.MigrationCompleted && ev.sendsOutput {
			p, err := cr.producing(ctx, m.Target.Instance, 2*time.Second)
			if err != nil {
				return nil, err
			}
			ev.producingAfter = &p
		}
	}
	cr.res.Observed = observed(ev)
	return ev, nil
}

// wantsFollowUp says whether the case ends with a clean handover: after a
// move that rolled back, from the one instance left running, when it
// speaks the socket. Past the point of no return nothing rolled back, so
// there is nothing to prove by moving again.
func (cr *caseRun) wantsFollowUp(ev *evidence, last *sim.Migration) bool {
	return cr.res.Strategy == sim.Handover && last.State != sim.MigrationCompleted && last.State != sim.MigrationRefused &&
		!pastNoReturn(last) && len(ev.running) == 1 && ev.connected
}

// launch places the case's job on node and waits until it is up: running
// and, for a handover, connected to its job socket.
func (cr *caseRun) launch(ctx context.Context, node string, strategy sim.Strategy) (*sim.Instance, error) {
	r := cr.r
	in, err := r.d.LaunchUp(ctx, sim.LaunchRequest{Template: r.cfg.Template, Node: node, Params: r.cfg.Params, Runtime: r.cfg.Runtime}, upUntil(strategy))
	if in == nil {
		return nil, fmt.Errorf("launch %s on %s: %w", r.cfg.Template, node, err)
	}
	cr.jobID = in.JobID
	cr.saw(in.ID)
	if err != nil {
		return nil, cr.notUp(ctx, in.ID, err)
	}
	return in, nil
}

// migrate runs one migration to its end. A source whose job is not
// connected at that moment (a job whose socket comes and goes; normsim
// learns of a lost socket a moment after a migration that lost it ended,
// so an instance listed as connected may not be by the time it is asked
// to move) is given targetStart to connect again, and asked again
// (apiclient.Retry): one that does not is a *notConnectedError.
func (cr *caseRun) migrate(ctx context.Context, from, to string, faults []sim.Fault) (*sim.Migration, error) {
	r := cr.r
	m, err := r.d.Migrate(ctx, from, sim.MigrateRequest{To: to, Strategy: string(cr.res.Strategy), Runtime: r.cfg.Runtime,
		Timeouts: r.timeouts, Faults: faults})
	var retried *apiclient.RetriedError
	if errors.As(err, &retried) && retried.Why != nil && ctx.Err() == nil {
		return nil, cr.notUp(ctx, from, retried.Why)
	}
	if err != nil {
		return nil, err
	}
	cr.saw(m.Target.Instance)
	// The driver waits as long as the migration's timeouts allow, and
	// 30 s more.
	id := m.ID
	m, err = r.d.WaitEnd(ctx, m, nil)
	if err != nil {
		return nil, &noEndError{id: id, err: err}
	}
	cr.saw(m.Target.Instance)
	cr.res.Migrations = append(cr.res.Migrations, m)
	return m, nil
}

// observe settles what the moves left behind: the instances still
// running, whether the survivor is connected again and producing.
func (cr *caseRun) observe(ctx context.Context, ev *evidence, last *sim.Migration) error {
	r := cr.r
	// A rolled-back source reconnects in its own time, and a stopped one
	// is on its way out: look until the job settles, or give up and judge
	// what is there.
	deadline := time.Now().Add(r.timeouts.StopGrace.D() + 2*time.Second)
	// What an earlier move observed says nothing of this one.
	ev.producing, ev.reconnected = nil, false
	for {
		ins, err := cr.instances(ctx)
		if err != nil {
			return err
		}
		ev.running = ev.running[:0]
		settled := true
		for _, in := range ins {
			switch in.State {
			case sim.InstanceRunning:
				ev.running = append(ev.running, in)
			case sim.InstanceCreated, sim.InstanceStarting, sim.InstanceStopping:
				settled = false
			}
		}
		ev.connected = len(ev.running) == 1 && ev.running[0].Connected
		if cr.res.Strategy == sim.Handover && len(ev.running) == 1 && !ev.connected {
			settled = false
		}
		if settled || time.Now().After(deadline) {
			break
		}
		if err := sleep(ctx, 50*time.Millisecond); err != nil {
			return err
		}
	}
	if len(ev.running) == 1 {
		sv := ev.running[0]
		closed := false
		for _, m := range ev.moves {
			side := sideOf(m, sv.ID)
			for _, e := range m.Events {
				if e.Side == side && e.Kind == sim.TimelineSocketClosed {
					closed = true
				}
			}
		}
		ev.reconnected = closed && ev.connected
		if ev.sendsOutput {
			p, err := cr.producing(ctx, sv.ID, 2*time.Second)
			if err != nil {
				return err
			}
			ev.producing = &p
		}
	}
	return nil
}

// sideOf is the side an instance played in a migration, "" for none.
func sideOf(m *sim.Migration, id string) string {
	switch id {
	case m.Source.Instance:
		return sideSource
	case m.Target.Instance:
		return sideTarget
	}
	return ""
}

// producing waits up to d for the instance to send output from now on:
// JSON packets it sent, or, when it is the job's one instance still
// running, the job's media (a receiver tells media senders apart only by
// address, so the job's media is that instance's only then).
//
// A run cancelled meanwhile is an error, never "not producing": a case
// that was cut short proves nothing against the job.
func (cr *caseRun) producing(ctx context.Context, id string, d time.Duration) (bool, error) {
	since := time.Now()
	deadline := since.Add(d)
	alone := false
	if ins, err := cr.instances(ctx); err == nil {
		running := 0
		for _, in := range ins {
			if in.State == sim.InstanceRunning || in.State == sim.InstanceStopping {
				running++
				alone = in.ID == id
			}
		}
		alone = alone && running == 1
	}
	for {
		sum, err := cr.r.c.Output(ctx, id, since)
		if err == nil && (sum.Packets > 0 || alone && sum.JobMediaDatagrams > 0) {
			return true, nil
		}
		if time.Now().After(deadline) {
			return false, nil
		}
		if err := sleep(ctx, 50*time.Millisecond); err != nil {
			return false, fmt.Errorf("while checking that %s produces: %w", id, err)
		}
	}
}

// upUntil is what a case's instance must be before it is moved: running
// and, for a handover, connected to its job socket (a job that speaks the
// socket; an overlap or stopThenStart job need not).
func upUntil(strategy sim.Strategy) sim.Until {
	if strategy == sim.Handover {
		return sim.UntilConnected
	}
	return sim.UntilRunning
}

// waitUp waits for an instance to be up (upUntil) within targetStart; the
// server answers the moment it is.
func (cr *caseRun) waitUp(ctx context.Context, id string, strategy sim.Strategy) (*sim.Instance, error) {
	in, err := cr.r.d.WaitUp(ctx, id, upUntil(strategy))
	if err != nil {
		return nil, cr.notUp(ctx, id, err)
	}
	return in, nil
}

// notUp says why an instance is not up as the report does: one that ended
// with its last log line, one running but not connected in time as a
// *notConnectedError (something of the job, where other errors say normsim
// could not carry a step out).
func (cr *caseRun) notUp(ctx context.Context, id string, err error) error {
	r := cr.r
	limit := r.timeouts.TargetStart.D()
	var ended *apiclient.EndedError
	var notUp *apiclient.NotUpError
	switch {
	case ctx.Err() != nil:
		return ctx.Err()
	case errors.As(err, &ended):
		// A job that dies at start (an interpreter missing, a bad
		// parameter) says why in its log, not in its exit code.
		if page, lerr := r.c.LogPage(ctx, id, 1); lerr == nil && len(page.Lines) > 0 {
			return fmt.Errorf("%w; its last log line: %s", err, sim.TerminalSafe(sim.FormatLogLine(page.Lines[len(page.Lines)-1], false)))
		}
		return err
	case errors.As(err, &notUp) && notUp.Instance != nil:
		if in := notUp.Instance; in.State == sim.InstanceRunning {
			return &notConnectedError{fmt.Sprintf("instance %s on %s did not connect to its job socket within targetStart (%s)", id, in.Node, limit)}
		}
		return fmt.Errorf("instance %s on %s did not run within targetStart (%s)", id, notUp.Instance.Node, limit)
	}
	return err
}

// notConnectedError: a running instance of a job that speaks the socket
// did not connect in time. It says something of the job, where other
// errors say normsim could not carry a step out.
type notConnectedError struct{ msg string }

func (e *notConnectedError) Error() string { return e.msg }

// noEndError: a migration did not end within its timeouts and a margin.
type noEndError struct {
	id  string
	err error
}

func (e *noEndError) Error() string { return fmt.Sprintf("migration %s did not end: %v", e.id, e.err) }
func (e *noEndError) Unwrap() error { return e.err }

// instances are the job's instances the manager knows.
func (cr *caseRun) instances(ctx context.Context) ([]sim.Instance, error) {
	all, err := cr.r.c.Instances(ctx)
	if err != nil {
		return nil, err
	}
	var out []sim.Instance
	for _, in := range all {
		if in.JobID == cr.jobID {
			out = append(out, in)
			cr.saw(in.ID)
		}
	}
	return out, nil
}

// cleanup removes every instance of the case's job: those that run are
// stopped, those that ended (a migration's stopped source) lose their record.
func (cr *caseRun) cleanup(ctx context.Context) error {
	if cr.jobID == "" {
		return nil
	}
	ins, err := cr.instances(ctx)
	if err != nil {
		return fmt.Errorf("cleanup: %w", err)
	}
	var errs []error
	for _, in := range ins {
		// A migration that did not end holds its instances: Remove waits
		// for its end, then removes them.
		if err := cr.r.d.Remove(ctx, in); err != nil {
			errs = append(errs, fmt.Errorf("cleanup: stop %s: %w", in.ID, err))
		}
	}
	return errors.Join(errs...)
}

// collectLogs keeps the lines every instance of the case printed, in
// time order, the last MaxCaseLogLines.
func (cr *caseRun) collectLogs(ctx context.Context) {
	var lines []sim.LogLine
	for _, id := range cr.order {
		p, err := cr.r.c.LogPage(ctx, id, MaxCaseLogLines)
		if err != nil {
			lines = append(lines, sim.LogLine{Instance: id, Service: "normsim", Stream: "stderr", At: time.Now(),
				Text: "normsim could not read this instance's logs: " + err.Error()})
			continue
		}
		lines = append(lines, p.Lines...)
		if p.Lost.Trimmed > 0 {
			cr.res.LogsOmitted += int(p.Lost.Trimmed)
		}
	}
	slices.SortStableFunc(lines, func(a, b sim.LogLine) int { return a.At.Compare(b.At) })
	if n := len(lines) - MaxCaseLogLines; n > 0 {
		cr.res.LogsOmitted += n
		lines = lines[n:]
	}
	cr.res.Logs = lines
}

// nodes are the first two nodes of the sim: the case moves between them.
func (r *Runner) nodes(ctx context.Context) ([]string, error) {
	nodes, err := r.c.Nodes(ctx)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, n := range nodes {
		names = append(names, n.Name)
	}
	if len(names) < 2 {
		return nil, fmt.Errorf("the sim has %d node(s); a migration needs two", len(names))
	}
	return names[:2], nil
}

// observed is the evidence as the report shows it.
func observed(ev *evidence) Observed {
	o := Observed{Producing: ev.producing, Reconnects: 0, Running: []string{}}
	for _, m := range ev.moves {
		o.States = append(o.States, endOf(m))
	}
	last := ev.moves[len(ev.moves)-1]
	if last.Output != nil {
		o.Seam = last.Output.Verdict
	}
	if sim.AppliedReported(last) {
		r := last.Result
		o.Result = &r
	}
	if last.State.Ended() {
		j := last.Judged()
		o.Judgement, o.AtFault = j.Grade, j.AtFault
	}
	o.PastPointOfNoReturn = pastNoReturn(last)
	for _, m := range ev.moves {
		o.Fired = append(o.Fired, faultsFired(m)...)
	}
	for _, in := range ev.running {
		o.Running = append(o.Running, in.ID+" on "+in.Node)
	}
	if ev.reconnected {
		o.Reconnects = 1
	}
	if ev.followUp != nil {
		o.FollowUp = endOf(ev.followUp)
		if ev.followUp.Output != nil {
			o.FollowUp += ", seam " + ev.followUp.Output.Verdict
		}
	}
	return o
}

// endOf is how a migration ended, in words: "completed", "aborted in
// target-ready: …".
func endOf(m *sim.Migration) string {
	if m.State == sim.MigrationCompleted {
		return string(m.State)
	}
	s := fmt.Sprintf("%s in %s", m.State, m.Phase)
	if m.Reason != "" {
		s += ": " + m.Reason
	}
	return s
}

// pastNoReturn says whether a migration passed the point of no return.
func pastNoReturn(m *sim.Migration) bool {
	return slices.ContainsFunc(m.Events, func(e sim.MigrationEvent) bool { return e.Kind == sim.TimelinePointOfNoReturn })
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
