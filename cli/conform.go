package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/normsim/normsim/app"
	"github.com/normsim/normsim/app/withdocker"
	"github.com/normsim/normsim/app/withsqlite"
	"github.com/normsim/normsim/conform"
	"github.com/normsim/normsim/sim"
)

// Exit codes of normsim conform (docs/conform.md).
const (
	conformExitFailed = 1 // a case failed or could not be run, or the sim did not start
	conformExitBroken = 2 // the template or the flags are wrong: nothing ran
)

// conformFlags are normsim conform's command line.
type conformFlags struct {
	runtime, db, pattern, logLevel string
	rerun                          string
	jsonPath, junitPath, htmlPath  string
	templates, params, timeouts    []string
	parallel                       int
	list                           bool
	chaos                          bool
	runs, only                     int
	seed                           uint64
}

func newConformCmd(env Env) *cobra.Command {
	var fl conformFlags
	cmd := &cobra.Command{
		Use:   "conform TEMPLATE",
		Short: "Grade a job against the contract: every fault at every handover step, one report",
		Long: `Run a template's job through a matrix of migration cases, like the Autobahn
suite does for WebSocket servers, and grade each case: pass (the job did what
the contract requires), tolerated (allowed but costly: a gap where none was
needed, a reconnect it should not have needed), fail (it broke the contract:
stayed silent, stopped producing after a rollback, mis-reported its
position, crashed), n/a (the case does not apply) or error (normsim could not
carry it out).

The matrix follows the strategy the template declares. For handover: a plain
handover, a chain a→b→a→b, the refusal path, and every fault the engine has
(kill, stop, pause and drop-socket of the source and of the target, a worker
abort, a frame held past its phase's timeout, duplicated, corrupted, the
target failing to start) at every handover step (get-state, target placed,
initial-state, target-ready, source-stopped-output, target-applied). After a
rollback the job must still produce and hand over cleanly. --list prints the
matrix; docs/conform.md explains every rule.

conform starts its own simulator (free ports, an in-memory store), launches
the job afresh for every case, and runs --parallel cases at once. The
migrations use short timeouts (state 2s, targetStart 15s, targetReady 3s,
stop 2s, apply 2s, stopGrace 3s) so a case that waits out a timeout costs
seconds; --timeouts changes them.

Exit status: 0 no case failed; 1 a case failed or could not be run (or a
chaos run broke an invariant); 2 the template or the flags are wrong, and
nothing ran.`,
		Example: `  normsim conform counter --runtime process --html report.html
  normsim conform counter --list
  normsim conform counter --case 4.* --parallel 4 --junit conform.xml --json conform.json
  normsim conform counter --case 1.2,4.*
  normsim conform counter --rerun-failed conform.json
  normsim conform my-product --templates ./templates --param RATE=100 --runtime docker`,
		Args: exactArgs(1, "TEMPLATE"),
		RunE: func(cmd *cobra.Command, args []string) error { return runConform(cmd, env, args[0], &fl) },
	}
	f := cmd.Flags()
	f.StringVar(&fl.runtime, "runtime", "auto", "runtime the job runs on: auto (docker when an engine answers, else process), process or docker")
	f.StringArrayVar(&fl.templates, "templates", nil, "directory of product templates (repeatable; default ./templates)")
	f.StringArrayVar(&fl.params, "param", nil, "template parameter KEY=VALUE (repeatable; --params is the same flag)")
	f.StringArrayVar(&fl.params, "params", nil, "same as --param")
	f.StringArrayVar(&fl.timeouts, "timeouts", nil, "per-phase migration timeouts PHASE=DURATION[,…] ("+strings.Join(sim.TimeoutNames(), ", ")+"), over conform's short ones")
	f.IntVar(&fl.parallel, "parallel", 2, "cases run at once")
	f.StringVar(&fl.pattern, "case", "", "run only the cases whose ID matches this glob (\"4.*\", \"1.2\") or whose name contains it (\"kill\"); a comma-separated list runs each (\"1.2,4.*\")")
	f.StringVar(&fl.rerun, "rerun-failed", "", "run only the cases that failed or could not be run in the JSON report `FILE` of an earlier run (--json)")
	f.BoolVar(&fl.list, "list", false, "print the matrix of cases and exit; nothing runs")
	f.BoolVar(&fl.chaos, "chaos", false, "instead of the matrix, make --runs runs of random fault schedules drawn from --seed, each checked against the invariants (docs/conform.md)")
	f.IntVar(&fl.runs, "runs", 50, "chaos runs to make")
	f.Uint64Var(&fl.seed, "seed", 0, "seed the chaos schedules are drawn from (default: drawn from the clock, and printed)")
	f.IntVar(&fl.only, "run", -1, "replay only this chaos run of --seed (as a broken run's replay line says)")
	f.StringVar(&fl.htmlPath, "html", "", "write a self-contained HTML report to `FILE`")
	f.StringVar(&fl.jsonPath, "json", "", "write a JSON report with every case's timelines and logs to `FILE`")
	f.StringVar(&fl.junitPath, "junit", "", "write a JUnit XML report, one testcase per case, to `FILE`")
	f.StringVar(&fl.db, "db", app.Memory, "SQLite store path; the default keeps nothing")
	f.StringVar(&fl.logLevel, "log-level", "error", "level of the simulator's own logs on stderr: debug, info, warn or error")
	return cmd
}

