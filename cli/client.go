package cli

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/normsim/normsim/apiclient"
	"github.com/normsim/normsim/sim"
)

func defaultServer() string {
	if s := os.Getenv("NORMSIM_SERVER"); s != "" {
		return s
	}
	return "http://127.0.0.1:7788"
}

// serverURL reads --server: a URL, or a bare HOST:PORT (what the banner
// and --addr speak), taken as http://HOST:PORT.
func serverURL(s string) string {
	s = strings.TrimSpace(s)
	if !strings.Contains(s, "://") {
		return "http://" + s
	}
	return s
}

// checkServer refuses a --server that names no host to reach (empty, or
// not a URL) as a usage error, before anything is sent: "cannot reach
// normsim at http:" blamed a sim that was never asked.
func checkServer(s string) error {
	u, err := url.Parse(serverURL(s))
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return usageErr("--server: want the URL or HOST:PORT of a running normsim (e.g. http://127.0.0.1:8080 or 127.0.0.1:8080); got %q", s)
	}
	return nil
}

func clientCommands(env Env) []*cobra.Command {
	var server string
	api := func() *apiclient.Client { return apiclient.New(serverURL(server), nil) }
	add := func(c *cobra.Command) *cobra.Command {
		c.Flags().StringVar(&server, "server", defaultServer(), "URL (or HOST:PORT) of the running normsim (env NORMSIM_SERVER)")
		run := c.RunE
		c.RunE = func(cmd *cobra.Command, args []string) error {
			if err := checkServer(server); err != nil {
				return err
			}
			return run(cmd, args)
		}
		return c
	}

	var node, runtime, until string
	var untilTimeout time.Duration
	var params []string
	launch := &cobra.Command{
		Use:   "launch TEMPLATE --node NODE",
		Short: "Launch a template on a node of a running sim",
		Long: `Launch a product template on a node of a running sim (normsim up) and print
the new instance's id, which ps, logs, migrate and stop take. The launch
returns once the instance is placed; ps shows when its job is connected.
--until running (or connected: running, and its job said hello on the job
socket) waits for that, up to --timeout, and exits 1 with the instance's
error and last log lines when it ends first (a job that dies at once) or
does not get there in time.

--param sets the template's parameters (normsim templates lists them, with
their types and defaults); a value the template refuses is an error naming
the parameter and the rule. --runtime picks how the instance runs: docker
(the compose file's images), process (the services' x-normsim commands on
this host) or external (you start the job yourself, with the env printed).`,
		Example: `  normsim launch counter --node a
  normsim launch counter --node b --param RATE=100
  normsim launch counter --node a --until connected
  normsim launch counter --node a --runtime external   # prints the env to start it under a debugger`,
		Args: exactArgs(1, "TEMPLATE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if node == "" {
				return usageErr("launch: --node is required (e.g. --node a)")
			}
			var wantUntil sim.Until
			if until != "" {
				u, err := sim.ParseUntil(until)
				if err != nil {
					return usageErr("--until: must be running or connected; got %q", until)
				}
				wantUntil = u
				if untilTimeout <= 0 {
					return usageErr("--timeout: want how long to wait, more than 0 (e.g. 30s); got %s", untilTimeout)
				}
			}
			given, err := paramValues(params)
			if err != nil {
				return err
			}
			req := sim.LaunchRequest{Template: args[0], Node: node, Runtime: runtime, Params: given}
			c := api()
			// Placed, then waited for: the instance and an external one's
			// env are printed first (the job they wait for may be yours).
			in, err := c.Launch(cmd.Context(), req)
			if err != nil {
				return templateHint(cmd.Context(), c, req.Template, err)
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "%s  job %s  on node %s  (%s, %s)\n", in.ID, in.JobID, in.Node, in.Runtime, in.State)
			if in.Runtime == sim.RuntimeExternal {
				fmt.Fprintln(out, "\nStart the job yourself (e.g. in your debugger) with this env, one block per service:")
				printExternalEnv(out, "normsim "+in.ID, in.Env)
			}
			if wantUntil == "" {
				return nil
			}
			return waitLaunched(cmd.Context(), c, in.ID, wantUntil, untilTimeout, out)
		},
	}
	launch.Flags().StringVar(&node, "node", "", "node to place the instance on (required)")
	launch.Flags().StringArrayVar(&params, "param", nil, "template parameter KEY=VALUE (repeatable)")
	launch.Flags().StringVar(&runtime, "runtime", "", "docker, process or external (default: the sim's)")
	launch.Flags().StringVar(&until, "until", "", "wait until the instance is running, or connected (running, and its job said hello); exit 1 if it ends first")
	launch.Flags().DurationVar(&untilTimeout, "timeout", time.Minute, "with --until, how long to wait")

	ps := &cobra.Command{
		Use:   "ps",
		Short: "List the instances of a running sim",
		Long: `List the instances of a running sim: id, job (which stays the same across
migrations), node, template, runtime, state, whether the job is connected to
its job socket, and the ports it publishes (address and port as a client
reaches them).`,
		Example: `  normsim ps
  NORMSIM_SERVER=127.0.0.1:7790 normsim ps`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			list, err := api().Instances(cmd.Context())
			if err != nil {
				return err
			}
			if len(list) == 0 {
				fmt.Fprintln(cmd.OutOrStdout(), "no instances; start one with: normsim launch TEMPLATE --node NODE")
				return nil
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tJOB\tNODE\tTEMPLATE\tRUNTIME\tSTATE\tCONNECTED\tPORTS\tREASON")
			for _, in := range list {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%v\t%s\t%s\n", in.ID, in.JobID, in.Node, in.Template, in.Runtime, in.State, in.Connected, portsColumn(in), reasonColumn(in.Error))
			}
			return tw.Flush()
		},
	}

	var onlyStopped bool
	stop := &cobra.Command{
		Use:   "stop ID...",
		Short: "Stop and remove instances of a running sim",
		Long: `Stop each instance (SIGTERM to its services, then SIGKILL after the grace
period) and remove what it ran. The ids are the ones ps shows; the first id
that cannot be stopped ends the command with its error.

An ID is an instance's (normsim ps lists them) or a job's, which names
the job's running instance: after a migration the job runs under a new
instance ID, and its job ID still finds it.

A migration's source is left listed as stopped while its job runs on
elsewhere; stop refuses it (it would not stop the job) and names the
instance the job runs as. --stopped removes such a stopped record, and
refuses an instance that runs.`,
		Example: `  normsim stop counter-1a2b3c
  normsim stop counter-1a2b3c counter-4d5e6f
  normsim stop --stopped counter-1a2b3c   # a migrated source's stopped record`,
		Args: minArgs(1, "ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c := api()
			for _, arg := range args {
				err := onInstance(cmd.Context(), c, arg, func(id string) error {
					if onlyStopped {
						if err := c.RemoveStopped(cmd.Context(), id); err != nil {
							return err
						}
						fmt.Fprintf(cmd.OutOrStdout(), "removed %s\n", id)
						return nil
					}
					if err := c.Stop(cmd.Context(), id); err != nil {
						return err
					}
					fmt.Fprintf(cmd.OutOrStdout(), "stopped %s\n", id)
					return nil
				})
				if err != nil {
					return err
				}
			}
			return nil
		},
	}

	var logOpts apiclient.LogOptions
	var tail string
	logs := &cobra.Command{
		Use:   "logs ID",
		Short: "Print an instance's logs (-f to follow)",
		Long: `Print what an instance's services printed, each line prefixed with its
service's name, kept by normsim: also after the instance stopped, migrated
away or was removed, and after a restart on the same --db. -f keeps printing
new lines until the instance ends (or Ctrl-C). The exit status is non-zero
when they cannot be served.

An ID is an instance's (normsim ps lists them) or a job's, which names
the job's running instance: after a migration the job runs under a new
instance ID, and its job ID still finds it.`,
		Example: `  normsim logs counter-1a2b3c
  normsim logs -f counter-1a2b3c
  normsim logs --tail 50 --timestamps counter-1a2b3c
  normsim logs --since 10m counter-1a2b3c`,
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
			if logOpts.Since != "" {
				if _, err := sim.ParseSince(logOpts.Since, time.Now()); err != nil {
					return usageErr("--%s", sim.ErrorMessage(err))
				}
			}
			c := api()
			return onInstance(cmd.Context(), c, args[0], func(id string) error {
				return c.Logs(cmd.Context(), id, logOpts, cmd.OutOrStdout())
			})
		},
	}
	stop.Flags().BoolVar(&onlyStopped, "stopped", false, "remove only the record of an instance that is not running (a migration's stopped source); refuse one that runs")
	logs.Flags().BoolVarP(&logOpts.Follow, "follow", "f", false, "keep printing new lines until the instance ends")
	logs.Flags().BoolVarP(&logOpts.Timestamps, "timestamps", "t", false, "show the time each line arrived")
	logs.Flags().StringVar(&logOpts.Since, "since", "", "only lines since an RFC 3339 time or a duration back from now (10m)")
	logs.Flags().StringVarP(&tail, "tail", "n", "all", "number of lines to show from the end")

	var to, strategy, mruntime string
	var wait, ignoreSeam bool
	var logLines int
	var timeouts []string
	migrate := &cobra.Command{
		Use:   "migrate ID",
		Short: "Migrate an instance to another node",
		Long: `Migrate a running instance to another node with one of the strategies its
template allows (the declared one, or stopThenStart). With --wait the phases
are printed as they happen, then the output seam, and the exit status says
how it ended:

  0  completed, and normsim's judgement of the job's promises is pass or
     tolerated (printed with why: for example participants the target
     reported it could not apply)
  1  not completed: refused, aborted or failed (or the sim could not be asked)
  3  completed, but the judgement is fail: a handover's seam broke a
     promise (numbers lost or repeated, a side producing out of turn, no
     target output); --ignore-seam makes this 0

After the end it prints the output seam, the target's target-applied
result whole (applied, failed with reasons, skewMs) and the judgement
(grade, the side at fault, why): the one normsim ci, conform, normsimtest
and the dashboard print too.

An ID is an instance's (normsim ps lists them) or a job's, which names
the job's running instance: after a migration the job runs under a new
instance ID, and its job ID still finds it.`,
		Example: `  normsim migrate counter-1a2b3c --wait
  normsim migrate counter-1a2b3c --to b --strategy stopThenStart --wait
  normsim migrate counter-1a2b3c --timeout targetReady=2s --wait`,
		Args: exactArgs(1, "ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			req := sim.MigrateRequest{To: to, Strategy: strategy, Runtime: mruntime}
			if err := parseTimeouts("--timeout", timeouts, &req.Timeouts); err != nil {
				return err
			}
			if logLines < 1 {
				return usageErr("--log-lines: want at least 1; got %d", logLines)
			}
			c := api()
			c.LogTail = logLines
			// Asked once: a refusal is the answer, for the person who asked
			// to see (the driver's zero Retry).
			d := apiclient.Driver{C: c}
			var mig *sim.Migration
			err := onInstance(cmd.Context(), c, args[0], func(id string) (err error) {
				mig, err = d.Migrate(cmd.Context(), id, req)
				return err
			})
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "migration %s: %s of %s from %s to %s\n", mig.ID, mig.Strategy, mig.Source.Instance, mig.Source.Node, mig.Target.Node)
			if !wait {
				if mig.Target.Runtime == sim.RuntimeExternal {
					// The env exists once the target is placed (after the
					// source's state, for a handover): wait for it, not for
					// the end.
					return showExternalTarget(cmd.Context(), c, serverURL(server), mig.ID, out)
				}
				return nil
			}
			final, err := followMigration(cmd.Context(), c, mig, out)
			if err != nil {
				return err
			}
			sourceEnded(out, final)
			return waitExit(final, ignoreSeam)
		},
	}
	migrate.Flags().StringVar(&to, "to", "", "target node (default: the other node)")
	migrate.Flags().StringVar(&strategy, "strategy", "", "overlap, stopThenStart or handover (default: the template's declared one)")
	migrate.Flags().StringVar(&mruntime, "runtime", "", "runtime of the target (default: the source's)")
	migrate.Flags().BoolVar(&wait, "wait", false, "print the phases as they happen and wait for the end")
	migrate.Flags().BoolVar(&ignoreSeam, "ignore-seam", false, "with --wait, exit 0 for a completed migration whose judgement is fail (its seam broke a promise) instead of 3")
	migrate.Flags().IntVar(&logLines, "log-lines", sim.DefaultLogTail, "with --wait, last log lines of each side printed when the migration fails, aborts or is judged fail")
	migrate.Flags().StringArrayVar(&timeouts, "timeout", nil, "per-phase timeout PHASE=DURATION, over the sim's (normsim up --timeouts): "+strings.Join(sim.TimeoutNames(), ", ")+" (repeatable or comma-separated; docs/migrations.md)")

	templates := &cobra.Command{
		Use:   "templates",
		Short: "List the templates a running sim loaded, with strategy and parameters",
		Long: `List the product templates of a running sim: the migration strategy each
declares (what migrate uses by default), its parameters with type, default
and range (what launch --param sets), and why an invalid one was refused.`,
		Example: `  normsim templates`,
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			list, err := api().Templates(cmd.Context())
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if len(list) == 0 {
				fmt.Fprintln(out, "no templates loaded; start normsim up with --templates DIR")
				return nil
			}
			tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "TEMPLATE\tSTRATEGY\tPARAMETERS")
			for _, t := range list {
				if !t.Valid {
					why := "invalid"
					if t.Error != nil {
						why = "invalid: " + t.Error.Error()
					}
					fmt.Fprintf(tw, "%s\t-\t%s\n", t.Name, why)
					continue
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\n", t.Name, t.Strategy, paramsColumn(t.Parameters))
			}
			return tw.Flush()
		},
	}

	var abortWhy string
	var abortWait bool
	abort := &cobra.Command{
		Use:   "abort MIGRATION",
		Short: "Abort a running migration: roll it back as a job's abort would",
		Long: `Abort a running migration before its point of no return. It rolls back at
its next step exactly as when a job sends abort: each side still connected is
told abort, the target is removed, and the source keeps running; the
migration ends aborted, with your act (and --reason) on its timeline and as
its reason. Past the point of no return (a handover's source stopped its
output; an overlap's source is being stopped; a stopThenStart's source was
stopped) nothing can roll back: the abort is refused with why, and the
migration ends on its own.

With --wait it follows the migration to its end; the exit status is 0 once it
ended aborted.`,
		Example: `  normsim abort mig-1a2b3c4d5e
  normsim abort mig-1a2b3c4d5e --reason "wrong target node" --wait`,
		Args: exactArgs(1, "MIGRATION"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c := api()
			mig, err := c.AbortMigration(cmd.Context(), args[0], abortWhy)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "migration %s: abort requested in phase %s\n", mig.ID, mig.Phase)
			if !abortWait {
				return nil
			}
			final, err := followMigration(cmd.Context(), c, mig, out)
			if err != nil {
				return err
			}
			if final.State != sim.MigrationAborted {
				return &ExitError{Code: 1, Err: fmt.Errorf("migration %s ended %s, not aborted: %s", final.ID, final.State, final.Reason)}
			}
			return nil
		},
	}
	abort.Flags().StringVar(&abortWhy, "reason", "", "why, for the timeline and the migration's reason")
	abort.Flags().BoolVar(&abortWait, "wait", false, "follow the migration to its end")

	events := recordsCommand(api, recordsSpec[sim.DescribedEvent]{
		Use:   "events ID",
		Short: "Show what happened to an instance: its states, connections and runtime",
		Long: `Show the last changes of an instance, oldest first: each state it went
through (with the error that ended it), each time its job connected to the
job socket or its socket closed (with the close code and reason), and what
its runtime noticed (a service that exited, and whether the engine restarted
it). An instance removed since keeps its history until its records are
pruned (normsim up --keep-migrations). --json prints the records as the API
gives them.`,
		What: "events",
		None: "nothing recorded yet",
		Read: func(ctx context.Context, c *apiclient.Client, id string, tail int) ([]sim.DescribedEvent, error) {
			return c.InstanceEvents(ctx, id, tail)
		},
		Line: func(ev sim.DescribedEvent) string {
			return fmt.Sprintf("%s  %-19s %s", ev.At.UTC().Format("15:04:05.000"), ev.Kind, sim.TerminalSafe(ev.Text))
		},
	})
	frames := recordsCommand(api, recordsSpec[sim.FrameRecord]{
		Use:   "frames ID",
		Short: "Show the job-socket frames between an instance's job and its node",
		Long: `Show the last frames an instance's job and its node said to each other on
the job socket, oldest first: when, which way (in: job to node; out: node to
job), the frame's type and size, and its text (hello's token redacted). It
covers the job's whole life, not only its migrations: a hello that was
refused, a frame the job sent at the wrong moment. An instance removed since
keeps its frames until its records are pruned (normsim up
--keep-migrations). --json prints the records as the API gives them.`,
		What: "frames",
		None: "no frames yet (its job has not connected)",
		Read: func(ctx context.Context, c *apiclient.Client, id string, tail int) ([]sim.FrameRecord, error) {
			return c.Frames(ctx, id, tail)
		},
		Dropped: func(ctx context.Context, c *apiclient.Client, id string) string {
			n, err := c.FrameCounts(ctx, id)
			if err != nil {
				return ""
			}
			return strings.Join(sim.FrameCountNotes(n), "\n")
		},
		Line: func(f sim.FrameRecord) string {
			return fmt.Sprintf("%s  %-3s  %-16s %7s  %s", f.At.UTC().Format("15:04:05.000"), f.Direction, f.Type, fmt.Sprintf("%d B", f.Size), sim.FrameSnippet([]byte(f.Data)))
		},
	})

	nodes := &cobra.Command{
		Use:   "nodes",
		Short: "List the nodes of a running sim, with capability and addresses",
		Long: `List the simulated worker nodes: the address their published ports bind
(127.0.1.1, 127.0.1.2, … as separate hosts would have), their job socket's
URL, and the capabilities they advertise (norsk.io/job-socket while the
listener is up: a handover target needs it).`,
		Example: `  normsim nodes`,
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			nodes, err := api().Nodes(cmd.Context())
			if err != nil {
				return err
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NODE\tADDRESS\tJOB SOCKET\tCAPABILITIES")
			for _, n := range nodes {
				addr, sock, caps := cmp.Or(n.Address, "-"), "none (--no-job-socket)", cmp.Or(strings.Join(n.Capabilities, ", "), "-")
				if n.SharedAddress {
					addr += " (shared)"
				}
				if n.Socket != nil {
					sock = n.Socket.URL
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", n.Name, addr, sock, caps)
			}
			return tw.Flush()
		},
	}

	cmds := []*cobra.Command{launch, ps, stop, logs, events, frames, migrate, abort, templates, nodes}
	for _, c := range cmds {
		add(c)
	}
	return cmds
}

