package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/docker/go-units"
	"github.com/spf13/cobra"

	"github.com/normsim/normsim/app"
	"github.com/normsim/normsim/app/withdocker"
	"github.com/normsim/normsim/app/withsqlite"
	"github.com/normsim/normsim/internal/bench"
	"github.com/normsim/normsim/internal/memlimit"
	"github.com/normsim/normsim/sim"
)

func newUpCmd(env Env) *cobra.Command {
	opts := app.DefaultOptions()
	opts.OpenStore = withsqlite.Open
	var logFormat, logLevel, cpuProfile, memoryLimit string
	var timeouts []string
	cmd := &cobra.Command{
		Use:   "up",
		Short: "Start the simulated nodes, their job sockets and the dashboard",
		Long: `Start the simulated manager with its worker nodes (a and b by default), each
serving the job socket jobs dial with NORSK_WORKER_WS_URL, plus the dashboard
and API. Templates come from ./templates (or --templates DIR); jobs run as
Docker containers when a Docker engine answers, else as host processes.

Records (instances, migrations, timelines, frames) are kept in SQLite at
$XDG_STATE_HOME/normsim/normsim.db unless --db says otherwise; --db :memory:
keeps nothing.

Ctrl-C stops everything and removes what normsim started (unless --keep);
so do SIGTERM and SIGHUP (a closed terminal or a dropped ssh session); a
second Ctrl-C quits at once. With --keep, containers keep running and the
next start on the same --db adopts them; host processes are stopped by that
next start (normsim cannot take them back), and their instances are marked
failed with that reason.

Exit status: 0 once stopped, 1 when normsim could not start (a port in
use, a store it cannot open) or stopped on an error, 2 for a usage error
(a flag value it cannot run with).`,
		Example: `  normsim up
  normsim up --nodes a,b,c --socket-port 0 --db :memory:
  normsim up --no-job-socket b --runtime process
  normsim up --runtime external --timeouts targetStart=10m,targetReady=5m   # time to step through a job in a debugger
  normsim up --db :memory: --memory-limit 600MiB   # thousands of jobs on a machine short of memory`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			log, err := newLogger(env.Stderr, logFormat, logLevel)
			if err != nil {
				return err
			}
			addr, err := listenAddr(opts.Addr)
			if err != nil {
				return err
			}
			opts.Addr = addr
			if opts.KeepMigrations < 0 {
				return usageErr("--keep-migrations: must be 0 (keep all) or more; got %d", opts.KeepMigrations)
			}
			if strings.TrimSpace(opts.DB) == "" {
				return usageErr("--db: give a store file path, or :memory: for a throwaway run; got an empty path")
			}
			if opts.SocketPort < 0 || opts.SocketPort > 65535 {
				return usageErr("--socket-port: must be 0..65535; got %d", opts.SocketPort)
			}
			if opts.OutputPort < 0 || opts.OutputPort > 65535 {
				return usageErr("--output-port: must be 0..65535 (0 picks a free port); got %d", opts.OutputPort)
			}
			if err := parseTimeouts("--timeouts", timeouts, &opts.Timeouts); err != nil {
				return err
			}
			if cmd.Flags().Changed("nodes") && len(opts.Nodes) == 0 {
				// Read as none, it would have quietly been the default.
				return usageErr("--nodes: name at least one node (e.g. --nodes a,b); got none")
			}
			for i, n := range opts.Nodes {
				opts.Nodes[i] = strings.TrimSpace(n)
			}
			if last := opts.SocketPort + len(opts.Nodes) - 1; opts.SocketPort > 0 && last > 65535 {
				return usageErr("--socket-port: %d nodes take ports %d..%d, past 65535; give at most %d, or 0 for free ports", len(opts.Nodes), opts.SocketPort, last, 65535-len(opts.Nodes)+1)
			}
			if memoryLimit != "" {
				limit, err := parseMemoryLimit("--memory-limit", memoryLimit)
				if err != nil {
					return err
				}
				// memlimit: the binary's start holds the runtime's limit
				// down for a moment (internal/initgc); this one comes
				// back after it and is the one reported.
				defer memlimit.Set(memlimit.Set(limit))
			}
			if cpuProfile != "" {
				stop, err := bench.ProfileCPU(cpuProfile)
				if err != nil {
					return err
				}
				defer stop()
			}
			opts.Logger = log
			opts.Version = Version
			opts.DefaultTemplates = env.Templates
			opts.Runtimes = withdocker.Runtimes()
			m := app.New(opts)
			defer m.Close()
			onHurry(cmd.Context(), m.Hurry)
			if err := m.Run(cmd.Context(), cmd.OutOrStdout()); err != nil {
				var pe *app.PortInUseError
				if errors.As(err, &pe) {
					return &ExitError{Code: 1, Err: pe}
				}
				var oe *app.OptionError
				if errors.As(err, &oe) {
					return usageErr("%v", oe)
				}
				return err
			}
			stopping(cmd.OutOrStdout(), m, opts.Keep)
			if err := m.Close(); err != nil {
				// Records lost, a job left running: not a clean stop,
				// which a script must be able to tell (exit 1).
				log.Warn("normsim did not stop cleanly", "err", err)
				fmt.Fprintln(cmd.OutOrStdout(), "  normsim stopped, not cleanly (above).")
				return &ExitError{Code: 1, Stands: true}
			}
			fmt.Fprintln(cmd.OutOrStdout(), "  normsim stopped.")
			return nil
		},
	}
	f := cmd.Flags()
	f.StringSliceVar(&opts.Nodes, "nodes", opts.Nodes, "names of the simulated worker nodes")
	f.IntVar(&opts.SocketPort, "socket-port", opts.SocketPort, "job-socket port of the first node; the next nodes take the following ports (0 picks free ports)")
	f.StringVar(&opts.SocketHost, "socket-host", opts.SocketHost, "address the job sockets and output sink bind (containers reach them through host.docker.internal)")
	f.StringArrayVar(&opts.NoJobSocket, "no-job-socket", nil, "run NODE without a job-socket listener (repeatable)")
	f.StringVar(&opts.Addr, "addr", opts.Addr, "dashboard and API address: HOST:PORT, or PORT or :PORT for that port on 127.0.0.1 (0 picks a free port)")
	f.StringVar(&opts.DB, "db", opts.DB, "SQLite store path, or :memory: for a throwaway run")
	f.StringArrayVar(&opts.Templates, "templates", nil, "directory of product templates (repeatable; default ./templates)")
	f.StringVar(&opts.Runtime, "runtime", opts.Runtime, "default runtime: auto, docker, process or external")
	f.StringVar(&opts.StudioAccess, "studio-access", "", "the launcher's access mode, set as NORSK_STUDIO_ACCESS where a template's studioAccessModes lists it")
	f.StringArrayVar(&timeouts, "timeouts", nil, "per-phase migration timeouts for the whole run, PHASE=DURATION[,…] with PHASE one of "+strings.Join(sim.TimeoutNames(), ", ")+"; a request's own --timeout wins (docs/migrations.md)")
	f.BoolVar(&opts.Keep, "keep", false, "leave what normsim started running on exit: the next start on the same --db adopts the containers\n(their jobs reconnect within about 2s, their output sink keeps its port) and external jobs reconnect by themselves;\nhost processes cannot be adopted, so that start stops them and marks their instances failed")
	f.IntVar(&opts.OutputPort, "output-port", 0, "UDP port of the output sink (0 picks a free port)")
	f.BoolVar(&opts.NoMedia, "no-media", false, "run no media receiver: jobs get no NORMSIM_MEDIA_URL and seams are judged from the output sink alone.\nEach job's receiver is a UDP port, an open file beside its job socket: for more jobs than half the open-file limit, ulimit -n (docs/media.md)")
	f.IntVar(&opts.KeepMigrations, "keep-migrations", 0, "keep at most N finished migrations in the store, dropping the oldest first with removed instances' events and\nframes older than the oldest migration kept (counted in GET /api/v1/stats; a live instance's stay, within its own\nbounds); 0 keeps all. For long runs on --db :memory:, whose store\notherwise grows with every migration")
	f.StringVar(&memoryLimit, "memory-limit", "", "a soft limit on the memory normsim's Go runtime holds, e.g. 600MiB or 1g (as GOMEMLIMIT, which it overrides): near it the\ngarbage collector runs more often, trading handovers/s for memory. The SQLite store and the binary are outside it\n(docs/benchmarks.md, section 7)")
	f.BoolVar(&opts.Profiling, "pprof", false, "serve the runtime's profiles under /debug/pprof/ on --addr, for go tool pprof (heap, allocs, goroutine, profile?seconds=N)")
	f.StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile of the whole run to FILE at exit, for go tool pprof")
	f.StringVar(&logFormat, "log-format", "text", "log format: text or json")
	f.StringVar(&logLevel, "log-level", "info", "log level: debug, info, warn or error")
	return cmd
}

