package docker

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/volume"
	"github.com/docker/docker/client"
	"golang.org/x/sync/errgroup"

	"github.com/normsim/normsim/sim"
)

// healthPoll is how often Start looks at a dependency's health; the
// engine's healthchecks run far less often, so this adds little delay.
const healthPoll = 100 * time.Millisecond

// Start starts a prepared (or adopted) instance's containers the way
// `docker compose up -d` does: each service once the services it depends on
// have started, become healthy or completed successfully, as their
// condition says; independent services start at once. It returns when
// every container has started. An unknown instance is ENotFound.
func (r *Runtime) Start(ctx context.Context, instanceID string) error {
	in, services, err := r.running(instanceID)
	if err != nil {
		return err
	}
	if in.composeName != "" {
		return r.startCompose(ctx, in) // its errors name the instance
	}
	byName := map[string]*service{}
	started := map[string]chan struct{}{}
	for _, s := range services {
		byName[s.name] = s
		started[s.name] = make(chan struct{})
	}
	g, gctx := errgroup.WithContext(ctx)
	for _, s := range services {
		g.Go(func() error {
			for _, d := range s.deps {
				dep := byName[d.Service]
				if dep == nil { // adopted with a dependency that has no container
					continue
				}
				select {
				case <-started[d.Service]:
				case <-gctx.Done():
					return gctx.Err()
				}
				if err := r.await(gctx, in.id, s.name, dep, d.Condition); err != nil {
					return err
				}
			}
			if err := r.cli.ContainerStart(gctx, s.container, container.StartOptions{}); err != nil {
				return r.startErr(in.id, s.name, err)
			}
			close(started[s.name])
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return fmt.Errorf("start instance %s: %w", instanceID, err)
	}
	return nil
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

// await waits until dep meets condition, so that svc may start.
func (r *Runtime) await(ctx context.Context, instanceID, svc string, dep *service, condition string) error {
	switch condition {
	case conditionHealthy:
		t := time.NewTicker(healthPoll)
		defer t.Stop()
		for {
			c, err := r.cli.ContainerInspect(ctx, dep.container)
			if err != nil {
				return r.engineErr("inspect service "+dep.name, err)
			}
			st := c.State
			switch {
			case st.Health == nil:
				return sim.Errorf(sim.EComposeInvalid, "compose.yml: service %q depends on %q being healthy, but %q has no healthcheck", svc, dep.name, dep.name)
			case st.Health.Status == container.Healthy:
				return nil
			case st.Health.Status == container.Unhealthy:
				return sim.Errorf(sim.EUnprocessable, "service %q of instance %s depends on %q, which is unhealthy%s", svc, instanceID, dep.name, lastProbe(st.Health))
			case !st.Running:
				return sim.Errorf(sim.EUnprocessable, "service %q of instance %s depends on %q being healthy, but %q exited with code %d", svc, instanceID, dep.name, dep.name, st.ExitCode)
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-t.C:
			}
		}
	case conditionCompleted:
		waitc, errc := r.cli.ContainerWait(ctx, dep.container, container.WaitConditionNotRunning)
		select {
		case w := <-waitc:
			if w.Error != nil {
				return fmt.Errorf("wait for service %s: %s", dep.name, w.Error.Message)
			}
			if w.StatusCode != 0 {
				return sim.Errorf(sim.EUnprocessable, "service %q of instance %s depends on %q completing successfully, but %q exited with code %d", svc, instanceID, dep.name, dep.name, w.StatusCode)
			}
			return nil
		case err := <-errc:
			return r.engineErr("wait for service "+dep.name, err)
		}
	default: // service_started: the dependency's ContainerStart returned
		return nil
	}
}

func lastProbe(h *container.Health) string {
	if len(h.Log) == 0 {
		return ""
	}
	p := h.Log[len(h.Log)-1]
	return fmt.Sprintf(" (last probe exited %d: %s)", p.ExitCode, strings.TrimSpace(p.Output))
}

// startErr gives a failed ContainerStart a code: the engine refuses a start
// for the template's reasons (a port in use, a missing executable).
func (r *Runtime) startErr(instanceID, svc string, err error) error {
	if client.IsErrConnectionFailed(err) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return r.engineErr("start service "+svc, err)
	}
	msg := err.Error()
	if strings.Contains(msg, "port is already allocated") || strings.Contains(msg, "address already in use") {
		return sim.Errorf(sim.EConflict, "start service %q of instance %s: a published port is in use: %s", svc, instanceID, msg)
	}
	return sim.Errorf(sim.EUnprocessable, "start service %q of instance %s: %s", svc, instanceID, msg)
}

// engineErr wraps an engine call's error, as EUnavailable when the engine
// does not answer.
func (r *Runtime) engineErr(op string, err error) error {
	if client.IsErrConnectionFailed(err) {
		return sim.Errorf(sim.EUnavailable, "%s: docker engine at %s does not answer: %v", op, r.cli.DaemonHost(), err)
	}
	return fmt.Errorf("%s: %w", op, err)
}

// Stop stops the instance's containers at once (SIGTERM, SIGKILL after
// grace, rounded up to whole seconds as the engine counts them), then
// removes them, their anonymous and named volumes and the network. Their
// deaths are not reported as ServiceExited. An unknown instance is not an
// error.
func (r *Runtime) Stop(ctx context.Context, instanceID string, grace time.Duration) error {
	r.mu.Lock()
	in := r.instances[instanceID]
	if in == nil {
		r.mu.Unlock()
		return nil
	}
	in.stopping = true
	services := in.services
	r.mu.Unlock()
	if services == nil {
		return nil // still being prepared: Prepare sees stopping and removes it all
	}
	if in.composeName != "" {
		if err := r.down(ctx, in.composeName, in.project, grace); err != nil {
			return fmt.Errorf("stop instance %s: %w", instanceID, err)
		}
		r.forget(in)
		return nil
	}

	secs := int(math.Ceil(max(grace, 0).Seconds()))
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
	var nets []string
	if in.network != "" {
		nets = append(nets, in.network)
	}
	if err := r.removeAll(ctx, ids, nets, instanceID); err != nil {
		return fmt.Errorf("stop instance %s: %w", instanceID, err)
	}
	r.forget(in)
	return nil
}

// removeAll force-removes containers (with their anonymous volumes), then
// networks, then the named volumes made for the instance. Things already
// gone are no error.
func (r *Runtime) removeAll(ctx context.Context, containers, networks []string, instanceID string) error {
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
	vols, err := r.cli.VolumeList(ctx, volume.ListOptions{Filters: filters.NewArgs(
		filters.Arg("label", LabelManaged+"=true"), filters.Arg("label", sim.LabelInstance+"="+instanceID))})
	if err != nil {
		fail(r.engineErr("list volumes", err))
	}
	for _, v := range vols.Volumes {
		wg.Go(func() {
			if err := r.cli.VolumeRemove(ctx, v.Name, false); err != nil && !cerrdefs.IsNotFound(err) {
				fail(r.engineErr("remove volume "+v.Name, err))
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