func runConform(cmd *cobra.Command, env Env, template string, fl *conformFlags) error {
	out := cmd.OutOrStdout()
	if fl.parallel < 1 {
		return usageErr("--parallel: want at least 1; got %d", fl.parallel)
	}
	switch fl.runtime {
	case "auto", sim.RuntimeProcess, sim.RuntimeDocker:
	case sim.RuntimeExternal:
		return usageErr("--runtime: external waits for jobs you start yourself, but conform launches the job afresh for every case and every move's target; use process or docker (docs/conform.md)")
	default:
		return usageErr("--runtime: must be auto, process or docker; got %q", fl.runtime)
	}
	params, err := paramValues(fl.params)
	if err != nil {
		return err
	}
	var timeouts sim.Timeouts
	if err := parseTimeouts("--timeouts", fl.timeouts, &timeouts); err != nil {
		return err
	}
	for _, d := range fl.templates {
		if err := checkTemplatesDir(d); err != nil {
			return err
		}
	}
	opts := conformOptions(fl.runtime)
	opts.Templates = templateDirs(fl.templates, nil)
	opts.DefaultTemplates = env.Templates
	opts.DB = fl.db
	opts.Version = Version
	log, err := newLogger(env.Stderr, "text", fl.logLevel)
	if err != nil {
		return err
	}
	opts.Logger = log

	// The template is checked, and the matrix drawn, before anything
	// starts: a wrong name or a bad param is exit 2 with nothing run.
	cat, cleanup, err := app.LoadCatalog(cmd.Context(), opts)
	if cmd.Context().Err() != nil {
		return &ExitError{Code: conformExitFailed, Err: errors.New("conform: interrupted")}
	}
	if err != nil {
		return usageErr("conform: %v", err)
	}
	strategy, err := conformStrategy(cat, template, params)
	cleanup()
	if err != nil {
		return &ExitError{Code: conformExitBroken, Err: err}
	}
	chaosSet := cmd.Flags().Changed("runs") || cmd.Flags().Changed("seed") || cmd.Flags().Changed("run")
	switch {
	case chaosSet && !fl.chaos:
		return usageErr("--runs, --seed and --run go with --chaos")
	case fl.chaos && fl.runs < 1:
		return usageErr("--runs: want at least 1; got %d", fl.runs)
	case fl.chaos && cmd.Flags().Changed("run") && !cmd.Flags().Changed("seed"):
		return usageErr("--run replays a run of a seed: give the --seed it was drawn from too")
	case fl.chaos && cmd.Flags().Changed("run") && fl.only < 0:
		return usageErr("--run: want a run index from 0; got %d", fl.only)
	case fl.chaos && (fl.pattern != "" || fl.rerun != ""):
		return usageErr("--case and --rerun-failed pick cases of the matrix; --chaos runs no matrix")
	case fl.rerun != "" && fl.pattern != "":
		return usageErr("--rerun-failed picks the cases itself; leave --case out")
	}
	if fl.rerun != "" {
		ids, err := failedCases(fl.rerun, template)
		if err != nil {
			return usageErr("--rerun-failed: %v", err)
		}
		if len(ids) == 0 {
			fmt.Fprintf(out, "%s: no case failed or errored; nothing to run again\n", fl.rerun)
			return nil
		}
		fl.pattern = strings.Join(ids, ",")
	}
	if fl.chaos && !cmd.Flags().Changed("seed") {
		fl.seed = uint64(time.Now().UnixNano())
	}
	runTimeouts := timeouts.Over(conform.Timeouts).WithDefaults()
	cases := conform.Select(conform.Matrix(strategy, runTimeouts), fl.pattern)
	if len(cases) == 0 {
		return usageErr("--case: %q matches none of the %d cases of a %s template; --list prints them", fl.pattern, len(conform.Matrix(strategy, runTimeouts)), strategy)
	}
	if fl.chaos && strategy != sim.Handover {
		return usageErr("--chaos draws faults of the handover protocol; %s declares %s", template, strategy)
	}
	if fl.list {
		printMatrix(out, template, strategy, cases)
		return nil
	}

	m := app.New(opts)
	defer m.Close()
	onHurry(cmd.Context(), m.Hurry)
	if err := m.Open(cmd.Context()); err != nil {
		return &ExitError{Code: conformExitFailed, Err: fmt.Errorf("conform: start the simulator: %w", err)}
	}
	stop := context.AfterFunc(cmd.Context(), m.Manager.Interrupt)
	defer stop()
	r := conform.New(conform.Config{URL: m.URL(), Template: template, Params: params, Runtime: runtimeOf(fl.runtime),
		Timeouts: timeouts, Parallel: fl.parallel, Out: out})
	var rep *conform.Report
	if fl.chaos {
		runs := fmt.Sprintf("%d run(s)", fl.runs)
		if fl.only >= 0 {
			runs = fmt.Sprintf("run %d", fl.only)
		}
		fmt.Fprintf(out, "normsim conform %s --chaos: %s of seed %d; runtime %s; %d at a time; API %s\n\n",
			template, runs, fl.seed, m.RuntimeNote(), fl.parallel, m.URL())
		rep = &conform.Report{Template: template, Strategy: strategy, Params: params, Parallel: fl.parallel, StartedAt: time.Now()}
		rep.Chaos = r.Chaos(cmd.Context(), conform.ChaosConfig{Seed: fl.seed, Runs: fl.runs, Only: fl.only,
			Replay: func(seed uint64, run int) string { return replayLine(template, fl, seed, run) }}, nil)
		rep.Interrupted = cmd.Context().Err() != nil
		rep.DurationMs = float64(time.Since(rep.StartedAt)) / float64(time.Millisecond)
		rep.Count()
	} else {
		fmt.Fprintf(out, "normsim conform %s: %d case(s) of a %s template; runtime %s; %d at a time; API %s\n\n",
			template, len(cases), strategy, m.RuntimeNote(), fl.parallel, m.URL())
		rep = r.Run(cmd.Context(), cases, nil)
	}
	rep.Version = Version
	rep.Hostname, _ = os.Hostname()
	rep.Filter = fl.pattern
	rep.Runtime = m.Manager.DefaultRuntime()
	fmt.Fprintln(out)
	rep.PrintSummary(out)
	if err := writeConformReports(rep, fl); err != nil {
		return &ExitError{Code: conformExitFailed, Err: err}
	}
	return conformOutcome(rep)
}

