//go:build unix && !aix

package process

import (
	"strconv"
	"syscall"
	"time"

	"github.com/normsim/normsim/internal/reaper"
)

// The jobs' reaper (internal/reaper) ends the host processes a normsim
// started when it dies without stopping them; it watches their process
// groups. A container dies with its engine's record (sim/docker has a
// reaper of its own for a --db :memory: run's); a host process has only
// this.
const (
	reaperEnv   = "NORMSIM_INTERNAL_REAPER"
	reaperGrace = 2 * time.Second
)

var jobReaper = reaper.New(reaperEnv)

func init() { reaper.Serve(reaperEnv, endGroups) }

// endGroups sends SIGTERM to the groups still listed, and SIGKILL to what
// is left of them after reaperGrace.
func endGroups(ids []string) {
	groups := map[int]bool{}
	for _, id := range ids {
		if g, err := strconv.Atoi(id); err == nil && g > 1 { // kill(-1) would signal everything
			groups[g] = true
		}
	}
	for g := range groups {
		syscall.Kill(-g, syscall.SIGTERM)
	}
	for deadline := time.Now().Add(reaperGrace); len(groups) > 0 && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		for g := range groups {
			if syscall.Kill(-g, 0) == syscall.ESRCH {
				delete(groups, g)
			}
		}
	}
	for g := range groups {
		syscall.Kill(-g, syscall.SIGKILL)
	}
}

// reapOnDeath puts a job's process group on the reaper's list. It reports
// an error once, when the reaper cannot be had: the job then outlives a
// normsim that dies without stopping it.
func reapOnDeath(pgid int) error { return jobReaper.Watch(strconv.Itoa(pgid)) }

// forgetOnDeath takes a group off the list: stopped, exited, or kept.
func forgetOnDeath(pgid int) { jobReaper.Forget(strconv.Itoa(pgid)) }
