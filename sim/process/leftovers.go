package process

import (
	"maps"
	"slices"

	"github.com/normsim/normsim/sim"
)

// Recorded is a host process as a store keeps it: its pid, which is also
// its process group, and where the system tells (Linux), when it started,
// which tells it from a later process that got the same pid.
type Recorded struct {
	Pid     int
	Started string
}

// StopLeftovers kills, with their process groups, the host processes an
// earlier run of normsim started for the given instances (instance ID →
// what it recorded). A recorded pid whose process started at another time
// than recorded is someone else's now and is left alone. A SIGKILLed
// normsim can die between starting a process and recording it, so on Linux
// it also finds processes by the instance ID in their environment
// (sim.EnvInstance, which their children inherit too) together with owner
// (sim.EnvOwner, the store's owner label): another normsim's processes
// never match, whatever their instance IDs. It returns how many process
// groups it signalled.
func StopLeftovers(owner string, recorded map[string][]Recorded) int {
	groups := map[int]bool{}
	for _, procs := range recorded {
		for _, p := range procs {
			if p.Pid > 1 && (p.Started == "" || startMark(p.Pid) == p.Started) {
				groups[p.Pid] = true
			}
		}
	}
	for _, pgid := range taggedGroups(sim.EnvInstance, slices.Collect(maps.Keys(recorded)), sim.EnvOwner+"="+owner) {
		groups[pgid] = true
	}
	delete(groups, ownGroup()) // neither a reused pid nor a tag normsim inherited may take it down
	n := 0
	for pgid := range groups {
		if anyInGroup(pgid) && killGroup(pgid) == nil {
			n++
		}
	}
	return n
}
