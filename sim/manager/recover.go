package manager

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/normsim/normsim/sim"
	"github.com/normsim/normsim/sim/jobsocket"
	"github.com/normsim/normsim/sim/process"
)

// Adopter is a runtime that can find what an earlier run of normsim left
// behind (the Docker runtime, by label).
type Adopter interface {
	// Leftovers maps each instance the runtime still holds to whether all its
	// services are running.
	Leftovers(ctx context.Context) (map[string]bool, error)
	Adopt(ctx context.Context, instanceID string) error
	RemoveInstance(ctx context.Context, instanceID string) error
}

// HostProcessRunner is a runtime that runs host processes: they are
// recorded so a restart can stop the ones an earlier run left.
type HostProcessRunner interface {
	Processes(instanceID string) map[string]process.Recorded
}

// Recover reconciles what the store remembers with what still runs: a
// migration that was running when normsim died is failed with reason
// "interrupted" (its events kept), container instances still running are
// adopted, host processes from the earlier run are stopped, anything else
// still running that nobody knows about is removed.
func (m *Manager) Recover(ctx context.Context) error {
	if m.cfg.Store == nil {
		return nil
	}
	running, err := m.cfg.Store.ListMigrations(ctx, sim.MigrationFilter{State: sim.MigrationRunning})
	if err != nil {
		return fmt.Errorf("recover migrations: %w", err)
	}
	for _, mig := range running {
		full, err := m.cfg.Store.GetMigration(ctx, mig.ID)
		if err != nil {
			return fmt.Errorf("recover migration %s: %w", mig.ID, err)
		}
		now := m.now()
		full.State, full.Reason, full.EndedAt = sim.MigrationFailed, sim.ReasonInterrupted, &now
		ev := sim.MigrationEvent{Seq: len(full.Events) + 1, At: now, Phase: full.Phase, Side: sideManager,
			Detail: "migration failed: interrupted (normsim stopped while it ran)"}
		if err := m.cfg.Store.AppendMigrationEvents(ctx, full.ID, []sim.MigrationEvent{ev}); err != nil {
			return err
		}
		full.Events = nil
		if err := m.cfg.Store.SaveMigration(ctx, full); err != nil {
			return err
		}
	}

	stored, err := m.cfg.Store.ListInstances(ctx)
	if err != nil {
		return fmt.Errorf("recover instances: %w", err)
	}
	leftovers := map[string]map[string]bool{} // runtime → instance → running
	for name, rt := range m.runtimes().Runtimes {
		if a, ok := rt.(Adopter); ok {
			l, err := a.Leftovers(ctx)
			if err != nil {
				m.log.Warn("could not list what an earlier run left", "runtime", name, "err", err)
				continue
			}
			leftovers[name] = l
		}
	}
	// Host processes cannot be adopted: every one an earlier run started is
	// stopped, found by recorded pid or by its instance ID (a kill can land
	// between the fork and the pid reaching the store). Ended instances are
	// searched by ID too, but their recorded pids are not trusted: those
	// processes were seen to end, and the pids may belong to others now.
	hostProcs := map[string][]process.Recorded{}
	for _, in := range stored {
		if in.Runtime != sim.RuntimeProcess {
			continue
		}
		hostProcs[in.ID] = nil
		if !in.State.Terminal() {
			hostProcs[in.ID] = recordedProcesses(in.RuntimeRef)
		}
	}
	if n := process.StopLeftovers(m.cfg.Owner, hostProcs); n > 0 {
		m.log.Info("stopped host processes an earlier run left", "groups", n)
	}
	for _, in := range stored {
		if in.State.Terminal() {
			m.holdEnded(in)
			continue
		}
		in.Connected = false
		reason := ""
		switch in.Runtime {
		case sim.RuntimeExternal:
			// Nothing to adopt: the developer's job reconnects by itself.
			if in.State == sim.InstanceStarting {
				in.State = sim.InstanceRunning
			}
		case sim.RuntimeProcess:
			in.State, reason = sim.InstanceFailed, "normsim restarted; host processes cannot be adopted, so the earlier ones were stopped"
		default:
			l, ok := leftovers[in.Runtime]
			if !ok {
				in.State, reason = sim.InstanceFailed, "normsim restarted and runtime "+in.Runtime+" is not available"
				break
			}
			a := m.runtimes().Runtimes[in.Runtime].(Adopter)
			// A launch answers while its instance is still starting, and
			// "running" may not have reached the store before the kill:
			// containers that are up are adopted either way.
			if running, ok := l[in.ID]; ok && running && (in.State == sim.InstanceRunning || in.State == sim.InstanceStarting) {
				if err := a.Adopt(ctx, in.ID); err == nil {
					in.State = sim.InstanceRunning
					break
				} else {
					reason = "could not adopt after a restart: " + err.Error()
				}
			} else {
				reason = "normsim restarted and the instance was no longer running"
			}
			a.RemoveInstance(ctx, in.ID)
			in.State = sim.InstanceFailed
		}
		if reason != "" {
			in.Error = reason
		}
		in.UpdatedAt = m.now()
		if err := m.cfg.Store.SaveInstance(ctx, in); err != nil {
			return err
		}
		if in.State.Terminal() {
			m.holdEnded(in) // listed with the reason recovery gave
			continue
		}
		// Adopted: back under management, its socket registered again with
		// the same token so the job can reconnect.
		live := &instance{Instance: *in, changed: make(chan struct{}), healthy: map[string]bool{}}
		if tmpl, err := m.cfg.Catalog.Get(in.Template); err == nil && tmpl.Valid {
			if spec, err := m.cfg.Catalog.Launch(in.Template, sim.LaunchInput{Instance: in, Node: m.nodes[in.Node].Node, Runtime: in.Runtime}); err == nil {
				live.spec = spec
				live.Published = publishedBy(in.Runtime, spec)
				if rt := m.runtimes().Runtimes[in.Runtime]; rt != nil {
					if bound := boundPorts(ctx, rt, in.ID, live.Published); bound != nil {
						live.Published = bound
					}
				}
			}
		}
		m.mu.Lock()
		m.addLocked(live)
		m.mu.Unlock()
		if n := m.nodes[in.Node]; n != nil && n.Socket != nil {
			n.Socket.Register(jobsocket.Registration{JobID: in.JobID, Role: in.ID, Token: in.Token})
		}
	}
	// Whatever a runtime still holds that is not under management now
	// (unknown to the store, or recorded as ended) is removed.
	for name, l := range leftovers {
		for id := range l {
			if in, err := m.Instance(ctx, id); err != nil || in.State.Terminal() {
				m.runtimes().Runtimes[name].(Adopter).RemoveInstance(ctx, id)
			}
		}
	}
	return nil
}