// conformOutcome is how a run ends: nil when it passed, else the exit
// error that says what failed, in the run's own terms (cases, or chaos
// runs).
func conformOutcome(rep *conform.Report) error {
	switch {
	case rep.Interrupted:
		return &ExitError{Code: conformExitFailed, Err: errors.New("conform: interrupted")}
	case rep.Chaos != nil && rep.Failed():
		return &ExitError{Code: conformExitFailed, Err: fmt.Errorf("conform --chaos: %d of %d run(s) broke an invariant, %d could not be run",
			len(rep.Chaos.Violations), len(rep.Chaos.Trials), rep.Chaos.Errors())}
	case rep.Failed():
		return &ExitError{Code: conformExitFailed, Err: fmt.Errorf("conform: %d of %d case(s) failed, %d could not be run",
			rep.Counts[conform.GradeFail], len(rep.Results), rep.Counts[conform.GradeError])}
	}
	return nil
}

// replayLine is the command that makes one chaos run again, with the
// flags that shaped it.
func replayLine(template string, fl *conformFlags, seed uint64, run int) string {
	parts := []string{"normsim conform", template, "--chaos", fmt.Sprintf("--seed %d --run %d", seed, run)}
	if fl.runtime != "auto" {
		parts = append(parts, "--runtime "+fl.runtime)
	}
	for _, d := range fl.templates {
		parts = append(parts, "--templates "+shellQuote(d))
	}
	for _, p := range fl.params {
		parts = append(parts, "--param "+shellQuote(p))
	}
	for _, t := range fl.timeouts {
		parts = append(parts, "--timeouts "+shellQuote(t))
	}
	return strings.Join(parts, " ")
}

