package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/normsim/normsim/app"
	"github.com/normsim/normsim/app/withdocker"
	"github.com/normsim/normsim/app/withsqlite"
	"github.com/normsim/normsim/scenario"
	"github.com/normsim/normsim/sim"
)

// Exit codes of normsim ci (docs/ci.md).
const (
	ciExitFailed = 1 // an expectation did not hold, a step could not run, or the sim did not start
	ciExitBroken = 2 // a scenario file is broken (or the command line is wrong): nothing ran
)

func newCICmd(env Env) *cobra.Command {
	var (
		junitPath, jsonPath, db, runtime, logLevel string
		templates, timeouts                        []string
		printSchema, checkOnly, verbose            bool
		logLines                                   int
	)
	cmd := &cobra.Command{
		Use:   "ci SCENARIO.yaml...",
		Short: "Run scenario files headless; exit non-zero when an expectation fails",
		Long: `Run scenario files against a simulator started in this process (free ports,
an in-memory store unless --db), print a line per step as it ends, and write
a JUnit report (--junit) and a JSON report with every migration's timeline
(--json). A directory argument runs every *.yaml and *.yml in it.

A scenario names a template, its parameters and a runtime, and lists steps:
launch, wait, and migrate with expectations (completed, aborted in a phase,
refused, the seam seamless, a gap below N ms, ...). docs/ci.md describes the
format; --schema prints its JSON Schema.

Exit status: 0 every expectation held; 1 an expectation did not hold, a step
could not be carried out, or normsim could not start; 2 a scenario file is
broken (each problem is printed as file:line:column) or the command line is
wrong, and nothing ran.`,
		Example: `  normsim ci examples/scenarios/*.yaml --junit normsim.xml --json normsim.json
  normsim ci scenarios/ --templates ./templates --runtime docker
  normsim ci --check scenarios/*.yaml
  normsim ci --schema > scenario.schema.json`,
		RunE: func(cmd *cobra.Command, args []string) error {
			// Scenario and step names, and what jobs said, are printed as
			// text a terminal does not act on (attack round 16, B-F5).
			out := sim.TerminalWriter(cmd.OutOrStdout())
			if printSchema {
				_, err := cmd.OutOrStdout().Write(scenario.Schema())
				return err
			}
			if len(args) == 0 {
				return usageErr("ci: want at least one SCENARIO.yaml (or a directory of them)\nRun '%s --help' for usage.", cmd.CommandPath())
			}
			switch runtime {
			case "auto", sim.RuntimeProcess, sim.RuntimeDocker:
			case sim.RuntimeExternal:
				return usageErr("--runtime: external waits for jobs you start yourself, which ci cannot do; use auto, process or docker")
			default:
				return usageErr("--runtime: must be auto, process or docker; got %q", runtime)
			}
			var runTimeouts sim.Timeouts
			if err := parseTimeouts("--timeouts", timeouts, &runTimeouts); err != nil {
				return err
			}
			for _, d := range templates {
				if err := checkTemplatesDir(d); err != nil {
					return err
				}
			}
			log, err := newLogger(env.Stderr, "text", logLevel)
			if err != nil {
				return err
			}
			started := time.Now()
			reports := func(rep *scenario.Report) error {
				rep.Version = Version
				rep.Hostname, _ = os.Hostname()
				var errs []error
				if junitPath != "" {
					if err := scenario.WriteFile(junitPath, rep.WriteJUnit); err != nil {
						errs = append(errs, fmt.Errorf("--junit %s: %w", junitPath, err))
					}
				}
				if jsonPath != "" {
					if err := scenario.WriteFile(jsonPath, rep.WriteJSON); err != nil {
						errs = append(errs, fmt.Errorf("--json %s: %w", jsonPath, err))
					}
				}
				return errors.Join(errs...)
			}
			broken := func(probs scenario.Problems) error {
				for _, p := range probs {
					fmt.Fprintln(env.Stderr, p.Error())
				}
				if err := reports(scenario.ProblemsReport(started, probs)); err != nil {
					fmt.Fprintln(env.Stderr, "normsim:", err)
				}
				return &ExitError{Code: ciExitBroken, Err: fmt.Errorf("ci: %d problem(s) in the scenario files; nothing was run", len(probs))}
			}

			files, probs := scenarioFiles(args)
			var scenarios []*scenario.Scenario
			for _, f := range files {
				ss, err := scenario.ParseFile(f)
				var ps scenario.Problems
				if errors.As(err, &ps) {
					probs = append(probs, ps...)
					continue
				} else if err != nil {
					probs = append(probs, scenario.Problem{File: f, Message: err.Error()})
					continue
				}
				scenarios = append(scenarios, ss...)
			}
			if len(probs) > 0 {
				return broken(probs)
			}
			opts := ciOptions(scenarios, runtime)
			opts.Timeouts = runTimeouts
			opts.DB = db
			opts.Templates = templateDirs(templates, scenarios)
			opts.DefaultTemplates = env.Templates
			opts.Logger = log
			opts.Version = Version
			if checkOnly {
				// The checks a run makes before it starts, against the
				// templates it would load, so --check never passes a file
				// the run rejects; only nothing is started.
				cat, cleanup, err := app.LoadCatalog(cmd.Context(), opts)
				if cmd.Context().Err() != nil {
					return &ExitError{Code: ciExitFailed, Err: errors.New("ci: interrupted")}
				}
				if err != nil {
					return usageErr("ci: %v", err)
				}
				defer cleanup()
				// The default runtime of --check: an explicit one, or what
				// the run would settle on (ciOptions makes auto process
				// when no scenario needs Docker); auto is not known.
				def := ""
				if opts.Runtime == sim.RuntimeProcess || opts.Runtime == sim.RuntimeDocker {
					def = opts.Runtime
				}
				if probs := scenario.CheckCatalog(scenarios, cat, def); len(probs) > 0 {
					return broken(probs)
				}
				fmt.Fprintf(out, "%d scenario(s) in %d file(s): valid, with the templates they launch, their params and the strategies they ask for\n", len(scenarios), len(files))
				return nil
			}

			m := app.New(opts)
			defer m.Close()
			onHurry(cmd.Context(), m.Hurry)
			if err := m.Open(cmd.Context()); err != nil {
				return &ExitError{Code: ciExitFailed, Err: fmt.Errorf("ci: start the simulator: %w", err)}
			}
			note := m.RuntimeNote()
			if runtime == "auto" && opts.Runtime == sim.RuntimeProcess {
				// ciOptions chose it, not the user.
				note = sim.RuntimeProcess + " (no scenario runs on Docker)"
			}
			fmt.Fprintf(out, "normsim ci %s: %d scenario(s) from %d file(s); nodes %s; default runtime %s; API %s\n\n",
				Version, len(scenarios), len(files), strings.Join(opts.Nodes, ", "), note, m.URL())

			// On Ctrl-C or SIGTERM the sim ends its migrations at once, so
			// the runner's cleanup need not wait out their phases (or a
			// frame a fault holds) before it removes the instances.
			stop := context.AfterFunc(cmd.Context(), m.Manager.Interrupt)
			defer stop()
			if logLines < 1 {
				return usageErr("--log-lines: want at least 1; got %d", logLines)
			}
			runner := scenario.NewRunner(scenario.Config{URL: m.URL(), Out: out, Verbose: verbose, LogTail: logLines})
			if probs := scenario.CheckCatalog(scenarios, m.Catalog, m.Manager.DefaultRuntime()); len(probs) > 0 {
				return broken(probs)
			}
			rep := runner.Run(cmd.Context(), scenarios)
			rep.PrintSummary(out)
			if err := reports(rep); err != nil {
				return &ExitError{Code: ciExitFailed, Err: err}
			}
			switch {
			case rep.Interrupted:
				return &ExitError{Code: ciExitFailed, Err: errors.New("ci: interrupted")}
			case !rep.Passed:
				return &ExitError{Code: ciExitFailed, Err: fmt.Errorf("ci: %d of %d scenario(s) failed", rep.Counts.ScenariosFailed, rep.Counts.Scenarios)}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&junitPath, "junit", "", "write a JUnit XML report to `FILE`")
	f.StringVar(&jsonPath, "json", "", "write a JSON report with every migration's timeline to `FILE`")
	f.StringArrayVar(&templates, "templates", nil, "directory of product templates (repeatable; default ./templates)")
	f.StringArrayVar(&timeouts, "timeouts", nil, "per-phase migration timeouts of the run, PHASE=DURATION[,…] ("+strings.Join(sim.TimeoutNames(), ", ")+"); a scenario's timeouts: and a step's win")
	f.StringVar(&db, "db", app.Memory, "SQLite store path; the default keeps nothing")
	f.StringVar(&runtime, "runtime", "auto", "runtime of scenarios that name none: auto (docker when an engine answers, else process), process or docker")
	f.BoolVarP(&verbose, "verbose", "v", false, "print every migration's timeline, not only failing ones")
	f.BoolVar(&checkOnly, "check", false, "only check the scenario files, their templates and params, as a run does before it starts (exit 0 or 2); start nothing")
	f.BoolVar(&printSchema, "schema", false, "print the JSON Schema of a scenario file and exit")
	f.IntVar(&logLines, "log-lines", sim.DefaultLogTail, "last log lines of each side a failing step reports")
	f.StringVar(&logLevel, "log-level", "error", "level of the simulator's own logs on stderr: debug, info, warn or error")
	return cmd
}

// templateDirs is where ci loads templates from: --templates (default
// ./templates, when there is one), then every directory a scenario names
// (templates:), each once. With neither, nil: the embedded defaults.
func templateDirs(flag []string, scenarios []*scenario.Scenario) []string {
	dirs := slices.Clone(flag)
	if len(dirs) == 0 {
		if st, err := os.Stat("templates"); err == nil && st.IsDir() {
			dirs = []string{"templates"}
		}
	}
	seen := map[string]bool{}
	for _, d := range dirs {
		if abs, err := filepath.Abs(d); err == nil {
			seen[abs] = true
		}
	}
	for _, s := range scenarios {
		for _, d := range s.TemplateDirs {
			abs, err := filepath.Abs(d)
			if err != nil || seen[abs] {
				continue
			}
			seen[abs] = true
			dirs = append(dirs, d)
		}
	}
	return dirs
}

// scenarioFiles expands the arguments: files as given, directories to
// their *.yaml and *.yml files. A missing path is a problem.
func scenarioFiles(args []string) ([]string, scenario.Problems) {
	var files []string
	var probs scenario.Problems
	for _, a := range args {
		st, err := os.Stat(a)
		if err != nil {
			probs = append(probs, scenario.Problem{File: a, Message: "no such scenario file"})
			continue
		}
		if !st.IsDir() {
			files = append(files, a)
			continue
		}
		var found []string
		for _, pat := range []string{"*.yaml", "*.yml"} {
			m, _ := filepath.Glob(filepath.Join(a, pat))
			found = append(found, m...)
		}
		slices.Sort(found)
		if len(found) == 0 {
			probs = append(probs, scenario.Problem{File: a, Message: "the directory holds no *.yaml or *.yml scenario file"})
		}
		files = append(files, found...)
	}
	return files, probs
}

// ciOptions are the simulator's options for the scenarios: free ports, the
// union of their nodes (a, b first), and only the runtimes they can use, so
// a process-only run never waits for a Docker engine.
func ciOptions(scenarios []*scenario.Scenario, runtime string) app.Options {
	opts := app.DefaultOptions()
	opts.OpenStore = withsqlite.Open
	opts.SocketPort = 0
	opts.OutputPort = 0
	opts.Addr = "127.0.0.1:0"
	opts.Runtime = runtime
	nodes := []string{}
	needDocker := runtime == sim.RuntimeDocker
	for _, s := range scenarios {
		for _, n := range s.Nodes {
			if !slices.Contains(nodes, n) {
				nodes = append(nodes, n)
			}
		}
		runtimes := []string{s.Runtime}
		for _, st := range s.Steps {
			switch {
			case st.Launch != nil:
				runtimes = append(runtimes, st.Launch.Runtime)
			case st.Migrate != nil:
				runtimes = append(runtimes, st.Migrate.Runtime)
			}
		}
		for _, r := range runtimes {
			needDocker = needDocker || r == sim.RuntimeDocker || (r == "" && s.Runtime == "" && runtime == "auto")
		}
	}
	if len(nodes) > 0 {
		opts.Nodes = nodes
	}
	if needDocker {
		opts.Runtimes = withdocker.Runtimes()
	} else {
		// Host processes reach the sockets on loopback; nothing else has to.
		opts.SocketHost = "127.0.0.1"
		opts.Runtimes = []app.RuntimeFactory{app.ProcessRuntime()}
		if opts.Runtime == "auto" {
			opts.Runtime = sim.RuntimeProcess
		}
	}
	return opts
}

// checkTemplatesDir is app.CheckTemplatesDir's refusal as a usage error.
func checkTemplatesDir(d string) error {
	if err := app.CheckTemplatesDir(d); err != nil {
		return usageErr("%s", err)
	}
	return nil
}
