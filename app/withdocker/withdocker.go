// Package withdocker links the Docker runtime into a normsim program.
//
// The app package itself links no Docker, Compose, buildkit, grpc or otel
// code: a program (or a job author's test) that runs jobs as host processes
// or starts them by hand does not pay for the Compose SDK in its build time,
// binary size or start-up. The normsim binary takes its runtimes from here;
// normsimtest/normsimdocker does the same for Go tests.
package withdocker

import (
	"context"
	"log/slog"
	"time"

	"github.com/normsim/normsim/app"
	"github.com/normsim/normsim/sim"
	"github.com/normsim/normsim/sim/docker"
	"github.com/normsim/normsim/sim/process"
	"github.com/normsim/normsim/sim/template"
)

// Runtime is the factory of the Docker runtime: available when an engine
// answers (DOCKER_HOST is respected).
func Runtime() app.RuntimeFactory {
	return app.RuntimeFactory{Name: sim.RuntimeDocker, New: func(ctx context.Context, obs sim.RuntimeObserver, logs sim.LogSink, log *slog.Logger) (sim.Runtime, error) {
		docker.RouteComposeLogs(log)
		self := process.RunLabel()
		rt, err := docker.New(docker.Config{Observer: obs, Logs: logs, Logger: log,
			// An earlier Main in this process has let go of the store (its
			// lock says so): only another process's run is alive elsewhere.
			LiveElsewhere: func(run string) bool { return run != self && process.JudgeRun(run) == sim.RunAlive }})
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

// Runtimes are docker then process, the runtimes of `normsim up`:
// --runtime auto picks Docker when an engine answers.
func Runtimes() []app.RuntimeFactory {
	return []app.RuntimeFactory{Runtime(), app.ProcessRuntime()}
}

// Templates are judged with the Docker runtime's platform check wherever
// the Docker runtime is linked (template.CheckPlatform).
func init() { template.CheckPlatform = docker.CheckPlatform }