// runtimeOf is the runtime a launch asks for: "" leaves auto to the sim.
func runtimeOf(flag string) string {
	if flag == "auto" {
		return ""
	}
	return flag
}

// conformStrategy is the strategy the template declares, once the catalog
// has judged it and the params valid.
func conformStrategy(cat sim.Catalog, name string, params map[string]string) (sim.Strategy, error) {
	t, err := cat.Get(name)
	if err != nil {
		var loaded []string
		for _, t := range cat.List() {
			loaded = append(loaded, t.Name)
		}
		return "", fmt.Errorf("conform: %w (loaded: %s); --templates DIR adds a directory of templates", err, strings.Join(loaded, ", "))
	}
	if !t.Valid {
		msg := "it is not valid"
		if t.Error != nil {
			msg = t.Error.Message
		}
		return "", fmt.Errorf("conform: template %q: %s", name, msg)
	}
	if err := cat.CheckParams(name, params); err != nil {
		return "", fmt.Errorf("conform: template %q: %w", name, err)
	}
	return sim.DeclaredStrategy(t.Strategy), nil
}

// printMatrix is --list: the cases, one per line, with what the contract
// prescribes.
func printMatrix(w io.Writer, template string, strategy sim.Strategy, cases []conform.Case) {
	fmt.Fprintf(w, "%d case(s) for %s (%s):\n\n", len(cases), template, strategy)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tGROUP\tCASE\tEXPECTED")
	for _, c := range cases {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", c.ID, c.Group, c.Name, c.Expect)
	}
	tw.Flush()
}

// writeConformReports writes the report files the flags ask for.
func writeConformReports(rep *conform.Report, fl *conformFlags) error {
	var errs []error
	for _, f := range []struct {
		flag, path string
		write      func(w io.Writer) error
	}{
		{"--json", fl.jsonPath, rep.WriteJSON},
		{"--junit", fl.junitPath, rep.WriteJUnit},
		{"--html", fl.htmlPath, rep.WriteHTML},
	} {
		if f.path == "" {
			continue
		}
		if err := conform.WriteFile(f.path, f.write); err != nil {
			errs = append(errs, fmt.Errorf("%s %s: %w", f.flag, f.path, err))
		}
	}
	return errors.Join(errs...)
}

// conformOptions are the simulator's options for a conform run: free
// ports, and only the runtimes it can use, so a process run never waits
// for a Docker engine.
func conformOptions(runtime string) app.Options {
	opts := app.DefaultOptions()
	opts.OpenStore = withsqlite.Open
	opts.SocketPort = 0
	opts.OutputPort = 0
	opts.Addr = "127.0.0.1:0"
	opts.Runtime = runtime
	opts.Timeouts = conform.Timeouts
	if runtime == sim.RuntimeProcess {
		opts.SocketHost = "127.0.0.1"
		opts.Runtimes = []app.RuntimeFactory{app.ProcessRuntime()}
	} else {
		opts.Runtimes = withdocker.Runtimes()
	}
	return opts
}

// failedCases are the IDs of the cases that failed or could not be run in
// an earlier run's JSON report of template.
func failedCases(path, template string) ([]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var rep conform.Report
	if err := json.Unmarshal(b, &rep); err != nil {
		return nil, fmt.Errorf("%s is not a JSON report of normsim conform (--json): %v", path, err)
	}
	if rep.Template != template {
		return nil, fmt.Errorf("%s is a report of template %q, not %q", path, rep.Template, template)
	}
	var ids []string
	for _, res := range rep.Results {
		if res.Grade == conform.GradeFail || res.Grade == conform.GradeError {
			ids = append(ids, res.ID)
		}
	}
	return ids, nil
}
