//go:build unix && !linux && !aix

package process

import (
	"context"
	"syscall"
)

func sysProcAttr(pidfd *int) *syscall.SysProcAttr {
	*pidfd = -1
	return &syscall.SysProcAttr{Setpgid: true}
}

// waitExit waits until pid exits and reaps it, or gives up when ctx ends
// (false). Without pidfds it polls; beforeReap runs just after the reap.
func waitExit(ctx context.Context, pid, _ int, beforeReap func()) (exitInfo, bool) {
	return pollExit(ctx, pid, beforeReap)
}

// groupAlive reports whether anything is left in group pgid. Zombies count:
// the launchd and init of these systems reap orphans promptly.
func groupAlive(pgid int) bool { return anyInGroup(pgid) }

// groupStopped cannot look at the group's threads without /proc: kill's
// return is as good as it gets here.
func groupStopped(int) bool { return true }

// taggedGroups finds nothing: without /proc no other process's environment
// can be read, so only recorded pids are stopped.
func taggedGroups(string, []string, string) []int { return nil }

// startMark is "": without /proc a process's start time is not at hand.
func startMark(int) string { return "" }

// ownedProcesses cannot look: without /proc no other process's
// environment can be read.
func ownedProcesses(string, string) (map[int]string, bool) { return nil, false }

// isZombie: this system does not say, so an ended process not yet reaped
// counts as alive.
func isZombie(int) bool { return false }
