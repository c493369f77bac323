package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/normsim/normsim/internal/bench"
)

func newBenchCmd(env Env) *cobra.Command {
	cfg := bench.Config{}
	var logLevel, plotPath, jsonPath string
	var curve []int
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Load-test the sim: connect many simulated jobs and hand them all over at once",
		Long: `Connect --jobs simulated jobs (real WebSocket clients in this process, speaking
the whole job-socket protocol) across two nodes, then hand every one of them
over to the other node at the same time, and report:

  throughput   completed handovers per second
  cpu          per job connected and per handover, the CPU time of the sim,
               of this process (the load generator) and of the whole machine
               (with the kernel's socket work), and the rate that allows with
               every core busy: on a loaded machine, the figure that bounds
               throughput and the one to compare between runs
  wall         per handover, migrate request -> source stopped (p50/p90/p99)
  cutover      per handover, source-stopped-output sent -> cutover-apply read
  peak RSS     the sim's peak resident memory (VmHWM) over the whole run, the
               jobs' removal included, and by the handovers' end
  goroutines   before the jobs connected and after they were removed
  store        what the sim's store held at the handovers' end, and how long
               after it the writes still pending then were all written: the
               sim answers before its records are stored, and this says when
               they all were

Each job is an external instance of --template (it must declare the handover
strategy): normsim starts nothing, the bench plays the job. Every handover must
end completed, or the command exits 1.

Where the sim runs:
  --sim in-process  (default) the sim runs inside this process, like
                    normsimtest: goroutines are counted, but the RSS is the sim
                    and the clients together.
  --sim child       runs 'normsim up --db :memory:' as a child process: the
                    peak RSS is the sim's alone (goroutines are not visible).
  --server URL      a sim you started yourself (nothing is measured but the
                    handovers).
  --sim bare        no sim: a bare server in this process that does only what
                    the jobs and the API calls need (launch, hello, the
                    handover's frames, the source's close), with no record,
                    store, timeline, check or timeout. The floor: run it beside
                    --sim in-process, and the difference in CPU per handover is
                    what the sim's fidelity costs; its rate is the most this
                    machine gives with the load generator on it.

A long run (--rounds N) hands every job over N times, one round after
another, and prints each round's throughput and the sim at rest after it:
goroutines, live heap, store size and migrations (pruned ones too, under
up --keep-migrations): a sim that stays flat ends with the goroutines and
heap of its first round.

A cost curve (--curve 100,1000,5000,10000) runs the whole bench once per
job count, each against a sim of its own (--sim child unless --sim says
otherwise), prints a table of them and, with --plot FILE.png, draws it:
throughput, wall and cutover latency, peak RSS per job and store size.

The sim reports what it could not keep (GET /api/v1/stats): frame records
that waited for the store (each slowed its job) and any lost.

The figures in docs/benchmarks.md come from this command; see there for the
machine they were measured on.`,
		Example: `  normsim bench
  normsim bench --jobs 200 --concurrency 50
  normsim bench --sim child
  normsim bench --sim child --jobs 1000 --rounds 50
  normsim bench --sim bare --jobs 10000
  normsim bench --curve 100,1000,5000,10000 --plot curve.png
  normsim bench --server http://127.0.0.1:7788 --jobs 100`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if env.CollectorOn != nil {
				env.CollectorOn()
			}
			if cfg.Jobs < 1 {
				return usageErr("--jobs: must be at least 1; got %d", cfg.Jobs)
			}
			if cfg.Concurrency < 0 {
				return usageErr("--concurrency: must be 0 (all at once) or more; got %d", cfg.Concurrency)
			}
			if cfg.Server != "" && cmd.Flags().Changed("sim") {
				return usageErr("--server and --sim exclude each other: --server uses a sim that already runs")
			}
			if cfg.Rounds < 1 {
				return usageErr("--rounds: must be at least 1; got %d", cfg.Rounds)
			}
			for _, n := range curve {
				if n < 1 {
					return usageErr("--curve: every job count must be at least 1; got %d", n)
				}
			}
			if len(curve) == 0 && plotPath != "" {
				return usageErr("--plot draws a cost curve: give --curve too, e.g. --curve 100,1000,5000,10000")
			}
			if len(curve) > 0 && cmd.Flags().Changed("jobs") {
				return usageErr("--curve and --jobs exclude each other: the curve says how many jobs each run has")
			}
			if len(curve) > 0 && cfg.Server != "" {
				return usageErr("--curve needs a sim of its own per job count; it cannot use --server")
			}
			if len(curve) > 0 && !cmd.Flags().Changed("sim") {
				cfg.Sim = bench.SimChild // the RSS per job must be the sim's alone
			}
			if cfg.KeepMigrations < 0 {
				return usageErr("--keep-migrations: must be 0 (keep all) or more; got %d", cfg.KeepMigrations)
			}
			if cfg.MemoryLimit != "" {
				if _, err := parseMemoryLimit("--memory-limit", cfg.MemoryLimit); err != nil {
					return err
				}
				if cfg.Server != "" || cfg.Sim != bench.SimChild {
					return usageErr("--memory-limit applies to a sim this command starts as a child (--sim child, or --curve): in-process it would limit the load generator too")
				}
			}
			if cfg.Server != "" && cmd.Flags().Changed("keep-migrations") {
				return usageErr("--keep-migrations applies to a sim this command starts; start yours with normsim up --keep-migrations")
			}
			if cfg.Server != "" && cfg.ProfileDir != "" {
				return usageErr("--profile needs a sim this command starts; profile a sim of your own with normsim up --pprof and go tool pprof")
			}
			if cfg.Server == "" && cfg.Sim != bench.SimInProcess && cfg.Sim != bench.SimChild && cfg.Sim != bench.SimBare {
				return usageErr("--sim: must be %s, %s or %s; got %q", bench.SimInProcess, bench.SimChild, bench.SimBare, cfg.Sim)
			}
			if cfg.Sim == bench.SimBare && (cfg.KeepMigrations > 0 || cmd.Flags().Changed("templates") || cmd.Flags().Changed("template")) {
				return usageErr("--sim bare keeps nothing and launches no template: --keep-migrations, --template and --templates apply to a sim")
			}
			log, err := newLogger(env.Stderr, "text", logLevel)
			if err != nil {
				return err
			}
			cfg.Logger = log.With("sim", "in-process")
			cfg.Out = cmd.OutOrStdout()
			cfg.DefaultTemplates = env.Templates
			if len(curve) > 0 {
				return runCurve(cmd, cfg, curve, plotPath, jsonPath)
			}
			rep, err := bench.Run(cmd.Context(), cfg)
			if err != nil {
				return err
			}
			bench.WriteReport(cmd.OutOrStdout(), rep)
			if err := writeBenchJSON(jsonPath, rep); err != nil {
				return err
			}
			if want := rep.Jobs * cfg.Rounds; rep.Failed > 0 || rep.Completed != want {
				return &ExitError{Code: 1, Err: fmt.Errorf("%d of %d handovers did not complete", want-rep.Completed, want)}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.IntVar(&cfg.Jobs, "jobs", 1000, "simulated jobs to connect (half on each node); each hands over once")
	f.IntVar(&cfg.Concurrency, "concurrency", 0, "handovers in flight at once (0: all of them)")
	f.StringVar(&cfg.Sim, "sim", bench.SimInProcess, "where the sim runs: in-process, child, or bare (no sim: the floor it is measured against)")
	f.StringVar(&cfg.Server, "server", "", "URL of a running sim to load instead of starting one")
	f.StringVar(&cfg.Template, "template", "counter", "template to launch; it must declare the handover strategy")
	f.StringArrayVar(&cfg.TemplateDirs, "templates", nil, "template directory for the sim this command starts (repeatable; default ./templates or the built-in ones)")
	f.DurationVar(&cfg.Timeout, "timeout", 0, "give up after this long (default 5m per round, for each point of a curve)")
	f.DurationVar(&cfg.Every, "progress", time.Second, "how often to print progress")
	f.StringVar(&cfg.MemoryLimit, "memory-limit", "", "the child sim this command starts runs with up --memory-limit SIZE (e.g. 600MiB): a soft limit on its Go memory")
	f.IntVar(&cfg.KeepMigrations, "keep-migrations", 0, "the sim this command starts keeps at most N finished migrations (up --keep-migrations); 0 keeps all")
	f.IntVar(&cfg.Rounds, "rounds", 1, "hand every job over this many times, one round after another, and show the sim at rest after each")
	f.IntSliceVar(&curve, "curve", nil, "job counts of a cost curve, e.g. 100,1000,5000,10000: one whole bench per count")
	f.StringVar(&plotPath, "plot", "", "with --curve: draw the curve into this PNG file")
	f.StringVar(&jsonPath, "json", "", "also write the report (with --curve: every point's) as JSON to this file")
	f.StringVar(&cfg.ProfileDir, "profile", "", "write the sim's CPU profile (cpu.pprof) and its heap at the peak (heap.pprof) into DIR, for go tool pprof; with --sim child also this command's own (bench-cpu.pprof)")
	f.StringVar(&logLevel, "log-level", "warn", "log level of the in-process sim: debug, info, warn or error")
	return cmd
}

// runCurve measures, prints and (with a path) plots a cost curve; every
// handover of every point must complete, or it exits 1.
func runCurve(cmd *cobra.Command, cfg bench.Config, sizes []int, plotPath, jsonPath string) error {
	reps, err := bench.RunCurve(cmd.Context(), cfg, sizes)
	out := cmd.OutOrStdout()
	if len(reps) > 0 {
		fmt.Fprintln(out)
		bench.WriteCurve(out, reps)
	}
	if jerr := writeBenchJSON(jsonPath, reps); jerr != nil && err == nil {
		err = jerr
	}
	if plotPath != "" && len(reps) > 0 {
		if perr := bench.PlotCurve(plotPath, reps); perr != nil && err == nil {
			err = perr
		} else if perr == nil {
			fmt.Fprintf(out, "\nplot: %s\n", plotPath)
		}
	}
	if err != nil {
		return err
	}
	for _, r := range reps {
		if r.Failed > 0 || r.Completed != r.Jobs {
			return &ExitError{Code: 1, Err: fmt.Errorf("%d jobs: %d of %d handovers did not complete", r.Jobs, r.Jobs-r.Completed, r.Jobs)}
		}
	}
	return nil
}

// writeBenchJSON writes v, indented, to path; nothing when path is empty.
func writeBenchJSON(path string, v any) error {
	if path == "" {
		return nil
	}
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("--json: %w", err)
	}
	return nil
}