// parseTimeouts reads --timeout/--timeouts values (PHASE=DURATION, also
// comma-separated) into t, as a usage error naming the flag.
func parseTimeouts(flag string, specs []string, t *sim.Timeouts) error {
	if err := sim.ParseTimeouts(specs, t); err != nil {
		return usageErr("%s: %s (docs/migrations.md)", flag, sim.ErrorMessage(err))
	}
	return nil
}

// followMigration prints each new timeline event until the migration ends,
// however long that takes (Ctrl-C leaves it going on).
func followMigration(ctx context.Context, c *apiclient.Client, started *sim.Migration, out io.Writer) (*sim.Migration, error) {
	printed := 0
	ext := newExternalWatch(out)
	d := apiclient.Driver{C: c, EndWait: -1}
	mig, err := d.WaitEnd(ctx, started, func(mig *sim.Migration) {
		if printed < len(mig.Events) {
			ext.clear()
		}
		for _, ev := range mig.Events[min(printed, len(mig.Events)):] {
			fmt.Fprint(out, sim.TimelineLine(mig, ev))
		}
		printed = len(mig.Events)
		ext.tick(mig, time.Now())
	})
	ext.clear()
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
	printVerdict(out, mig)
	if mig.Logs != nil && len(mig.Logs.Tails) > 0 {
		fmt.Fprint(out, sim.FormatLogTails(mig.Logs.Tails))
	}
	return mig, nil
}

