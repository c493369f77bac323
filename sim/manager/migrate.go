package manager

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/normsim/normsim/protocol"
	"github.com/normsim/normsim/sim"
)

// MigrateRequest is sim.MigrateRequest.
type MigrateRequest = sim.MigrateRequest

// Timeline sides and phases.
const (
	sideManager = "manager"
	sideSource  = "source"
	sideTarget  = "target"
	sideOutput  = "output"
)

// startSettles bounds how long a migrate request waits for the start of a
// source whose job is already connected (see Migrate).
const startSettles = 10 * time.Second

// starting: the instance's start has not ended yet.
func starting(s sim.InstanceState) bool {
	return s == sim.InstanceCreated || s == sim.InstanceStarting
}

// Migrate checks the request and starts the migration in the background.
// Refusals before anything starts are errors, not migrations.
func (m *Manager) Migrate(ctx context.Context, instanceID string, req MigrateRequest) (*sim.Migration, error) {
	if err := m.refuseWhileStoreFails("migration"); err != nil {
		return nil, err
	}
	m.mu.Lock()
	src, ok := m.instances[instanceID]
	if !ok {
		m.mu.Unlock()
		return nil, sim.Errorf(sim.ENotFound, "instance %q not found", instanceID)
	}
	srcSnap := src.Instance
	// A migration of the job under way is the answer, whatever it has
	// done to this instance so far (a stopThenStart stops it first, and
	// "is stopping" would send the client the wrong way); checked again
	// below, where the new one takes the job.
	if other := m.byJob[srcSnap.JobID]; other != nil {
		m.mu.Unlock()
		return nil, sim.Errorf(sim.EConflict, "job %s is already migrating (%s); wait for it to end", srcSnap.JobID, other.id)
	}
	m.mu.Unlock()

	to := req.To
	if to == "" {
		for _, name := range m.order {
			if name != srcSnap.Node {
				to = name
				break
			}
		}
		if to == "" {
			return nil, sim.Errorf(sim.EUnprocessable, "there is no other node to migrate %s to", instanceID)
		}
	}
	toNode, ok := m.nodes[to]
	if !ok {
		return nil, sim.Errorf(sim.ENotFound, "node %q not found; nodes are %s", to, strings.Join(m.order, ", "))
	}
	if to == srcSnap.Node {
		return nil, sim.Errorf(sim.EUnprocessable, "instance %s already runs on node %s; migrate it to another node", instanceID, to)
	}
	tmpl, err := m.cfg.Catalog.Get(srcSnap.Template)
	if err != nil {
		return nil, err
	}
	if !tmpl.Valid {
		// Its strategy is unknown, and a target could not be placed: say
		// why now, not as a strategy the user never asked for.
		return nil, sim.Errorf(sim.ETemplateInvalid, "template %q of instance %s is invalid now, so it cannot migrate: %s; fix the template (it reloads when its files change) and migrate again", tmpl.Name, instanceID, tmpl.Error.Message)
	}
	strategy := tmpl.Strategy
	if req.Strategy != "" {
		if strategy, err = sim.ParseStrategy(req.Strategy); err != nil {
			return nil, err
		}
	}
	if err := sim.CheckStrategy(tmpl.Strategy, strategy); err != nil {
		return nil, err
	}
	// The source's node: the wait below refreshes the source's record,
	// not where it runs.
	srcNode := m.nodes[srcSnap.Node]
	if starting(srcSnap.State) && srcSnap.Connected {
		// A job that said hello is running, but the manager hears so when
		// its start goroutine does: a job that migrates the moment it reads
		// hello-ack can get here first. Wait for the start it is in.
		snap, err := m.waitInstance(ctx, instanceID, startSettles, func(in sim.Instance) bool { return !starting(in.State) })
		if snap.ID == "" {
			return nil, sim.Errorf(sim.ENotFound, "instance %q not found: %v", instanceID, err)
		}
		srcSnap = snap
	}
	if srcSnap.State != sim.InstanceRunning {
		if next := m.RunningInstanceOf(srcSnap.JobID); next != "" {
			return nil, sim.Errorf(sim.EUnprocessable, "instance %s is %s; only a running instance can migrate: its job %s now runs as %s", instanceID, srcSnap.State, srcSnap.JobID, next)
		}
		return nil, sim.Errorf(sim.EUnprocessable, "instance %s is %s; only a running instance can migrate", instanceID, srcSnap.State)
	}
	if strategy == sim.Handover {
		if !toNode.HasJobSocket() {
			return nil, sim.Errorf(sim.EUnprocessable, "handover needs a target node with %s; node %s runs without a job socket", protocol.Capability, to)
		}
		// The listener tells the manager of a connection before it
		// answers the job's hello: a job that asks to migrate the moment
		// it reads hello-ack is connected here too.
		if !srcSnap.Connected {
			return nil, sim.Errorf(sim.ENotConnected, "handover needs the source connected to its job socket; %s is not connected", instanceID)
		}
	}
	runtimeName := req.Runtime
	if runtimeName == "" {
		runtimeName = srcSnap.Runtime
	}
	rt, err := m.runtime(runtimeName)
	if err != nil {
		return nil, err
	}
	if strategy != sim.StopThenStart {
		if err := m.checkPortClashes(srcSnap, toNode, rt, strategy); err != nil {
			return nil, err
		}
	}
	faults := append([]sim.Fault(nil), req.Faults...)
	if err := req.Timeouts.Check(); err != nil {
		return nil, err
	}
	timeouts := req.Timeouts.Over(m.Timeouts())
	if err := validateFaults(faults, timeouts, m.runtimes().Runtimes[srcSnap.Runtime], rt); err != nil {
		return nil, err
	}

	now := m.now()
	r := &run{m: m, id: "mig-" + randomHex(5), events: newEventQueue(), gone: make(chan struct{}), rt: rt,
		src: srcSnap, srcNode: srcNode, tgtNode: toNode, timeouts: timeouts,
		faults: faults, fired: make([]bool, len(faults)), armedAtHello: armsAtHello(faults), start: now}
	r.mig = sim.Migration{ID: r.id, JobID: srcSnap.JobID, Strategy: strategy, State: sim.MigrationRunning,
		Source:   sim.MigrationEndpoint{Instance: srcSnap.ID, Node: srcSnap.Node, Runtime: srcSnap.Runtime},
		Target:   sim.MigrationEndpoint{Node: to, Runtime: rt.Name()},
		Result:   sim.MigrationResult{Applied: []string{}, Failed: []sim.FailedApply{}},
		Timeouts: r.timeouts, Faults: faults, StartedAt: now, Events: []sim.MigrationEvent{}}

	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil, sim.Errorf(sim.EUnavailable, "normsim is shutting down")
	}
	if other := m.byJob[srcSnap.JobID]; other != nil {
		m.mu.Unlock()
		return nil, sim.Errorf(sim.EConflict, "job %s is already migrating (%s); wait for it to end", srcSnap.JobID, other.id)
	}
	if cur := m.instances[srcSnap.ID]; cur == nil || cur.stopped {
		// A stop got there first (checked again here, under the lock
		// the stop marks the instance in).
		m.mu.Unlock()
		return nil, sim.Errorf(sim.EConflict, "instance %s is being stopped; it cannot migrate", srcSnap.ID)
	}
	m.byJob[srcSnap.JobID] = r
	m.byInstance[srcSnap.ID] = r
	delete(m.ended, srcSnap.ID)
	m.migrations[r.id] = r
	m.mu.Unlock()

	m.markBegun(r.id)
	m.journal.migration(r.doc())
	r.note(sim.TimelineRequested, sim.PhaseRequested, sideManager, fmt.Sprintf("%s of %s from node %s to node %s", strategy, srcSnap.ID, srcSnap.Node, to))
	snap := r.snapshot()
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		r.run(m.ctx)
	}()
	return snap, nil
}

// checkPortClashes refuses, before anything starts, an overlap or handover
// whose target would publish a fixed host port the source still holds: the
// engine would fail the target with a bare "port is already allocated".
// The target's ports are those a launch on the target node would publish
// (auto ports probed as the launch will probe them).
func (m *Manager) checkPortClashes(src sim.Instance, to *Node, rt sim.Runtime, strategy sim.Strategy) error {
	m.mu.Lock()
	var srcSpec *sim.LaunchSpec
	if in := m.instances[src.ID]; in != nil {
		srcSpec = in.spec
	}
	m.mu.Unlock()
	held := publishedBy(src.Runtime, srcSpec)
	if len(held) == 0 || rt.Name() != sim.RuntimeDocker {
		return nil
	}
	probe := src
	probe.Node, probe.Ports, probe.Published = to.Name, nil, nil
	spec, err := m.cfg.Catalog.Launch(src.Template, sim.LaunchInput{Instance: &probe, Node: to.Node, Runtime: rt.Name(),
		StudioAccess: m.cfg.StudioAccess})
	if err != nil {
		return nil // the placement itself will say what is wrong
	}
	clashes := sim.PortClashes(held, publishedBy(rt.Name(), spec))
	if len(clashes) == 0 {
		return nil
	}
	var ports []string
	for _, p := range clashes {
		ports = append(ports, fmt.Sprintf("%s (service %s)", p, p.Service))
	}
	why := fmt.Sprintf("the template publishes it on an address the nodes do not each have (%s)", clashes[0].HostIP)
	fix := "publish it without an address, on 0.0.0.0 or on 127.0.0.1, so that each node binds its own"
	if to.SharedAddress && clashes[0].HostIP == to.Address {
		want := sim.NodeAddress(slices.Index(m.order, to.Name))
		why = fmt.Sprintf("nodes %s and %s share the address %s because this host has no loopback address %s for node %s",
			src.Node, to.Name, to.Address, want, to.Name)
		fix = fmt.Sprintf("give node %s its own (%s) and restart normsim", to.Name, sim.AliasHint(runtime.GOOS, want))
	}
	return sim.Errorf(sim.EUnprocessable, "%s of %s to node %s would publish %s while the source still holds it: %s; %s, or migrate with strategy %s, which stops the source first",
		strategy, src.ID, to.Name, strings.Join(ports, ", "), why, fix, sim.StopThenStart)
}

// Migration returns a migration, live or from the store.
func (m *Manager) Migration(ctx context.Context, id string) (*sim.Migration, error) {
	return m.migration(ctx, id, true)
}

// MigrationSummary is Migration without the timeline (Events nil), for a
// client polling where thousands of migrations are: neither copied from a
// running one nor read from the store.
func (m *Manager) MigrationSummary(ctx context.Context, id string) (*sim.Migration, error) {
	return m.migration(ctx, id, false)
}

func (m *Manager) migration(ctx context.Context, id string, events bool) (*sim.Migration, error) {
	m.mu.Lock()
	r := m.migrations[id]
	m.mu.Unlock()
	if r != nil {
		if v := r.view(events); v != nil {
			return v, nil
		}
	}
	if events {
		return m.cfg.Store.GetMigration(ctx, id)
	}
	return m.cfg.Store.GetMigrationSummary(ctx, id)
}

// Migrations lists migrations newest first, running ones from memory (see
// MigrationPage).
func (m *Manager) Migrations(ctx context.Context, f sim.MigrationFilter) ([]*sim.Migration, error) {
	p, err := m.MigrationPage(ctx, f)
	return p.Items, err
}

// AwaitMigration waits until the migration's timeline has an event past
// seq after, or it has ended (after < 0: until it ends), and returns it as
// it is then. Every step of a migration adds to its timeline, so a client
// that passes the last seq it has seen is woken by the next step. When ctx
// ends first it returns the migration as it is, with ctx's error.
func (m *Manager) AwaitMigration(ctx context.Context, id string, after int) (*sim.Migration, error) {
	return m.awaitMigration(ctx, id, after, true)
}

// AwaitMigrationSummary is AwaitMigration answering without the timeline
// (see MigrationSummary).
func (m *Manager) AwaitMigrationSummary(ctx context.Context, id string, after int) (*sim.Migration, error) {
	return m.awaitMigration(ctx, id, after, false)
}

func (m *Manager) awaitMigration(ctx context.Context, id string, after int, events bool) (*sim.Migration, error) {
	for {
		m.mu.Lock()
		r := m.migrations[id]
		m.mu.Unlock()
		if r == nil { // ended and stored, or unknown
			// Read even when the wait has just run out: the end is news.
			return m.migration(context.WithoutCancel(ctx), id, events)
		}
		r.mu.Lock()
		done := r.mig.State.Ended() || (after >= 0 && r.eventsGone+len(r.mig.Events) > after)
		if !done && r.changed == nil {
			r.changed = make(chan struct{})
		}
		changed := r.changed
		r.mu.Unlock()
		if done {
			return m.viewOrStored(ctx, r, events)
		}
		select {
		case <-changed:
		case <-ctx.Done():
			v, err := m.viewOrStored(ctx, r, events)
			if err == nil {
				err = ctx.Err()
			}
			return v, err
		}
	}
}

// viewOrStored is the run's view, or its record in the store once the
// run has let its events go.
func (m *Manager) viewOrStored(ctx context.Context, r *run, events bool) (*sim.Migration, error) {
	if v := r.view(events); v != nil {
		return v, nil
	}
	return m.migration(context.WithoutCancel(ctx), r.id, events)
}

type runEventKind int

const (
	evSocket  runEventKind = iota + 1 // what a node's listener reported
	evRuntime                         // what a runtime reported
	evFault                           // a worker-abort fault fired
	evAbort                           // the user asked to abort
	evCall                            // work another goroutine hands the owner (a held frame's release, a resumed job)
)

