package sim

import (
	"context"
	"fmt"
	"io"
	"strings"
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
	// grace) and removes them, and says which services outlived the grace.
	// Stopping an unknown instance is not an error.
	Stop(ctx context.Context, instanceID string, grace time.Duration) (StopReport, error)
	// Logs writes the instance's captured output to w; with follow it keeps
	// writing until ctx ends.
	Logs(ctx context.Context, instanceID string, follow bool, w io.Writer) error
	// Close releases the runtime; with keep false it removes whatever it
	// still runs, giving each service a stop grace that ctx's deadline
	// shortens. Once ctx is done, what still runs is killed and removed
	// at once rather than left behind.
	Close(ctx context.Context, keep bool) error
}

// StopReport is how a Stop ended an instance's services.
type StopReport struct {
	// Killed are the services still running when the grace ran out: they
	// did not exit on SIGTERM and were killed (SIGKILL).
	Killed []string
	// OwnGrace is the grace of each killed service whose compose file
	// set its own (stop_grace_period), which the stop honoured.
	OwnGrace map[string]time.Duration
}

// KilledWhy says which services were killed after which grace, as a
// timeline reads it: "job still running after its own 3s stop grace";
// grace is the stop's, which a service's own stop_grace_period overrides.
func (r StopReport) KilledWhy(grace time.Duration) string {
	parts := make([]string, 0, len(r.Killed))
	for _, svc := range r.Killed {
		parts = append(parts, fmt.Sprintf("%s still running after %s", svc, r.GraceOf(svc, grace)))
	}
	return strings.Join(parts, "; ")
}

