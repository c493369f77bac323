package app

import (
	"context"
	"log/slog"
	"time"

	"github.com/normsim/normsim/sim"
	"github.com/normsim/normsim/sim/docker"
	"github.com/normsim/normsim/sim/process"
)

// DockerRuntime is the factory of the Docker runtime: available when an
// engine answers (DOCKER_HOST is respected).
func DockerRuntime() RuntimeFactory {
	return RuntimeFactory{Name: sim.RuntimeDocker, New: func(ctx context.Context, obs sim.RuntimeObserver, logs sim.LogSink, log *slog.Logger) (sim.Runtime, error) {
		routeComposeLogs(log)
		rt, err := docker.New(docker.Config{Observer: obs, Logs: logs, Logger: log})
		if err != nil {
			return nil, err
		}
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		if err := rt.Ping(pctx); err != nil {
			rt.Close(context.Background(), true)
			return nil, err
		}
		return dockerAdopter{Runtime: rt, owner: new(string)}, nil
	}}
}

// ProcessRuntime is the factory of the host-process runtime.
func ProcessRuntime() RuntimeFactory {
	return RuntimeFactory{Name: sim.RuntimeProcess, New: func(ctx context.Context, obs sim.RuntimeObserver, logs sim.LogSink, log *slog.Logger) (sim.Runtime, error) {
		return process.New(process.Config{Observer: obs, Logs: logs, Logger: log}), nil
	}}
}

// DefaultRuntimes are docker then process: --runtime auto picks Docker when
// an engine answers.
func DefaultRuntimes() []RuntimeFactory {
	return []RuntimeFactory{DockerRuntime(), ProcessRuntime()}
}

// dockerAdopter lets the manager find containers an earlier run over the
// same store left: only those carrying this store's owner label, never
// another normsim's on the same engine.
type dockerAdopter struct {
	*docker.Runtime
	owner *string
}

// SetOwner names the store whose containers this runtime may adopt.
func (d dockerAdopter) SetOwner(owner string) { *d.owner = owner }

func (d dockerAdopter) Leftovers(ctx context.Context) (map[string]bool, error) {
	owned, err := d.Owned(ctx)
	if err != nil {
		return nil, err
	}
	out := map[string]bool{}
	for _, o := range owned {
		if o.Labels[sim.LabelOwner] != *d.owner {
			continue
		}
		running, seen := out[o.Instance]
		if !seen {
			running = true
		}
		out[o.Instance] = running && o.Running
	}
	return out, nil
}
