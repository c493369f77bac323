package sim

import (
	"context"
	"io"
	"syscall"
	"time"
)

// Runtime runs the services of a LaunchSpec somewhere real: Docker
// containers, host processes, or nowhere at all (external: the developer
// starts the job, e.g. under a debugger).
type Runtime interface {
	// Name is the runtime's name (RuntimeDocker, RuntimeProcess, ...).
	Name() string
	// Prepare creates everything the instance needs without starting it
	// (a stopThenStart target); an error leaves nothing behind.
	Prepare(ctx context.Context, spec *LaunchSpec) error
	// Start starts a prepared instance's services in dependency order and
	// returns once each has started (not necessarily healthy).
	Start(ctx context.Context, instanceID string) error
	// Stop stops the instance's services (SIGTERM, then SIGKILL after
	// grace) and removes them. Stopping an unknown instance is not an error.
	Stop(ctx context.Context, instanceID string, grace time.Duration) error
	// Logs writes the instance's captured output to w; with follow it keeps
	// writing until ctx ends.
	Logs(ctx context.Context, instanceID string, follow bool, w io.Writer) error
	// Close releases the runtime; with keep false it removes whatever it
	// still runs, giving each service a stop grace that ctx's deadline
	// shortens. Once ctx is done, what still runs is killed and removed
	// at once rather than left behind.
	Close(ctx context.Context, keep bool) error
}

// RuntimeEvent is something a runtime noticed about a running service.
type RuntimeEvent struct {
	Instance string
	Service  string
	Kind     RuntimeEventKind
	ExitCode int
	// Signal is the signal that ended the service, where the runtime knows
	// it (a host process); 0 when it exited, or when only the exit code is
	// known (a container: 128+n by convention).
	Signal int
	Detail string
	At     time.Time
	// Restarting is set on a ServiceExited the engine answers by starting
	// the service again (its restart policy, as docker compose would):
	// the instance goes on running.
	Restarting bool
}

// RuntimeEventKind says what a runtime noticed.
type RuntimeEventKind string

// Runtime event kinds.
const (
	ServiceStarted   RuntimeEventKind = "started"
	ServiceHealthy   RuntimeEventKind = "healthy"
	ServiceUnhealthy RuntimeEventKind = "unhealthy"
	// ServiceExited: the service ended on its own (not through Stop).
	ServiceExited RuntimeEventKind = "exited"
)

// RuntimeObserver receives a runtime's events. Implementations must not block.
type RuntimeObserver func(RuntimeEvent)

// Signaler is a runtime that can deliver a signal to an instance's services
// without stopping them through Stop, for fault injection: a SIGKILL is a
// crash the runtime reports as ServiceExited, SIGSTOP/SIGCONT freeze and
// thaw the job.
type Signaler interface {
	Signal(ctx context.Context, instanceID string, sig syscall.Signal) error
}

// PortReporter is a runtime that can say which host ports an instance's
// running services really bound, including the ones the engine picked
// (a compose port without a host port).
type PortReporter interface {
	PublishedPorts(ctx context.Context, instanceID string) ([]PublishedPort, error)
}
