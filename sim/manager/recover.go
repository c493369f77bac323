package manager

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/normsim/normsim/protocol"
	"github.com/normsim/normsim/sim"
)

// Recover reconciles what the store remembers with what still runs: a
// migration that was running when normsim died ends with reason
// "interrupted" (its events kept), rolled back if it is known not to have
// passed its point of no return (sim.NoReturnMarks), failed otherwise;
// each instance that had not ended is what its runtime's recovery
// (sim.Recoverer) makes of it: adopted, back under management, or failed
// with the runtime's reason. What a runtime still holds that nobody knows
// about is the runtime's to remove.
func (m *Manager) Recover(ctx context.Context) error {
	if m.cfg.Store == nil {
		return nil
	}
	// Everything is read before anything is written: a record that
	// cannot be read stops the start with the store as it found it.
	interrupted, err := m.readInterrupted(ctx)
	if err != nil {
		return err
	}
	stored, err := m.cfg.Store.ListInstances(ctx)
	if err != nil {
		return fmt.Errorf("recover instances: %w", err)
	}
	rollBack, err := m.endInterrupted(ctx, interrupted)
	if err != nil {
		return err
	}
	recovered := m.recoverRuntimes(ctx, stored)
	for _, in := range stored {
		if in.State.Terminal() {
			m.holdEnded(in)
			continue
		}
		in.Connected = false
		byID, available := recovered[in.Runtime]
		r, told := byID[in.ID]
		switch {
		case !available:
			in.State, in.Error = sim.InstanceFailed, "normsim restarted and runtime "+in.Runtime+" is not available"
		case !told:
			in.State, in.Error = sim.InstanceFailed, "normsim restarted and runtime "+in.Runtime+" did not say what became of the instance"
		case r.Adopted:
			// A launch answers while its instance is still starting, and
			// "running" may not have reached the store before the kill.
			if in.State == sim.InstanceStarting {
				in.State = sim.InstanceRunning
			}
		default:
			in.State = sim.InstanceFailed
			if r.Reason != "" {
				in.Error = r.Reason
			}
		}
		if in.State.Terminal() {
			in.Healthy = false // as setStateLocked has it for a live one
		}
		in.UpdatedAt = m.now()
		if err := m.cfg.Store.SaveInstance(ctx, in); err != nil {
			return fmt.Errorf("recover instance %s: %w", in.ID, err)
		}
		if in.State.Terminal() {
			m.holdEnded(in) // listed with the reason recovery gave
			continue
		}
		m.readopt(ctx, in)
	}
	for _, mig := range rollBack {
		if err := m.rollBackInterrupted(ctx, mig); err != nil {
			return err
		}
	}
	if m.marks != nil {
		// Every migration they marked has ended, in the store.
		if err := m.marks.ClearMarks(); err != nil {
			m.log.Warn("could not clear the point-of-no-return marks of the last run", "err", err)
		}
	}
	return nil
}

// readInterrupted reads every migration that was running when normsim
// died, whole.
func (m *Manager) readInterrupted(ctx context.Context) ([]*sim.Migration, error) {
	running, err := m.cfg.Store.ListMigrations(ctx, sim.MigrationFilter{State: sim.MigrationRunning})
	if err != nil {
		return nil, fmt.Errorf("recover migrations: %w", err)
	}
	out := make([]*sim.Migration, 0, len(running))
	for _, mig := range running {
		full, err := m.cfg.Store.GetMigration(ctx, mig.ID)
		if err != nil {
			return nil, fmt.Errorf("recover migration %s: %w", mig.ID, err)
		}
		out = append(out, full)
	}
	return out, nil
}

// endInterrupted ends the migrations that were running when normsim
// died: it fails, with reason "interrupted" and its events kept, each
// not known to be short of its point of no return, and returns those
// that are, to be rolled back once their instances are recovered.
func (m *Manager) endInterrupted(ctx context.Context, running []*sim.Migration) ([]*sim.Migration, error) {
	var marks map[string]bool
	if m.marks != nil && len(running) > 0 {
		var err error
		if marks, err = m.marks.Marks(); err != nil {
			// Unmarked, each fails: nothing is rolled back on a guess.
			m.log.Warn("could not read the point-of-no-return marks of the last run; its interrupted migrations are failed, none rolled back", "err", err)
		}
	}
	var rollBack []*sim.Migration
	for _, full := range running {
		if passed, marked := marks[full.ID]; marked && !passed && !recordedPast(full) {
			rollBack = append(rollBack, full)
			continue
		}
		now := m.now()
		full.State, full.Reason, full.EndedAt = sim.MigrationFailed, sim.ReasonInterrupted, &now
		ev := sim.MigrationEvent{Seq: len(full.Events) + 1, At: now, Phase: full.Phase, Side: sideManager,
			Detail: "migration failed: interrupted (normsim stopped while it ran)"}
		if err := m.cfg.Store.AppendMigrationEvents(ctx, full.ID, []sim.MigrationEvent{ev}); err != nil {
			return nil, fmt.Errorf("recover migration %s: %w", full.ID, err)
		}
		full.Events = nil
		if err := m.cfg.Store.SaveMigration(ctx, full); err != nil {
			return nil, fmt.Errorf("recover migration %s: %w", full.ID, err)
		}
	}
	return rollBack, nil
}

