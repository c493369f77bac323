package docker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/compose-spec/compose-go/v2/types"
	"github.com/docker/cli/cli/command"
	"github.com/docker/compose/v5/pkg/api"
	"github.com/docker/docker/client"

	"github.com/normsim/normsim/sim"
)

// LabelManaged is "true" on everything this package creates, beside sim's
// Label* keys. The launch contract sets those on every service; the
// runtime sets instance, service and project itself as well, because they
// are how it finds its containers again.
const LabelManaged = "io.normsim.managed"

// pingTimeout bounds Ping so `--runtime auto` decides quickly.
const pingTimeout = 1500 * time.Millisecond

// hurryBound bounds the forced removal Close makes once its context ends.
const hurryBound = 5 * time.Second

// closeGrace is how long Close lets each container stop before SIGKILL;
// compose's default. A deadline on Close's ctx shortens it.
const closeGrace = 10 * time.Second

// Config configures a Runtime. Every field is optional.
type Config struct {
	// Observer receives the services' started/healthy/unhealthy/exited
	// events. It is called from the runtime's event goroutine and must not
	// block.
	Observer sim.RuntimeObserver
	Logger   *slog.Logger
	// Now stamps RuntimeEvents; time.Now by default.
	Now func() time.Time
	// Logs receives every line each container prints, from its start;
	// nil captures nothing (Logs still reads the engine's).
	Logs sim.LogSink
	// LiveElsewhere reports whether a run (sim.LabelRun) is another
	// normsim process that runs now: recovery leaves its containers
	// alone, though they carry this store's owner label (a copy of a
	// store started beside the original has it too). nil proves none.
	LiveElsewhere func(run string) bool
}

// Runtime is sim.Runtime on the Docker engine the docker command line
// would use: DOCKER_HOST (with DOCKER_API_VERSION, DOCKER_CERT_PATH,
// DOCKER_TLS_VERIFY), else DOCKER_CONTEXT or the current context of
// ~/.docker/config.json. A spec that carries its compose project runs
// through the Compose SDK, as `docker compose` runs it.
type Runtime struct {
	cli       *client.Client
	dockerCli *command.DockerCli
	compose   api.Compose
	observer  sim.RuntimeObserver
	log       *slog.Logger
	now       func() time.Time
	logs      sim.LogSink
	// liveElsewhere is Config.LiveElsewhere.
	liveElsewhere func(run string) bool
	// capCtx ends the log captures when the runtime closes.
	capCtx    context.Context
	capCancel context.CancelFunc

	connMu    sync.Mutex
	connected bool // API version negotiated

	mu        sync.Mutex
	instances map[string]*instance
	// ownFreezes counts the pauses and unpauses Signal asked for, by
	// container and action, whose events have not come yet: those the
	// engine reports otherwise were done by someone else.
	ownFreezes map[string]int
	closed     bool
	watching   bool
	cancel     context.CancelFunc // stops the event watcher
	wg         sync.WaitGroup     // the event watcher and the log captures
}

var _ sim.Runtime = (*Runtime)(nil)

// instance is what the runtime tracks of one instance it prepared or adopted.
type instance struct {
	id      string
	owner   string // sim.LabelOwner of its containers; "" for none
	network string // name; "" when adopted without one, or a compose project
	// project is the compose project the SDK created the instance from;
	// composeName its name, also known for an adopted one (nil project).
	project     *types.Project
	composeName string
	services    []*service
	stopping    bool
	// startFailed is set while the containers a failed start stopped are
	// down: their deaths are that cleanup's, not the job exiting (guarded
	// by Runtime.mu; a start clears it).
	startFailed bool
	// reporting counts deaths seen and not yet reported (ExitPending).
	reporting int
	// changed is closed (and replaced) whenever one of the instance's
	// containers starts or dies, so a following Logs resumes a service
	// that (re)started; gone is closed once the instance is stopped or
	// removed.
	changed chan struct{}
	gone    chan struct{}
	// captured is closed once the capture of the instance's output has
	// ended; nil until it starts.
	captured chan struct{}
	// reaped: the containers' reaper removes it if normsim dies first.
	reaped bool
}

