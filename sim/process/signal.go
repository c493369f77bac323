package process

import (
	"context"
	"fmt"
	"syscall"

	"github.com/normsim/normsim/sim"
)

var _ sim.Signaler = (*Runtime)(nil)

// Signal sends sig to every running service's process group. An exit it
// causes is reported as ServiceExited, like a crash.
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
	return nil
}