// recordedPast says whether a migration's stored timeline shows it past
// its point of no return, or its source being stopped: either is past
// rolling back, whatever a mark says.
func recordedPast(mig *sim.Migration) bool {
	for _, ev := range mig.Events {
		if ev.Kind == sim.TimelinePointOfNoReturn || ev.Kind == sim.TimelineSourceStopped || ev.Phase == sim.PhaseStopSource {
			return true
		}
	}
	return false
}

// rollBackInterrupted rolls back, at this start, a migration a killed
// normsim left short of its point of no return, as the contract has a
// lost connection do: the target removed, the source left as it is. No
// job is told abort: each lost its socket when normsim died, which
// before the point of no return is itself a rollback, and a job that
// reconnects gets a plain hello-ack.
func (m *Manager) rollBackInterrupted(ctx context.Context, mig *sim.Migration) error {
	var evs []sim.MigrationEvent
	add := func(side string, kind sim.TimelineKind, detail string) {
		evs = append(evs, sim.MigrationEvent{Seq: len(mig.Events) + len(evs) + 1, At: m.now(), Phase: mig.Phase, Side: side, Kind: kind, Detail: detail})
	}
	add(sideManager, "", "rolling back at this start: normsim was killed while the migration ran, before its point of no return; no job is told abort, each lost its socket then")
	rb := &sim.RollbackReport{Told: []string{}, AtRestart: true}
	if mig.Target.Instance == "" {
		// Killed while placing it: the target's record may have been
		// stored before the migration's said who its target was. The
		// record names its migration; the rollback removes it and says
		// so, and the migration names it, as it would have.
		m.mu.Lock()
		for id, in := range m.instances {
			if in.MigrationID == mig.ID && id != mig.Source.Instance {
				mig.Target.Instance, mig.Target.Node = id, in.Node
			}
		}
		m.mu.Unlock()
	}
	if id := mig.Target.Instance; id != "" {
		m.mu.Lock()
		in := m.instances[id]
		m.mu.Unlock()
		if in != nil {
			grace := mig.Timeouts.Over(m.Timeouts()).StopGrace.D()
			rb.Target, rb.TargetDetail = m.removeRolledBackTarget(in, mig.ID, grace, func(stop func()) { stop() })
		} else {
			// Its record never reached the store: its runtime's recovery
			// removed what ran of it with the run's other leftovers.
			rb.Target, rb.TargetDetail = sim.TargetGone, "target removed: its record was not stored before normsim was killed, and what ran of it was removed with the run's leftovers"
		}
		add(sideTarget, sim.TimelineTargetRemoved, rb.TargetDetail)
	}
	rb.Source, rb.SourceDetail = m.sourceLeft(mig.Source.Instance)
	if rb.Source == sim.SourceRunning {
		add(sideSource, "", "source left running")
	} else {
		add(sideSource, "", rb.SourceDetail)
	}
	now := m.now()
	mig.State, mig.Reason, mig.EndedAt, mig.Rollback = sim.MigrationAborted, sim.ReasonInterrupted, &now, rb
	j := sim.Judge(mig)
	mig.Judgement = &j
	add(sideManager, sim.TimelineEnded, "migration aborted: interrupted")
	if err := m.cfg.Store.AppendMigrationEvents(ctx, mig.ID, evs); err != nil {
		return fmt.Errorf("recover migration %s: %w", mig.ID, err)
	}
	mig.Events = nil
	if err := m.cfg.Store.SaveMigration(ctx, mig); err != nil {
		return fmt.Errorf("recover migration %s: %w", mig.ID, err)
	}
	m.log.Info("rolled back a migration normsim was killed during, before its point of no return", "migration", mig.ID,
		"target", rb.TargetDetail, "source", rb.SourceDetail)
	return nil
}

// recoverRuntimes has each runtime that can recover reconcile its stored
// instances, and returns what each made of them by runtime, then instance.
// A runtime that cannot (none by that name, no recovery, or its recovery
// failed) is missing: its instances are not available.
func (m *Manager) recoverRuntimes(ctx context.Context, stored []*sim.Instance) map[string]map[string]sim.Recovery {
	byRuntime := map[string][]sim.Instance{}
	for _, in := range stored {
		byRuntime[in.Runtime] = append(byRuntime[in.Runtime], *in)
	}
	out := map[string]map[string]sim.Recovery{}
	for name, rt := range m.runtimes().Runtimes {
		rec, ok := rt.(sim.Recoverer)
		if !ok {
			continue
		}
		got, err := rec.Recover(ctx, m.cfg.Owner, byRuntime[name])
		if err != nil {
			m.log.Warn("could not recover what an earlier run left", "runtime", name, "err", err)
			continue
		}
		out[name] = got
	}
	return out
}

