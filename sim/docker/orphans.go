package docker

import (
	"context"
	"slices"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"

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
// gone (alive, another machine's or PID namespace's, unlabelled).
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
	// An orphan is an instance of one owner: two normsims may have drawn
	// the same instance ID.
	type orphan struct{ owner, id string }
	var orphans []orphan
	for _, c := range list {
		o := orphan{c.Labels[sim.LabelOwner], c.Labels[sim.LabelInstance]}
		run := c.Labels[sim.LabelRun]
		if o.id == "" || o.owner == owner || c.Labels[sim.LabelStore] != sim.StoreMemory || slices.Contains(orphans, o) {
			continue
		}
		switch judge(run) {
		case sim.RunGone:
			orphans = append(orphans, o)
		case sim.RunUnjudged:
			if !slices.Contains(sweep.Unjudged, run) {
				sweep.Unjudged = append(sweep.Unjudged, run)
			}
		}
	}
	for _, o := range orphans {
		if err := r.sweep(ctx, o.owner, o.id); err != nil {
			r.log.Warn("could not remove what a killed normsim left", "instance", o.id, "err", err)
			continue
		}
		sweep.Removed = append(sweep.Removed, o.id)
	}
	return sweep, nil
}
