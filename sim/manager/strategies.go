package manager

import (
	"context"
	"fmt"
	"time"

	"github.com/normsim/normsim/protocol"
	"github.com/normsim/normsim/sim"
)

// act is one kind of step a migration's owner takes (run.do).
type act int

const (
	askState       act = iota // get-state to the source, its state (or refusal) back
	prepareTarget             // place the target on its node, not started
	placeTarget               // place the target and start it
	startTarget               // start the prepared target
	awaitConnected            // the target's job connects: hello-ack and initial-state
	awaitFrame                // a frame from a side's job
	awaitApplied              // the target's target-applied, its result recorded
	awaitRunning              // the target runs: healthy if it has a check, connected if the job speaks the socket
	targetRunning             // the timeline says the target runs
	awaitOutput               // the target's first packet, for a job the sink has seen output from
	goOn                      // nothing broke the move meanwhile (run.goingOn)
	noReturn                  // the point of no return, unless the user asked to abort first
	targetUp                  // the moment the target took over, for the seam
	linger                    // the source lingers past the point of no return (run.linger)
	stopSource                // SIGTERM to the source, SIGKILL after the stop grace
)

// stage is one row of a strategy's table.
type stage struct {
	act act
	// enter is the phase the migration enters as the step begins; ""
	// keeps the phase it is in (a handover's cutover phases are moved by
	// the frames that move them: cutovers).
	enter sim.Phase
	// side and frame name the frame awaitFrame waits for.
	side, frame string
	// timeout names the Timeouts field that bounds the step's wait.
	timeout string
	// withState: the target placed is handed the source's state as it
	// connects (hello-ack with the migration, then initial-state).
	withState bool
}

// strategies are the steps a migration takes, in order. The first that
// fails ends the migration (finish): rolled back before the point of no
// return, failed after it. What the jobs send between the steps moves a
// handover through its cutover (transitions.go), and a disruption or the
// user's abort breaks off the step that waits.
var strategies = map[sim.Strategy][]stage{
	sim.Handover: {
		{act: askState, enter: sim.PhaseGetState, timeout: "state"},
		{act: prepareTarget, enter: sim.PhasePlaceTarget, withState: true},
		{act: startTarget},
		{act: awaitConnected, timeout: "targetStart"}, // moves to target-ready
		{act: awaitFrame, side: sideTarget, frame: protocol.TypeTargetReady, timeout: "targetReady"},
		// Relayed as cutover-apply: the point of no return.
		{act: awaitFrame, side: sideSource, frame: protocol.TypeSourceStoppedOutput, timeout: "stop"},
		{act: awaitApplied, timeout: "apply"},
		{act: linger, timeout: "linger"},
		{act: stopSource, enter: sim.PhaseStopSource, timeout: "stopGrace"},
	},
	sim.Overlap: {
		{act: placeTarget, enter: sim.PhaseStartTarget},
		{act: awaitRunning, timeout: "targetStart"},
		{act: targetRunning},
		{act: awaitOutput, timeout: "targetReady"},
		{act: noReturn},
		{act: targetUp},
		{act: stopSource, enter: sim.PhaseStopSource, timeout: "stopGrace"},
	},
	sim.StopThenStart: {
		{act: prepareTarget, enter: sim.PhasePrepareTarget},
		// Stopping the source is what cannot be undone: what broke the
		// move while the target was prepared rolls it back before that.
		{act: goOn},
		{act: stopSource, enter: sim.PhaseStopSource, timeout: "stopGrace"},
		{act: noReturn},
		{act: startTarget, enter: sim.PhaseStartTarget},
		{act: awaitRunning, timeout: "targetStart"},
		{act: goOn}, // past the point of no return: failed
		{act: targetUp},
		{act: targetRunning},
	},
}

// runSteps takes the strategy's steps in order, and returns what ended
// the migration early, or nil.
func (r *run) runSteps(ctx context.Context, steps []stage) error {
	for _, s := range steps {
		if s.enter != "" {
			r.setPhase(s.enter)
		}
		if err := r.do(ctx, s); err != nil {
			return err
		}
	}
	return nil
}