// runEvent is what reaches a migration's owner, and what its steps then
// see of it.
type runEvent struct {
	kind     runEventKind
	instance string
	socket   sim.SocketEvent
	// piped says the socket event comes out of a pipe: it waited behind a
	// frame a fault held (pipe.go), and goes on now; held is how long a
	// delay-frame fault held the frame itself.
	piped bool
	held  time.Duration
	// arrived is when a socket event or a user's abort was handed on to
	// the owner: each is decided as of then.
	arrived time.Time
	runtime sim.RuntimeEvent
	reason  string
	// answer gets the owner's decision on a user's abort: "" taken, or
	// why it is refused.
	answer chan string
	// heard is closed once the owner has fired the faults armed on a
	// hello (the listener writes hello-ack only then).
	heard chan struct{}
	call  func()
}

// run is one migration in progress. One goroutine owns it (run.run): it
// walks the strategy's steps and takes every event other goroutines hand
// it (post), in the order they arrived, so everything that changes the
// migration happens on that goroutine. mu guards what readers of the
// migration (the API, the journal) see of it while it changes.
type run struct {
	// releaseLogs ends the hold on log writes a cutover takes; nil when
	// none is held (guarded by mu).
	releaseLogs func()
	m           *Manager
	id          string
	rt          sim.Runtime
	src         sim.Instance
	srcNode     *Node
	tgtNode     *Node
	timeouts    sim.Timeouts
	faults      []sim.Fault
	fired       []bool // guarded by mu
	// faultOn are the sides a fired fault struck (fireFaultLocked);
	// guarded by mu.
	faultOn map[string]bool
	// armedAtHello says a fault is armed on a frame a connection begins
	// with (hello, hello-ack, initial-state): only then does a job's hello
	// wait for the owner (onSocket). Set before the owner starts; faults
	// do not change after.
	armedAtHello bool
	start        time.Time
	// events is the owner's inbox: what every other goroutine hands the
	// migration (post). It carries pointers: a runEvent holds a whole
	// frame.
	events *eventQueue
	// steps are the events the owner handled that its steps (await,
	// disrupted) have still to see, in order. The owner's alone.
	steps []runEvent
	// eventsDropped counts the events post could not queue (guarded by mu).
	eventsDropped int
	// ownerGone is set as the owner lets go of the migration, after its
	// end: what is posted from then on is done by the poster, as something
	// that crossed the end (afterEnd); gone is closed with it (guarded by
	// mu).
	ownerGone bool
	gone      chan struct{}

	mu sync.Mutex
	// mig is the record as it stands: its phase and its target's id are
	// the run's own, kept nowhere else.
	mig sim.Migration
	// eventsGone counts the timeline's events let go once stored
	// (letEventsGo): mig.Events holds those after them.
	eventsGone int
	// notes counts the notes of frames discarded, sockets replaced and
	// reconnects (boundedLocked), kept or not; connected are the sides
	// that connected before, whose next connection is a reconnect.
	notes     int
	connected map[string]bool
	// tgtPlacedAt is when the target was created: a media sender first
	// heard from then on is the target.
	tgtPlacedAt time.Time
	// tgtToken is the target's job-socket token: kept out of the timeline
	// with the source's (redactLocked).
	tgtToken string
	// askedAt is when a frame to the source ([0]) and to the target
	// ([1]) was last decided: what that side sends after may answer
	// it (handleInTurn).
	askedAt [2]time.Time
	// phaseStarts are when each phase began, oldest first: a close or an
	// exit is named by the phase it came in (phaseAt), which the owner
	// may have left by the time it hears of it.
	phaseStarts []phaseStart
	// facts are what the owner decides with (step.go).
	facts
	// effects is the buffer step appends an event's effects to, reused
	// for each (guarded by mu, as decide holds it throughout).
	effects []effect
	// deferring is set while a socket event is handled: timeline events
	// are stamped when they happen but stored and published (JSON, the
	// journal, the bus) only after a cutover frame has been relayed, so
	// recording never sits on the relay's path. Guarded by mu.
	deferring bool
	deferred  []sim.MigrationEvent
	// starting is set during the target's start call: events are held in
	// held until it returns, so "target started" can go before whatever
	// the target did before the call returned (see startTarget).
	starting bool
	held     []sim.MigrationEvent
	// sourceSignalled is set once a kill or stop fault has landed on the
	// source: its exit may not have been reported yet, and a rollback
	// waits for it before it says what it left (guarded by mu).
	sourceSignalled bool
	// pauses are the pause faults that landed, for the end to resume what
	// they still hold (resumePaused; guarded by mu).
	pauses []*heldPause
	// pausesOver is set as the end resumes them: a pause that would land
	// after (one armed on the rollback's abort) is skipped.
	pausesOver bool
	// cut are the connections drop-socket faults cut: a frame read from
	// one is discarded (cutOffLocked; guarded by mu).
	cut []cutConn
	// struck says which fault landed on a job to end it (kill, stop,
	// drop-socket), e.g. "kill struck the target"; "" while none did. An
	// overlap or a stopThenStart does not go on past it (goingOn).
	struck string
	// changed, when someone awaits the migration (AwaitMigration), is
	// closed at its next timeline event (guarded by mu).
	changed chan struct{}
	// writes are the frames decided under mu and not yet written, in the
	// order they were decided; writing says someone is writing them
	// (flushWrites). No socket is written while mu is held: a job that
	// does not read its socket would otherwise hold every reader of the
	// migration (the API, the other side's socket) for the write timeout.
	writes  []*pendingWrite
	writing bool
}

// letEventsGo lets the timeline's events go once the migration is in the
// store: an ended run stays in memory while its instances may still send
// a frame that crossed its end (Manager.ended), and at 10,000 jobs their
// timelines were a fifth of the sim's live heap. Later events are
// numbered on and written after them; readers read the store.
func (r *run) letEventsGo() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.eventsGone += len(r.mig.Events)
	r.mig.Events = nil
	// What decide keeps between events is let go too (it holds mu).
	r.effects, r.deferred = nil, nil
}

// eventsLetGo reports whether letEventsGo has run: the run's record is
// the store's.
func (r *run) eventsLetGo() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.eventsGone > 0
}

func (r *run) doc() *sim.Migration {
	r.mu.Lock()
	defer r.mu.Unlock()
	d := r.mig
	d.Events = nil
	return &d
}

func (r *run) snapshot() *sim.Migration {
	r.mu.Lock()
	defer r.mu.Unlock()
	d := r.mig
	d.Events = append([]sim.MigrationEvent(nil), r.mig.Events...)
	return &d
}

// view is the migration as a reader asked for it: a snapshot with its
// timeline, or without it its document alone (doc); nil once its events
// are let go (then it is in the store).
func (r *run) view(events bool) *sim.Migration {
	if r.eventsLetGo() {
		return nil
	}
	if events {
		return r.snapshot()
	}
	return r.doc()
}

// post hands ev to the migration's owner, from any other goroutine, and
// reports whether the owner will see it. Once the owner has let go (the
// migration ended), what ev asks is done here and now (afterEnd).
func (r *run) post(ev runEvent) bool {
	r.mu.Lock()
	if r.ownerGone {
		r.mu.Unlock()
		r.afterEnd(ev)
		return false
	}
	defer r.mu.Unlock()
	if r.events.put(&ev) {
		return true
	}
	// A flood of events cannot grow memory: the migration sees the ones
	// that fit, and a flood is itself a reason to end. What does not fit
	// is counted, and the timeline says so, first when it starts (here:
	// the owner cannot be told through a full inbox) and then how many at
	// the end (finish).
	if r.eventsDropped++; r.eventsDropped == 1 {
		r.m.log.Warn("migration event queue full; dropping and counting what does not fit", "migration", r.id)
		r.recordLocked(r.mig.Phase, sideManager, fmt.Sprintf("the migration's inbox is full (%d events waiting): events past it are dropped, and counted", eventQueueMax), nil)
	}
	if ev.answer != nil {
		ev.answer <- fmt.Sprintf("migration %s cannot take an abort now: its inbox is full (%d events waiting); try again", r.id, eventQueueMax)
	}
	return false
}

// toSteps hands an event the owner handled on to the migration's steps,
// which see it at their next wait. The owner's only.
func (r *run) toSteps(ev runEvent) { r.steps = append(r.steps, ev) }

// take returns the next event for the migration's steps: one the owner
// handled already, or else the next that arrived, handled first. false
// when nothing waits. The owner's only.
func (r *run) take() (runEvent, bool) {
	for len(r.steps) == 0 {
		p, ok := r.events.take()
		if !ok {
			return runEvent{}, false
		}
		r.handleInTurn(p)
	}
	ev := r.steps[0]
	r.steps[0] = runEvent{}
	if r.steps = r.steps[1:]; len(r.steps) == 0 {
		r.steps = nil
	}
	return ev, true
}

// handleArrived handles what waits in the inbox, leaving what the steps
// are to see for their next wait.
func (r *run) handleArrived() {
	for {
		p, ok := r.events.take()
		if !ok {
			return
		}
		r.handleInTurn(p)
	}
}

// handleInTurn handles ev, and first, when it is a socket's end, what the
// other side's job had sent before it (one verdict whatever order the two
// sockets' news arrives in, docs/contract.md): that side's socket is read
// up to now, and its frames, close or drop that arrived before ev are
// handled before it. A drop is heard the moment it comes, while a frame
// the other job sent before it may still wait to be read (attack round
// 16, A-F1: a target-applied heard after the source's drop failed a good
// handover; a source-stopped-output after the target's rolled back one
// past its point of no return).
func (r *run) handleInTurn(ev *runEvent) {
	if ev.kind == evSocket && ev.socket.Kind == sim.SocketDisconnected && !ev.socket.At.IsZero() {
		other := r.src.ID
		if r.sideOf(ev.instance) == sideSource {
			other = r.targetID()
		}
		// Each socket's news is stamped by its own reader, a scheduling
		// delay after it arrived, so a frame stamped just after the end
		// may have been sent just before it: a tie, which goes to the
		// frame. Unless the end came before normsim asked what the
		// frame answers: then it came first, whatever the stamps.
		r.mu.Lock()
		asked := r.askedAt[askIndex(r.sideOf(other))]
		r.mu.Unlock()
		tie := ev.socket.At
		if ev.socket.At.After(asked) {
			tie = ev.socket.At.Add(socketsTie)
			if wait := time.Until(tie); wait > 0 {
				time.Sleep(wait) // what came in the tie is read too, whenever this runs
			}
		}
		r.catchUp(other)
		for _, e := range r.events.takeWhere(func(e *runEvent) bool {
			if e.kind != evSocket || e.instance != other || e.socket.At.IsZero() {
				return false
			}
			if e.socket.Kind == sim.SocketFrame {
				return e.socket.At.Before(tie)
			}
			return e.socket.At.Before(ev.socket.At) // the first of two ends is the end
		}) {
			r.handle(*e)
			if e.socket.At.After(ev.socket.At) {
				// A frame in the tie went first: the end came after it,
				// in the phase it moved to, once the migration had it.
				ev.socket.At = e.socket.At
			}
		}
	}
	r.handle(*ev)
}

// askIndex is side's in run.askedAt.
func askIndex(side string) int {
	if side == sideTarget {
		return 1
	}
	return 0
}

// socketsTie is how much later than one socket's end a frame on the other
// may be stamped and still count as sent before it (handleInTurn).
const socketsTie = 2 * time.Millisecond

// catchUp has role's socket read what its job sent up to now and hand it
// on to the migration (sim.JobSocket.CatchUp).
func (r *run) catchUp(role string) {
	node := r.srcNode
	if role != r.src.ID {
		node = r.tgtNode
	}
	if role == "" || node == nil || node.Socket == nil {
		return
	}
	node.Socket.CatchUp(r.src.JobID, role)
}

// drain takes what waits in the inbox, in order, and does each with do.
func (r *run) drain(do func(runEvent)) {
	for {
		p, ok := r.events.take()
		if !ok {
			return
		}
		do(*p)
	}
}

// handle is the owner taking one event: the only place any other
// goroutine's news changes the migration.
func (r *run) handle(ev runEvent) {
	switch ev.kind {
	case evSocket:
		r.onSocketOwned(ev)
	case evRuntime:
		r.decide(ev, func() input { return input{kind: inRuntime, exited: ev.runtime.Kind == sim.ServiceExited} })
	case evAbort:
		r.decideUserAbort(ev)
	case evCall:
		ev.call()
	default:
		r.toSteps(ev)
	}
}

// during runs call, which blocks (a launch, a start, a stop, a wait on the
// output), on a goroutine of its own while the owner goes on handling what
// arrives: relays, a job's hello, the user's abort. call must not touch
// the run; what the steps are to see waits for their next wait.
func (r *run) during(call func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		call()
	}()
	for {
		select {
		case <-done:
			r.handleArrived()
			return
		case <-r.events.ready:
			r.handleArrived()
		}
	}
}

