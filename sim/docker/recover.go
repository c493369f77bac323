package docker

import (
	"context"
	"slices"

	"github.com/normsim/normsim/sim"
)

var (
	_ sim.Recoverer      = (*Runtime)(nil)
	_ sim.OrphanRemover  = (*Runtime)(nil)
	_ sim.EngineReporter = (*Runtime)(nil)
)

// Recover adopts the containers an earlier run over the same store left
// running, and removes the rest of what that store's runs left: the
// instances it could not adopt, and the ones the store does not know or
// recorded as ended. Only containers carrying owner's label (sim.LabelOwner)
// are looked at, never another normsim's on the same engine. A removal that
// fails is logged and recovery goes on: the instance is failed either way.
func (r *Runtime) Recover(ctx context.Context, owner string, stored []sim.Instance) (map[string]sim.Recovery, error) {
	owned, err := r.Owned(ctx)
	if err != nil {
		return nil, err
	}
	owned, live := r.withoutLiveRuns(owner, owned)
	r.readCompleted(ctx, owner, owned)
	left := leftovers(owner, owned)
	out := map[string]sim.Recovery{}
	for _, in := range stored {
		if in.State.Terminal() {
			continue
		}
		if run, ok := live[in.ID]; ok {
			out[in.ID] = sim.Recovery{Reason: "its containers belong to another normsim that is running now (run " + run + "), started on a copy of this store: left to it"}
			continue
		}
		if !adoptable(in, left) {
			out[in.ID] = sim.Recovery{Reason: "normsim restarted and the instance was no longer running"}
			continue
		}
		if err := r.adopt(ctx, owner, in.ID); err != nil {
			out[in.ID] = sim.Recovery{Reason: "could not adopt after a restart: " + err.Error()}
			continue
		}
		out[in.ID] = sim.Recovery{Adopted: true}
	}
	for _, id := range unadopted(out, left) {
		if _, theirs := live[id]; theirs {
			continue
		}
		if err := r.removeInstance(ctx, owner, id); err != nil {
			r.log.Warn("could not remove what an earlier run left", "instance", id, "err", err)
		}
	}
	return out, nil
}

// withoutLiveRuns leaves out of owned the instances of owner that another
// normsim running now started, and returns them by ID with that run. A
// store file copied while its normsim was stopped, and both started
// again, have one owner label: without this, each one's recovery removed
// the instances the other had launched since, as a dead run's leftovers.
// An instance goes whole when any of its containers is of a live run.
func (r *Runtime) withoutLiveRuns(owner string, owned []Owned) ([]Owned, map[string]string) {
	live := map[string]string{}
	if r.liveElsewhere == nil {
		return owned, live
	}
	judged := map[string]bool{} // run → alive elsewhere: each is judged once (it reads /proc)
	for _, o := range owned {
		run := o.Labels[sim.LabelRun]
		if o.Labels[sim.LabelOwner] != owner || run == "" {
			continue
		}
		alive, ok := judged[run]
		if !ok {
			alive = r.liveElsewhere(run)
			judged[run] = alive
		}
		if alive {
			live[o.Instance] = run
		}
	}
	if len(live) == 0 {
		return owned, live
	}
	kept := owned[:0:0]
	for _, o := range owned {
		if _, ok := live[o.Instance]; !ok || o.Labels[sim.LabelOwner] != owner {
			kept = append(kept, o)
		}
	}
	runs := map[string][]string{}
	for id, run := range live {
		runs[run] = append(runs[run], id)
	}
	for run, ids := range runs {
		slices.Sort(ids)
		r.log.Warn("left instances that carry this store's owner label but belong to another normsim that is running now: this store is a copy of that one's, and its jobs are its own",
			"run", run, "instances", ids)
	}
	return kept, live
}

// readCompleted marks owner's exited containers that exited with code 0
// (the list gives the code only inside its status text): only recovery
// needs it, so only recovery asks the engine, once a container.
func (r *Runtime) readCompleted(ctx context.Context, owner string, owned []Owned) {
	for i := range owned {
		o := &owned[i]
		if !o.Exited || o.Labels[sim.LabelOwner] != owner {
			continue
		}
		if ci, err := r.cli.ContainerInspect(ctx, o.ContainerID); err == nil && ci.State != nil {
			o.Completed = ci.State.ExitCode == 0 && !ci.State.OOMKilled
		}
	}
}

// leftovers maps each instance of owner's runs the engine still holds
// containers of to whether it still runs as `docker compose up` would
// have it: some container runs (or is being restarted by the engine), and
// every other one did too or completed (exit 0, a one-shot's end).
func leftovers(owner string, owned []Owned) map[string]bool {
	seen, running, ended := map[string]bool{}, map[string]bool{}, map[string]bool{}
	for _, o := range owned {
		if o.Labels[sim.LabelOwner] != owner {
			continue
		}
		seen[o.Instance] = true
		switch {
		case o.Running || o.Restarting:
			running[o.Instance] = true
		case !o.Completed:
			ended[o.Instance] = true
		}
	}
	out := map[string]bool{}
	for id := range seen {
		out[id] = running[id] && !ended[id]
	}
	return out
}

// adoptable reports whether a stored instance that has not ended is taken
// back: it still runs (leftovers). A launch answers while its instance is
// still starting, and "running" may not have reached the store before the
// kill: containers that are up are adopted either way.
func adoptable(in sim.Instance, left map[string]bool) bool {
	running, ok := left[in.ID]
	return ok && running && (in.State == sim.InstanceRunning || in.State == sim.InstanceStarting)
}

// unadopted is what recovery removes, sorted: the stored instances it did
// not adopt, and the leftovers no stored instance that had not ended
// accounts for.
func unadopted(recovered map[string]sim.Recovery, left map[string]bool) []string {
	var ids []string
	for id, rec := range recovered {
		if !rec.Adopted {
			ids = append(ids, id)
		}
	}
	for id := range left {
		if _, ok := recovered[id]; !ok {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids
}
