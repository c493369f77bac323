package app

import (
	"context"
	"log/slog"

	"github.com/normsim/normsim/sim"
	"github.com/normsim/normsim/sim/process"
)

// ProcessRuntime is the factory of the host-process runtime.
func ProcessRuntime() RuntimeFactory {
	return RuntimeFactory{Name: sim.RuntimeProcess, New: func(ctx context.Context, obs sim.RuntimeObserver, logs sim.LogSink, log *slog.Logger) (sim.Runtime, error) {
		return process.New(process.Config{Observer: obs, Logs: logs, Logger: log}), nil
	}}
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
