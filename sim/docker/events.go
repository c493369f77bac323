package docker

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/events"
	"github.com/docker/docker/api/types/filters"

	"github.com/normsim/normsim/sim"
)

// Reconnect backoff of the event stream.
const (
	watchBackoffMin = 100 * time.Millisecond
	watchBackoffMax = 5 * time.Second
)

// startWatchingLocked starts the event watcher once; r.mu must be held.
func (r *Runtime) startWatchingLocked() {
	if r.watching {
		return
	}
	r.watching = true
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	// Asking for events since now makes the engine replay whatever happens
	// between this call and the moment the subscription is live, so the
	// first container start is never missed.
	// The engine's clock, not the injected one: the engine compares it with
	// its own timestamps.
	since := time.Now().UnixNano()
	containers := &watcher{r: r, since: since, filters: containerEvents, handle: r.handle}
	// Network events carry no container labels: they are matched to the
	// containers tracked by ID, on a stream of their own.
	networks := &watcher{r: r, since: since, filters: networkEvents, handle: r.handleNetwork}
	r.wg.Go(func() { containers.run(ctx) })
	r.wg.Go(func() { networks.run(ctx) })
}

// containerEvents are the events of managed containers the runtime acts on.
func containerEvents() filters.Args {
	return filters.NewArgs(
		filters.Arg("type", string(events.ContainerEventType)),
		filters.Arg("label", LabelManaged+"=true"),
		filters.Arg("event", string(events.ActionStart)),
		filters.Arg("event", string(events.ActionDie)),
		filters.Arg("event", "health_status"),
		filters.Arg("event", actionPause),
		filters.Arg("event", actionUnpause),
	)
}

// networkEvents are a container being taken off a network and put on one.
func networkEvents() filters.Args {
	return filters.NewArgs(
		filters.Arg("type", string(events.NetworkEventType)),
		filters.Arg("event", string(events.ActionDisconnect)),
		filters.Arg("event", string(events.ActionConnect)),
	)
}

// watcher follows the engine's event stream for managed containers,
// reconnecting when it drops. since (engine time, ns) and seen make the
// replay after a reconnect deliver each event exactly once.
type watcher struct {
	r       *Runtime
	filters func() filters.Args
	handle  func(events.Message)
	since   int64
	seen    map[string]bool // keys of the events stamped exactly since
}

func (w *watcher) run(ctx context.Context) {
	backoff := watchBackoffMin
	for {
		before := w.since
		err := w.stream(ctx)
		if ctx.Err() != nil {
			return
		}
		if w.since != before { // the stream worked for a while
			backoff = watchBackoffMin
		}
		w.r.log.Warn("docker event stream dropped; reconnecting", "err", err, "in", backoff)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, watchBackoffMax)
	}
}

// stream reads one connection of the event stream until it fails.
func (w *watcher) stream(ctx context.Context) error {
	since := fmt.Sprintf("%d.%09d", w.since/1e9, w.since%1e9)
	msgs, errs := w.r.cli.Events(ctx, events.ListOptions{Since: since, Filters: w.filters()})
	for {
		select {
		case m := <-msgs:
			key := m.Actor.ID + " " + m.Actor.Attributes["container"] + " " + string(m.Action)
			switch {
			case m.TimeNano < w.since:
				continue
			case m.TimeNano == w.since && w.seen[key]:
				continue
			case m.TimeNano > w.since:
				w.since, w.seen = m.TimeNano, map[string]bool{}
			}
			if w.seen == nil {
				w.seen = map[string]bool{}
			}
			w.seen[key] = true
			w.handle(m)
		case err := <-errs:
			return err
		}
	}
}

// restarts reports whether the engine starts a container that exited
// again, by its restart policy, and the policy's name. The engine decides
// before it reports the exit: the container is then restarting (or, if
// the restart was quick, running again).
//
// A job that exits at once may have been restarted, and have died again,
// by the time this looks, so the engine's restart count decides: the k-th
// death since the count was base was followed by a restart once the count
// reached base+k.
func (r *Runtime) restarts(containerID string, base, k int) (string, bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ci, err := r.cli.ContainerInspect(ctx, containerID)
	if err != nil || ci.HostConfig == nil || ci.State == nil {
		return "", false
	}
	again := ci.RestartCount >= base+k || ci.State.Restarting || ci.State.Running
	return string(ci.HostConfig.RestartPolicy.Name), again
}

