// Package cli is normsim's command line: one cobra command per subcommand,
// each a thin layer over app (the simulator) or the HTTP API (commands that
// talk to a running sim).
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/normsim/normsim/apiclient"
)

// Version is set at build time (-ldflags "-X github.com/normsim/normsim/cli.Version=v1.2.3").
var Version = "dev"

// Env is what the commands need from the process: streams, the embedded
// default templates, and how to exit.
type Env struct {
	Stdout, Stderr io.Writer
	Templates      fs.FS
	// CollectorOn brings the garbage collector back at once, which the
	// binary keeps off while it starts (internal/initgc); nil: it is on.
	// A command that measures the sim in this process (bench) calls it
	// first, so that a short run is not measured without a collector.
	CollectorOn func()
}

// ExitError carries a specific exit code (1 failure, 2 usage).
type ExitError struct {
	Code int
	Err  error
	// Stands: the code is the command's answer even after a Ctrl-C (up,
	// whose normal end is one, stopping uncleanly), not the interrupt's.
	Stands bool
}

func (e *ExitError) Error() string {
	if e.Err == nil {
		return ""
	}
	return e.Err.Error()
}

func (e *ExitError) Unwrap() error { return e.Err }

func usageErr(format string, args ...any) error {
	return &ExitError{Code: 2, Err: fmt.Errorf(format, args...)}
}

// noArgs is cobra.NoArgs as a usage error (exit 2), saying that the
// command takes none rather than calling the argument an unknown command.
func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usageErr("%s takes no arguments; got %q\nRun '%s --help' for usage.", cmd.CommandPath(), args[0], cmd.CommandPath())
	}
	return nil
}

// Main runs the command line and returns the process exit code.
func Main(args []string, env Env) int {
	ctx, stop, hurried := signalContext(env.Stderr)
	defer stop()
	root := NewRoot(env)
	root.SetArgs(args)
	root.SetOut(env.Stdout)
	root.SetErr(env.Stderr)
	err := root.ExecuteContext(ctx)
	if hurried() {
		return exitInterrupted // interrupted twice: not a clean end, whatever the command said
	}
	if err == nil {
		return 0
	}
	code := report(err, env.Stderr)
	var ee *ExitError
	if ctx.Err() != nil && !(errors.As(err, &ee) && ee.Stands) {
		// A Ctrl-C (or SIGTERM) cut the command short: its failure is
		// the interrupt's, and says so as a shell does (128+SIGINT), so
		// a CI wrapper tells a cancelled run from a failed one. A command
		// that ends cleanly on it (up) still exits 0.
		return exitInterrupted
	}
	return code
}

// exitInterrupted is the exit status of a command cut short by a signal.
const exitInterrupted = 130

// report prints a command's error as the user should read it and returns
// its exit status.
func report(err error, stderr io.Writer) int {
	var ee *ExitError
	if errors.As(err, &ee) {
		if ee.Err != nil && ee.Error() != "" {
			fmt.Fprintln(stderr, "normsim:", ee.Error())
		}
		return ee.Code
	}
	var apiErr *apiclient.Error
	var unreachable *apiclient.UnreachableError
	switch {
	case errors.As(err, &apiErr):
		fmt.Fprintf(stderr, "normsim: %s (%s)\n", apiErr.Message, apiErr.Code)
	case errors.As(err, &unreachable):
		fmt.Fprintf(stderr, "normsim: %v\n  is `normsim up` running? point elsewhere with --server or NORMSIM_SERVER\n", unreachable)
	default:
		fmt.Fprintln(stderr, "normsim:", err)
	}
	if isUsage(err) || strings.HasPrefix(err.Error(), "unknown command ") {
		return 2 // cobra's own refusal of a command it does not know is usage too
	}
	return 1
}

// hurryKey is the context key of the command's hurry hook (onHurry).
type hurryKey struct{}

// onHurry registers what a second Ctrl-C (or SIGTERM) does before normsim
// quits: kill and remove what is still running, within a short bound.
func onHurry(ctx context.Context, f func()) {
	if h, ok := ctx.Value(hurryKey{}).(*hurryHook); ok {
		h.set(f)
	}
}

type hurryHook struct {
	mu    sync.Mutex
	f     func()
	fired atomic.Bool
}

func (h *hurryHook) set(f func()) { h.mu.Lock(); h.f = f; h.mu.Unlock() }

func (h *hurryHook) run() {
	h.fired.Store(true)
	h.mu.Lock()
	f := h.f
	h.mu.Unlock()
	if f != nil {
		f()
	}
}

// hurryBound is how long a second interrupt lets normsim kill and remove
// what it runs before it quits regardless.
const hurryBound = 3 * time.Second

// signalEcho is how soon after the first a signal is taken for the same
// one delivered again; a person's second Ctrl-C takes longer.
const signalEcho = 50 * time.Millisecond

