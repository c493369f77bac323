package cli

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/normsim/normsim/internal/bench"
)

func newBenchCmd(env Env) *cobra.Command {
	cfg := bench.Config{}
	var logLevel string
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Load-test the sim: connect many simulated jobs and hand them all over at once",
		Long: `Connect --jobs simulated jobs (real WebSocket clients in this process, speaking
the whole job-socket protocol) across two nodes, then hand every one of them
over to the other node at the same time, and report:

  throughput   completed handovers per second
  wall         per handover, migrate request -> source stopped (p50/p90/p99)
  cutover      per handover, source-stopped-output sent -> cutover-apply read
  peak RSS     the sim's peak resident memory (VmHWM)
  goroutines   before the jobs connected and after they were removed

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

The figures in docs/benchmarks.md come from this command; see there for the
machine they were measured on.`,
		Example: `  normsim bench
  normsim bench --jobs 200 --concurrency 50
  normsim bench --sim child
  normsim bench --server http://127.0.0.1:7788 --jobs 100`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if cfg.Jobs < 1 {
				return usageErr("--jobs: must be at least 1; got %d", cfg.Jobs)
			}
			if cfg.Concurrency < 0 {
				return usageErr("--concurrency: must be 0 (all at once) or more; got %d", cfg.Concurrency)
			}
			if cfg.Server != "" && cmd.Flags().Changed("sim") {
				return usageErr("--server and --sim exclude each other: --server uses a sim that already runs")
			}
			if cfg.Server != "" && cfg.ProfileDir != "" {
				return usageErr("--profile needs a sim this command starts; profile a sim of your own with normsim up --pprof and go tool pprof")
			}
			if cfg.Server == "" && cfg.Sim != bench.SimInProcess && cfg.Sim != bench.SimChild {
				return usageErr("--sim: must be %s or %s; got %q", bench.SimInProcess, bench.SimChild, cfg.Sim)
			}
			log, err := newLogger(env.Stderr, "text", logLevel)
			if err != nil {
				return err
			}
			cfg.Logger = log.With("sim", "in-process")
			cfg.Out = cmd.OutOrStdout()
			cfg.DefaultTemplates = env.Templates
			rep, err := bench.Run(cmd.Context(), cfg)
			if err != nil {
				return err
			}
			bench.WriteReport(cmd.OutOrStdout(), rep)
			if rep.Failed > 0 || rep.Completed != rep.Jobs {
				return &ExitError{Code: 1, Err: fmt.Errorf("%d of %d handovers did not complete", rep.Jobs-rep.Completed, rep.Jobs)}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.IntVar(&cfg.Jobs, "jobs", 1000, "simulated jobs to connect (half on each node); each hands over once")
	f.IntVar(&cfg.Concurrency, "concurrency", 0, "handovers in flight at once (0: all of them)")
	f.StringVar(&cfg.Sim, "sim", bench.SimInProcess, "where the sim runs: in-process or child")
	f.StringVar(&cfg.Server, "server", "", "URL of a running sim to load instead of starting one")
	f.StringVar(&cfg.Template, "template", "counter", "template to launch; it must declare the handover strategy")
	f.StringArrayVar(&cfg.TemplateDirs, "templates", nil, "template directory for the sim this command starts (repeatable; default ./templates or the built-in ones)")
	f.DurationVar(&cfg.Timeout, "timeout", 5*time.Minute, "give up after this long")
	f.DurationVar(&cfg.Every, "progress", time.Second, "how often to print progress")
	f.StringVar(&cfg.ProfileDir, "profile", "", "write the sim's CPU profile (cpu.pprof) and its heap at the peak (heap.pprof) into DIR, for go tool pprof")
	f.StringVar(&logLevel, "log-level", "warn", "log level of the in-process sim: debug, info, warn or error")
	return cmd
}