// showExternalTarget waits until the migration has placed its external
// target and prints the env its job needs, or says how the migration ended
// before that.
func showExternalTarget(ctx context.Context, c *apiclient.Client, server, id string, out io.Writer) error {
	ext := newExternalWatch(out)
	waitCtx, stop := context.WithCancel(ctx)
	defer stop()
	mig, err := c.WaitMigration(waitCtx, id, func(mig *sim.Migration) {
		if ext.showEnv(mig) {
			stop()
		}
	})
	switch {
	case ext.envShown:
		fmt.Fprintf(out, "Follow it on the dashboard: %s/migrations/%s (or migrate with --wait for a countdown)\n", strings.TrimSuffix(server, "/"), id)
		return nil
	case err != nil:
		return err
	default:
		return &ExitError{Code: 1, Err: fmt.Errorf("migration %s %s before its target was placed: %s", mig.ID, mig.State, mig.Reason)}
	}
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

// exitSeam is migrate --wait's exit status for a migration that completed
// with a judgement of fail.
const exitSeam = 3

// printVerdict prints what an ended migration's verdict rests on: the
// seam, what the target reported in target-applied, and the judgement.
func printVerdict(out io.Writer, m *sim.Migration) {
	if m.Output != nil {
		fmt.Fprintf(out, "output: %s (%s)\n", m.Output.Verdict, m.Output.Detail)
	}
	if sim.AppliedReported(m) {
		fmt.Fprintf(out, "target-applied: %s\n", sim.FormatResult(m.Result))
	}
	fmt.Fprintf(out, "judgement: %s\n", sim.FormatJudgement(m.Judged()))
}

// waitExit is migrate --wait's exit status for an ended migration: 1 when
// it did not complete, exitSeam when it completed but the judgement is
// fail (a handover promised an exact cutover), unless ignoreSeam.
// tolerated is 0: what it tolerates was printed.
func waitExit(m *sim.Migration, ignoreSeam bool) error {
	if m.State != sim.MigrationCompleted {
		return &ExitError{Code: 1, Err: fmt.Errorf("migration %s %s: %s", m.ID, m.State, m.Reason)}
	}
	if j := m.Judged(); j.Grade == sim.GradeFail && !ignoreSeam {
		return &ExitError{Code: exitSeam, Err: fmt.Errorf("migration %s completed, but its judgement is fail (at fault: %s): %s (--ignore-seam accepts it)", m.ID, cmp.Or(j.AtFault, "none"), j.Why)}
	}
	return nil
}

// recordsSpec is a command that prints an instance's last records of one
// kind (its events, its frames).
type recordsSpec[T any] struct {
	Use, Short, Long string
	// What names the records ("frames"); None is what is said of an
	// instance without any.
	What, None string
	Read       func(ctx context.Context, c *apiclient.Client, id string, tail int) ([]T, error)
	Line       func(T) string
	// Dropped, when set, says what of the instance's records normsim let
	// go of ("" when nothing): printed before the lines.
	Dropped func(ctx context.Context, c *apiclient.Client, id string) string
}

// recordsCommand makes spec's command: the last --tail records of the
// instance (or the job's running instance) its ID names, a line each, or
// --json as the API gives them.
func recordsCommand[T any](api func() *apiclient.Client, spec recordsSpec[T]) *cobra.Command {
	tail, asJSON := 50, false
	name := strings.Fields(spec.Use)[0]
	cmd := &cobra.Command{
		Use:   spec.Use,
		Short: spec.Short,
		Long: spec.Long + `

An ID is an instance's (normsim ps lists them) or a job's, which names
the job's running instance: after a migration the job runs under a new
instance ID, and its job ID still finds it.`,
		Example: "  normsim " + name + " counter-1a2b3c\n  normsim " + name + " counter-1a2b3c --tail 20 --json",
		Args:    exactArgs(1, "ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if tail < 1 || tail > 10000 {
				return usageErr("--tail: want a number of %s from 1 to 10000; got %d", spec.What, tail)
			}
			c := api()
			var recs []T
			dropped := ""
			var unreadable *sim.UnreadableRecords
			err := onInstance(cmd.Context(), c, args[0], func(id string) (err error) {
				recs, err = spec.Read(cmd.Context(), c, id, tail)
				if u, ok := errors.AsType[*sim.UnreadableRecords](err); ok {
					unreadable, err = u, nil
				}
				if err == nil && spec.Dropped != nil {
					dropped = spec.Dropped(cmd.Context(), c, id)
				}
				return err
			})
			if err != nil {
				return err
			}
			if unreadable != nil {
				// Served without them: said on stderr, so --json stays
				// the records alone.
				fmt.Fprintf(cmd.ErrOrStderr(), "warning: %s of %s could not be read from normsim's store and are left out: %v\n", sim.Plural(int64(unreadable.Count), "record"), args[0], unreadable.First)
			}
			out := cmd.OutOrStdout()
			if asJSON {
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				return enc.Encode(recs)
			}
			if dropped != "" {
				fmt.Fprintln(out, dropped)
			}
			if len(recs) == 0 {
				fmt.Fprintf(out, "%s: %s\n", args[0], spec.None)
				return nil
			}
			for _, r := range recs {
				fmt.Fprintln(out, spec.Line(r))
			}
			return nil
		},
	}
	cmd.Flags().IntVar(&tail, "tail", tail, "how many of the last "+spec.What+" to show (1 to 10000)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the "+spec.What+" as JSON records")
	return cmd
}

