package app_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/normsim/normsim/app"
	"github.com/normsim/normsim/sim"
)

// closeFails is a runtime whose Close does its work and then fails.
type closeFails struct {
	sim.Runtime
	err error
}

func (c closeFails) Close(ctx context.Context, keep bool) error {
	return errors.Join(c.Runtime.Close(ctx, keep), c.err)
}

// TestCloseReportsWhatFailed: Close returns what failed while shutting
// down, naming it, and goes on closing the rest; a second Close returns the
// same error. A simulator whose shutdown went well closes without one.
func TestCloseReportsWhatFailed(t *testing.T) {
	errGone := errors.New("the engine went away")
	stubborn := app.RuntimeFactory{Name: "stubborn", New: func(ctx context.Context, obs sim.RuntimeObserver, logs sim.LogSink, log *slog.Logger) (sim.Runtime, error) {
		rt, err := app.ProcessRuntime().New(ctx, obs, logs, log)
		return closeFails{Runtime: rt, err: errGone}, err
	}}
	opts := testOptions(t)
	opts.Runtimes = []app.RuntimeFactory{app.ProcessRuntime(), stubborn}
	m := app.New(opts)
	if err := m.Open(context.Background()); err != nil {
		t.Fatal(err)
	}
	err := m.Close()
	if !errors.Is(err, errGone) || !strings.Contains(err.Error(), "close runtime stubborn: the engine went away") {
		t.Fatalf("Close = %v, want the stubborn runtime's failure", err)
	}
	if again := m.Close(); again != err {
		t.Fatalf("second Close = %v, want the first one's %v", again, err)
	}

	m = app.New(testOptions(t))
	if err := m.Open(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := m.Close(); err != nil {
		t.Fatalf("Close of a simulator whose shutdown went well: %v", err)
	}
}
