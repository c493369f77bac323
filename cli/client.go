package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/normsim/normsim/client"
	"github.com/normsim/normsim/sim"
)

func defaultServer() string {
	if s := os.Getenv("NORMSIM_SERVER"); s != "" {
		return s
	}
	return "http://127.0.0.1:7788"
}

func clientCommands(env Env) []*cobra.Command {
	var server string
	api := func() *client.Client { return client.New(server, nil) }
	add := func(c *cobra.Command) *cobra.Command {
		c.Flags().StringVar(&server, "server", defaultServer(), "URL of the running normsim (env NORMSIM_SERVER)")
		return c
	}

	var node, runtime string
	var params []string
	launch := &cobra.Command{
		Use:   "launch TEMPLATE --node NODE",
		Short: "Launch a template on a node of a running sim",
		Example: `  normsim launch counter --node a
  normsim launch counter --node b --param RATE=100 --runtime external`,
		Args: exactArgs(1, "TEMPLATE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if node == "" {
				return usageErr("launch: --node is required (e.g. --node a)")
			}
			req := sim.LaunchRequest{Template: args[0], Node: node, Runtime: runtime, Params: map[string]string{}}
			for _, p := range params {
				k, v, ok := strings.Cut(p, "=")
				if !ok || k == "" {
					return usageErr("--param: want KEY=VALUE; got %q", p)
				}
				req.Params[k] = v
			}
			in, err := api().Launch(cmd.Context(), req)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "%s  job %s  on node %s  (%s, %s)\n", in.ID, in.JobID, in.Node, in.Runtime, in.State)
			if in.Runtime == sim.RuntimeExternal {
				fmt.Fprintln(out, "\nStart the job yourself with this env (one block per service):")
				printEnv(out, in.Env)
			}
			return nil
		},
	}
	launch.Flags().StringVar(&node, "node", "", "node to place the instance on (required)")
	launch.Flags().StringArrayVar(&params, "param", nil, "template parameter KEY=VALUE (repeatable)")
	launch.Flags().StringVar(&runtime, "runtime", "", "docker, process or external (default: the sim's)")

	ps := &cobra.Command{
		Use:   "ps",
		Short: "List the instances of a running sim",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			list, err := api().Instances(cmd.Context())
			if err != nil {
				return err
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tJOB\tNODE\tTEMPLATE\tRUNTIME\tSTATE\tCONNECTED\tPORTS")
			for _, in := range list {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%v\t%s\n", in.ID, in.JobID, in.Node, in.Template, in.Runtime, in.State, in.Connected, portsColumn(in))
			}
			return tw.Flush()
		},
	}

	stop := &cobra.Command{
		Use:   "stop ID...",
		Short: "Stop and remove instances of a running sim",
		Args:  minArgs(1, "ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			for _, id := range args {
				if err := api().Stop(cmd.Context(), id); err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "stopped %s\n", id)
			}
			return nil
		},
	}

	var logOpts client.LogOptions
	var tail string
	logs := &cobra.Command{
		Use:   "logs ID",
		Short: "Print an instance's logs (-f to follow)",
		Long: `Print what an instance's services printed, kept by normsim: also after the
instance stopped, migrated away or was removed, and after a restart on the
same --db. The exit status is non-zero when they cannot be served.`,
		Args: exactArgs(1, "ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			logOpts.Tail = -1
			if tail != "all" {
				n, err := strconv.Atoi(tail)
				if err != nil || n < 0 {
					return usageErr("--tail: want a number of lines or \"all\"; got %q", tail)
				}
				logOpts.Tail = n
			}
			return api().Logs(cmd.Context(), args[0], logOpts, cmd.OutOrStdout())
		},
	}
	logs.Flags().BoolVarP(&logOpts.Follow, "follow", "f", false, "keep printing new lines until the instance ends")
	logs.Flags().BoolVarP(&logOpts.Timestamps, "timestamps", "t", false, "show the time each line arrived")
	logs.Flags().StringVar(&logOpts.Since, "since", "", "only lines since an RFC 3339 time or a duration back from now (10m)")
	logs.Flags().StringVarP(&tail, "tail", "n", "all", "number of lines to show from the end")

	var to, strategy, mruntime string
	var wait bool
	var logLines int
	var timeouts []string
	migrate := &cobra.Command{
		Use:   "migrate ID",
		Short: "Migrate an instance to another node",
		Long: `Migrate a running instance to another node with one of the strategies its
template allows (the declared one, or stopThenStart). With --wait the phases
are printed as they happen and the exit status is 0 only when the migration
completed.`,
		Example: `  normsim migrate counter-1a2b3c --wait
  normsim migrate counter-1a2b3c --to b --strategy stopThenStart --wait
  normsim migrate counter-1a2b3c --timeout targetReady=2s --wait`,
		Args: exactArgs(1, "ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			req := sim.MigrateRequest{To: to, Strategy: strategy, Runtime: mruntime}
			if err := parseTimeouts(timeouts, &req.Timeouts); err != nil {
				return err
			}
			if logLines < 1 {
				return usageErr("--log-lines: want at least 1; got %d", logLines)
			}
			c := api()
			c.LogTail = logLines
			mig, err := c.Migrate(cmd.Context(), args[0], req)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "migration %s: %s of %s from %s to %s\n", mig.ID, mig.Strategy, mig.Source.Instance, mig.Source.Node, mig.Target.Node)
			if !wait {
				return nil
			}
			final, err := followMigration(cmd.Context(), c, mig.ID, out)
			if err != nil {
				return err
			}
			if final.State != sim.MigrationCompleted {
				return &ExitError{Code: 1, Err: fmt.Errorf("migration %s %s: %s", final.ID, final.State, final.Reason)}
			}
			return nil
		},
	}
	migrate.Flags().StringVar(&to, "to", "", "target node (default: the other node)")
	migrate.Flags().StringVar(&strategy, "strategy", "", "overlap, stopThenStart or handover (default: the template's declared one)")
	migrate.Flags().StringVar(&mruntime, "runtime", "", "runtime of the target (default: the source's)")
	migrate.Flags().BoolVar(&wait, "wait", false, "print the phases as they happen and wait for the end")
	migrate.Flags().IntVar(&logLines, "log-lines", sim.DefaultLogTail, "with --wait, last log lines of each side printed when the migration fails or aborts")
	migrate.Flags().StringArrayVar(&timeouts, "timeout", nil, "per-phase timeout PHASE=DURATION: "+strings.Join(sim.TimeoutNames(), ", ")+" (repeatable; docs/migrations.md)")

	cmds := []*cobra.Command{launch, ps, stop, logs, migrate}
	for _, c := range cmds {
		add(c)
	}
	return cmds
}

