package docker

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/docker/compose/v5/pkg/api"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/network"

	"github.com/normsim/normsim/sim"
)

// Owned is a container normsim created, in this run or an earlier one.
type Owned struct {
	Instance    string
	Service     string
	ContainerID string
	Running     bool
	// Restarting is a container the engine is about to start again (its
	// restart policy), Exited one that ended; Completed (filled by
	// Recover, which asks the engine) one that exited with code 0. Neither
	// a restarting nor a completed one ends its project under `docker
	// compose up`.
	Restarting, Exited bool
	Completed          bool
	Labels             map[string]string
}

// Owned lists every container that carries normsim's labels, running or
// not, whichever run created it, by instance then service.
func (r *Runtime) Owned(ctx context.Context) ([]Owned, error) {
	if err := r.connect(ctx); err != nil {
		return nil, err
	}
	list, err := r.cli.ContainerList(ctx, container.ListOptions{All: true, Filters: filters.NewArgs(
		filters.Arg("label", LabelManaged+"=true"))})
	if err != nil {
		return nil, r.engineErr("list normsim containers", err)
	}
	owned := make([]Owned, 0, len(list))
	for _, c := range list {
		owned = append(owned, Owned{
			Instance:    c.Labels[sim.LabelInstance],
			Service:     c.Labels[sim.LabelService],
			ContainerID: c.ID,
			Running:     c.State == container.StateRunning,
			Restarting:  c.State == container.StateRestarting,
			Exited:      c.State == container.StateExited,
			Labels:      c.Labels,
		})
	}
	slices.SortFunc(owned, func(a, b Owned) int {
		return cmp.Or(cmp.Compare(a.Instance, b.Instance), cmp.Compare(a.Service, b.Service), cmp.Compare(a.ContainerID, b.ContainerID))
	})
	return owned, nil
}

// instanceFilter selects what normsim created for one instance of owner
// (sim.LabelOwner; "" for a spec launched without one). Each normsim
// draws its instance IDs on its own, six hex digits: two normsims on one
// engine can draw the same one, so every look-up and removal names the
// owner too, and never takes another normsim's instance for its own.
func instanceFilter(owner, instanceID string) filters.Args {
	f := filters.NewArgs(filters.Arg("label", LabelManaged+"=true"), filters.Arg("label", sim.LabelInstance+"="+instanceID))
	if owner != "" {
		f.Add("label", sim.LabelOwner+"="+owner)
	}
	return f
}

// ownerOf is the owner label a spec's services carry ("" for none).
func ownerOf(spec *sim.LaunchSpec) string { return labelOf(spec, sim.LabelOwner) }

// labelOf is the value of a label the manager puts on every service of
// spec, "" when none has it.
func labelOf(spec *sim.LaunchSpec, label string) string {
	for _, s := range spec.Services {
		if v := s.Labels[label]; v != "" {
			return v
		}
	}
	return ""
}

// InstanceIDTaken says whether anything in the engine carries the
// instance ID (sim.IDChecker): another normsim's instance, or one an
// earlier run left that recovery has not taken. The compose project
// (normsim-<instance id>) and the default container names follow from the
// ID, and compose would recreate another's containers as its own.
func (r *Runtime) InstanceIDTaken(ctx context.Context, instanceID string) (bool, error) {
	if err := r.connect(ctx); err != nil {
		return false, err
	}
	f := instanceFilter("", instanceID)
	list, err := r.cli.ContainerList(ctx, container.ListOptions{All: true, Limit: 1, Filters: f})
	if err != nil {
		return false, r.engineErr("list containers of instance "+instanceID, err)
	}
	if len(list) > 0 {
		return true, nil
	}
	nets, err := r.cli.NetworkList(ctx, network.ListOptions{Filters: f})
	if err != nil {
		return false, r.engineErr("list networks of instance "+instanceID, err)
	}
	return len(nets) > 0, nil
}

// trackedOwner is the owner of a tracked instance ("" for one not
// tracked).
func (r *Runtime) trackedOwner(instanceID string) string {
	if in := r.lookup(instanceID); in != nil {
		return in.owner
	}
	return ""
}

// filterOf is instanceFilter for a tracked instance, by its owner.
func (r *Runtime) filterOf(instanceID string) filters.Args {
	return instanceFilter(r.trackedOwner(instanceID), instanceID)
}

// Adopt tracks an instance an earlier run left in the engine, so that
// Start, Stop, Logs and the runtime's events cover it as if this runtime
// had prepared it, whoever's it is (Recover adopts only its own store's).
// Adopting an instance already tracked is a no-op; one with no container
// is ENotFound.
func (r *Runtime) Adopt(ctx context.Context, instanceID string) error {
	return r.adopt(ctx, "", instanceID)
}

