package process

import (
	"context"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/normsim/normsim/sim"
)

// Recorded is a host process as a store keeps it: its pid, which is also
// its process group, and where the system tells (Linux), when it started,
// which tells it from a later process that got the same pid.
type Recorded struct {
	Pid     int
	Started string
}

// The RuntimeRef keys a host process is recorded under: "pid:SERVICE" and,
// where the system tells, "started:SERVICE".
const (
	refPid     = "pid:"
	refStarted = "started:"
	// refLogs is the run's log directory, removed by a restart that
	// stops what a crashed run left.
	refLogs = "logs"
)

var (
	_ sim.RefRecorder = (*Runtime)(nil)
	_ sim.Recoverer   = (*Runtime)(nil)
)

// RuntimeRef is what a store keeps of each running service of the
// instance so a restart can stop it (see Recover): its pid and when it
// started.
func (r *Runtime) RuntimeRef(instanceID string) map[string]string {
	ref := map[string]string{}
	r.mu.Lock()
	if inst := r.instances[instanceID]; inst != nil && inst.dir != "" {
		ref[refLogs] = inst.dir
	}
	r.mu.Unlock()
	for svc, p := range r.running(instanceID) {
		ref[refPid+svc] = strconv.Itoa(p.pid)
		if p.started != "" {
			ref[refStarted+svc] = p.started
		}
	}
	return ref
}

// recordedProcesses is the host processes a RuntimeRef holds.
func recordedProcesses(ref map[string]string) []Recorded {
	var out []Recorded
	for k, v := range ref {
		svc, ok := strings.CutPrefix(k, refPid)
		if !ok {
			continue
		}
		if pid, err := strconv.Atoi(v); err == nil {
			out = append(out, Recorded{Pid: pid, Started: ref[refStarted+svc]})
		}
	}
	return out
}

// cannotAdopt is why an instance of an earlier run fails on recovery.
const cannotAdopt = "normsim restarted; host processes cannot be adopted, so the earlier ones were stopped"

// Recover stops every host process an earlier run of owner started: host
// processes cannot be adopted, so every stored instance that had not ended
// fails. They are found by recorded pid or by their instance ID (a kill
// can land between the fork and the pid reaching the store). Ended
// instances are searched by ID too, but their recorded pids are not
// trusted: those processes were seen to end, and the pids may belong to
// others now.
func (r *Runtime) Recover(_ context.Context, owner string, stored []sim.Instance) (map[string]sim.Recovery, error) {
	recorded := map[string][]Recorded{}
	out := map[string]sim.Recovery{}
	for _, in := range stored {
		recorded[in.ID] = nil
		if !in.State.Terminal() {
			recorded[in.ID] = recordedProcesses(in.RuntimeRef)
			out[in.ID] = sim.Recovery{Reason: cannotAdopt}
		}
	}
	if n := StopLeftovers(owner, recorded); n > 0 {
		r.logger.Info("stopped host processes an earlier run left", "groups", n)
	}
	for _, in := range stored {
		if dir := in.RuntimeRef[refLogs]; isLogDir(dir, in.ID) {
			if err := os.RemoveAll(dir); err != nil {
				r.logger.Warn("remove the log directory an earlier run left", "instance", in.ID, "dir", dir, "err", err)
			}
		}
	}
	return out, nil
}

// isLogDir reports whether dir is what Start makes for the instance's log
// files (an absolute path named normsim-ID-…): a store names nothing else
// for removal.
func isLogDir(dir, instanceID string) bool {
	return filepath.IsAbs(dir) && filepath.Clean(dir) == dir &&
		strings.HasPrefix(filepath.Base(dir), "normsim-"+safeName(instanceID)+"-")
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
			// Without a start time the pid proves nothing where the
			// system records one: it may be anyone's now.
			if now := startMark(p.Pid); p.Pid > 1 && (p.Started == now || p.Started == "" && now == "") {
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

// Running lists the process groups on this host that carry owner's label
// (sim.EnvOwner) and are alive, by the instance ID in their environment
// (sim.Census): read from /proc, so a group the runtime lost track of
// shows too.
func (r *Runtime) Running(_ context.Context, owner string) ([]sim.RunningUnit, error) {
	groups, ok := ownedProcesses(sim.EnvInstance, sim.EnvOwner+"="+owner)
	if !ok {
		return nil, sim.Errorf(sim.EUnprocessable, "the process runtime cannot list host processes on this platform (no /proc)")
	}
	delete(groups, ownGroup())
	out := make([]sim.RunningUnit, 0, len(groups))
	for pgid, inst := range groups {
		out = append(out, sim.RunningUnit{Runtime: sim.RuntimeProcess, Instance: inst, Ref: strconv.Itoa(pgid)})
	}
	slices.SortFunc(out, func(a, b sim.RunningUnit) int { return strings.Compare(a.Instance+"/"+a.Ref, b.Instance+"/"+b.Ref) })
	return out, nil
}