// reasonColumn is an instance's error on one line, cut for a table: why
// a failed or stopped instance ended ("-" when nothing is wrong).
func reasonColumn(s string) string {
	s = strings.Join(strings.Fields(sim.TerminalSafe(s)), " ")
	if s == "" {
		return "-"
	}
	if r := []rune(s); len(r) > 60 {
		s = string(r[:59]) + "…"
	}
	return s
}

// waitLaunched waits until the instance is where until says, and fails
// with its error and last log lines when it ends first or the timeout
// passes.
func waitLaunched(ctx context.Context, c *apiclient.Client, id string, until sim.Until, timeout time.Duration, out io.Writer) error {
	// A job that dies at once was running for a moment: it must still be
	// there a moment later (Settle).
	d := apiclient.Driver{C: c, UpWait: timeout, Settle: launchSettle}
	_, err := d.WaitUp(ctx, id, until)
	if err == nil {
		fmt.Fprintf(out, "%s is %s\n", id, until)
		return nil
	}
	if ctx.Err() != nil {
		return errors.New("interrupted while waiting; the instance goes on")
	}
	var why error = err
	var notUp *apiclient.NotUpError
	if errors.As(err, &notUp) && notUp.Instance != nil {
		in := notUp.Instance
		why = fmt.Errorf("instance %s is not %s after %s: state %s, connected %v%s", id, until, timeout, in.State, in.Connected, colonOr(in.Error))
	}
	if page, lerr := c.LogPage(ctx, id, 20); lerr == nil && len(page.Lines) > 0 {
		fmt.Fprintf(out, "last %d log line(s) of %s:\n", len(page.Lines), id)
		for _, l := range page.Lines {
			fmt.Fprintf(out, "  %s\n", sim.FormatLogLine(l, false))
		}
	}
	return &ExitError{Code: 1, Err: why}
}

