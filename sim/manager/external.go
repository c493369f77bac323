package manager

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/normsim/normsim/sim"
)

// External is the runtime that starts nothing: the developer runs the job
// (e.g. under a debugger) with the env the instance shows. Stopping it is
// the manager closing its socket normally.
type External struct{}

// Name is sim.RuntimeExternal.
func (External) Name() string { return sim.RuntimeExternal }

// Prepare does nothing.
func (External) Prepare(context.Context, *sim.LaunchSpec) error { return nil }

// Start does nothing: the job starts when the developer starts it.
func (External) Start(context.Context, string) error { return nil }

// Stop does nothing beyond what the manager does (a normal socket close).
func (External) Stop(context.Context, string, time.Duration) (sim.StopReport, error) {
	return sim.StopReport{}, nil
}

// Logs explains where the logs are.
func (External) Logs(_ context.Context, id string, _ bool, w io.Writer) error {
	_, err := fmt.Fprintf(w, "%s runs on the external runtime: normsim did not start it, so its logs are wherever you run it\n", id)
	return err
}

// Close does nothing.
func (External) Close(context.Context, bool) error { return nil }

// Recover adopts every external instance that had not ended: there is
// nothing to take back, the developer's job reconnects by itself.
func (External) Recover(_ context.Context, _ string, stored []sim.Instance) (map[string]sim.Recovery, error) {
	out := map[string]sim.Recovery{}
	for _, in := range stored {
		if !in.State.Terminal() {
			out[in.ID] = sim.Recovery{Adopted: true}
		}
	}
	return out, nil
}
