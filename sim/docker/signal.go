package docker

import (
	"context"
	"fmt"
	"syscall"

	"github.com/normsim/normsim/sim"
)

var _ sim.Signaler = (*Runtime)(nil)

// Signal delivers sig to each service's container, for fault injection:
// SIGSTOP and SIGCONT pause and unpause it (the engine's freezer, which
// works for a PID 1 that ignores signals), any other signal is sent as a
// kill. An exit it causes is reported as ServiceExited, like a crash.
func (r *Runtime) Signal(ctx context.Context, instanceID string, sig syscall.Signal) error {
	_, services, err := r.running(instanceID)
	if err != nil {
		return err
	}
	for _, s := range services {
		switch sig {
		case syscall.SIGSTOP:
			err = r.cli.ContainerPause(ctx, s.container)
		case syscall.SIGCONT:
			err = r.cli.ContainerUnpause(ctx, s.container)
		default:
			err = r.cli.ContainerKill(ctx, s.container, fmt.Sprint(int(sig)))
		}
		if err != nil {
			return r.engineErr(fmt.Sprintf("signal %s to service %s", sig, s.name), err)
		}
	}
	return nil
}