// launchSettle is how long launch --until watches an instance that got
// there for it to end: a job that dies at once does within it.
const launchSettle = time.Second

// colonOr is ": s", or "" for an empty s.
func colonOr(s string) string {
	if s == "" {
		return ""
	}
	return ": " + s
}

// onInstance runs do on the instance a command's ID argument names: the
// instance of that ID, or, when do is refused NOT_FOUND and arg is no
// instance's ID but a job's, the job's running instance (after a
// migration the job runs as an instance of another name). An instance ID
// costs no request more than do's own; do's error stands when arg names
// neither, with where to find the instances. What was not found is read
// from the instances the API lists, never from the error's message: an
// instance of that ID was there, so something else was not (a node, say).
func onInstance(ctx context.Context, c *apiclient.Client, arg string, do func(id string) error) error {
	err := do(arg)
	var e *apiclient.Error
	if !errors.As(err, &e) || e.Code != sim.ENotFound {
		return err
	}
	list, lerr := c.Instances(ctx)
	if lerr != nil {
		return err
	}
	running := ""
	for _, in := range list {
		if in.ID == arg {
			return err
		}
		if in.JobID == arg && in.State == sim.InstanceRunning {
			running = in.ID
		}
	}
	if running != "" {
		return do(running)
	}
	h := *e
	h.Message += "; normsim ps lists the instances"
	return &h
}

