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
			err = r.freeze(s.container, actionPause, func() error { return r.cli.ContainerPause(ctx, s.container) })
		case syscall.SIGCONT:
			err = r.freeze(s.container, actionUnpause, func() error { return r.cli.ContainerUnpause(ctx, s.container) })
		default:
			err = r.cli.ContainerKill(ctx, s.container, fmt.Sprint(int(sig)))
		}
		if err != nil {
			return r.engineErr(fmt.Sprintf("signal %s to service %s", sig, s.name), err)
		}
	}
	return nil
}

// The engine's actions of a pause and an unpause, as its events name them.
const (
	actionPause   = "pause"
	actionUnpause = "unpause"
)

// freeze runs a pause or an unpause of container, counted as normsim's
// own until the engine's event of it comes (ownFreeze).
func (r *Runtime) freeze(container, action string, do func() error) error {
	key := container + " " + action
	r.mu.Lock()
	r.ownFreezes[key]++
	r.mu.Unlock()
	err := do()
	if err != nil {
		r.mu.Lock()
		r.ownFreezeLocked(container, action) // no event will come for it
		r.mu.Unlock()
	}
	return err
}

// ownFreezeLocked says whether the engine's pause or unpause of container was
// Signal's, and takes it off the count; r.mu must be held.
func (r *Runtime) ownFreezeLocked(container, action string) bool {
	key := container + " " + action
	n := r.ownFreezes[key]
	if n == 0 {
		return false
	}
	if n == 1 {
		delete(r.ownFreezes, key)
	} else {
		r.ownFreezes[key] = n - 1
	}
	return true
}