// pause waits d, or until ctx ends.
func pause(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// letGo ends the owner's part, after the migration's end: what is posted
// from now on is done by its poster (afterEnd), and so is what waits in
// the inbox now.
func (r *run) letGo() {
	r.mu.Lock()
	r.ownerGone = true
	close(r.gone)
	r.mu.Unlock()
	r.steps = nil
	r.drain(r.afterEnd)
}

// afterEnd does what an event asks of a migration whose owner has let go:
// a frame is late (or discarded, from a dropped connection), a user's
// abort refused, a hello goes on.
func (r *run) afterEnd(ev runEvent) {
	switch ev.kind {
	case evSocket:
		switch ev.socket.Kind {
		case sim.SocketHello:
			close(ev.heard)
		case sim.SocketFrame:
			side := r.sideOf(ev.socket.Role)
			r.mu.Lock()
			cut := r.cutOffLocked(ev.socket, side)
			r.mu.Unlock()
			if !cut {
				r.handleSocket(ev.socket, side, false, ev.held, ev.arrived)
			}
		case sim.SocketDiscarded, sim.SocketReplaced:
			r.socketNote(ev.socket)
		}
	case evAbort:
		r.decideUserAbort(ev)
	case evCall:
		ev.call()
	}
}

// record adds a timeline event.
func (r *run) record(phase sim.Phase, side, detail string, frame *sim.FrameInfo) {
	r.mu.Lock()
	r.recordLocked(phase, side, detail, frame)
	r.mu.Unlock()
}

// recordHere adds a timeline event in the current phase.
func (r *run) recordHere(side, detail string, frame *sim.FrameInfo) {
	r.mu.Lock()
	r.recordLocked(r.mig.Phase, side, detail, frame)
	r.mu.Unlock()
}

func (r *run) recordLocked(phase sim.Phase, side, detail string, frame *sim.FrameInfo) {
	r.putLocked(sim.MigrationEvent{At: r.m.now(), Phase: phase, Side: side, Detail: detail, Frame: frame})
}

// note adds a timeline event of a kind clients act on (sim.TimelineKind).
func (r *run) note(kind sim.TimelineKind, phase sim.Phase, side, detail string) {
	r.mu.Lock()
	r.noteLocked(kind, phase, side, detail)
	r.mu.Unlock()
}

func (r *run) noteLocked(kind sim.TimelineKind, phase sim.Phase, side, detail string) {
	r.putLocked(sim.MigrationEvent{At: r.m.now(), Phase: phase, Side: side, Kind: kind, Detail: detail})
}

func (r *run) putLocked(ev sim.MigrationEvent) {
	if r.deferring {
		r.deferred = append(r.deferred, ev)
		return
	}
	r.appendLocked(ev)
}

func (r *run) appendLocked(ev sim.MigrationEvent) {
	if r.starting {
		r.held = append(r.held, ev)
		return
	}
	r.redactLocked(&ev)
	ev.Seq = r.eventsGone + len(r.mig.Events) + 1
	r.mig.Events = append(r.mig.Events, ev)
	r.m.journal.migrationEvent(r.id, r.eventsGone, r.mig.Events)
	if r.changed != nil {
		close(r.changed)
		r.changed = nil
	}
	data, _ := json.Marshal(ev)
	r.m.cfg.Bus.Publish(sim.Event{At: ev.At, Kind: sim.EventMigrationEvent, Migration: r.id, Data: data})
}

// redactLocked keeps both sides' tokens out of a timeline event: a job
// may quote its token in the state or answer it sends, which the other
// side is handed as it is, but the record, the API and the event stream
// never show (attack round 15, A-F6). Frame records are redacted by the
// listeners' recorder.
func (r *run) redactLocked(ev *sim.MigrationEvent) {
	for _, token := range [2]string{r.src.Token, r.tgtToken} {
		if token == "" {
			continue
		}
		if strings.Contains(ev.Detail, token) {
			ev.Detail = strings.ReplaceAll(ev.Detail, token, "<redacted>")
		}
		if ev.Frame != nil && bytes.Contains(ev.Frame.Payload, []byte(token)) {
			f := *ev.Frame
			f.Payload = bytes.ReplaceAll(f.Payload, []byte(token), []byte("<redacted>"))
			ev.Frame = &f
		}
	}
}

// deferLocked starts holding timeline events back; flushLocked records
// them, in order, with the times they were stamped.
func (r *run) deferLocked() { r.deferring = true }

func (r *run) flushLocked() {
	r.deferring = false
	for _, ev := range r.deferred {
		r.appendLocked(ev)
	}
	r.deferred = r.deferred[:0]
}

// setPhase moves the migration on to p, as a step begins. The frames a
// job sends move it to target-ready, cutover-ready and cutover-apply
// (handleSocket); the owner does both, so the phase is always the one the
// migration is in.
func (r *run) setPhase(p sim.Phase) {
	r.mu.Lock()
	r.moveLocked(p, r.m.now())
	r.mu.Unlock()
	r.m.journal.migration(r.doc())
}

// moveLocked moves the migration to phase p, and lets each side send what
// p asks of it (the asks table), before the frame that asks is written.
// What a job may send next follows from the phase, here alone.
func (r *run) moveLocked(p sim.Phase, at time.Time) {
	r.mig.Phase = p
	r.phaseStarts = append(r.phaseStarts, phaseStart{phase: p, at: at})
	r.allowLocked(sideSource)
	r.allowLocked(sideTarget)
}

// allowLocked arms what side may send in the current phase (asks), if it
// asks anything of it and the side is there.
func (r *run) allowLocked(side string) {
	may := mayAnswer(r.mig.Phase, side)
	role, node := r.src.ID, r.srcNode
	if side == sideTarget {
		role, node = r.mig.Target.Instance, r.tgtNode
	}
	if may == nil || role == "" || node.Socket == nil {
		return
	}
	node.Socket.Expect(r.src.JobID, role, may...)
}

func (r *run) sideOf(role string) string {
	if role == r.src.ID {
		return sideSource
	}
	return sideTarget
}

func frameInfo(dir string, typ string, size int, payload json.RawMessage) *sim.FrameInfo {
	return sim.NewFrameInfo(dir, typ, size, payload)
}

// frameDetail is the timeline text of a frame a job sent.
func frameDetail(f protocol.JobFrame) string {
	switch f.Type {
	case protocol.TypeAbort, protocol.TypeStateRefused:
		return f.Type + ": " + f.Reason
	}
	return f.Type
}

// replacedSocket is where a frame came from that was read on a socket a
// newer connection had replaced.
const replacedSocket = "read on its replaced socket after a newer connection took over (4409)"

// eventDetail is frameDetail of a socket event's frame, saying so when it
// came on a replaced socket.
func eventDetail(ev sim.SocketEvent) string {
	if ev.Replaced {
		return frameDetail(ev.Frame) + ", " + replacedSocket
	}
	return frameDetail(ev.Frame)
}

// socketNote records what the listener reports beside the frames it
// passes on: the side's socket replaced by a newer connection, or a
// frame it read and discarded (and why).
func (r *run) socketNote(ev sim.SocketEvent) {
	r.mu.Lock()
	defer r.mu.Unlock()
	side := r.sideOf(ev.Role)
	if ev.Kind == sim.SocketReplaced {
		r.noteDiscardedLocked(side, "socket replaced by a newer connection: normsim closed the old one with "+closeText(ev.Code, ev.Reason), nil)
		return
	}
	what, frame := "a frame", (*sim.FrameInfo)(nil)
	if f := ev.Frame; f.Type != "" {
		what, frame = frameDetail(f), frameInfo(dirIn, f.Type, ev.Size, payloadOf(f))
	}
	what += " from the " + side
	if ev.Replaced {
		what += ", " + replacedSocket
	}
	r.noteDiscardedLocked(side, what+": "+ev.Reason+"; discarded", frame)
}

// noteDiscardedLocked records a note a job can cause without end: a
// frame discarded, a socket replaced by a reconnect. The timeline keeps
// the first sim.MaxTimelineNotes, each with at most sim.MaxNotePayload of
// its frame's payload, and counts the rest (Migration.NotesCut): a job
// that reconnected and flooded its replaced sockets put every 60 KiB
// frame on it, until reading the record ran normsim out of memory.
func (r *run) noteDiscardedLocked(side, detail string, frame *sim.FrameInfo) {
	if frame != nil && len(frame.Payload) > sim.MaxNotePayload {
		frame.PayloadNote = fmt.Sprintf("the payload's %d bytes are not kept: the frame was discarded", len(frame.Payload))
		frame.Payload = nil
	}
	r.boundedLocked(sim.MigrationEvent{At: r.m.now(), Phase: r.mig.Phase, Side: side, Detail: detail, Frame: frame})
}

// noteSentAgainLocked records ev, a frame sent again as a job
// reconnected, as one of the notes a job can cause without end, with at
// most sim.MaxNotePayload of its payload.
func (r *run) noteSentAgainLocked(ev sim.MigrationEvent) {
	if f := ev.Frame; f != nil && len(f.Payload) > sim.MaxNotePayload {
		cut := *f
		cut.PayloadNote = fmt.Sprintf("the payload's %d bytes are not kept: sent again on a reconnect, as first sent above", len(f.Payload))
		cut.Payload = nil
		ev.Frame = &cut
	}
	r.boundedLocked(ev)
}

// boundedLocked records ev, one of the notes a job can cause without end
// (noteDiscardedLocked, a side's connection after its first), while the
// timeline keeps them.
func (r *run) boundedLocked(ev sim.MigrationEvent) {
	r.notes++
	if r.notes > sim.MaxTimelineNotes {
		r.mig.NotesCut++
		if r.notes == sim.MaxTimelineNotes+1 {
			r.recordLocked(r.mig.Phase, sideManager, fmt.Sprintf("the timeline keeps the first %d notes of frames discarded, sockets replaced and reconnects; from here on they are counted in notesCut, not kept", sim.MaxTimelineNotes), nil)
		}
		return
	}
	r.putLocked(ev)
}

// onSocket runs on a node listener's goroutine: it hands the event to
// the migration's owner. A hello waits until the owner has fired the
// faults armed on it, which must strike before the job reads hello-ack
// (fireAtHelloLocked). piped says the event waited behind a held frame.
func (r *run) onSocket(ev sim.SocketEvent, piped bool) {
	e := runEvent{kind: evSocket, instance: ev.Role, socket: ev, piped: piped, arrived: time.Now()}
	if ev.Kind != sim.SocketHello {
		r.post(e)
		return
	}
	if !r.armedAtHello {
		// Nothing to fire: the job's hello-ack waits for no one, as on
		// the real worker.
		return
	}
	e.heard = make(chan struct{})
	if r.post(e) {
		select {
		case <-e.heard:
		case <-r.gone:
		}
	}
}

// onSocketOwned is the owner taking a socket event: a frame goes past the
// armed faults and then, unless one drops or holds it, to handleSocket,
// which decides it.
func (r *run) onSocketOwned(e runEvent) {
	ev := e.socket
	side := r.sideOf(ev.Role)
	switch ev.Kind {
	case sim.SocketReplaced, sim.SocketDiscarded:
		r.socketNote(ev)
		return
	case sim.SocketHello:
		r.mu.Lock()
		r.fireAtHelloLocked(side)
		r.mu.Unlock()
		close(e.heard)
		return
	}
	if e.held > 0 {
		// A frame a fault held: it passed the faults on its way in.
		r.handleSocket(ev, side, false, e.held, e.arrived)
		return
	}
	if !e.piped && (ev.Kind == sim.SocketFrame || ev.Kind == sim.SocketDisconnected) {
		// A fault may have held a frame this socket sent before this one
		// after the listener handed this one on: it waits its turn
		// behind it, as on one TCP connection.
		e.piped = true
		if r.m.behindHeldIn(ev, func() { r.post(e) }) {
			return
		}
	}
	if ev.Kind != sim.SocketFrame {
		r.handleSocket(ev, side, false, 0, e.arrived)
		return
	}
	w := &inbound{r: r, ev: ev, side: side, at: e.arrived}
	r.mu.Lock()
	if r.cutOffLocked(ev, side) {
		r.mu.Unlock()
		return
	}
	r.passLocked(passage{typ: ev.Frame.Type, dir: dirIn, side: side}, w)
	r.mu.Unlock()
	for _, then := range w.then {
		then()
	}
	r.flushWrites()
}

// cutOffLocked discards a frame the listener read from a connection just
// before a drop-socket fault cut it off, and handed on after: a worker
// takes nothing more from a connection it dropped. A fault armed on a frame
// strikes as that frame is written (flushWrites), before the owner takes
// anything else, so the job's answer to it always ends here.
func (r *run) cutOffLocked(ev sim.SocketEvent, side string) bool {
	if ev.Conn == 0 || !slices.Contains(r.cut, cutConn{ev.Role, ev.Conn}) {
		return false
	}
	f := ev.Frame
	r.noteDiscardedLocked(side, fmt.Sprintf("%s from the %s: read as normsim dropped the connection (drop-socket); discarded", eventDetail(ev), side),
		frameInfo(dirIn, f.Type, ev.Size, payloadOf(f)))
	return true
}

// cutConn is an instance's connection (SocketEvent.Conn: numbered by its
// node's socket) that a drop-socket fault cut.
type cutConn struct {
	role string
	conn uint64
}

// inbound carries a frame a job sent past the faults: it goes on the
// timeline as it arrives, and is handled (and relayed) by handleSocket
// once the run's lock is let go.
type inbound struct {
	r        *run
	ev       sim.SocketEvent
	at       time.Time // when it was handed on to the owner
	side     string
	recorded bool
	then     []func() // run after the lock is let go
}

func (w *inbound) arrived() {
	if !w.recorded {
		f := w.ev.Frame
		w.r.recordLocked(w.r.mig.Phase, w.side, eventDetail(w.ev), frameInfo(dirIn, f.Type, w.ev.Size, payloadOf(f)))
		w.recorded = true
	}
}

func (w *inbound) pass(faulted bool) error {
	// A frame a fault acts on is recorded again as it is handled.
	recorded := w.recorded && !faulted
	w.then = append(w.then, func() { w.r.handleSocket(w.ev, w.side, recorded, 0, w.at) })
	return nil
}

func (w *inbound) corrupt() error {
	node := w.r.srcNode
	if w.side == sideTarget {
		node = w.r.tgtNode
	}
	w.then = append(w.then, func() {
		node.Socket.Disconnect(w.r.src.JobID, w.ev.Role, protocol.CloseProtocolError, "frame is not valid JSON")
	})
	return nil
}

// hold hands the frame on once d has passed; what the job sends after it
// waits behind it (Manager.OnSocketEvent).
func (w *inbound) hold(d time.Duration, what string) {
	r := w.r
	ev := runEvent{kind: evSocket, instance: w.ev.Role, socket: w.ev, piped: true, held: d}
	r.m.hold(pipeKey{w.ev.Role, dirIn}, pipeItem{at: time.Now().Add(d),
		deliver: func() { ev.arrived = time.Now(); r.post(ev) },
		lost:    func(why string) { r.post(runEvent{kind: evCall, call: func() { r.heldLost(what, d, why) }}) }})
}

// late records a frame that arrived after the migration was bound to end:
// the job sent it before it could read the abort (or the end) on the wire.
// It is not a protocol error, and nothing acts on it.
func (r *run) late(ev sim.SocketEvent) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lateLocked(ev, r.sideOf(ev.Role))
}