func parseTimeouts(specs []string, t *sim.Timeouts) error {
	for _, s := range specs {
		k, v, ok := strings.Cut(s, "=")
		f, known := t.Field(k)
		if !ok || !known {
			return usageErr("--timeout: want PHASE=DURATION with PHASE one of %s; got %q", strings.Join(sim.TimeoutNames(), ", "), s)
		}
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return usageErr("--timeout %s: %q is not a positive duration like 5s", k, v)
		}
		*f = sim.Duration(d)
	}
	return nil
}

// followMigration prints each new timeline event until the migration ends.
func followMigration(ctx context.Context, c *client.Client, id string, out io.Writer) (*sim.Migration, error) {
	printed := 0
	mig, err := c.WaitMigration(ctx, id, func(mig *sim.Migration) {
		for _, ev := range mig.Events[min(printed, len(mig.Events)):] {
			fmt.Fprintf(out, "  %8.1f ms  %-14s %-8s %s%s\n", float64(ev.At.Sub(mig.StartedAt))/float64(time.Millisecond), ev.Phase, ev.Side, ev.Detail, sim.PayloadSnippet(ev))
		}
		printed = len(mig.Events)
	})
	if err != nil {
		if ctx.Err() != nil {
			return nil, errors.New("interrupted while waiting; the migration goes on")
		}
		return nil, err
	}
	fmt.Fprintf(out, "%s %s", mig.ID, mig.State)
	if mig.Reason != "" {
		fmt.Fprintf(out, ": %s", mig.Reason)
	}
	fmt.Fprintln(out)
	if mig.Output != nil {
		fmt.Fprintf(out, "output: %s (%s)\n", mig.Output.Verdict, mig.Output.Detail)
	}
	if mig.Logs != nil && len(mig.Logs.Tails) > 0 {
		fmt.Fprint(out, sim.FormatLogTails(mig.Logs.Tails))
	}
	return mig, nil
}

func printEnv(w io.Writer, env map[string]map[string]string) {
	bw := bufio.NewWriter(w)
	for _, s := range slices.Sorted(maps.Keys(env)) {
		fmt.Fprintf(bw, "# service %s\n", s)
		for _, k := range slices.Sorted(maps.Keys(env[s])) {
			fmt.Fprintf(bw, "export %s=%q\n", k, env[s][k])
		}
	}
	bw.Flush()
}

func exactArgs(n int, names string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != n {
			return usageErr("%s: want %s; got %d argument(s)\nRun '%s --help' for usage.", cmd.Name(), names, len(args), cmd.CommandPath())
		}
		return nil
	}
}

func minArgs(n int, names string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) < n {
			return usageErr("%s: want at least one %s\nRun '%s --help' for usage.", cmd.Name(), names, cmd.CommandPath())
		}
		return nil
	}
}

// portsColumn is what ps shows of an instance's published ports, the way
// `docker ps` does: "127.0.1.1:1935->1935/tcp, …", "-" for none.
func portsColumn(in sim.Instance) string {
	if len(in.Published) == 0 {
		return "-"
	}
	var out []string
	for _, p := range in.Published {
		out = append(out, p.String())
	}
	return strings.Join(out, ", ")
}