// templateHint adds the loaded templates to a launch refused NOT_FOUND
// because no template of that name is loaded (the list says so, not the
// message: the node may be what was not found).
func templateHint(ctx context.Context, c *apiclient.Client, name string, err error) error {
	var e *apiclient.Error
	if !errors.As(err, &e) || e.Code != sim.ENotFound {
		return err
	}
	list, lerr := c.Templates(ctx)
	if lerr != nil {
		return err
	}
	names := make([]string, 0, len(list))
	for _, t := range list {
		if t.Name == name {
			return err
		}
		names = append(names, t.Name)
	}
	loaded := "none"
	if len(names) > 0 {
		slices.Sort(names)
		loaded = strings.Join(names, ", ")
	}
	h := *e
	h.Message += "; loaded: " + loaded + " (normsim templates shows them; normsim up --templates DIR loads others)"
	return &h
}

// paramsColumn is what templates shows of a template's parameters:
// "RATE int=50 [1..1000]", "-" for none.
func paramsColumn(ps []sim.Parameter) string {
	if len(ps) == 0 {
		return "-"
	}
	var out []string
	for _, p := range ps {
		s := p.Name + " " + p.Type
		if p.Default != nil {
			s += "=" + *p.Default
		} else if p.Required {
			s += " (required)"
		}
		if p.Min != nil || p.Max != nil {
			lo, hi := "", ""
			if p.Min != nil {
				lo = strconv.FormatFloat(*p.Min, 'g', -1, 64)
			}
			if p.Max != nil {
				hi = strconv.FormatFloat(*p.Max, 'g', -1, 64)
			}
			s += " [" + lo + ".." + hi + "]"
		}
		if len(p.Values) > 0 {
			s += " {" + strings.Join(p.Values, "|") + "}"
		}
		out = append(out, s)
	}
	return strings.Join(out, ", ")
}

// paramValues reads --param KEY=VALUE flags. A key given twice is a usage
// error, as the API refuses a key twice in params: which value was meant
// is not for normsim to guess.
func paramValues(flags []string) (map[string]string, error) {
	out := map[string]string{}
	for _, p := range flags {
		k, v, ok := strings.Cut(p, "=")
		if !ok || k == "" {
			return nil, usageErr("--param: want KEY=VALUE; got %q", p)
		}
		if prev, twice := out[k]; twice {
			return nil, usageErr("--param: %s is given twice (%q and %q); give each parameter once", k, prev, v)
		}
		out[k] = v
	}
	return out, nil
}