// do carries out one step.
func (r *run) do(ctx context.Context, s stage) error {
	limit := r.limit(s.timeout)
	switch s.act {
	case askState:
		return r.askState(ctx, limit)
	case prepareTarget:
		o := launchOpts{}
		if s.withState {
			r.mu.Lock()
			o = launchOpts{initialState: r.initialState, hasInitial: true, handoverTarget: true}
			r.mu.Unlock()
		}
		_, err := r.placeTarget(ctx, true, o)
		return err
	case placeTarget:
		_, err := r.placeTarget(ctx, false, launchOpts{})
		return err
	case startTarget:
		return r.startTarget(ctx)
	case awaitConnected:
		// hello-ack and initial-state are recorded as the target
		// connects (handleSocket), which moves a handover to
		// target-ready.
		_, err := r.await(ctx, "the target to connect", limit, wait{role: r.targetID()})
		return err
	case awaitFrame:
		role := r.src.ID
		if s.side == sideTarget {
			role = r.targetID()
		}
		_, err := r.await(ctx, s.frame, limit, wait{role: role, frames: []string{s.frame}})
		return err
	case awaitApplied:
		return r.awaitApplied(ctx, limit)
	case awaitRunning:
		return r.waitTargetRunning(ctx, limit, r.src.Connected && r.tgtNode.HasJobSocket())
	case targetRunning:
		r.record(sim.PhaseStartTarget, sideTarget, "target running", nil)
		return nil
	case awaitOutput:
		return r.waitOr(ctx, func(ctx context.Context) { r.waitTargetOutput(ctx, limit) })
	case goOn:
		return r.goingOn()
	case noReturn:
		return r.crossNoReturn()
	case targetUp:
		r.ownDecision(input{kind: inTookOver, at: r.m.now()})
		return nil
	case linger:
		return r.linger(ctx, limit)
	case stopSource:
		return r.stopSource(ctx, limit)
	}
	panic(fmt.Sprintf("manager: a strategy step with no act %d", s.act))
}

// limit is the duration of the Timeouts field named name; 0 for none.
func (r *run) limit(name string) time.Duration {
	if name == "" {
		return 0
	}
	t := r.timeouts
	d, ok := t.Field(name)
	if !ok {
		panic("manager: a strategy step names no timeout " + name)
	}
	return d.D()
}

func (r *run) targetID() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.mig.Target.Instance
}

// askState asks the source for its state, which the target is handed as
// its initial state.
func (r *run) askState(ctx context.Context, limit time.Duration) error {
	src := r.src
	if err := r.send(src.ID, r.srcNode, protocol.WorkerFrame{Type: protocol.TypeGetState, MigrationID: r.id}); err != nil {
		return endf("could not ask the source for its state: %v", err)
	}
	ev, err := r.await(ctx, "the source's state", limit, wait{role: src.ID, frames: []string{protocol.TypeState, protocol.TypeStateRefused}})
	if err != nil {
		return err
	}
	if ev.socket.Frame.Type == protocol.TypeStateRefused {
		return &refused{ev.socket.Frame.Reason}
	}
	state := ev.socket.Frame.Payload
	initial, _ := protocol.WorkerFrame{Type: protocol.TypeInitialState, MigrationID: r.id, Payload: state}.Marshal()
	if len(initial) > protocol.MaxFrameBytes {
		// The target's client would close on it (4413): refuse now,
		// while nothing is placed and the source can simply go on.
		return endf("the source's state cannot be handed to a target: as initial-state it is %d bytes, over the job socket's %d-byte frame cap (the state frame was %d bytes)",
			len(initial), protocol.MaxFrameBytes, ev.socket.Size)
	}
	r.ownDecision(input{kind: inState, state: state, size: len(initial)})
	return nil
}

// awaitApplied waits for the target's target-applied and records what it
// applied; the target has answered all it was asked.
func (r *run) awaitApplied(ctx context.Context, limit time.Duration) error {
	tgtID := r.targetID()
	ev, err := r.await(ctx, protocol.TypeTargetApplied, limit, wait{role: tgtID, frames: []string{protocol.TypeTargetApplied}})
	r.unholdLogs()
	if err != nil {
		return err
	}
	f := ev.socket.Frame
	r.mu.Lock()
	r.decideLocked(input{kind: inApplied, at: ev.socket.At})
	if f.Applied != nil {
		r.mig.Result.Applied = f.Applied
	}
	for _, x := range f.Failed {
		r.mig.Result.Failed = append(r.mig.Result.Failed, sim.FailedApply{ID: x.ID, Reason: x.Reason})
	}
	r.mig.Result.SkewMs = f.SkewMs
	r.mu.Unlock()
	// The target has answered its ask; a second target-applied is late.
	// But the migration is in progress until its end, the source's linger
	// and stop included, and the target may still abort it: past the
	// point of no return that fails it (a close frame of its own does too).
	r.expire(r.tgtNode, tgtID)
	if r.tgtNode.Socket != nil {
		r.tgtNode.Socket.Expect(r.src.JobID, tgtID, protocol.TypeAbort)
	}
	return nil
}