type service struct {
	name      string
	container string // ID
	// drainedAt is when the capture last read a stream of the service to
	// its end; reading is whether it is reading one (both guarded by
	// Runtime.mu).
	drainedAt time.Time
	reading   bool
	// captured counts the lines the capture read, to tell a slow capture
	// from a stalled one.
	captured atomic.Int64
	// dies counts the deaths the event watcher saw since the engine last
	// counted restarts from restartBase (a start by normsim sets it back
	// to 0, as the engine does; an adopted container keeps its count).
	// Guarded by Runtime.mu.
	dies, restartBase int
	// diedAt is the engine's time of the last death seen: every line of
	// that run is stamped before it, every line of a restart after it.
	diedAt time.Time
	// offNetworks are the networks it was taken off while it ran
	// (handleNetwork), so that being put back is said and a start's
	// connects are not. Guarded by Runtime.mu.
	offNetworks map[string]bool
}

func (in *instance) service(containerID string) *service {
	for _, s := range in.services {
		if s.container == containerID {
			return s
		}
	}
	return nil
}

// New returns a Runtime for the engine the environment names. It does no
// I/O: use Ping to learn whether the engine answers.
func New(cfg Config) (*Runtime, error) {
	dcli, err := newDockerCli()
	if err != nil {
		return nil, err
	}
	// The engine as the docker CLI resolves it: DOCKER_HOST (with
	// DOCKER_TLS_VERIFY and DOCKER_CERT_PATH), else the context.
	ep := dcli.DockerEndpoint()
	eopts, err := endpointOpts(ep)
	if err != nil {
		return nil, sim.Errorf(sim.EUnavailable, "docker context %q (%s): %v", dcli.CurrentContext(), ep.Host, err)
	}
	opts := append([]client.Opt{client.WithVersionFromEnv(), client.WithAPIVersionNegotiation()}, eopts...)
	cli, err := client.NewClientWithOpts(opts...)
	if err != nil {
		return nil, fmt.Errorf("docker client: %w", err)
	}
	composer, err := newComposer(dcli)
	if err != nil {
		return nil, fmt.Errorf("compose service: %w", err)
	}
	r := &Runtime{
		cli:           cli,
		dockerCli:     dcli,
		compose:       composer,
		observer:      cfg.Observer,
		log:           cfg.Logger,
		now:           cfg.Now,
		logs:          cfg.Logs,
		liveElsewhere: cfg.LiveElsewhere,
		instances:     map[string]*instance{},
		ownFreezes:    map[string]int{},
	}
	r.capCtx, r.capCancel = context.WithCancel(context.Background())
	if r.observer == nil {
		r.observer = func(sim.RuntimeEvent) {}
	}
	if r.log == nil {
		r.log = slog.New(slog.DiscardHandler)
	}
	if r.now == nil {
		r.now = time.Now
	}
	return r, nil
}

// Engine says which engine the runtime uses: the docker context it was
// found through (as the docker CLI picks it), its address and version.
func (r *Runtime) Engine(ctx context.Context) (*sim.Engine, error) {
	if err := r.connect(ctx); err != nil {
		return nil, err
	}
	v, err := r.cli.ServerVersion(ctx)
	if err != nil {
		return nil, r.engineErr("ask the engine its version", err)
	}
	return &sim.Engine{Context: r.dockerCli.CurrentContext(), Host: r.cli.DaemonHost(), Version: v.Version}, nil
}

// Name returns sim.RuntimeDocker.
func (r *Runtime) Name() string { return sim.RuntimeDocker }

// Client returns the runtime's engine client.
func (r *Runtime) Client() *client.Client { return r.cli }

// Ping reports whether the engine answers, within about 1.5 s; an engine
// that does not is an EUnavailable error.
func (r *Runtime) Ping(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, pingTimeout)
	defer cancel()
	r.connMu.Lock()
	defer r.connMu.Unlock()
	return r.pingLocked(ctx)
}

