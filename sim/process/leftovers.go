package process

import (
	"maps"
	"slices"

	"github.com/normsim/normsim/sim"
)

// StopLeftovers kills, with their process groups, the host processes an
// earlier run of normsim started for the given instances (instance ID →
// the pids it recorded). A SIGKILLed normsim can die between starting a
// process and recording its pid, so on Linux it also finds processes by the
// instance ID in their environment (sim.EnvInstance, which their children
// inherit too). It returns how many process groups it signalled.
func StopLeftovers(recorded map[string][]int) int {
	groups := map[int]bool{}
	for _, pids := range recorded {
		for _, pid := range pids {
			if pid > 1 {
				groups[pid] = true
			}
		}
	}
	for _, pgid := range taggedGroups(sim.EnvInstance, slices.Collect(maps.Keys(recorded))) {
		groups[pgid] = true
	}
	delete(groups, ownGroup()) // a reused pid must never take normsim down
	n := 0
	for pgid := range groups {
		if anyInGroup(pgid) && killGroup(pgid) == nil {
			n++
		}
	}
	return n
}
