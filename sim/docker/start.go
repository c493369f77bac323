package docker

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/compose-spec/compose-go/v2/graph"
	"github.com/compose-spec/compose-go/v2/types"
	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/compose/v5/pkg/api"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/volume"
	"github.com/docker/docker/client"

	"github.com/normsim/normsim/sim"
)

// Start starts a prepared (or adopted) instance's containers the way
// `docker compose start` does: each service once the services it depends
// on have started, become healthy or completed successfully, as their
// condition says; independent services start at once. It returns when
// every container has started. An unknown instance is ENotFound.
func (r *Runtime) Start(ctx context.Context, instanceID string) error {
	in, _, err := r.running(instanceID)
	if err != nil {
		return err
	}
	if in.composeName == "" {
		return sim.Errorf(sim.EConflict, "instance %s was created by a normsim before the Compose SDK and cannot be started again; stop it and launch it anew", instanceID)
	}
	// A start by hand sets the engine's restart count back to 0.
	r.mu.Lock()
	for _, s := range in.services {
		s.dies, s.restartBase = 0, 0
	}
	r.mu.Unlock()
	// Captured from before the start, so no line is missed.
	r.capture(in, time.Time{})
	return r.startCompose(ctx, in) // its errors name the instance
}

// running returns the tracked instance and its services, refusing an
// unknown one or one being stopped.
func (r *Runtime) running(id string) (*instance, []*service, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil, nil, errClosed
	}
	in := r.instances[id]
	switch {
	case in == nil:
		return nil, nil, sim.Errorf(sim.ENotFound, "instance %s is not in the docker runtime", id)
	case in.stopping:
		return nil, nil, sim.Errorf(sim.EConflict, "instance %s is being stopped", id)
	case in.services == nil:
		return nil, nil, sim.Errorf(sim.EConflict, "instance %s is still being prepared", id)
	}
	return in, in.services, nil
}

// engineErr wraps an engine call's error, as EUnavailable when the engine
// does not answer.
func (r *Runtime) engineErr(op string, err error) error {
	if client.IsErrConnectionFailed(err) {
		return sim.Errorf(sim.EUnavailable, "%s: docker engine at %s does not answer: %v", op, r.cli.DaemonHost(), err)
	}
	return fmt.Errorf("%s: %w", op, err)
}

// Stop takes the instance's project down as `docker compose down
// --volumes` does: containers stopped at once (SIGTERM, SIGKILL after
// grace, rounded up to whole seconds as the engine counts them) and
// removed with their anonymous and named volumes, then the networks.
// Their deaths are not reported as ServiceExited. An unknown instance is
// not an error. An adopted instance that a normsim before the Compose SDK
// created (no compose labels) is removed container by container.
func (r *Runtime) Stop(ctx context.Context, instanceID string, grace time.Duration) (sim.StopReport, error) {
	r.mu.Lock()
	in := r.instances[instanceID]
	if in == nil {
		r.mu.Unlock()
		return sim.StopReport{}, nil
	}
	in.stopping = true
	services := in.services
	r.mu.Unlock()
	if services == nil {
		return sim.StopReport{}, nil // still being prepared: Prepare sees stopping and removes it all
	}
	began := time.Now()
	secs := int(math.Ceil(max(grace, 0).Seconds()))
	if in.composeName != "" {
		r.stopOwnGraces(ctx, in, services, grace)
		if !r.stopForCapture(ctx, in, grace) {
			// Stopped before down removes them, so how each ended can
			// still be read.
			d := time.Duration(secs) * time.Second
			if err := r.compose.Stop(ctx, in.composeName, api.StopOptions{Project: in.project, Timeout: &d}); err != nil {
				r.log.Warn("stop before removing", "instance", in.id, "err", err)
			}
		}
		rep := sim.StopReport{Killed: r.killedOnStop(ctx, services, began)}
		rep.OwnGrace = ownGraces(in.project, rep.Killed)
		if err := r.down(ctx, in.composeName, in.project, grace, instanceID); err != nil {
			return rep, fmt.Errorf("stop instance %s: %w", instanceID, err)
		}
		r.forget(in)
		r.awaitCaptured(in)
		return rep, nil
	}

	var wg sync.WaitGroup
	ids := make([]string, len(services))
	for i, s := range services {
		ids[i] = s.container
		wg.Go(func() {
			err := r.cli.ContainerStop(ctx, s.container, container.StopOptions{Timeout: &secs})
			if err != nil && !cerrdefs.IsNotFound(err) {
				// The forced remove below kills it anyway.
				r.log.Warn("stop container", "instance", instanceID, "service", s.name, "err", err)
			}
		})
	}
	wg.Wait()
	rep := sim.StopReport{Killed: r.killedOnStop(ctx, services, began)}
	var nets []string
	if in.network != "" {
		nets = append(nets, in.network)
	}
	if err := r.removeAll(ctx, ids, nets, in.owner, instanceID); err != nil {
		return rep, fmt.Errorf("stop instance %s: %w", instanceID, err)
	}
	r.forget(in)
	r.awaitCaptured(in)
	return rep, nil
}