// GraceOf is the grace that ran out for a killed service, as said:
// "its own 3s stop grace" where its compose file set one, else "the 10s
// stop grace" (grace, the stop's).
func (r StopReport) GraceOf(svc string, grace time.Duration) string {
	if own, ok := r.OwnGrace[svc]; ok {
		return fmt.Sprintf("its own %s stop grace", own)
	}
	return fmt.Sprintf("the %s stop grace", grace)
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
	// OthersRun is set on a ServiceExited with code 0 (the only exit that
	// can leave its instance running) when another container or process
	// of the instance (another service's, or another replica of this one)
	// still runs, or is being started.
	OthersRun bool
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
	// ServiceKilled: Stop killed the service (SIGKILL) after it outlived
	// the stop grace; the manager's event, from the StopReport.
	ServiceKilled RuntimeEventKind = "killed"
	// ServicePaused and ServiceResumed: the service's processes were
	// frozen and thawed (docker pause and unpause), by a pause fault or
	// from outside normsim; Detail says which. Nothing else changes: the
	// instance still runs, and its job answers nothing meanwhile.
	ServicePaused  RuntimeEventKind = "paused"
	ServiceResumed RuntimeEventKind = "resumed"
	// ServiceNetworkLost and ServiceNetworkBack: a running service was
	// taken off one of its networks (docker network disconnect) and put
	// back. Nothing else changes: its job may lose its socket, or its
	// output may stop reaching normsim, which the migration then hears.
	ServiceNetworkLost RuntimeEventKind = "network-disconnected"
	ServiceNetworkBack RuntimeEventKind = "network-connected"
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

// ExitReporter is a runtime that reports a service's exit some time after
// it learns of it: it first reads the service's last output, and the
// Docker runtime asks the engine about the restart policy. ExitPending
// says whether an exit of one of the instance's services is learned and
// not reported yet. A migration that lost the job's socket waits for that
// report, so the exit, not the lost socket, is the reason it gives.
type ExitReporter interface {
	ExitPending(instanceID string) bool
}

// PortReporter is a runtime that can say which host ports an instance's
// running services really bound, including the ones the engine picked
// (a compose port without a host port).
type PortReporter interface {
	PublishedPorts(ctx context.Context, instanceID string) ([]PublishedPort, error)
}

// Recoverer is a runtime that reconciles, when normsim starts again on a
// store, what an earlier run of it left with what the store remembers.
type Recoverer interface {
	// Recover is given every instance of this runtime the store remembers
	// (ended ones too) and owner, the store's owner label
	// (LabelOwner, EnvOwner): only what owner's runs left is the runtime's
	// to adopt or remove. It answers, for each instance that has not ended,
	// whether it runs on under management or why not, and removes or stops
	// whatever else of owner's runs it still holds. An error means it could
	// not tell at all.
	Recover(ctx context.Context, owner string, stored []Instance) (map[string]Recovery, error)
}

// Recovery is what a runtime made of one instance an earlier run left.
type Recovery struct {
	// Adopted: the instance still runs and is back under management.
	Adopted bool
	// Reason says why it was not adopted; the instance fails with it.
	Reason string
}

// RefRecorder is a runtime whose services outlive a killed normsim and
// can be found again only through what the store keeps of them (host
// processes): the manager writes an instance to the store before Start,
// and RuntimeRef's answer into Instance.RuntimeRef right after, for the
// runtime's Recover to read after a restart.
type RefRecorder interface {
	// RuntimeRef is what to keep of the instance's running services; empty
	// when none runs.
	RuntimeRef(instanceID string) map[string]string
}

// OrphanRemover is a runtime that can remove what normsims that are gone
// left behind whose store no recovery will open again (a --db :memory:
// run's), and says which instances it removed. The instances of owner
// are recovery's; of the others, only those of runs judge proves gone
// are removed.
type OrphanRemover interface {
	RemoveOrphans(ctx context.Context, owner string, judge func(run string) RunVerdict) (OrphanSweep, error)
}

// IDChecker is a runtime whose instances are seen by other normsims too
// (a shared Docker engine): it says whether an instance ID is in use
// there, so that a normsim never draws an ID another's instance has, and
// the two never share a compose project (normsim-<instance id>) or a
// container name.
type IDChecker interface {
	InstanceIDTaken(ctx context.Context, instanceID string) (bool, error)
}

// RunVerdict is what one normsim can prove of another's run (LabelRun).
type RunVerdict int

const (
	// RunUnjudged: the run is of another machine, another PID namespace
	// (a normsim in a container beside one on the host) or has a label
	// that proves nothing. Its instances are never removed, whatever
	// became of it.
	RunUnjudged RunVerdict = iota
	RunAlive
	RunGone
)

// OrphanSweep is what a sweep of orphans did.
type OrphanSweep struct {
	// Removed are the instances of runs proven gone that were removed.
	Removed []string
	// Unjudged are the runs (LabelRun) whose instances were left because
	// this normsim cannot see whether their normsim is alive.
	Unjudged []string
}

// EngineReporter is a runtime that can say which Docker engine it runs
// containers on.
type EngineReporter interface {
	Engine(ctx context.Context) (*Engine, error)
}

// RuntimeSet is the runtimes a manager launches with, by name, and the one
// a launch that names none uses. A set known from the start is its own
// RuntimeRegistry.
type RuntimeSet struct {
	Runtimes map[string]Runtime
	Default  string
}

// RuntimeRegistry is where the manager finds its runtimes. Start-up may
// learn them after the manager exists (normsim up settles whether a Docker
// engine answers after it is ready), so Wait may block until then.
type RuntimeRegistry interface {
	// Wait returns the runtimes once they are known.
	Wait() RuntimeSet
	// Engine is the Docker engine the runtimes run containers on, without
	// waiting: nil while that is not known, or when none answered.
	Engine() *Engine
}

// Wait is s: it is known.
func (s RuntimeSet) Wait() RuntimeSet { return s }

// Engine is nil: a bare set names no engine.
func (s RuntimeSet) Engine() *Engine { return nil }

// Census is a runtime that can say what it has running right now as the
// host sees it (process groups alive, containers running), not as the
// manager's records say: the ground truth a check that nothing runs which
// the manager does not know compares with.
type Census interface {
	// Running lists the units that carry owner's label (LabelOwner,
	// EnvOwner) and run now, whichever instance they belong to.
	Running(ctx context.Context, owner string) ([]RunningUnit, error)
}

// RunningUnit is one process group or container a runtime has running.
type RunningUnit struct {
	Runtime  string `json:"runtime"`
	Instance string `json:"instance"`
	// Ref is the process group id or the container id.
	Ref string `json:"ref"`
	// Known says the manager knows the instance and holds it not ended;
	// State is the state it holds it in ("" when it does not know it).
	Known bool          `json:"known"`
	State InstanceState `json:"state,omitempty"`
}