func (r *run) lateLocked(ev sim.SocketEvent, side string) {
	f := ev.Frame
	r.recordLocked(r.mig.Phase, side, lateDetail(ev, side), frameInfo(dirIn, f.Type, ev.Size, payloadOf(f)))
}

// lateByLocked says how late a frame is whose hold ends now: after its
// migration ended, or after the wait for it (or the wait in progress)
// timed out; "" when it is on time.
func (r *run) lateByLocked() string {
	now := time.Now()
	switch {
	case r.mig.State.Ended():
		return after(r.m.now().Sub(*r.mig.EndedAt), "the migration ended")
	case !r.waiting.deadline.IsZero() && !now.Before(r.waiting.deadline):
		return after(now.Sub(r.waiting.deadline), "its phase timed out")
	case !r.timedOut.IsZero():
		return after(now.Sub(r.timedOut), "its phase timed out")
	case r.ending:
		return "after the migration was bound to end"
	}
	return ""
}

// after says how long after a moment something came, to the millisecond.
func after(d time.Duration, moment string) string {
	if d = d.Round(time.Millisecond); d <= 0 {
		return "right after " + moment
	}
	return d.String() + " after " + moment
}

// heldLost records a held frame that never went on, and why.
func (r *run) heldLost(what string, d time.Duration, why string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if when := r.lateByLocked(); when != "" {
		r.recordLocked(r.mig.Phase, sideManager, fmt.Sprintf("late %s: held %s by a delay-frame fault; discarded %s: %s", what, d, when, why), nil)
		return
	}
	r.recordLocked(r.mig.Phase, sideManager, "fault: the held "+what+" was discarded: "+why, nil)
}

// onRuntime hands a runtime event to the migration's owner; a service
// that exited binds the migration to end (handle), so nothing arriving
// after it is relayed.
func (r *run) onRuntime(ev sim.RuntimeEvent) {
	r.post(runEvent{kind: evRuntime, instance: ev.Instance, runtime: ev})
}

// handleSocket decides a socket event (step): it records it (a frame
// unless recorded already), relays the cutover frames, and hands the event
// on to the migration's steps. held is how long a delay-frame fault held
// the frame. The owner's, and afterEnd's once the owner has let go.
func (r *run) handleSocket(ev sim.SocketEvent, side string, recorded bool, held time.Duration, arrived time.Time) {
	in := input{kind: inSocket, side: side, socket: ev, recorded: recorded, held: held}
	r.decide(runEvent{kind: evSocket, instance: ev.Role, socket: ev}, func() input {
		if ev.Kind == sim.SocketFrame {
			// A frame is decided as of when it arrived: one in before
			// the deadline of the wait it is about is on time, though
			// the listener (behind a burst of pings) or the owner takes
			// it after; a held one arrives as its hold ends.
			if arrived.IsZero() {
				arrived = time.Now()
			}
			if held == 0 && !ev.At.IsZero() && ev.At.Before(arrived) {
				arrived = ev.At
			}
			in.late, in.arrived = ev.Late, arrived
			if held > 0 {
				in.lateBy = r.lateByLocked()
			}
		} else {
			in.arrived = ev.At // a hello, a close: as the listener dated it
		}
		return in
	})
}

// decideUserAbort decides the user's abort (step) and answers the API,
// which waits for it: 202, or 409 and why. Once the owner has let go, the
// migration has ended and step refuses it as such.
func (r *run) decideUserAbort(ev runEvent) {
	r.decide(ev, func() input { return input{kind: inUserAbort, reason: ev.reason, arrived: ev.arrived} })
}

// stateLocked is the migration's state as step decides with it.
func (r *run) stateLocked() state {
	return state{id: r.id, strategy: r.mig.Strategy, phase: r.mig.Phase, ended: r.mig.State, facts: r.facts}
}

// decideLocked takes a decision of the owner's own steps (inBound,
// inState, inNoReturn, …) through stepOwn, which changes the facts and
// asks nothing more.
func (r *run) decideLocked(in input) {
	r.facts = stepOwn(r.stateLocked(), in).facts
}

// ownDecision is decideLocked under mu.
func (r *run) ownDecision(in input) {
	r.mu.Lock()
	r.decideLocked(in)
	r.mu.Unlock()
}

// decide takes an event through step, under mu, and carries out the
// effects it returns in order: the one place an event from another
// goroutine changes the migration. in is read under mu (it may ask the
// wait in progress); ev is what the steps see if the event is handed on.
// The frames it decides to write are written once mu is let go.
func (r *run) decide(ev runEvent, read func() input) {
	r.mu.Lock()
	in := read()
	in.now = r.m.now()
	next, effs := stepTo(r.effects[:0], r.stateLocked(), in)
	r.facts = next.facts
	// Timeline entries are stamped as they are made, and stored and
	// published once the relay is queued: off the relay's path.
	r.deferLocked()
	answer, answered := "", false
	moved, relayed := false, ""
	reconnected := false
	for _, e := range effs {
		switch e.do {
		case doRecord:
			ev := sim.MigrationEvent{At: r.m.now(), Phase: e.phase, Side: e.side, Kind: e.kind, Detail: e.detail, Frame: e.info}
			if reconnected && e.info != nil && e.info.Direction == dirOut && e.info.Type == protocol.TypeInitialState {
				// The initial state handed again on a reconnect is one
				// of its notes, bounded with it (attack round 16, A-F4:
				// a target reconnecting in a loop added its whole state
				// each time).
				r.noteSentAgainLocked(ev)
				break
			}
			if e.kind == sim.TimelineConnected {
				if r.connected[e.side] {
					reconnected = true
					r.boundedLocked(ev) // a reconnect: a job may loop on them
					break
				}
				if r.connected == nil {
					r.connected = map[string]bool{}
				}
				r.connected[e.side] = true
			}
			r.putLocked(ev)
		case doMove:
			// A job's frame or hello moved it: the phase began as that
			// arrived (a frame held by a fault, as its hold ended), and
			// what arrived after it came in the new one.
			at := in.now
			if in.kind == inSocket && !in.arrived.IsZero() && in.arrived.Before(at) {
				at = in.arrived
			}
			r.moveLocked(e.phase, at)
			moved = true
		case doHoldLogs:
			if r.m.cfg.Logs != nil && r.releaseLogs == nil {
				r.releaseLogs = r.m.cfg.Logs.Hold()
			}
		case doRelay:
			role, node := r.src.ID, r.srcNode
			if e.side == sideTarget {
				role, node = r.mig.Target.Instance, r.tgtNode
			}
			r.deliverLocked(role, node, protocol.WorkerFrame{Type: e.frame, MigrationID: r.id, Payload: e.payload})
			relayed = e.frame
		case doFire:
			r.fireOnLocked(e.frame)
		case doHandOn:
			r.toSteps(ev)
		case doAnswer:
			answer, answered = e.detail, true
		case doMarkPassed:
			r.m.markPassed(r.id)
		}
	}
	r.flushLocked()
	if hook := testHookRelayed.Load(); relayed != "" && hook != nil {
		(*hook)(relayed)
	}
	// The buffer is kept for the next event; what the effects held is
	// let go.
	clear(effs)
	r.effects = effs[:0]
	r.mu.Unlock()
	if answered {
		ev.answer <- answer
	}
	r.flushWrites()
	if moved {
		// After the relay's write: a normsim killed while the migration
		// waits in the new phase must find it there on restart.
		r.m.journal.migration(r.doc())
	}
}

// testHookRelayed, set by tests only, runs on the owner after a cutover
// frame is relayed and before its event is handed to the steps, still
// under the run's lock: it widens the moment a deadline can fall in.
var testHookRelayed atomic.Pointer[func(relay string)]

// deliverLocked applies any frame fault armed on this frame, queues it to
// be written (flushWrites), records it, and fires faults armed on it. What
// the job may answer was armed as the phase moved (moveLocked).
func (r *run) deliverLocked(role string, node *Node, f protocol.WorkerFrame) error {
	_, err := r.deliverWaitLocked(false, role, node, f)
	return err
}

// deliverWaitLocked is deliverLocked; with wait, it returns the writes it
// queued, for a caller that waits for them once mu is let go.
func (r *run) deliverWaitLocked(wait bool, role string, node *Node, f protocol.WorkerFrame) ([]*pendingWrite, error) {
	side := r.sideOf(role)
	// Marshalled once: the bytes are what is sent, sized and (for a
	// corrupt-frame fault) cut.
	b, err := f.Marshal()
	if err != nil {
		r.recordLocked(r.mig.Phase, sideManager, fmt.Sprintf("could not marshal %s for the %s: %v", f.Type, side, err), nil)
		return nil, err
	}
	if len(b) > protocol.MaxFrameBytes {
		// A relayed payload plus the frame's own fields can pass the cap
		// the job's client enforces: the frame is not sent, and the
		// migration ends saying why.
		reason := fmt.Sprintf("could not relay %s to the %s: it would be %d bytes, over the job socket's %d-byte frame cap", f.Type, side, len(b), protocol.MaxFrameBytes)
		r.recordLocked(r.mig.Phase, sideManager, reason, nil)
		r.decideLocked(input{kind: inBound})
		r.toSteps(runEvent{kind: evFault, reason: reason})
		return nil, errors.New(reason)
	}
	w := &outbound{r: r, role: role, node: node, side: side, f: f, b: b, wait: wait}
	err = r.passLocked(passage{typ: f.Type, dir: dirOut, side: side}, w)
	return w.queued, err
}

// pendingWrite is a frame decided under mu, to be written with mu let go.
type pendingWrite struct {
	node      *Node
	role      string
	side, typ string
	b         []byte
	// done gets the write's error; nil when no one waits for it.
	done chan error
	// strikeLocked, when set, is done in the frame's place, under mu: a
	// fault that strikes a job, in order with the frames around it.
	strikeLocked func()
}

// queueWriteLocked queues w for flushWrites. A frame has been recorded as
// sent already: a job's answer, which can come the moment the frame is
// written, must not go on the timeline before it.
func (r *run) queueWriteLocked(w *pendingWrite) {
	r.writes = append(r.writes, w)
	if w.strikeLocked == nil {
		r.askedAt[askIndex(w.side)] = r.m.now()
	}
}

// flushWrites writes the queued frames in the order they were decided,
// with mu let go. One goroutine writes at a time; a caller that finds
// another writing leaves its frames to it, which writes until none is
// left, so none is stranded and none overtakes another.
func (r *run) flushWrites() {
	r.mu.Lock()
	if r.writing {
		r.mu.Unlock()
		return
	}
	r.writing = true
	for len(r.writes) > 0 {
		batch := r.writes
		r.writes = nil
		r.mu.Unlock()
		for i := 0; i < len(batch); i++ {
			w := batch[i]
			if w.strikeLocked != nil {
				r.mu.Lock()
				w.strikeLocked()
				r.mu.Unlock()
				continue
			}
			// A fault armed on this frame strikes right after it: the
			// frame is written and the fault strikes under one hold of
			// mu, so nothing the job answers the frame with is taken in
			// between (faults.md). Only with such a fault is a socket
			// written under mu.
			strikes := i+1 < len(batch) && batch[i+1].strikeLocked != nil
			if strikes {
				r.mu.Lock()
			}
			err := w.node.Socket.SendRaw(context.Background(), r.src.JobID, w.role, w.typ, w.b)
			if err != nil {
				failed := fmt.Sprintf("writing %s to the %s failed: %v (the job may not have received it)", w.typ, w.side, err)
				if strikes {
					r.recordLocked(r.mig.Phase, sideManager, failed, nil)
				} else {
					r.recordHere(sideManager, failed, nil)
				}
			}
			for strikes && i+1 < len(batch) && batch[i+1].strikeLocked != nil {
				i++
				batch[i].strikeLocked()
			}
			if strikes {
				r.mu.Unlock()
			}
			if w.done != nil {
				w.done <- err
			}
		}
		r.mu.Lock()
	}
	r.writing = false
	r.mu.Unlock()
}

// outbound carries a frame the worker sends to a job past the faults; it
// goes on the timeline as it is sent.
type outbound struct {
	r    *run
	role string
	node *Node
	side string
	f    protocol.WorkerFrame
	b    []byte // f, marshalled
	// wait: a caller waits for the writes; queued are those it queued.
	wait   bool
	queued []*pendingWrite
}

func (w *outbound) arrived() {}

