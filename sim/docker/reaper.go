package docker

import (
	"context"
	"strings"
	"time"

	"github.com/normsim/normsim/internal/reaper"
	"github.com/normsim/normsim/sim"
)

// The containers' reaper (internal/reaper) removes the instances a
// --db :memory: normsim created when it dies without removing them
// (SIGKILL, a test binary's timeout): no store remembers them, so no
// later normsim can adopt them, and until one swept them as a gone
// normsim's orphans (RemoveOrphans) they ran on, on an engine others may
// share. A store file's instances are left for the next normsim on that
// store, which adopts or removes them (Recover).
const containerReaperEnv = "NORMSIM_INTERNAL_DOCKER_REAPER"

// reaperBound bounds the removals the reaper makes.
const reaperBound = time.Minute

var containerReaper = reaper.New(containerReaperEnv)

func init() { reaper.Serve(containerReaperEnv, removeLeft) }

// reaperKey is how the reaper lists an instance: its ID and its owner,
// as two normsims may have drawn the same ID.
func reaperKey(in *instance) string { return in.id + "\t" + in.owner }

// removeLeft force-removes what each instance still listed left in the
// engine (containers, networks, volumes), as a second Ctrl-C does.
func removeLeft(keys []string) {
	if len(keys) == 0 {
		return // an orderly exit: nothing to ask the engine, nothing to wait for
	}
	r, err := New(Config{})
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), reaperBound)
	defer cancel()
	if r.connect(ctx) != nil {
		return
	}
	remove := func() {
		for _, key := range keys {
			id, owner, _ := strings.Cut(key, "\t")
			r.sweep(ctx, owner, id)
		}
	}
	remove()
	// The engine goes on with what the dead normsim asked of it (a
	// network, containers being created) after the first pass: a second
	// pass, once those have landed, takes them too.
	time.Sleep(reaperSecondPass)
	remove()
}

// reaperSecondPass is how long after its first pass the reaper looks again.
const reaperSecondPass = 3 * time.Second

// reapedOnDeath says whether a spec's instance is one the reaper watches:
// launched by a normsim whose store is in memory.
func reapedOnDeath(spec *sim.LaunchSpec) bool {
	for _, s := range spec.Services {
		if s.Labels[sim.LabelStore] == sim.StoreMemory {
			return true
		}
	}
	return false
}