// readopt brings an adopted instance back under management, its socket
// registered again with the same token so the job can reconnect.
func (m *Manager) readopt(ctx context.Context, in *sim.Instance) {
	live := &instance{Instance: *in, changed: make(chan struct{}), healthy: map[string]bool{}}
	m.reopenMedia(in)
	spec, err := m.relaunchSpec(in)
	if err != nil {
		// It runs on; without its spec its health checks and published
		// ports are unknown.
		m.log.Warn("adopted an instance whose launch spec cannot be made again", "instance", in.ID, "err", err)
	} else {
		live.spec = spec
		live.Published = publishedBy(in.Runtime, spec)
		if rt := m.runtimes().Runtimes[in.Runtime]; rt != nil {
			if bound := boundPorts(ctx, rt, in.ID, live.Published); bound != nil {
				live.Published = bound
			}
		}
	}
	n := m.nodes[in.Node]
	why := m.unreachable(in)
	if why != "" || dialsElsewhere(live.Error) {
		// Said afresh each start: an earlier run's word on it is stale.
		live.Error = why
	}
	if why != "" {
		m.log.Warn("adopted an instance whose job cannot reach this run's job socket", "instance", in.ID, "why", why)
	}
	m.mu.Lock()
	m.addLocked(live)
	m.mu.Unlock()
	if n != nil && n.Socket != nil {
		n.Socket.Register(sim.SocketRegistration{JobID: in.JobID, Role: in.ID, Token: in.Token})
	}
}

// unreachable says why an adopted instance's job cannot reconnect, ""
// when it can. Its env, fixed at launch, names the job socket it dials:
// its node may not be one of this run's (--nodes), may run without a job
// socket (--no-job-socket), or may listen on another port
// (--socket-port). It stays listed running, not connected, with this
// reason.
func (m *Manager) unreachable(in *sim.Instance) string {
	u, err := url.Parse(envOf(in, protocol.EnvURL))
	if err != nil || u.Port() == "" {
		return "" // it speaks no job socket, or its env is not known
	}
	dials := u.Port()
	n := m.nodes[in.Node]
	var now, fix string
	switch {
	case n == nil:
		now = fmt.Sprintf("node %s is not one of this run's nodes (%s)", in.Node, strings.Join(m.order, ", "))
		fix = fmt.Sprintf("start normsim with node %s in --nodes, listening on %s", in.Node, dials)
	case n.Socket == nil:
		now = fmt.Sprintf("node %s runs without a job socket in this run (--no-job-socket)", in.Node)
		fix = fmt.Sprintf("start normsim without --no-job-socket %s, node %s listening on %s", in.Node, in.Node, dials)
	case strconv.Itoa(n.SocketPort) != dials:
		now = fmt.Sprintf("node %s listens on %d in this run", in.Node, n.SocketPort)
		fix = fmt.Sprintf("start normsim so that node %s listens on %s again (--socket-port is the first node's port in --nodes, each next node's the port after)", in.Node, dials)
	default:
		return ""
	}
	return fmt.Sprintf(dialsElsewherePrefix+" at port %s (its %s, set when it was launched), and %s: it cannot reconnect; %s, or delete the instance and launch it again",
		dials, protocol.EnvURL, now, fix)
}

// dialsElsewherePrefix begins every reason unreachable gives.
const dialsElsewherePrefix = "its job dials the job socket"

// dialsElsewhere says whether an instance's error is unreachable's: it
// holds until the job connects all the same.
func dialsElsewhere(err string) bool { return strings.HasPrefix(err, dialsElsewherePrefix) }

// relaunchSpec is the launch spec an adopted instance was started with,
// made again from its template.
func (m *Manager) relaunchSpec(in *sim.Instance) (*sim.LaunchSpec, error) {
	tmpl, err := m.cfg.Catalog.Get(in.Template)
	if err != nil {
		return nil, err
	}
	if !tmpl.Valid {
		return nil, fmt.Errorf("template %q is invalid: %s", tmpl.Name, tmpl.Error.Message)
	}
	node, ok := m.nodes[in.Node]
	if !ok {
		return nil, fmt.Errorf("node %q is not one of this run's nodes (%s)", in.Node, strings.Join(m.order, ", "))
	}
	var env map[string]string
	if u := mediaURLOf(in); u != "" {
		env = map[string]string{sim.EnvMediaURL: u}
	}
	return m.cfg.Catalog.Launch(in.Template, sim.LaunchInput{Instance: in, Node: node.Node, Runtime: in.Runtime, Env: env})
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

// MarkAllStopped records every live instance as stopped, straight to the
// store: used on exit after the runtimes removed what they ran. Its error
// joins the saves that failed.
func (m *Manager) MarkAllStopped() error {
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
	var errs []error
	for i := range list {
		if err := m.cfg.Store.SaveInstance(context.Background(), &list[i]); err != nil {
			errs = append(errs, fmt.Errorf("record instance %s as stopped: %w", list[i].ID, err))
		}
	}
	return errors.Join(errs...)
}