// adopt is Adopt of owner's instance ("" for any owner's).
func (r *Runtime) adopt(ctx context.Context, owner, instanceID string) error {
	if r.lookup(instanceID) != nil {
		return nil
	}
	if err := r.connect(ctx); err != nil {
		return err
	}
	list, err := r.cli.ContainerList(ctx, container.ListOptions{All: true, Filters: instanceFilter(owner, instanceID)})
	if err != nil {
		return r.engineErr("list containers of instance "+instanceID, err)
	}
	if len(list) == 0 {
		return sim.Errorf(sim.ENotFound, "instance %s has no containers in the docker engine", instanceID)
	}
	in := &instance{id: instanceID, owner: owner}
	for _, c := range list {
		if name := c.Labels[api.ProjectLabel]; name != "" {
			in.composeName = name // created through the Compose SDK
		}
		in.services = append(in.services, &service{
			name:      c.Labels[sim.LabelService],
			container: c.ID,
		})
	}
	slices.SortFunc(in.services, func(a, b *service) int { return cmp.Compare(a.name, b.name) })
	nets, err := r.cli.NetworkList(ctx, network.ListOptions{Filters: instanceFilter(owner, instanceID)})
	if err != nil {
		return r.engineErr("list networks of instance "+instanceID, err)
	}
	if len(nets) > 0 {
		in.network = nets[0].Name
	}
	if err := r.track(in); err != nil {
		if sim.ErrorCode(err) == sim.EConflict {
			return nil // adopted concurrently
		}
		return fmt.Errorf("adopt instance %s: %w", instanceID, err)
	}
	// Restarts the engine made before the adoption are not deaths seen here.
	for _, s := range in.services {
		if ci, err := r.cli.ContainerInspect(ctx, s.container); err == nil {
			r.mu.Lock()
			s.restartBase = ci.RestartCount
			r.mu.Unlock()
		}
	}
	// From now: the lines an earlier run captured are in the store, and
	// what was printed while no normsim ran is not (docs/logs.md).
	r.capture(in, r.now())
	return nil
}

// RemoveInstance force-removes whatever normsim created for the instance
// (containers, network, named volumes), tracked (then only its owner's)
// or not (any owner's): the cleanup of an earlier run's leftovers.
// Nothing to remove is not an error.
func (r *Runtime) RemoveInstance(ctx context.Context, instanceID string) error {
	return r.removeInstance(ctx, "", instanceID)
}

// removeInstance is RemoveInstance of owner's instance; "" takes a
// tracked instance's owner, or any owner's for one not tracked.
func (r *Runtime) removeInstance(ctx context.Context, owner, instanceID string) error {
	if err := r.connect(ctx); err != nil {
		return err
	}
	r.mu.Lock()
	in := r.instances[instanceID]
	if in != nil {
		in.stopping = true
		if owner == "" {
			owner = in.owner
		}
	}
	r.mu.Unlock()

	if err := r.sweep(ctx, owner, instanceID); err != nil {
		return fmt.Errorf("remove instance %s: %w", instanceID, err)
	}
	if in != nil {
		r.forget(in)
	}
	return nil
}

// sweep force-removes every container, network and volume that carries
// the labels of owner's instance.
func (r *Runtime) sweep(ctx context.Context, owner, instanceID string) error {
	_, err := r.sweepCount(ctx, owner, instanceID)
	return err
}

// sweepCount is sweep, and how many containers it found to remove.
func (r *Runtime) sweepCount(ctx context.Context, owner, instanceID string) (int, error) {
	f := instanceFilter(owner, instanceID)
	list, err := r.cli.ContainerList(ctx, container.ListOptions{All: true, Filters: f})
	if err != nil {
		return 0, r.engineErr("list containers of instance "+instanceID, err)
	}
	nets, err := r.cli.NetworkList(ctx, network.ListOptions{Filters: f})
	if err != nil {
		return 0, r.engineErr("list networks of instance "+instanceID, err)
	}
	ids := make([]string, len(list))
	for i, c := range list {
		ids[i] = c.ID
	}
	netIDs := make([]string, len(nets))
	for i, n := range nets {
		netIDs[i] = n.ID
	}
	return len(ids), r.removeAll(ctx, ids, netIDs, owner, instanceID)
}

// sweepSettle is how long sweepSettled sees none of an instance's
// containers before it takes the sweep as done, and sweepEvery how often it
// looks meanwhile.
const (
	sweepSettle = time.Second
	sweepEvery  = 200 * time.Millisecond
)

// sweepSettled sweeps an instance whose create failed until none of its
// containers has appeared for sweepSettle (or ctx ends). compose cancels
// its other creates at the first failure, but only its requests: the
// engine goes on and makes the container, under load after the first
// sweep looked, and it was left behind.
func (r *Runtime) sweepSettled(ctx context.Context, owner, instanceID string) error {
	quietSince := time.Now()
	for {
		n, err := r.sweepCount(ctx, owner, instanceID)
		if err != nil {
			return err
		}
		if n > 0 {
			quietSince = time.Now()
		}
		if time.Since(quietSince) >= sweepSettle {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(sweepEvery):
		}
	}
}

// Running lists owner's containers that run now (sim.Census).
func (r *Runtime) Running(ctx context.Context, owner string) ([]sim.RunningUnit, error) {
	owned, err := r.Owned(ctx)
	if err != nil {
		return nil, err
	}
	var out []sim.RunningUnit
	for _, o := range owned {
		if o.Running && o.Labels[sim.LabelOwner] == owner {
			out = append(out, sim.RunningUnit{Runtime: sim.RuntimeDocker, Instance: o.Instance, Ref: o.ContainerID})
		}
	}
	return out, nil
}