func (w *outbound) pass(bool) error {
	return w.write(w.b, w.f.Type, frameInfo(dirOut, w.f.Type, len(w.b), w.f.Payload))
}

func (w *outbound) corrupt() error {
	bad := w.b[:len(w.b)/2]
	return w.write(bad, w.f.Type+" (corrupted)", frameInfo(dirOut, w.f.Type, len(bad), nil))
}

// write sends b, or, while a frame is held on the way to the same socket,
// queues it behind that frame. detail and fi are its timeline entry.
func (w *outbound) write(b []byte, detail string, fi *sim.FrameInfo) error {
	r := w.r
	queued := time.Now()
	if r.m.behind(pipeKey{w.role, dirOut}, pipeItem{
		deliver: func() {
			waited := time.Since(queued).Round(time.Millisecond)
			r.post(runEvent{kind: evCall, call: func() {
				r.mu.Lock()
				w.sendLocked(b, fmt.Sprintf("%s, after waiting %s behind a held frame", detail, waited), fi)
				r.mu.Unlock()
				r.flushWrites()
			}})
		},
		lost: func(why string) {
			r.post(runEvent{kind: evCall, call: func() {
				r.recordHere(sideManager, fmt.Sprintf("%s to the %s was not sent: %s", w.f.Type, w.side, why), nil)
			}})
		},
	}) {
		r.recordLocked(r.mig.Phase, sideManager, fmt.Sprintf("%s to the %s waits behind a frame held on its socket", w.f.Type, w.side), nil)
		return nil
	}
	return w.sendLocked(b, detail, fi)
}

// sendLocked queues b to be written once mu is let go (flushWrites), and
// records it as sent.
func (w *outbound) sendLocked(b []byte, detail string, fi *sim.FrameInfo) error {
	r := w.r
	if !w.node.Socket.Connected(r.src.JobID, w.role) {
		r.recordLocked(r.mig.Phase, sideManager, fmt.Sprintf("could not send %s to the %s: %v", w.f.Type, w.side, sim.ErrNotConnected), nil)
		return sim.ErrNotConnected
	}
	r.recordLocked(r.mig.Phase, w.side, detail, fi)
	pw := &pendingWrite{node: w.node, role: w.role, side: w.side, typ: w.f.Type, b: b}
	if w.wait {
		pw.done = make(chan error, 1)
		w.queued = append(w.queued, pw)
	}
	r.queueWriteLocked(pw)
	return nil
}

// hold sends the frame once d has passed; what is sent to the job after
// it waits behind it (write). Sent after its migration ended or its
// phase timed out, it is recorded as late.
func (w *outbound) hold(d time.Duration, what string) {
	r := w.r
	fi := frameInfo(dirOut, w.f.Type, len(w.b), w.f.Payload)
	r.m.hold(pipeKey{w.role, dirOut}, pipeItem{at: time.Now().Add(d),
		deliver: func() { r.post(runEvent{kind: evCall, call: func() { w.release(d, what, fi) }}) },
		lost:    func(why string) { r.post(runEvent{kind: evCall, call: func() { r.heldLost(what, d, why) }}) }})
}

// release sends a frame a delay-frame fault held for d, or records it as
// late, as its hold ends.
func (w *outbound) release(d time.Duration, what string, fi *sim.FrameInfo) {
	r := w.r
	r.mu.Lock()
	when := r.lateByLocked()
	switch {
	case when == "":
		w.sendLocked(w.b, w.f.Type, fi)
	case !w.node.Socket.Connected(r.src.JobID, w.role):
		r.recordLocked(r.mig.Phase, w.side, fmt.Sprintf("late %s: held %s by a delay-frame fault, it came %s; could not be sent: %v", what, d, when, sim.ErrNotConnected), nil)
	default:
		outcome := "sent"
		if answers := answersTo(w.f.Type); len(answers) > 0 {
			// A correct job answers it: that answer is late, not the
			// answer to whatever a newer migration asks meanwhile. Owed
			// before it is written, so the answer cannot come first.
			w.node.Socket.Owe(r.src.JobID, w.role, answers...)
			outcome += "; an answer to it is late"
		}
		r.recordLocked(r.mig.Phase, w.side, fmt.Sprintf("late %s: held %s by a delay-frame fault, it came %s; %s", what, d, when, outcome), fi)
		r.queueWriteLocked(&pendingWrite{node: w.node, role: w.role, side: w.side, typ: w.f.Type, b: w.b})
	}
	r.mu.Unlock()
	r.flushWrites()
}

// answersTo are the frames a job may answer an ask of type t with (abort
// aside, which is always allowed); none for a frame that asks nothing.
func answersTo(t string) []string {
	switch t {
	case protocol.TypeGetState:
		return []string{protocol.TypeState, protocol.TypeStateRefused}
	case protocol.TypeInitialState:
		return []string{protocol.TypeTargetReady}
	case protocol.TypeCutoverReady:
		return []string{protocol.TypeSourceStoppedOutput}
	case protocol.TypeCutoverApply:
		return []string{protocol.TypeTargetApplied}
	}
	return nil
}

func payloadOf(f protocol.JobFrame) json.RawMessage {
	switch f.Type {
	case protocol.TypeState, protocol.TypeTargetReady, protocol.TypeSourceStoppedOutput:
		return f.Payload
	case protocol.TypeTargetApplied:
		b, _ := f.Marshal()
		return b
	}
	return nil
}

// send delivers f to the job and waits until it was written (or held by
// a fault, or dropped by one).
func (r *run) send(role string, node *Node, f protocol.WorkerFrame) error {
	r.mu.Lock()
	queued, err := r.deliverWaitLocked(true, role, node, f)
	r.mu.Unlock()
	r.flushWrites()
	for _, w := range queued {
		if werr := <-w.done; err == nil {
			err = werr
		}
	}
	return err
}

// errEnd carries why a migration ends early.
type errEnd struct{ reason string }

func (e *errEnd) Error() string { return e.reason }

func endf(format string, args ...any) error { return &errEnd{fmt.Sprintf(format, args...)} }

// errBroken is an end a job brought on itself by breaking a promise:
// an answer that did not come in time, a frame normsim closed its socket
// for (4400, 4413, 1002, 1007), or an exit while it was being moved.
type errBroken struct {
	errEnd
	side, promise string
}

func brokenf(side, promise, format string, args ...any) error {
	return &errBroken{errEnd{fmt.Sprintf(format, args...)}, side, promise}
}

// abortedPastApply says whether the target's abort came after its
// cutover-apply by more than a frame in flight, or after its own
// target-applied: it did not cross cutover-apply on the wire, and past
// the point of no return a target reports what it could not apply in
// target-applied instead.
func (r *run) abortedPastApply(at time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.ponr && !r.applySentAt.IsZero() && (at.After(r.applySentAt.Add(sim.InFlight)) || !r.appliedAt.IsZero())
}

// sourceCommitted says whether the source has sent source-stopped-output:
// its own frame, before anything it sends after on the same socket, so
// an abort after it cannot have crossed anything (as a target's abort
// may cross cutover-apply) and breaks the source's own commitment.
func (r *run) sourceCommitted() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.mig.Strategy == sim.Handover && r.ponr // the others' point is normsim's own
}

// faultStruck are the sides a fired fault of the migration struck: what
// one of them broke may be the fault's doing, not the job's.
func (r *run) faultStruck() map[string]bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return maps.Clone(r.faultOn)
}

// await reads events until one is what w waits for, a disruption ends
// the wait with an error, or the timeout passes.
func (r *run) await(ctx context.Context, what string, timeout time.Duration, w wait) (runEvent, error) {
	w.deadline = time.Now().Add(timeout)
	r.ownDecision(input{kind: inAwait, wait: w})
	timer := time.NewTimer(timeout)
	defer func() {
		timer.Stop()
		r.ownDecision(input{kind: inWaited})
	}()
	accept := func(ev runEvent) bool { return ev.kind == evSocket && w.accepts(ev.socket) }
	// take reads the events waiting: the accepted one, or a disruption.
	take := func() (runEvent, bool, error) {
		for {
			ev, ok := r.take()
			if !ok {
				return runEvent{}, false, nil
			}
			if accept(ev) {
				return ev, true, nil
			}
			if err := r.disruption(ev); err != nil {
				return ev, true, err
			}
		}
	}
	for {
		if ev, done, err := take(); done {
			return ev, err
		}
		select {
		case <-r.events.ready:
		case <-timer.C:
			// What arrived before the deadline wins over the timer it
			// raced: it is decided as of its arrival (step), so
			// a frame in before the deadline is relayed and taken,
			// and one after it is late. One decision per deadline. What
			// waits on the sockets unread (behind a burst of pings, say)
			// is read first (attack round 16, A-F2).
			r.catchUp(r.src.ID)
			r.catchUp(r.targetID())
			if ev, done, err := take(); done {
				return ev, err
			}
			r.ownDecision(input{kind: inTimedOut})
			if w.frames != nil {
				return runEvent{}, brokenf(r.sideOf(w.role), sim.PromiseAnswerInTime, "timed out after %s waiting for %s", timeout, what)
			}
			return runEvent{}, endf("timed out after %s waiting for %s", timeout, what)
		case <-ctx.Done():
			r.bindToEnd()
			return runEvent{}, endf(sim.ReasonInterrupted)
		}
	}
}

// bindToEnd marks the migration as ending the moment the decision is
// made, so a frame that arrives before finish runs (one a fault held, say)
// is late rather than relayed.
func (r *run) bindToEnd() { r.ownDecision(input{kind: inBound}) }

// waitOr runs wait, a wait of overlap's or stopThenStart's on something
// other than the migration's events (an instance's state, the output
// sink), and meanwhile reads those events as await does: a disruption (an
// exit, a lost socket, a job's or the worker's abort) or the user's abort
// ends the wait at once, with the reason the migration ends with; nil
// once wait returned by itself.
func (r *run) waitOr(ctx context.Context, wait func(context.Context)) error {
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		wait(wctx)
	}()
	defer func() {
		cancel()
		<-done
	}()
	for {
		// What the owner handled while the steps were busy elsewhere (a
		// start, say) comes first.
		if err := r.disrupted(); err != nil {
			return err
		}
		select {
		case <-done:
			return r.disrupted()
		case <-r.events.ready:
		}
	}
}

// disrupted reads the events waiting, and returns the first that breaks
// the migration (disruption), which binds it to end; the others are
// dropped, as await drops what it does not wait for. What the source did
// once the migration was done with it is not news (sourceDoneWith).
func (r *run) disrupted() error { return r.disruptedBefore(time.Time{}) }

// disruptedBefore is disrupted once normsim began stopping the source at
// began (zero: not yet): the source's own end from then on (its socket
// closed, by it or by normsim, its exit) is the stop's doing.
func (r *run) disruptedBefore(began time.Time) error {
	for {
		ev, ok := r.take()
		if !ok {
			return nil
		}
		if r.sourceDoneWith(ev, began) {
			continue
		}
		if err := r.disruption(ev); err != nil {
			r.bindToEnd()
			return err
		}
	}
}

// sourceDoneWith says whether ev is the source's and came once the
// migration no longer needed it: at or after the target took over (a
// handover's target-applied, overlap's take-over) or after stopping
// began (when not zero). Its source is stopped next whatever it does, so
// a source that ends then harms nothing; one that ended before, heard
// only now (the listener's news of two sockets arrives in any order),
// broke the migration as it would have at its step.
func (r *run) sourceDoneWith(ev runEvent, stopping time.Time) bool {
	if r.sideOf(ev.instance) != sideSource {
		return false
	}
	r.mu.Lock()
	done := r.readyAt
	if r.mig.Strategy == sim.Handover {
		done = r.appliedAt
	}
	r.mu.Unlock()
	if done.IsZero() || !stopping.IsZero() && stopping.Before(done) {
		done = stopping
	}
	if done.IsZero() {
		return false
	}
	var at time.Time
	switch ev.kind {
	case evSocket:
		at = ev.socket.At
	case evRuntime:
		at = ev.runtime.At
	default:
		return true // no time of its own: heard once the source was done with
	}
	return !at.Before(done)
}

// disruption says whether an event breaks the migration: an abort, a lost
// socket, a service that exited, a frame no phase expects.
func (r *run) disruption(ev runEvent) error {
	side := r.sideOf(ev.instance)
	switch ev.kind {
	case evSocket:
		switch ev.socket.Kind {
		case sim.SocketFrame:
			if ev.socket.Frame.Type == protocol.TypeAbort {
				if side == sideTarget && r.abortedPastApply(ev.socket.At) || side == sideSource && r.sourceCommitted() {
					return brokenf(side, sim.PromiseReportNotAbort, "the %s aborted: %s", side, ev.socket.Frame.Reason)
				}
				return endf("the %s aborted: %s", side, ev.socket.Frame.Reason)
			}
		case sim.SocketDisconnected:
			// A job that crashes drops its socket and exits at about the
			// same moment; which of the two normsim hears first is a race.
			// The exit is the better reason, so wait briefly for it.
			if ev.socket.ClosedBy == sim.ClosedByWorker {
				// normsim closed it on purpose (a protocol error, a
				// fault): the job did not crash.
				if malformed(ev.socket.Code) {
					return brokenf(side, sim.PromiseWellFormed, "%s on %s", socketDropped(side, ev.socket), r.phaseAt(ev.socket.At))
				}
				if ev.socket.Code == closePolicyViolation {
					// 1008: a write to it did not finish within 5 s; it
					// did not read (docs/contract.md, close codes).
					return brokenf(side, sim.PromiseReads, "%s on %s", socketDropped(side, ev.socket), r.phaseAt(ev.socket.At))
				}
				return endf("%s on %s", socketDropped(side, ev.socket), r.phaseAt(ev.socket.At))
			}
			if exit, ok := r.awaitExit(ev.instance); ok {
				return r.exited(side, exit)
			}
			if ev.socket.ClosedBy == sim.ClosedByJob {
				// A close frame is the job's own decision: it left the
				// migration it was part of, as surely as one that exits.
				return brokenf(side, sim.PromiseStaysUp, "%s on %s", socketDropped(side, ev.socket), r.phaseAt(ev.socket.At))
			}
			return endf("%s on %s", socketDropped(side, ev.socket), r.phaseAt(ev.socket.At))
		}
	case evFault, evAbort:
		return endf("%s", ev.reason)
	case evRuntime:
		if ev.runtime.Kind == sim.ServiceExited {
			return r.exited(side, ev.runtime)
		}
	}
	return nil
}

