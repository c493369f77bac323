package docker

import (
	"context"
	"slices"
	"strings"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/volume"

	"github.com/normsim/normsim/sim"
)

// RemoveOrphans removes the instances whose containers a --db :memory:
// normsim left that is gone (sim.LabelStore; judge proves it gone from
// their sim.LabelRun), and says what it removed and whose it could not
// judge. Runs of a --db :memory: normsim have an owner label no store
// remembers, so no recovery would ever find them. Everything else is
// left: the containers of a store file's runs (left by --keep for the next
// normsim on that store to adopt, or by a kill for it to remove), of owner
// (this store's, which recovery adopts or removes), and of runs not proven
// gone (alive, another machine's or PID namespace's, unlabelled). The
// networks and volumes such a run made that outlived its containers (a
// name: x another normsim's container used when they were removed) are
// removed too once nothing uses them (removeOrphanResources).
func (r *Runtime) RemoveOrphans(ctx context.Context, owner string, judge func(run string) sim.RunVerdict) (sim.OrphanSweep, error) {
	var sweep sim.OrphanSweep
	if err := r.connect(ctx); err != nil {
		return sweep, err
	}
	list, err := r.cli.ContainerList(ctx, container.ListOptions{All: true, Filters: filters.NewArgs(
		filters.Arg("label", LabelManaged+"=true"), filters.Arg("label", sim.LabelRun))})
	if err != nil {
		return sweep, r.engineErr("list containers", err)
	}
	gone := orphanJudge(owner, judge, &sweep)
	// An orphan is an instance of one owner: two normsims may have drawn
	// the same instance ID.
	type orphan struct{ owner, id string }
	var orphans []orphan
	for _, c := range list {
		o := orphan{c.Labels[sim.LabelOwner], c.Labels[sim.LabelInstance]}
		if o.id == "" || slices.Contains(orphans, o) || !gone(c.Labels) {
			continue
		}
		orphans = append(orphans, o)
	}
	for _, o := range orphans {
		if err := r.sweep(ctx, o.owner, o.id); err != nil {
			r.log.Warn("could not remove what a killed normsim left", "instance", o.id, "err", err)
			continue
		}
		sweep.Removed = append(sweep.Removed, o.id)
	}
	if err := r.removeOrphanResources(ctx, gone); err != nil {
		return sweep, err
	}
	return sweep, nil
}

// removeOrphanResources removes the networks and volumes a --db :memory:
// normsim that is gone made and nothing uses any more, by the proof the
// containers' sweep takes (gone, an orphanJudge). Its containers are gone
// by now, removed by its reaper or by the sweep above, but what a template
// names (name: x) may have been in use by another normsim's container
// then, and no container is left to lead a sweep to it. One a container
// still uses (another normsim's, running or not: the engine would remove a
// network a stopped container is attached to, and that container could
// never start again) is left, and said, naming its users, for a later
// sweep.
func (r *Runtime) removeOrphanResources(ctx context.Context, gone func(labels map[string]string) bool) error {
	f := filters.NewArgs(filters.Arg("label", LabelManaged+"=true"), filters.Arg("label", sim.LabelRun),
		filters.Arg("label", sim.LabelStore+"="+sim.StoreMemory))
	nets, err := r.cli.NetworkList(ctx, network.ListOptions{Filters: f})
	if err != nil {
		return r.engineErr("list networks", err)
	}
	vols, err := r.cli.VolumeList(ctx, volume.ListOptions{Filters: f})
	if err != nil {
		return r.engineErr("list volumes", err)
	}
	// The networks (found by ID and by name: a container created and not
	// started, or stopped, has no endpoint and is found by the name only)
	// and the volumes, each with how it is removed.
	type resource struct {
		kind, name string
		refs       []string
		labels     map[string]string
		remove     func() error
	}
	var resources []resource
	for _, n := range nets {
		resources = append(resources, resource{"network", n.Name, []string{n.ID, n.Name}, n.Labels,
			func() error { return r.cli.NetworkRemove(ctx, n.ID) }})
	}
	for _, v := range vols.Volumes {
		resources = append(resources, resource{"volume", v.Name, []string{v.Name}, v.Labels,
			func() error { return r.cli.VolumeRemove(ctx, v.Name, false) }})
	}
	removed := map[string][]string{}
	for _, res := range resources {
		if !gone(res.labels) {
			continue
		}
		users, err := r.containersUsing(ctx, res.kind, res.refs...)
		if err != nil {
			return err
		}
		if len(users) == 0 {
			err := res.remove()
			if err == nil || cerrdefs.IsNotFound(err) {
				removed[res.kind] = append(removed[res.kind], res.name)
				continue
			}
			if !inUse(err) {
				r.log.Warn("could not remove a "+res.kind+" a normsim that is gone made", res.kind, res.name, "err", err)
				continue
			}
		}
		// Used, or a container took it since it was looked at: said.
		var names []string
		for _, c := range users {
			n := shortID(c.ID)
			if len(c.Names) > 0 {
				n = strings.TrimPrefix(c.Names[0], "/")
			}
			names = append(names, n)
		}
		r.log.Info("left a "+res.kind+" a normsim that is gone made: containers still use it; a later normsim's sweep removes it once none does, or remove it then with: docker "+res.kind+" rm "+res.name,
			res.kind, res.name, "run", res.labels[sim.LabelRun], "containers", names)
	}
	removedNets, removedVols := removed["network"], removed["volume"]
	if len(removedNets)+len(removedVols) > 0 {
		r.log.Info("removed networks and volumes a normsim that is gone made, which nothing used any more", "networks", removedNets, "volumes", removedVols)
	}
	return nil
}

// orphanJudge says whether what carries labels was made by a --db
// :memory: normsim that is gone: managed, sim.LabelStore memory, not
// owner's, and of a run judge proves gone. Each run is judged once (judge
// reads /proc), and one it cannot judge is added to sweep's Unjudged.
func orphanJudge(owner string, judge func(run string) sim.RunVerdict, sweep *sim.OrphanSweep) func(labels map[string]string) bool {
	verdicts := map[string]sim.RunVerdict{}
	return func(labels map[string]string) bool {
		if labels[LabelManaged] != "true" || labels[sim.LabelStore] != sim.StoreMemory || labels[sim.LabelOwner] == owner {
			return false
		}
		run := labels[sim.LabelRun]
		v, ok := verdicts[run]
		if !ok {
			v = judge(run)
			verdicts[run] = v
		}
		if v == sim.RunUnjudged && !slices.Contains(sweep.Unjudged, run) {
			sweep.Unjudged = append(sweep.Unjudged, run)
		}
		return v == sim.RunGone
	}
}

// containersUsing lists the containers, running or not, attached to a
// network (kind "network") or mounting a volume ("volume"), by any of refs
// (a network by ID and by name: a container created and not started, or
// stopped, is found by the name only, as it has no endpoint).
func (r *Runtime) containersUsing(ctx context.Context, kind string, refs ...string) ([]container.Summary, error) {
	f := filters.NewArgs()
	for _, ref := range refs {
		f.Add(kind, ref)
	}
	list, err := r.cli.ContainerList(ctx, container.ListOptions{All: true, Filters: f})
	if err != nil {
		return nil, r.engineErr("list the containers using "+kind+" "+refs[len(refs)-1], err)
	}
	return list, nil
}