// signalContext is cancelled by the first Ctrl-C (or SIGTERM, SIGHUP), for a
// graceful shutdown; a second one runs the hurry hook (onHurry) and quits
// once the command returns, within hurryBound. stop ends the watch;
// hurried reports whether the second signal came.
func signalContext(stderr io.Writer) (ctx context.Context, stop func(), hurried func() bool) {
	hook := &hurryHook{}
	ctx, cancel := context.WithCancel(context.WithValue(context.Background(), hurryKey{}, hook))
	hurried = hook.fired.Load
	ch := make(chan os.Signal, 2)
	// SIGHUP too: a closed terminal or a dropped ssh session must not
	// leave the jobs running with nothing to stop them.
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	done := make(chan struct{})
	go func() {
		select {
		case <-ch:
			cancel()
		case <-done:
			return
		}
		// The context is cancelled now: only the next signal, or the
		// command's end, ends this wait. A signal right behind the first
		// is the same one delivered twice (timeout(1) signals its child
		// and then its process group), not a second Ctrl-C.
		first := time.Now()
	wait:
		for {
			select {
			case <-ch:
				if time.Since(first) >= signalEcho {
					break wait
				}
			case <-done:
				return
			}
		}
		fmt.Fprintln(stderr, "\nnormsim: second interrupt: killing what is still running and quitting")
		hook.run()
		select {
		case <-done:
		case <-time.After(hurryBound):
			fmt.Fprintln(stderr, "normsim: quitting now; something may be left running (the next normsim on this store cleans it up)")
		}
		os.Exit(exitInterrupted)
	}()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			signal.Stop(ch)
			cancel()
			close(done)
		})
	}
	return ctx, stop, hurried
}

// NewRoot builds the command tree.
func NewRoot(env Env) *cobra.Command {
	root := &cobra.Command{
		Use:   "normsim",
		Short: "Simulate a Norsk manager and worker nodes to test job migration locally and in CI",
		Long: `normsim simulates a Norsk manager and its worker nodes on one machine, so you
can test job migration and handover code locally and in CI.

  normsim up                      start two nodes (a, b) and the dashboard
  normsim launch counter --node a run the counter template on node a
  normsim migrate ID --wait       hand it over to the other node
  normsim ci scenario.yaml        run scenarios headless, exit non-zero on failure
  normsim templates               the loaded templates, their strategy and parameters
  normsim nodes                   the nodes, their addresses and capabilities

Every command that talks to a running sim takes --server (default
http://127.0.0.1:7788).`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return usageErr("%v%s\nRun '%s --help' for usage.", err, flagHint(err), c.CommandPath())
	})
	root.AddCommand(newVersionCmd(env), newUpCmd(env), newValidateCmd(env), newBuildExamplesCmd(env))
	root.AddCommand(clientCommands(env)...)
	root.AddCommand(newCICmd(env), newConformCmd(env))
	root.AddCommand(newBenchCmd(env))
	strictBuiltins(root)
	return root
}

// strictBuiltins makes cobra's own commands refuse what they do not know
// as usage errors: `normsim completion SHELL` a shell it has no script
// for, `normsim help TOPIC` a command there is not. Both printed help and
// exited 0, so a script piping `completion bsh` into a completion file
// went on with nothing in it.
func strictBuiltins(root *cobra.Command) {
	root.InitDefaultCompletionCmd()
	root.InitDefaultHelpCmd()
	for _, c := range root.Commands() {
		switch c.Name() {
		case "completion":
			var shells []string
			for _, sub := range c.Commands() {
				shells = append(shells, sub.Name())
			}
			c.Args = func(cmd *cobra.Command, args []string) error {
				if len(args) > 0 {
					return usageErr("%s: no shell %q; want one of %s\nRun '%s --help' for usage.", cmd.CommandPath(), args[0], strings.Join(shells, ", "), cmd.CommandPath())
				}
				return nil
			}
			c.RunE = func(cmd *cobra.Command, _ []string) error { return cmd.Help() }
		case "help":
			c.Args = func(cmd *cobra.Command, args []string) error {
				if _, _, err := cmd.Root().Find(args); err != nil {
					return usageErr("no command %q to help with\nRun '%s' for the list.", strings.Join(args, " "), cmd.CommandPath())
				}
				return nil
			}
		}
	}
}

// flagHint adds the fix to a flag value Go could not parse: its message
// says what is wrong ("time: unknown unit "x" in duration "5x"") but not
// what to write. The flag's type says what to write.
func flagHint(err error) string {
	var bad *pflag.InvalidValueError
	if !errors.As(err, &bad) {
		return ""
	}
	switch bad.GetFlag().Value.Type() {
	case "duration":
		return "; write a duration such as 500ms, 30s or 2m"
	case "int", "int8", "int16", "int32", "int64", "uint", "uint8", "uint16", "uint32", "uint64":
		return "; write a whole number, such as 10"
	}
	return ""
}

func isUsage(err error) bool {
	var ee *ExitError
	return errors.As(err, &ee) && ee.Code == 2
}

func newVersionCmd(env Env) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print normsim's version",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			fmt.Fprintf(cmd.OutOrStdout(), "normsim %s\n", Version)
			return nil
		},
	}
}

func newLogger(w io.Writer, format, level string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, usageErr("--log-level: must be debug, info, warn or error; got %q", level)
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, usageErr("--log-format: must be text or json; got %q", format)
}