// malformed says whether a close normsim sent a job was for a frame the
// job sent that was not well-formed: the job protocol's 4400 and 4413, and
// RFC 6455's 1002 (a frame that breaks WebSocket itself) and 1007 (text or
// a close reason that is not UTF-8).
func malformed(code int) bool {
	switch code {
	case protocol.CloseProtocolError, protocol.CloseFrameTooLarge, closeWebSocketProtocolError, closeInvalidPayloadData:
		return true
	}
	return false
}

// The RFC 6455 close codes the listener sends: the first two for a job's
// frame, the last when a write to the job did not finish in time.
const (
	closeWebSocketProtocolError = 1002
	closeInvalidPayloadData     = 1007
	closePolicyViolation        = 1008
)

// exitGrace is how long a lost socket waits for the runtime to learn of
// its job's exit, on runtimes that report exits: longer than the Docker
// engine and the process runtime take to notice one, short enough that a
// job which only closed its socket is not kept waiting long. An exit the
// runtime has learned of is then waited for until it is reported
// (sim.ExitReporter), up to exitReportBound: the Docker runtime holds the
// report up to a second while the container's last output is captured,
// then asks the engine about its restart policy, and a loaded engine took
// longer than the grace 1 run in 20 (e2e's TestCrashGivesOneStableReason
// in the full suite), when the reason was the lost socket, not the exit.
const (
	exitGrace       = 1500 * time.Millisecond
	exitReportBound = 10 * time.Second
)

// awaitExit waits up to exitGrace for a service of the instance to exit,
// and for an exit the runtime learned of until it is reported.
// Other events are read and dropped: the migration is ending anyway.
func (r *run) awaitExit(instance string) (sim.RuntimeEvent, bool) {
	if r.runtimeOf(instance) == sim.RuntimeExternal {
		return sim.RuntimeEvent{}, false // nothing reports its exits
	}
	var reporter sim.ExitReporter
	if instance == r.src.ID {
		reporter, _ = r.m.runtimes().Runtimes[r.src.Runtime].(sim.ExitReporter)
	} else {
		reporter, _ = r.rt.(sim.ExitReporter)
	}
	bound := time.Now().Add(exitReportBound)
	timer := time.NewTimer(exitGrace)
	defer timer.Stop()
	// exit takes what waits, and returns the instance's exit if it came.
	exit := func() (sim.RuntimeEvent, bool) {
		for {
			ev, ok := r.take()
			if !ok {
				return sim.RuntimeEvent{}, false
			}
			if ev.kind == evRuntime && ev.instance == instance && ev.runtime.Kind == sim.ServiceExited {
				return ev.runtime, true
			}
		}
	}
	for {
		if ev, ok := exit(); ok {
			return ev, true
		}
		select {
		case <-r.events.ready:
		case <-timer.C:
			// A runtime reports the exit before it stops counting it
			// pending: one reported as the timer fired is waiting.
			if ev, ok := exit(); ok {
				return ev, true
			}
			if reporter != nil && reporter.ExitPending(instance) && time.Now().Before(bound) {
				timer.Reset(20 * time.Millisecond) // learned, not reported yet
				continue
			}
			return sim.RuntimeEvent{}, false
		case <-r.m.ctx.Done():
			return sim.RuntimeEvent{}, false
		}
	}
}

// exited is the end of a migration whose job's service exited.
func (r *run) exited(side string, ev sim.RuntimeEvent) error {
	again := ""
	if ev.Restarting {
		again = " (the engine restarts it, by its restart policy)"
	}
	// Unless a fault of the migration did it (finish tells), the job
	// ended on its own while it was being moved.
	return brokenf(side, sim.PromiseStaysUp, "the %s's service %s %s on %s%s", side, ev.Service, exitPhrase(ev, r.runtimeOf(ev.Instance)), r.phaseAt(ev.At), again)
}

// runtimeOf is the runtime an instance of the migration runs on.
func (r *run) runtimeOf(instance string) string {
	if instance == r.src.ID {
		return r.src.Runtime
	}
	return r.rt.Name()
}

type phaseStart struct {
	phase sim.Phase
	at    time.Time
}

// phaseAt is the phase the migration was in at t: a close that arrived as
// cutover-apply was sent but was heard after the owner moved on happened
// in cutover-apply. An event with no time of its own, or one from before
// the first phase this run saw begin (a recovered run), is named by the
// current phase.
func (r *run) phaseAt(t time.Time) sim.Phase {
	r.mu.Lock()
	defer r.mu.Unlock()
	if t.IsZero() {
		return r.mig.Phase
	}
	for i := len(r.phaseStarts) - 1; i >= 0; i-- {
		if !r.phaseStarts[i].at.After(t) {
			return r.phaseStarts[i].phase
		}
	}
	return r.mig.Phase
}

// exitPhrase says how a service ended, the same way on every runtime:
// "exited with code 3", "killed by signal 9".
func exitPhrase(ev sim.RuntimeEvent, runtime string) string {
	if ev.Signal > 0 {
		return fmt.Sprintf("killed by signal %d", ev.Signal)
	}
	if runtime == sim.RuntimeDocker && ev.ExitCode > 128 && ev.ExitCode <= 128+64 {
		// The Docker engine reports only the code; 128+n is how a
		// container's main process ends on signal n.
		return fmt.Sprintf("exited with code %d (128+%d: killed by signal %d)", ev.ExitCode, ev.ExitCode-128, ev.ExitCode-128)
	}
	return fmt.Sprintf("exited with code %d", ev.ExitCode)
}

// closeText is a close code and its reason as a person reads them:
// "4400 (frame state is out of phase)", "1000 (no reason given)".
func closeText(code int, reason string) string {
	if reason == "" {
		reason = "no reason given"
	}
	return fmt.Sprintf("%d (%s)", code, reason)
}

// socketClosed is the timeline entry of a closed socket: who closed it.
func socketClosed(ev sim.SocketEvent) string {
	switch ev.ClosedBy {
	case sim.ClosedByWorker:
		return "socket closed by normsim with " + closeText(ev.Code, ev.Reason)
	case sim.ConnectionLost:
		return fmt.Sprintf("connection lost without a close frame (%d)", ev.Code)
	}
	return "socket closed by the job with " + closeText(ev.Code, ev.Reason)
}

// socketDropped is why a lost socket ends a migration, naming who closed it.
func socketDropped(side string, ev sim.SocketEvent) string {
	switch ev.ClosedBy {
	case sim.ClosedByWorker:
		return fmt.Sprintf("normsim closed the %s's socket with %s", side, closeText(ev.Code, ev.Reason))
	case sim.ConnectionLost:
		return fmt.Sprintf("the %s's connection was lost without a close frame (%d)", side, ev.Code)
	}
	return fmt.Sprintf("the %s closed its socket with %s", side, closeText(ev.Code, ev.Reason))
}

// run drives the migration to its end.
func (r *run) run(ctx context.Context) {
	// A strategy with no table ends aborted, never completed having done
	// nothing.
	err := endf("normsim has no steps for the strategy %q", r.mig.Strategy)
	if steps, ok := strategies[r.mig.Strategy]; ok {
		err = r.runSteps(ctx, steps)
	}
	if err == nil {
		err = r.lastLook()
	}
	r.finish(ctx, err)
	r.letGo()
}

// lastLook is the look before a migration completes. It is in progress
// up to its end, and a target whose socket closed or went away just
// before fails it (docs/contract.md, lost connections): what the target
// sent up to now, the end of its socket included, is read and heard first
// (sim.JobSocket.CatchUp), so the verdict does not turn on whether that
// news outran the end.
func (r *run) lastLook() error {
	if id := r.targetID(); id != "" && r.tgtNode.Socket != nil {
		r.tgtNode.Socket.CatchUp(r.src.JobID, id)
	}
	return r.disrupted()
}

// placeTarget launches the target instance on the target node.
func (r *run) placeTarget(ctx context.Context, prepareOnly bool, o launchOpts) (sim.Instance, error) {
	o.jobID = r.src.JobID
	o.migrationID = r.id
	o.prepareOnly = true
	var tgt sim.Instance
	var err error
	r.during(func() {
		tgt, err = r.m.launch(ctx, LaunchRequest{Template: r.src.Template, Node: r.tgtNode.Name, Params: r.src.Params, Runtime: r.rt.Name()}, o)
	})
	if err != nil {
		return tgt, endf("could not place the target on node %s: %s", r.tgtNode.Name, describe(err))
	}
	// Route the target's socket events to this migration, and arm what a
	// handover target may say, before its env is visible: an external job
	// dials the moment the migration shows the env, and its hello or
	// target-ready must be neither lost nor judged out of phase.
	r.m.mu.Lock()
	r.m.byInstance[tgt.ID] = r
	r.m.mu.Unlock()
	r.mu.Lock()
	r.mig.Target.Instance, r.tgtPlacedAt, r.tgtToken = tgt.ID, tgt.CreatedAt, tgt.Token
	r.allowLocked(sideTarget)
	if tgt.Runtime == sim.RuntimeExternal {
		r.mig.Target.Env = tgt.Env
	}
	r.mu.Unlock()
	r.m.journal.migration(r.doc())
	r.mu.Lock()
	r.noteLocked(sim.TimelineTargetCreated, r.mig.Phase, sideTarget, fmt.Sprintf("target %s created on node %s (%s runtime)", tgt.ID, tgt.Node, tgt.Runtime))
	r.mu.Unlock()
	if prepareOnly {
		return tgt, nil
	}
	return tgt, r.startTarget(ctx)
}

// startTarget starts the prepared target.
func (r *run) startTarget(ctx context.Context) error {
	r.m.mu.Lock()
	in := r.m.instances[r.mig.Target.Instance]
	r.m.mu.Unlock()
	if in == nil {
		return endf("the target instance is gone")
	}
	r.mu.Lock()
	fail := planTargetStart(r.faults, r.fired)
	if fail >= 0 {
		r.fireFaultLocked(fail, sideTarget)
	}
	r.mu.Unlock()
	if fail >= 0 {
		r.mu.Lock()
		r.noteLocked(sim.TimelineFault, r.mig.Phase, sideManager, "fault: the target fails to start")
		r.mu.Unlock()
		r.m.mu.Lock()
		r.m.setStateLocked(in, sim.InstanceFailed, "start: injected fault target-fail-start")
		r.m.mu.Unlock()
		return endf("the target failed to start: injected fault")
	}
	// A start call can return after the job it started has connected (a
	// Docker start, a port lookup): the events recorded meanwhile are held
	// and the target is recorded started before the first of its own, at
	// that event's time, since it cannot have acted before it started.
	r.mu.Lock()
	r.starting = true
	r.mu.Unlock()
	var err error
	r.during(func() { err = r.m.start(ctx, in, r.rt) })
	r.mu.Lock()
	defer r.mu.Unlock()
	held := r.held
	r.starting, r.held = false, nil
	started := sim.MigrationEvent{At: r.m.now(), Phase: r.mig.Phase, Side: sideTarget, Kind: sim.TimelineTargetStarted, Detail: "target started"}
	if in.Runtime == sim.RuntimeExternal {
		// Nothing was started: the developer starts the job.
		started.Kind, started.Detail = "", "waiting for the developer to start the target's job with the env shown (external runtime)"
	}
	put := false
	for _, ev := range held {
		if err == nil && !put && ev.Side == sideTarget {
			started.At, started.Phase = ev.At, ev.Phase
			r.appendLocked(started)
			put = true
		}
		r.appendLocked(ev)
	}
	if err != nil {
		return endf("the target failed to start: %v", err)
	}
	if !put {
		r.appendLocked(started)
	}
	return nil
}

// waitTargetRunning waits until the target runs, is healthy when it has a
// healthcheck, and is connected when the job speaks the socket.
func (r *run) waitTargetRunning(ctx context.Context, timeout time.Duration, needConnected bool) error {
	var err error
	if end := r.waitOr(ctx, func(ctx context.Context) {
		_, err = r.m.waitInstance(ctx, r.mig.Target.Instance, timeout, func(in sim.Instance) bool {
			return in.State == sim.InstanceRunning && in.Healthy && (!needConnected || in.Connected)
		})
	}); end != nil {
		return end
	}
	if errors.Is(err, errTimeout) {
		what := "running"
		if needConnected {
			what = "running and connected"
		}
		return endf("timed out after %s waiting for the target to be %s", timeout, what)
	}
	if err != nil {
		return endf("the target did not start: %v", err)
	}
	return nil
}

