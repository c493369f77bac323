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
	"syscall"

	"github.com/spf13/cobra"

	"github.com/normsim/normsim/client"
)

// Version is set at build time (-ldflags "-X github.com/normsim/normsim/cli.Version=v1.2.3").
var Version = "dev"

// Env is what the commands need from the process: streams, the embedded
// default templates, and how to exit.
type Env struct {
	Stdout, Stderr io.Writer
	Templates      fs.FS
}

// ExitError carries a specific exit code (1 failure, 2 usage).
type ExitError struct {
	Code int
	Err  error
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

// Main runs the command line and returns the process exit code.
func Main(args []string, env Env) int {
	ctx, stop := signalContext()
	defer stop()
	root := NewRoot(env)
	root.SetArgs(args)
	root.SetOut(env.Stdout)
	root.SetErr(env.Stderr)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return 0
	}
	var ee *ExitError
	if errors.As(err, &ee) {
		if ee.Err != nil && ee.Error() != "" {
			fmt.Fprintln(env.Stderr, "normsim:", ee.Error())
		}
		return ee.Code
	}
	var apiErr *client.Error
	var unreachable *client.UnreachableError
	switch {
	case errors.As(err, &apiErr):
		fmt.Fprintf(env.Stderr, "normsim: %s (%s)\n", apiErr.Message, apiErr.Code)
	case errors.As(err, &unreachable):
		fmt.Fprintf(env.Stderr, "normsim: %v\n  is `normsim up` running? point elsewhere with --server or NORMSIM_SERVER\n", unreachable)
	default:
		fmt.Fprintln(env.Stderr, "normsim:", err)
	}
	if isUsage(err) {
		return 2
	}
	return 1
}

// signalContext is cancelled by the first Ctrl-C (or SIGTERM); a second one
// quits at once.
func signalContext() (context.Context, func()) {
	ctx, cancel := context.WithCancel(context.Background())
	ch := make(chan os.Signal, 2)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	go func() {
		select {
		case <-ch:
			cancel()
		case <-ctx.Done():
			return
		}
		select {
		case <-ch:
			fmt.Fprintln(os.Stderr, "\nnormsim: second interrupt, quitting now")
			os.Exit(130)
		case <-ctx.Done():
		}
	}()
	return ctx, func() { signal.Stop(ch); cancel() }
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

Every command that talks to a running sim takes --server (default
http://127.0.0.1:7788).`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return usageErr("%v\nRun '%s --help' for usage.", err, c.CommandPath())
	})
	root.AddCommand(newVersionCmd(env), newUpCmd(env), newValidateCmd(env), newBuildExamplesCmd(env))
	root.AddCommand(clientCommands(env)...)
	root.AddCommand(newCICmd(env))
	root.AddCommand(newBenchCmd(env))
	return root
}

func isUsage(err error) bool {
	var ee *ExitError
	return errors.As(err, &ee) && ee.Code == 2
}

func newVersionCmd(env Env) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print normsim's version",
		Args:  cobra.NoArgs,
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
