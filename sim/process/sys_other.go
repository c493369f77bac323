//go:build !unix || aix

package process

import (
	"context"
	"errors"
	"os"
)

// supported: the process runtime works on this system.
const supported = false

var errUnsupported = errors.New("the process runtime does not run on this system")

func startProcess(string, []string, string, []string, *os.File, *os.File) (int, int, error) {
	return 0, -1, errUnsupported
}

func terminateGroup(int) error { return errUnsupported }

func killGroup(int) error { return errUnsupported }

func groupAlive(int) bool { return false }

func waitExit(context.Context, int, int, func()) (exitInfo, bool) { return exitInfo{}, false }

func groupStopped(int) bool { return true }

func taggedGroups(string, []string, string) []int { return nil }

func anyInGroup(int) bool { return false }

var ownGroup = func() int { return -1 }

// startMark is "": without /proc a process's start time is not at hand.
func startMark(int) string { return "" }

// ownedProcesses cannot look: without /proc no other process's
// environment can be read.
func ownedProcesses(string, string) (map[int]string, bool) { return nil, false }

// No reaper where there is no process runtime.
func reapOnDeath(int) error { return nil }
func forgetOnDeath(int)     {}

// isZombie: this system does not say, so an ended process not yet reaped
// counts as alive.
func isZombie(int) bool { return false }