// linger keeps the source running until Timeouts.Linger has passed since
// the point of no return, for a job whose output the sink watches: a
// source that goes on producing after source-stopped-output is then caught
// even on runtimes that stop it right after target-applied. The migration
// is still in progress: a target that closes its socket, sends what
// normsim closes it for, or exits meanwhile ends it as at any other step,
// and so does a source whose end came before target-applied, heard late
// (sourceDoneWith).
func (r *run) linger(ctx context.Context, d time.Duration) error {
	sink := r.m.cfg.Sink
	if sink == nil || !sink.Seen(r.src.JobID) {
		return nil
	}
	r.mu.Lock()
	until := r.stoppedAt.Add(d)
	r.mu.Unlock()
	wait := until.Sub(r.m.now())
	if wait <= 0 {
		return nil
	}
	r.record(sim.PhaseStopSource, sideManager, fmt.Sprintf("source kept running %s past the point of no return (linger) so late output shows", d), nil)
	return r.waitOr(ctx, func(ctx context.Context) { pause(ctx, wait) })
}

// crossNoReturn marks the point of no return of an overlap or a
// stopThenStart, unless the user asked to abort first: then it returns
// the reason to end with, and the migration rolls back instead.
func (r *run) crossNoReturn() error {
	if err := r.goingOn(); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.decideLocked(input{kind: inNoReturn}); !r.ponr {
		return endf("%s", r.userAbort)
	}
	r.m.markPassed(r.id)
	return nil
}

// goingOn is why an overlap or a stopThenStart must end before its next
// step, or nil: an event that broke it (disrupted) or the user's abort.
func (r *run) goingOn() error {
	if err := r.disrupted(); err != nil {
		return err
	}
	r.mu.Lock()
	struck, abort := r.struck, r.userAbort
	r.mu.Unlock()
	if abort != "" {
		return endf("%s", abort)
	}
	if struck != "" {
		// A kill, stop or dropped socket landed on a job (a fault armed
		// on its hello, say) after the manager had seen it connected:
		// the move ends with what became of the job, once that is heard.
		r.bindToEnd()
		if err := r.awaitDisruption(); err != nil {
			return err
		}
		return endf("the fault %s", struck)
	}
	return nil
}

// awaitDisruption waits up to exitGrace for the event that breaks the
// migration (an exit, a lost socket) and returns it; nil if none came.
func (r *run) awaitDisruption() error {
	timer := time.NewTimer(exitGrace)
	defer timer.Stop()
	for {
		if err := r.disrupted(); err != nil {
			return err
		}
		select {
		case <-r.events.ready:
		case <-timer.C:
			return nil
		case <-r.m.ctx.Done():
			return nil
		}
	}
}

// AbortMigration stops a running migration the way a job's abort would,
// if it has not passed the point of no return: the migration's owner
// takes the ask in order with what arrived before it, answers, and rolls
// the migration back at once (each side still connected is told abort,
// the target is removed, the source keeps running); it ends aborted with
// the user's act as its reason. Past the point of no return nothing can
// roll back, and the refusal says so.
func (m *Manager) AbortMigration(ctx context.Context, id, why string) (*sim.Migration, error) {
	m.mu.Lock()
	r := m.migrations[id]
	m.mu.Unlock()
	if r == nil {
		done, err := m.MigrationSummary(ctx, id)
		if err != nil {
			return nil, err
		}
		return nil, sim.Errorf(sim.EConflict, "%s", stepUserAbort(id, abortAsk{ended: done.State}))
	}
	reason := "aborted by the user"
	if why = strings.TrimSpace(why); why != "" {
		reason += ": " + protocol.Truncate(why, 200)
	}
	// The owner decides, in order with what arrived before the ask: a
	// source-stopped-output handed on first is the point of no return,
	// and the abort is refused; one after it is late.
	answer := make(chan string, 1)
	r.post(runEvent{kind: evAbort, reason: reason, answer: answer, arrived: time.Now()})
	select {
	case refusal := <-answer:
		if refusal != "" {
			return nil, sim.Errorf(sim.EConflict, "%s", refusal)
		}
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return r.snapshot(), nil
}

type refused struct{ reason string }

func (e *refused) Error() string { return "the source refused: " + e.reason }

// stopSource stops the source: SIGTERM, and SIGKILL after grace.
func (r *run) stopSource(ctx context.Context, grace time.Duration) error {
	r.m.mu.Lock()
	in := r.m.instances[r.src.ID]
	r.m.mu.Unlock()
	if in == nil {
		return nil
	}
	// The target is still being moved, and a source that ended before
	// the target took over broke its promise, however late that is
	// heard: either ends the migration as at any other step.
	if err := r.disrupted(); err != nil {
		return err
	}
	// The source's stop cannot be undone: a normsim killed from here on
	// must not roll the migration back at its next start. (A
	// stopThenStart stops its source before its point of no return.)
	r.m.markPassed(r.id)
	began := r.m.now()
	r.record(sim.PhaseStopSource, sideSource, "stopping the source", nil)
	var stop sim.StopReport
	var err error
	r.during(func() { stop, err = r.m.stopInstance(ctx, in, grace) })
	if err != nil {
		return endf("could not stop the source: %v", err)
	}
	if err := r.disruptedBefore(began); err != nil {
		return err
	}
	how := "source stopped" + externalEnd(in.Runtime, "source")
	if len(stop.Killed) > 0 {
		why := stop.KilledWhy(grace)
		how = fmt.Sprintf("source stopped: it did not exit on SIGTERM (%s) and was killed (SIGKILL)", why)
		r.mu.Lock()
		r.mig.SourceKilled = why
		r.mu.Unlock()
	}
	r.note(sim.TimelineSourceStopped, sim.PhaseStopSource, sideSource, how)
	return nil
}

// externalEnd is what a stop of an external instance adds to its timeline
// event: normsim did not start the process, so it cannot end it; the real
// worker would have signalled it. The job only sees its socket close.
func externalEnd(runtime, side string) string {
	if runtime != sim.RuntimeExternal {
		return ""
	}
	return fmt.Sprintf(": it runs on the external runtime, so normsim only closed its socket (1000 \"instance stopped\"), "+
		"where the real worker would have sent SIGTERM; end your %s process now", side)
}

// waitTargetOutput waits, for a job that sends output (JSON packets to
// the sink, or media to the receiver), until the target's first arrived:
// a media job is running when it produces, and overlap promises both
// produce for a moment.
func (r *run) waitTargetOutput(ctx context.Context, limit time.Duration) {
	sink, recv, judge := r.m.cfg.Sink, r.m.cfg.Media, r.m.cfg.MediaJudge
	job, tgtID := r.src.JobID, r.targetID()
	r.mu.Lock()
	placed := r.tgtPlacedAt
	r.mu.Unlock()
	since := r.start.Add(-mediaBefore)
	packets := sink != nil && sink.Seen(job)
	media := recv != nil && judge != nil && !placed.IsZero() && len(recv.Media(job, since).Datagrams) > 0
	if !packets && !media {
		return
	}
	var pokedPackets, pokedMedia <-chan struct{}
	if packets {
		poke, stop := sink.Watch(job)
		defer stop()
		pokedPackets = poke
	}
	if media {
		poke, stop := recv.Watch(job)
		defer stop()
		pokedMedia = poke
	}
	started := func() bool {
		if packets && slices.ContainsFunc(sink.Packets(job, r.start), func(p sim.Packet) bool { return p.Instance == tgtID }) {
			return true
		}
		if media {
			// Only what came since the target was placed: this runs on
			// every datagram, and a window copied whole each time would
			// cost the seconds before it again and again.
			w := recv.Media(job, placed)
			// Junk from another program on the job's port is not the
			// target producing, as it is not in the seam's verdict.
			return slices.ContainsFunc(w.Datagrams, func(d sim.MediaDatagram) bool {
				return !w.FirstHeard[d.From].Before(placed) && judge.Readable(d.Data)
			})
		}
		return false
	}
	timeout := time.NewTimer(limit)
	defer timeout.Stop()
	for {
		if started() {
			r.record(sim.PhaseStartTarget, sideOutput, "target output started", nil)
			return
		}
		select {
		case <-pokedPackets:
		case <-pokedMedia:
		case <-timeout.C:
			r.record(sim.PhaseStartTarget, sideOutput, "no target output yet; stopping the source anyway", nil)
			return
		case <-ctx.Done():
			return
		}
	}
}

// unholdLogs releases the hold on log writes the cutover took, if any.
func (r *run) unholdLogs() {
	r.mu.Lock()
	release := r.releaseLogs
	r.releaseLogs = nil
	r.mu.Unlock()
	if release != nil {
		release()
	}
}

// finish ends the migration: completed, refused, rolled back (aborted) or
// failed, then measures the output seam.
func (r *run) finish(ctx context.Context, err error) {
	r.flushWrites() // nothing decided before the end is left unwritten
	r.unholdLogs()
	r.mu.Lock()
	// From here on nothing is relayed: a source-stopped-output that
	// arrives now is late, not the point of no return.
	r.decideLocked(input{kind: inBound})
	ponr, phase, tgtID := r.ponr, r.mig.Phase, r.mig.Target.Instance
	if n := r.eventsDropped; n > 0 {
		r.recordLocked(phase, sideManager, fmt.Sprintf("%d events were dropped: the migration's inbox was full", n), nil)
	}
	r.mu.Unlock()
	// What either job may still send about this migration is late, not a
	// protocol error: its answer may already be on the wire.
	r.expire(r.srcNode, r.src.ID)
	if tgtID != "" {
		r.expire(r.tgtNode, tgtID)
		// A target that reconnects from now on, as the job's instance
		// or as a later migration's source, is no target any more.
		if r.tgtNode.Socket != nil {
			r.tgtNode.Socket.Settle(r.src.JobID, tgtID)
		}
	}
	state, reason := stepEnd(err, ponr)
	// The steps are over, so is every pause: a rollback then tells and
	// removes jobs that can act, and the output is judged of a job that
	// runs.
	r.resumePaused()
	if broken := stepBroken(err, state, r.faultStruck()); broken != nil {
		r.mu.Lock()
		r.mig.Broken = broken
		r.mu.Unlock()
	}
	switch state {
	case sim.MigrationRefused:
		r.record(phase, sideSource, "refused: "+reason, nil)
	case sim.MigrationAborted:
		r.rollback(reason, phase)
	case sim.MigrationFailed:
		r.record(phase, sideManager, "failed after the point of no return: "+reason, nil)
	}
	switch state {
	case sim.MigrationCompleted, sim.MigrationFailed:
		r.measureOutput(ctx)
		r.measureMedia(ctx)
	case sim.MigrationAborted:
		r.measureRollbackOutput(ctx)
	}
	// What arrived before the end goes on the timeline before it: late,
	// or discarded from a dropped connection.
	r.handleArrived()
	// Release the job and its instances before the end is visible: a
	// client that reads "completed" may migrate or stop them at once, and
	// must not be told they are still part of this migration (409).
	r.m.mu.Lock()
	delete(r.m.byJob, r.src.JobID)
	delete(r.m.byInstance, r.src.ID)
	delete(r.m.byInstance, r.mig.Target.Instance)
	if src := r.m.instances[r.src.ID]; src != nil && state == sim.MigrationCompleted {
		// In the same critical section as the release: a DELETE of the
		// source is refused by one or the other (Stop).
		src.movedBy = r.id
	}
	for _, id := range []string{r.src.ID, r.mig.Target.Instance} {
		// Only a connected instance can send a frame that crossed the end
		// (see OnSocketEvent, which lets go once its socket closes).
		if in, ok := r.m.instances[id]; ok && id != "" && in.Connected {
			r.m.ended[id] = r
		}
	}
	r.m.mu.Unlock()
	r.mu.Lock()
	now := r.m.now()
	r.mig.State, r.mig.Reason = state, reason
	r.mig.EndedAt = &now
	total := ms(now.Sub(r.start))
	r.mig.Durations.TotalMs = &total
	if !r.readyAt.IsZero() {
		v := ms(r.readyAt.Sub(r.start))
		r.mig.Durations.TargetReadyMs = &v
	}
	if !r.readyAt.IsZero() && !r.appliedAt.IsZero() {
		v := ms(r.appliedAt.Sub(r.readyAt))
		r.mig.Durations.CutoverMs = &v
	}
	j := sim.Judge(&r.mig)
	r.mig.Judgement = &j
	if j.Grade != sim.GradePass {
		blame := ""
		if j.AtFault != "" {
			blame = " (at fault: the " + j.AtFault + ")"
		}
		r.recordLocked(phase, sideManager, fmt.Sprintf("judged %s%s: %s", j.Grade, blame, j.Why), nil)
	}
	r.noteLocked(sim.TimelineEnded, phase, sideManager, "migration "+string(state)+suffix(reason))
	r.mu.Unlock()

	// It leaves memory once it is in the store, so a reader always finds
	// it; while the store cannot write, it is served from memory. Nothing
	// waits for that here: at 10,000 handovers, 4,000 ended migrations'
	// goroutines and stacks waited on the journal's backlog.
	r.m.journal.migrationThen(r.doc(), func() {
		r.m.mu.Lock()
		delete(r.m.migrations, r.id)
		r.m.mu.Unlock()
		r.m.markEnded(r.id) // its end is stored: nothing is left to recover
		r.letEventsGo()
	})
	r.m.publish(sim.EventMigrationEnded, "", r.id, map[string]any{"state": state, "reason": reason})
}

func suffix(reason string) string {
	if reason == "" {
		return ""
	}
	return ": " + reason
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// expire ends what the migration asked of a job (jobsocket's Expire).
func (r *run) expire(node *Node, role string) {
	if node.Socket != nil {
		node.Socket.Expire(r.src.JobID, role)
	}
}

// rollback undoes a migration before the point of no return: abort to each
// side still there but the one that aborted, target removed, source left
// as it is. Every abort is written before the end is visible, and what
// became of each side is on the timeline and in the record (Rollback).
func (r *run) rollback(reason string, phase sim.Phase) {
	r.record(phase, sideManager, "rolling back: "+reason, nil)
	abort := protocol.WorkerFrame{Type: protocol.TypeAbort, MigrationID: r.id, Reason: protocol.Truncate(reason, 200)}
	r.mu.Lock()
	tgtID, abortedBy := r.mig.Target.Instance, r.abortedBy
	r.mu.Unlock()
	rb := &sim.RollbackReport{Told: []string{}}
	// A source a fault killed is not told to abort, nor recorded left
	// running, before its exit has had its moment to be reported.
	r.awaitSignalledSource()
	if r.mig.Strategy == sim.Handover {
		if abortedBy != sideSource && r.srcNode.Socket != nil && r.srcNode.Socket.Connected(r.src.JobID, r.src.ID) {
			if r.send(r.src.ID, r.srcNode, abort) == nil {
				rb.Told = append(rb.Told, sideSource)
			}
		}
		if abortedBy != sideTarget && tgtID != "" && r.tgtNode.Socket != nil && r.tgtNode.Socket.Connected(r.src.JobID, tgtID) {
			r.markTargetTold()
			if r.send(tgtID, r.tgtNode, abort) == nil {
				rb.Told = append(rb.Told, sideTarget)
			}
		}
	}
	if tgtID != "" {
		r.removeTarget(tgtID, phase, rb)
	}
	rb.Source, rb.SourceDetail = r.m.sourceLeft(r.src.ID)
	r.mu.Lock()
	r.mig.Rollback = rb
	r.mu.Unlock()
	if rb.Source == sim.SourceRunning {
		r.record(phase, sideSource, "source left running", nil)
	} else {
		r.record(phase, sideSource, rb.SourceDetail, nil)
	}
}

// markTargetTold stamps the moment from which the target of a rollback
// may produce nothing: the first of its own abort, the worker's abort to
// it, and the start of its removal.
func (r *run) markTargetTold() {
	r.ownDecision(input{kind: inTargetTold, at: r.m.now()})
}

// removeTarget stops and removes a rolled-back migration's target, and
// says how it ended: on SIGTERM, or killed after the stop grace.
func (r *run) removeTarget(tgtID string, phase sim.Phase, rb *sim.RollbackReport) {
	r.m.mu.Lock()
	in := r.m.instances[tgtID]
	r.m.mu.Unlock()
	if in == nil {
		return
	}
	r.markTargetTold()
	rb.Target, rb.TargetDetail = r.m.removeRolledBackTarget(in, r.id, r.timeouts.StopGrace.D(), r.during)
	r.note(sim.TimelineTargetRemoved, phase, sideTarget, rb.TargetDetail)
}

// removeRolledBackTarget stops and removes in, the target of migration
// migID rolled back, and says how it ended (RollbackReport's Target and
// TargetDetail). during runs the stop: a migration's owner handles what
// arrives meanwhile.
func (m *Manager) removeRolledBackTarget(in *instance, migID string, grace time.Duration, during func(func())) (string, string) {
	m.mu.Lock()
	was, connected := in.State, in.Connected
	m.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), grace+10*time.Second)
	var stop sim.StopReport
	var err error
	during(func() { stop, err = m.stopInstance(ctx, in, grace) })
	cancel()
	m.mu.Lock()
	m.removeLocked(in.ID)
	m.mu.Unlock()
	m.deleteStored(in.ID)
	m.publish(sim.EventInstanceRemoved, in.ID, migID, nil)
	var target, detail string
	switch {
	case in.Runtime == sim.RuntimeExternal && !connected:
		// Nothing to close: saying normsim closed a socket would be false.
		target, detail = sim.TargetClosed, "target removed: it runs on the external runtime and had no connection to close "+
			"(its job never connected, or its socket had closed already); normsim starts no process there, so end your target process now if you started one"
	case in.Runtime == sim.RuntimeExternal:
		target, detail = sim.TargetClosed, "target removed"+externalEnd(in.Runtime, "target")
	case len(stop.Killed) > 0:
		target = sim.TargetKilled
		detail = fmt.Sprintf("target removed: it did not exit on SIGTERM (%s) and was killed (SIGKILL)", stop.KilledWhy(grace))
	case was == sim.InstanceFailed || was == sim.InstanceStopped:
		target, detail = sim.TargetGone, "target removed: it had already ended ("+string(was)+")"
	default:
		target, detail = sim.TargetExited, "target removed: it exited on SIGTERM"
	}
	if err != nil {
		detail += fmt.Sprintf(" (the stop reported: %v)", err)
	}
	return target, detail
}