// connect pings the engine once to settle the API version. It must come
// before any concurrent use of the client: the client negotiates lazily,
// and its event stream reads the version without the lock that guards the
// negotiation.
func (r *Runtime) connect(ctx context.Context) error {
	r.connMu.Lock()
	defer r.connMu.Unlock()
	if r.connected {
		return nil
	}
	return r.pingLocked(ctx)
}

func (r *Runtime) pingLocked(ctx context.Context) error {
	ping, err := r.cli.Ping(ctx)
	if err != nil {
		return sim.Errorf(sim.EUnavailable, "docker engine at %s does not answer: %v", r.cli.DaemonHost(), err)
	}
	if !r.connected {
		r.cli.NegotiateAPIVersionPing(ping)
		r.connected = true
	}
	return nil
}

// Close stops watching the engine's events. Unless keep, it first stops and
// removes every instance the runtime tracks (the ones it prepared and the
// ones it adopted), giving each container up to 10 s (less when ctx has a
// deadline) to exit on SIGTERM.
func (r *Runtime) Close(ctx context.Context, keep bool) error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil
	}
	r.closed = true
	ids := make([]string, 0, len(r.instances))
	for id, in := range r.instances {
		ids = append(ids, id)
		if keep && in.reaped {
			containerReaper.Forget(reaperKey(in)) // kept on purpose
		}
	}
	r.mu.Unlock()

	var errs []error
	if !keep {
		grace := closeGrace
		if dl, ok := ctx.Deadline(); ok {
			grace = min(grace, max(0, time.Until(dl)-time.Second))
		}
		// The stops get a context ctx does not cancel: when ctx ends (a
		// second Ctrl-C), what is still running is force-removed at once
		// instead of the stops failing half way and leaving it.
		stopCtx, cancelStops := context.WithTimeout(context.WithoutCancel(ctx), grace+15*time.Second)
		defer cancelStops()
		var wg sync.WaitGroup
		errc := make(chan error, 2*len(ids))
		for _, id := range ids {
			wg.Go(func() { _, err := r.Stop(stopCtx, id, grace); errc <- err })
		}
		stopped := make(chan struct{})
		go func() { wg.Wait(); close(stopped) }()
		select {
		case <-stopped:
		case <-ctx.Done():
			kctx, cancel := context.WithTimeout(context.Background(), hurryBound)
			var sweeps sync.WaitGroup
			for _, id := range ids {
				sweeps.Go(func() { errc <- r.sweep(kctx, r.trackedOwner(id), id) })
			}
			sweeps.Wait()
			cancel()
			<-stopped
		}
		close(errc)
		for err := range errc {
			errs = append(errs, err)
		}
	}

	r.mu.Lock()
	cancel := r.cancel
	r.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	r.capCancel()
	r.wg.Wait()
	errs = append(errs, r.cli.Close())
	if c, ok := r.compose.(interface{ Close() error }); ok {
		errs = append(errs, c.Close())
	}
	return errors.Join(errs...)
}

// errClosed is returned by calls made after Close.
var errClosed = errors.New("docker runtime is closed")

// track registers in, starting the event watcher on first use.
func (r *Runtime) track(in *instance) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return errClosed
	}
	if _, ok := r.instances[in.id]; ok {
		return sim.Errorf(sim.EConflict, "instance %s is already prepared in the docker runtime", in.id)
	}
	in.changed = make(chan struct{})
	in.gone = make(chan struct{})
	r.instances[in.id] = in
	r.startWatchingLocked()
	return nil
}

// lookup returns the tracked instance id, or nil.
func (r *Runtime) lookup(id string) *instance {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.instances[id]
}

// forget drops in from the tracked instances and wakes its log followers.
func (r *Runtime) forget(in *instance) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.instances[in.id] == in {
		delete(r.instances, in.id)
		close(in.gone)
		if in.reaped {
			containerReaper.Forget(reaperKey(in))
		}
	}
}