// stopOwnGraces honours the stop_grace_period a compose file sets for a
// service (the job author's word on how long it needs to stop, which
// `docker compose stop` keeps): normsim's stop grace, passed for the whole
// project, would override it (compose stop -t does). When any service
// sets one, the services are stopped here as compose orders them,
// dependents first, each with its own grace or normsim's (grace); the
// project's stop after finds them stopped. The engine sends each
// container's stop signal first (stop_signal), SIGKILL after its grace.
func (r *Runtime) stopOwnGraces(ctx context.Context, in *instance, services []*service, grace time.Duration) {
	r.mu.Lock()
	p := in.project
	r.mu.Unlock()
	if p == nil || !slices.ContainsFunc(services, func(s *service) bool { return p.Services[s.name].StopGracePeriod != nil }) {
		return
	}
	// compose-go's own walk, as compose stop orders it: a service once
	// every service that depends on it is stopped, the rest at once.
	err := graph.InDependencyOrder(ctx, p, func(ctx context.Context, name string, sc types.ServiceConfig) error {
		d := grace
		if sc.StopGracePeriod != nil {
			d = time.Duration(*sc.StopGracePeriod)
		}
		secs := int(math.Ceil(max(d, 0).Seconds()))
		var wg sync.WaitGroup
		for _, s := range services {
			if s.name != name {
				continue
			}
			wg.Go(func() { // each replica
				if err := r.cli.ContainerStop(ctx, s.container, container.StopOptions{Timeout: &secs}); err != nil && !cerrdefs.IsNotFound(err) {
					r.log.Warn("stop container", "instance", in.id, "service", name, "err", err)
				}
			})
		}
		wg.Wait()
		return nil
	}, graph.InReverseOrder)
	if err != nil {
		r.log.Warn("stop services in dependency order", "instance", in.id, "err", err) // the project's stop after ends them anyway
	}
}

// ownGraces are the stop_grace_period of those of the services p sets one
// for; nil when none.
func ownGraces(p *types.Project, services []string) map[string]time.Duration {
	if p == nil { // adopted: its compose file is not known
		return nil
	}
	var out map[string]time.Duration
	for _, name := range services {
		if sc, ok := p.Services[name]; ok && sc.StopGracePeriod != nil {
			if out == nil {
				out = map[string]time.Duration{}
			}
			out[name] = time.Duration(*sc.StopGracePeriod)
		}
	}
	return out
}

// killedOnStop are the services whose containers a stop begun at began
// had to kill: the engine sends SIGTERM, then SIGKILL once the timeout
// has passed, and a container ended by that SIGKILL exits with 137
// (128+9) after the stop began. One the kernel killed for memory is not
// counted.
func (r *Runtime) killedOnStop(ctx context.Context, services []*service, began time.Time) []string {
	var killed []string
	for _, s := range services {
		c, err := r.cli.ContainerInspect(ctx, s.container)
		if err != nil || c.State == nil || c.State.Running || c.State.OOMKilled || c.State.ExitCode != 128+9 {
			continue
		}
		if at, err := time.Parse(time.RFC3339Nano, c.State.FinishedAt); err == nil && at.Before(began) {
			continue // it had died before the stop
		}
		killed = append(killed, s.name)
	}
	return killed
}

// captureStall is how long a stop waits for a capture that reads no line
// before it gives up on what the stopped container printed last (and says
// so in the log).
const captureStall = 5 * time.Second