// holdEnded lists an instance that has ended (stopped, or failed, by
// recovery too) as it was before the restart: with its state and reason,
// until it is removed. Nothing of it runs.
func (m *Manager) holdEnded(in *sim.Instance) {
	in.Connected = false
	ended := &instance{Instance: *in, changed: make(chan struct{}), healthy: map[string]bool{}, stopped: true}
	m.mu.Lock()
	m.addLocked(ended)
	m.mu.Unlock()
}

// recordedProcesses is the host processes an instance's RuntimeRef holds:
// "pid:SERVICE" and, where the system told, "started:SERVICE".
func recordedProcesses(ref map[string]string) []process.Recorded {
	var out []process.Recorded
	for k, v := range ref {
		svc, ok := strings.CutPrefix(k, "pid:")
		if !ok {
			continue
		}
		if pid, err := strconv.Atoi(v); err == nil {
			out = append(out, process.Recorded{Pid: pid, Started: ref["started:"+svc]})
		}
	}
	return out
}

// MarkAllStopped records every live instance as stopped, straight to the
// store: used on exit after the runtimes removed what they ran.
func (m *Manager) MarkAllStopped() {
	m.mu.Lock()
	var list []sim.Instance
	for _, in := range m.instances {
		if !in.State.Terminal() {
			in.State, in.Connected = sim.InstanceStopped, false
			in.UpdatedAt = m.now()
			list = append(list, in.Instance)
		}
	}
	m.mu.Unlock()
	for i := range list {
		m.cfg.Store.SaveInstance(context.Background(), &list[i])
	}
}
