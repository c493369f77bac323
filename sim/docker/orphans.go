package docker

import (
	"context"
	"slices"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"

	"github.com/normsim/normsim/sim"
)

// RemoveOrphans removes the instances whose containers a normsim left
// that is gone (gone reports it from their sim.LabelRun), and returns
// their IDs. Runs of a --db :memory: normsim have an owner label no store
// remembers, so no recovery would ever find them. The containers of owner
// (this store's, which recovery adopts or removes) and of runs that are
// not known to be gone (alive, another host's, unlabelled) are left.
func (r *Runtime) RemoveOrphans(ctx context.Context, owner string, gone func(run string) bool) ([]string, error) {
	if err := r.connect(ctx); err != nil {
		return nil, err
	}
	list, err := r.cli.ContainerList(ctx, container.ListOptions{All: true, Filters: filters.NewArgs(
		filters.Arg("label", LabelManaged+"=true"), filters.Arg("label", sim.LabelRun))})
	if err != nil {
		return nil, r.engineErr("list containers", err)
	}
	var orphans []string
	for _, c := range list {
		id, run := c.Labels[sim.LabelInstance], c.Labels[sim.LabelRun]
		if id == "" || c.Labels[sim.LabelOwner] == owner || slices.Contains(orphans, id) || !gone(run) {
			continue
		}
		orphans = append(orphans, id)
	}
	var removed []string
	for _, id := range orphans {
		if err := r.sweep(ctx, id); err != nil {
			r.log.Warn("could not remove what a killed normsim left", "instance", id, "err", err)
			continue
		}
		removed = append(removed, id)
	}
	return removed, nil
}