// parseMemoryLimit reads a memory size as docker run --memory takes it
// (600m, 600MiB, 1.5g; binary units), as a usage error naming flag.
func parseMemoryLimit(flag, v string) (int64, error) {
	n, err := units.RAMInBytes(v)
	if err != nil || n <= 0 {
		return 0, usageErr("%s: want a size such as 600MiB, 600m or 1g; got %q", flag, v)
	}
	return n, nil
}

// listenAddr reads --addr. A bare port or ":PORT" means that port on
// 127.0.0.1, not every interface as net.Listen would take ":PORT": the
// dashboard changes things and promises to bind loopback unless told a
// host. 0 picks a free port, as the "port in use" message offers.
func listenAddr(s string) (string, error) {
	s = strings.TrimSpace(s)
	host, port := "127.0.0.1", s
	if h, p, err := net.SplitHostPort(s); err == nil {
		if h != "" {
			host = h
		}
		port = p
	} else if strings.Contains(s, ":") {
		return "", usageErr("--addr: want HOST:PORT, PORT or :PORT; got %q (%v)", s, err)
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 0 || n > 65535 {
		return "", usageErr("--addr: the port must be 0..65535 (0 picks a free one); got %q", s)
	}
	return net.JoinHostPort(host, strconv.Itoa(n)), nil
}

// stopping says, on the first Ctrl-C, what the shutdown is about to remove
// (or leave running with --keep), so a wait for containers to stop is not
// a silent one.
func stopping(w io.Writer, m *app.Main, keep bool) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	var live []string
	if list, err := m.Manager.Instances(ctx); err == nil {
		for _, in := range list {
			if in.State != sim.InstanceStopped {
				live = append(live, in.ID+" on "+in.Node)
			}
		}
	}
	switch {
	case len(live) == 0:
		fmt.Fprintln(w, "\n  Stopping normsim: no instances to remove (Ctrl-C again quits at once)")
	case keep:
		fmt.Fprintf(w, "\n  Stopping normsim: leaving %s running (--keep; the next normsim on this store adopts them): %s\n", sim.Plural(int64(len(live)), "instance"), someOf(live))
	default:
		fmt.Fprintf(w, "\n  Stopping normsim: removing %s: %s (Ctrl-C again quits at once)\n", sim.Plural(int64(len(live)), "instance"), someOf(live))
	}
}

// shownInstances is how many instances a shutdown line names: enough to
// recognise a laptop's few, one line for a load test's thousands.
const shownInstances = 8

// someOf names the first shownInstances of live and counts the rest.
func someOf(live []string) string {
	if len(live) <= shownInstances {
		return strings.Join(live, ", ")
	}
	return fmt.Sprintf("%s and %d more (normsim ps lists them)", strings.Join(live[:shownInstances], ", "), len(live)-shownInstances)
}