// handle turns one engine event into a RuntimeEvent for a tracked instance.
func (r *Runtime) handle(m events.Message) {
	attrs := m.Actor.Attributes
	r.mu.Lock()
	in := r.instances[attrs[sim.LabelInstance]]
	var svc *service
	if in != nil {
		svc = in.service(m.Actor.ID)
	}
	if svc == nil {
		r.mu.Unlock()
		return
	}
	// A failed start's cleanup stopped it: the start's error says why.
	stopping := in.stopping || in.startFailed
	own := false
	if a := string(m.Action); a == actionPause || a == actionUnpause {
		own = r.ownFreezeLocked(m.Actor.ID, a)
	}
	if m.Action == events.ActionDie {
		svc.dies++
		svc.diedAt = time.Unix(0, m.TimeNano)
		if !stopping {
			in.reporting++
			defer func() {
				r.mu.Lock()
				in.reporting--
				r.mu.Unlock()
			}()
		}
	}
	if m.Action == events.ActionStart || m.Action == events.ActionDie {
		close(in.changed)
		in.changed = make(chan struct{})
	}
	dies, base := svc.dies, svc.restartBase
	r.mu.Unlock()

	ev := sim.RuntimeEvent{Instance: in.id, Service: svc.name, At: r.now()}
	name := attrs["name"]
	switch {
	case m.Action == events.ActionStart:
		ev.Kind = sim.ServiceStarted
		ev.Detail = fmt.Sprintf("container %s started", name)
	case m.Action == events.ActionDie:
		if stopping {
			return // stopped through Stop, not on its own
		}
		code, _ := strconv.Atoi(attrs["exitCode"])
		policy, again := r.restarts(m.Actor.ID, base, dies)
		r.awaitDrained(in, svc, time.Unix(0, m.TimeNano))
		ev.Kind = sim.ServiceExited
		ev.ExitCode = code
		if code == 0 {
			// Only an exit 0 can leave the instance running on.
			ev.OthersRun = r.othersRunning(in.id, m.Actor.ID)
		}
		ev.Detail = fmt.Sprintf("container %s exited with code %d", name, code)
		if again {
			ev.Restarting = true
			ev.Detail += fmt.Sprintf("; the engine restarts it (restart: %s)", policy)
		}
	case strings.HasSuffix(string(m.Action), ": healthy"):
		ev.Kind = sim.ServiceHealthy
		ev.Detail = fmt.Sprintf("container %s is healthy", name)
	case strings.HasSuffix(string(m.Action), ": unhealthy"):
		ev.Kind = sim.ServiceUnhealthy
		ev.Detail = fmt.Sprintf("container %s is unhealthy", name)
	case string(m.Action) == actionPause:
		ev.Kind = sim.ServicePaused
		ev.Detail = fmt.Sprintf("container %s was paused by a pause fault", name)
		if !own {
			// Nothing tells the job: it answers nothing until it is
			// unpaused, and a migration then times out on it, as the real
			// worker's would.
			ev.Detail = fmt.Sprintf("container %s was paused outside normsim (docker pause, or another tool): its processes are frozen and its job answers nothing until it is unpaused", name)
		}
	case string(m.Action) == actionUnpause:
		ev.Kind = sim.ServiceResumed
		ev.Detail = fmt.Sprintf("container %s was unpaused by the end of a pause fault", name)
		if !own {
			ev.Detail = fmt.Sprintf("container %s was unpaused outside normsim", name)
		}
	default:
		return
	}
	r.log.Debug("runtime event", "instance", ev.Instance, "service", ev.Service, "kind", ev.Kind, "exit_code", ev.ExitCode)
	r.observer(ev)
}

// handleNetwork reports a tracked container that was taken off one of its
// networks while it ran (docker network disconnect, outside normsim), and
// put back: its job may then lose its socket, or its output stop reaching
// normsim, and the instance's history says why. The engine also takes a
// container off its networks as it stops: a container not running then is
// an exit, reported as such.
func (r *Runtime) handleNetwork(m events.Message) {
	containerID, network := m.Actor.Attributes["container"], m.Actor.Attributes["name"]
	r.mu.Lock()
	var in *instance
	var svc *service
	for _, i := range r.instances {
		if s := i.service(containerID); s != nil {
			in, svc = i, s
			break
		}
	}
	if svc == nil || in.stopping || in.startFailed {
		r.mu.Unlock()
		return
	}
	back := m.Action == events.ActionConnect
	if back != svc.offNetworks[network] {
		// A start's connect; or a disconnect said already (the engine
		// disconnects again as it puts a container back).
		r.mu.Unlock()
		return
	}
	r.mu.Unlock()
	if !back && !r.containerRunning(containerID) {
		return
	}
	r.mu.Lock()
	if back {
		delete(svc.offNetworks, network)
	} else {
		if svc.offNetworks == nil {
			svc.offNetworks = map[string]bool{}
		}
		svc.offNetworks[network] = true
	}
	r.mu.Unlock()
	// A network event names its container by ID alone.
	name := svc.name + " (" + shortID(containerID) + ")"
	ev := sim.RuntimeEvent{Instance: in.id, Service: svc.name, At: r.now(), Kind: sim.ServiceNetworkLost,
		Detail: fmt.Sprintf("container %s was taken off network %s outside normsim (docker network disconnect): its job may lose its socket, and its output stop reaching normsim, through it", name, network)}
	if back {
		ev.Kind = sim.ServiceNetworkBack
		ev.Detail = fmt.Sprintf("container %s was put back on network %s", name, network)
	}
	r.log.Debug("runtime event", "instance", ev.Instance, "service", ev.Service, "kind", ev.Kind)
	r.observer(ev)
}

// containerRunning says whether the engine has the container running.
func (r *Runtime) containerRunning(containerID string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ci, err := r.cli.ContainerInspect(ctx, containerID)
	return err == nil && ci.State != nil && ci.State.Running
}

// othersRunning says whether a container of the instance other than
// exited runs (a replica of the same service counts).
func (r *Runtime) othersRunning(instanceID, exited string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	f := r.filterOf(instanceID)
	f.Add("status", "running")
	list, err := r.cli.ContainerList(ctx, container.ListOptions{Filters: f})
	if err != nil {
		return false // as if none: the exit is then the instance's end
	}
	for _, c := range list {
		if c.ID != exited {
			return true
		}
	}
	return false
}

// ExitPending says whether a container of the instance died on its own and
// its exit is not reported yet (sim.ExitReporter): the report waits for
// its last output and the engine's restart decision.
func (r *Runtime) ExitPending(instanceID string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	in := r.instances[instanceID]
	return in != nil && in.reporting > 0
}