// awaitSignalledSource waits, up to exitGrace, for the exit of a source a
// kill or stop fault signalled and the manager still sees running: the
// signal was delivered, the exit is reported a moment later, and a
// rollback that did not wait would record a killed source as left
// running. A job that ignores SIGTERM is still running after the wait,
// and is recorded so.
func (r *run) awaitSignalledSource() {
	r.mu.Lock()
	signalled := r.sourceSignalled
	r.mu.Unlock()
	if !signalled {
		return
	}
	r.m.mu.Lock()
	in := r.m.instances[r.src.ID]
	running := in != nil && in.State == sim.InstanceRunning
	r.m.mu.Unlock()
	if running {
		r.awaitExit(r.src.ID)
	}
}

// sourceLeft says what a rollback leaves of source id (RollbackReport's
// Source and SourceDetail): running, or gone and how (it exited, a fault
// killed it, normsim stopped it).
func (m *Manager) sourceLeft(id string) (string, string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	in := m.instances[id]
	switch {
	case in == nil:
		return sim.SourceGone, "the source is gone: it was removed"
	case in.State == sim.InstanceRunning:
		return sim.SourceRunning, "left running"
	case in.Error != "":
		return sim.SourceGone, fmt.Sprintf("the source is gone, not left running: it is %s (%s)", in.State, in.Error)
	}
	return sim.SourceGone, fmt.Sprintf("the source is gone, not left running: it is %s", in.State)
}

// measureOutput judges the output seam from what the sink saw, waiting
// briefly for the target's first packets when the job produces output.
func (r *run) measureOutput(ctx context.Context) {
	sink := r.m.cfg.Sink
	r.mu.Lock()
	tgtID := r.mig.Target.Instance
	moments := sim.SeamMoments{SourceStopped: r.stoppedAt, ApplySent: r.applySentAt}
	if len(r.mig.Faults) == 0 {
		// A fault may change or lose what the target was handed.
		moments.Position = r.handedOver
	}
	r.mu.Unlock()
	if sink == nil || tgtID == "" {
		return
	}
	since := r.start.Add(-2 * time.Second)
	unreadable := sink.Unreadable(r.src.JobID, since)
	if !sink.Seen(r.src.JobID) {
		if unreadable != nil {
			// Output that could not be read is still output: say so
			// rather than nothing.
			rep := &sim.OutputReport{Verdict: sim.VerdictUnknown, Detail: "no readable packets"}
			rep.AddUnreadable(unreadable)
			r.setOutput(rep)
		}
		return
	}
	// A source on the external runtime was only told to stop by its
	// socket's close: what it still sends while it drains belongs to an
	// overlap's seam, and is watched for as long as a handover's source.
	drains := r.mig.Strategy == sim.Overlap && r.src.Runtime == sim.RuntimeExternal
	closed := r.m.now()
	r.during(func() {
		awaitTargetPackets(ctx, sink, r.src.JobID, tgtID, since)
		r.awaitLateSource(ctx, moments)
		if drains {
			r.watchSince(ctx, closed)
		}
	})
	rep := sim.AnalyzeSeam(r.src.ID, tgtID, sink.Packets(r.src.JobID, since), sink.Sent(r.src.JobID), moments)
	rep.AddUnreadable(sink.Unreadable(r.src.JobID, since))
	rep.Detail += watchedFor(rep, moments, r.m.now())
	if drains {
		rep.Detail += r.watchedExternal(sideSource, closed)
	}
	r.setOutput(rep)
}

// watchedFor says, where it matters, that the seam was judged on what
// came until a moment: a source that went on sending is caught, not
// counted whole, and a target that starts producing later is not seen.
func watchedFor(rep *sim.OutputReport, at sim.SeamMoments, judged time.Time) string {
	switch {
	case rep.SourceAfterStop > 0 && !at.SourceStopped.IsZero():
		return fmt.Sprintf(" (counted until the seam was judged, %.0f ms after source-stopped-output)", ms(judged.Sub(at.SourceStopped)))
	case rep.Verdict == sim.VerdictNoOutput && rep.FirstTarget == nil:
		return fmt.Sprintf(" (normsim waits up to %s for the target's first packets before it judges the seam: one that starts later is judged as one that sent nothing)", targetPacketsWait)
	}
	return ""
}

// targetPacketsWait bounds how long a seam waits for the target's first
// packets (awaitTargetPackets).
const targetPacketsWait = 2 * time.Second

// awaitTargetPackets waits up to targetPacketsWait for the target's first
// three packets.
func awaitTargetPackets(ctx context.Context, sink sim.OutputSink, jobID, tgtID string, since time.Time) {
	poke, stop := sink.Watch(jobID)
	defer stop()
	deadline := time.NewTimer(targetPacketsWait)
	defer deadline.Stop()
	for {
		n := 0
		for _, p := range sink.Packets(jobID, since) {
			if p.Instance == tgtID {
				n++
			}
		}
		if n >= 3 {
			return
		}
		select {
		case <-poke:
		case <-deadline.C:
			return
		case <-ctx.Done():
			return
		}
	}
}

// awaitLateSource waits, for a handover past its point of no return, until
// the source has had Timeouts.Linger since its source-stopped-output to
// show whether it kept producing (and at least long enough to tell that
// from a packet in flight, sim.InFlightByNumber): a completed handover
// lingered before it stopped the source, but one that failed right after
// the point of no return (the worker aborting on target-applied, say)
// would otherwise be judged before a source that kept producing had sent
// its next packet, and the source forgiven.
func (r *run) awaitLateSource(ctx context.Context, at sim.SeamMoments) {
	if !at.SourceStopped.IsZero() {
		r.watchSince(ctx, at.SourceStopped)
	}
}

// watchSince waits until a job told to stop producing at from has had
// Timeouts.Linger to show whether it goes on (and at least long enough to
// tell that from a packet in flight, sim.InFlightByNumber): what it sends
// meanwhile is in the seam normsim judges.
func (r *run) watchSince(ctx context.Context, from time.Time) {
	wait := max(r.timeouts.Linger.D(), sim.InFlightByNumber+sim.InFlight)
	if left := time.Until(from.Add(wait)); left > 0 {
		pause(ctx, left)
	}
}

// watchedExternal says in a seam's detail how long normsim watched a job
// on the external runtime, which it stops only by closing its socket.
func (r *run) watchedExternal(side string, from time.Time) string {
	return fmt.Sprintf(" (the %s runs on the external runtime, where normsim only closes its socket: what it sent was watched until %.0f ms after that)",
		side, ms(r.m.now().Sub(from)))
}

// measureRollbackOutput holds a rolled-back handover's target to its
// promise: it never got cutover-apply, so every packet it sent is one too
// many, and those after it was told abort are counted apart. A target
// normsim stopped is removed by now, so all it sent is in; one on the
// external runtime only had its socket closed, and may go on: it is
// watched after it was told (watchSince).
func (r *run) measureRollbackOutput(ctx context.Context) {
	sink := r.m.cfg.Sink
	r.mu.Lock()
	tgtID, told := r.mig.Target.Instance, r.targetToldAt
	r.mu.Unlock()
	if sink == nil || tgtID == "" || r.mig.Strategy != sim.Handover || !sink.Seen(r.src.JobID) {
		return
	}
	external := r.rt.Name() == sim.RuntimeExternal && !told.IsZero()
	if external {
		r.during(func() { r.watchSince(ctx, told) })
	}
	var before, after int64
	var last time.Time
	for _, p := range sink.Packets(r.src.JobID, r.start) {
		if p.Instance != tgtID {
			continue
		}
		switch {
		case told.IsZero() || p.At.Before(told.Add(sim.InFlight)):
			before++
		default:
			after++
			last = p.At
		}
	}
	if before == 0 && after == 0 {
		return
	}
	rep := &sim.OutputReport{Verdict: sim.VerdictOverlap, AtFault: sideTarget, TargetBeforeApply: before + after, TargetAfterAbort: after}
	var parts []string
	if after > 0 {
		parts = append(parts, fmt.Sprintf("the target sent %s after it was told abort (the last %.1f ms after it)",
			sim.Plural(after, "packet"), ms(last.Sub(told))))
	}
	switch {
	case before > 0 && after > 0:
		parts = append(parts, fmt.Sprintf("it sent %s before that, though it never got cutover-apply", sim.Plural(before, "packet")))
	case before > 0:
		parts = append(parts, fmt.Sprintf("the target sent %s, though it never got cutover-apply", sim.Plural(before, "packet")))
	}
	rep.Detail = strings.Join(parts, "; ")
	if external {
		rep.Detail += r.watchedExternal(sideTarget, told)
	}
	r.setOutput(rep)
}

func (r *run) setOutput(rep *sim.OutputReport) {
	r.mu.Lock()
	r.mig.Output = rep
	r.mu.Unlock()
	r.recordHere(sideOutput, "output "+rep.Verdict+": "+rep.Detail, nil)
}
