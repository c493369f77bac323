package process

import (
	"context"
	"fmt"
	"syscall"
	"time"

	"github.com/normsim/normsim/sim"
)

var _ sim.Signaler = (*Runtime)(nil)

// Signal sends sig to every running service's process group. An exit it
// causes is reported as ServiceExited, like a crash. SIGSTOP returns once
// every process of the groups has stopped, so a pause armed on a frame
// lands before the frame is sent.
func (r *Runtime) Signal(ctx context.Context, instanceID string, sig syscall.Signal) error {
	pids := r.Pids(instanceID)
	if len(pids) == 0 {
		return sim.Errorf(sim.ENotFound, "instance %q has no running process", instanceID)
	}
	for svc, pid := range pids {
		if err := syscall.Kill(-pid, sig); err != nil {
			return fmt.Errorf("signal %s of %s: %w", sig, svc, err)
		}
	}
	if sig != syscall.SIGSTOP {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, stopWait)
	defer cancel()
	for svc, pid := range pids {
		for !groupStopped(pid) {
			select {
			case <-ctx.Done():
				return fmt.Errorf("signal %s of %s: the process group had not stopped after %s", sig, svc, stopWait)
			case <-time.After(stopPoll):
			}
		}
	}
	return nil
}

// stopWait bounds the wait for a stopped group; stopPoll is how often
// /proc is read meanwhile.
const (
	stopWait = 5 * time.Second
	stopPoll = 200 * time.Microsecond
)
