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
		return rt, nil
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

// runtimeRegistry is the runtimes as the manager finds them
// (sim.RuntimeRegistry). Open opens them beside the store, and with an
// in-memory store they are settled only after ready: until openRuntimes
// closes known, Wait blocks and Engine is nil.
type runtimeRegistry struct {
	known chan struct{}
	// Written by openRuntimes before known is closed, read after it.
	set    sim.RuntimeSet
	engine *sim.Engine // the Docker engine found; nil when none answered
	note   string      // how the default was chosen, for the banner
	err    error       // a --runtime that is not available
}

var _ sim.RuntimeRegistry = (*runtimeRegistry)(nil)

func newRuntimeRegistry() *runtimeRegistry {
	return &runtimeRegistry{known: make(chan struct{})}
}

// Wait returns the runtimes once they are known.
func (r *runtimeRegistry) Wait() sim.RuntimeSet {
	<-r.known
	return r.set
}

// Engine is the Docker engine found, without waiting: nil until the
// runtimes are known.
func (r *runtimeRegistry) Engine() *sim.Engine {
	select {
	case <-r.known:
		return r.engine
	default:
		return nil
	}
}