// stopForCapture stops a captured instance's containers as `docker compose
// stop` does (in dependency order, SIGTERM then SIGKILL after grace) and
// waits until the capture has read each to the end, before the caller
// removes them: removing a container ends its log stream, and whatever the
// capture had not read yet would be lost. It waits as long as the capture
// makes progress; one that stalls for captureStall is given up on with a
// marker line saying from when lines may be missing. It reports whether
// it stopped them (false: nothing is captured).
func (r *Runtime) stopForCapture(ctx context.Context, in *instance, grace time.Duration) bool {
	r.mu.Lock()
	capturing := in.captured != nil
	services := in.services
	r.mu.Unlock()
	if !capturing {
		return false
	}
	secs := time.Duration(math.Ceil(max(grace, 0).Seconds())) * time.Second
	if err := r.compose.Stop(ctx, in.composeName, api.StopOptions{Project: in.project, Timeout: &secs}); err != nil {
		r.log.Warn("stop before removing", "instance", in.id, "err", err)
		return true // down stops them anyway
	}
	for _, s := range services {
		seen, since := s.captured.Load(), time.Now()
		for {
			// Stopped, a container's stream ends once read to the end.
			r.mu.Lock()
			drained := !s.reading
			r.mu.Unlock()
			if drained || ctx.Err() != nil {
				break
			}
			if n := s.captured.Load(); n != seen {
				seen, since = n, time.Now()
			} else if time.Since(since) > captureStall {
				r.log.Warn("gave up reading a stopped container's logs", "instance", in.id, "service", s.name)
				r.logs.CaptureLog(sim.LogLine{Instance: in.id, Service: s.name, Stream: sim.StreamNormsim, At: r.now(),
					Text: fmt.Sprintf("normsim: the capture read nothing for %v after %s stopped; lines it printed last may be missing", captureStall, s.name)})
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	return true
}

// awaitCaptured waits (boundedly) for the capture of a stopped instance's
// output to end, so what it printed while it stopped is kept before Stop
// returns.
func (r *Runtime) awaitCaptured(in *instance) {
	r.mu.Lock()
	done := in.captured
	r.mu.Unlock()
	if done == nil {
		return
	}
	select {
	case <-done:
	case <-time.After(drainBound):
	}
}

// removeAll force-removes containers (with their anonymous volumes), then
// networks, then the named volumes made for the instance. Things already
// gone are no error.
func (r *Runtime) removeAll(ctx context.Context, containers, networks []string, owner, instanceID string) error {
	var mu sync.Mutex
	var errs []error
	fail := func(err error) {
		mu.Lock()
		errs = append(errs, err)
		mu.Unlock()
	}
	var wg sync.WaitGroup
	for _, id := range containers {
		wg.Go(func() {
			err := r.cli.ContainerRemove(ctx, id, container.RemoveOptions{Force: true, RemoveVolumes: true})
			if err != nil && !cerrdefs.IsNotFound(err) && !alreadyRemoving(err) {
				fail(r.engineErr("remove container "+shortID(id), err))
			}
		})
	}
	wg.Wait()
	for _, n := range networks {
		wg.Go(func() {
			if err := r.cli.NetworkRemove(ctx, n); err != nil && !cerrdefs.IsNotFound(err) {
				fail(r.engineErr("remove network "+n, err))
			}
		})
	}
	wg.Wait()
	if err := r.removeVolumes(ctx, owner, instanceID); err != nil {
		fail(err)
	}
	return errors.Join(errs...)
}

// removeVolumes removes the named volumes made for owner's instance:
// those carrying its labels, never one that only shares a name with what
// its compose file declares.
func (r *Runtime) removeVolumes(ctx context.Context, owner, instanceID string) error {
	vols, err := r.cli.VolumeList(ctx, volume.ListOptions{Filters: instanceFilter(owner, instanceID)})
	if err != nil {
		return r.engineErr("list volumes", err)
	}
	var mu sync.Mutex
	var errs []error
	var wg sync.WaitGroup
	for _, v := range vols.Volumes {
		wg.Go(func() {
			err := r.cli.VolumeRemove(ctx, v.Name, false)
			if err != nil && inUse(err) {
				// Named in a compose file (name: x), it is shared with
				// another instance that names it: left to the last of them
				// (removeShared).
				r.log.Info("volume in use by another instance: left to it", "instance", instanceID, "volume", v.Name)
				return
			}
			if err != nil && !cerrdefs.IsNotFound(err) {
				mu.Lock()
				errs = append(errs, r.engineErr("remove volume "+v.Name, err))
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// alreadyRemoving reports the engine's answer to a second concurrent
// remove of the same container.
func alreadyRemoving(err error) bool {
	return strings.Contains(err.Error(), "is already in progress")
}

func shortID(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}
