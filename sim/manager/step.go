package manager

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/normsim/normsim/protocol"
	"github.com/normsim/normsim/sim"
)

// facts are what a migration's owner decides with beside its record (the
// phase and end state are the record's, sim.Migration): each kept here
// once, changed only by step (run.decide keeps what it returns;
// TestOnlyStepChangesTheFacts), read by others under run.mu.
type facts struct {
	// ponr says the migration passed its point of no return: from here
	// nothing rolls back.
	ponr bool
	// ending is set the moment the owner takes what binds the migration
	// to end (an abort, a lost socket, an exit, a timeout, or finish):
	// from then on no frame is relayed, and a frame that arrived after it
	// is a late one, recorded and ignored.
	ending bool
	// abortedBy is the side whose abort ended the migration: the other
	// side is told, not the one that said it.
	abortedBy string
	// userAbort is why the user asked to abort the migration, once they
	// have: from then on the point of no return is never crossed.
	userAbort string
	// readyAt: the target said target-ready (a handover), or took over
	// (the other strategies). appliedAt: its target-applied. stoppedAt:
	// the source said source-stopped-output.
	readyAt, appliedAt, stoppedAt time.Time
	// applySentAt is taken as cutover-apply is decided: the target can
	// produce nothing legitimately before it.
	applySentAt time.Time
	// handedOver is the position the source handed over in
	// source-stopped-output, which the target is sent as cutover-apply.
	handedOver json.RawMessage
	// targetToldAt is, in a rollback, when the target was told to stop:
	// its own abort, the worker's abort to it, or its removal, whichever
	// came first.
	targetToldAt time.Time
	// initialState is the source's state a handover target gets on
	// connect, and initialSize the size of that initial-state frame.
	initialState json.RawMessage
	initialSize  int
	// waiting is what the step in progress waits for from a job, until
	// when; zero between such waits.
	waiting wait
	// timedOut is the deadline of the wait that timed out, if one did:
	// how late a held frame comes is told from it.
	timedOut time.Time
}

// wait is what a step waits for from one job: frames of the given types,
// or, with none, its connection; and until when.
type wait struct {
	role     string
	frames   []string
	deadline time.Time
}

// accepts says whether a socket event is what the wait takes.
func (w wait) accepts(ev sim.SocketEvent) bool {
	if ev.Role != w.role || w.role == "" {
		return false
	}
	if w.frames == nil {
		return ev.Kind == sim.SocketConnected
	}
	return ev.Kind == sim.SocketFrame && slices.Contains(w.frames, ev.Frame.Type)
}

// state is what step decides with.
type state struct {
	id       string
	strategy sim.Strategy
	phase    sim.Phase
	ended    sim.MigrationState // "" while the migration runs
	facts
}

// inputKind is what happened, as step sees it.
type inputKind int

const (
	inSocket    inputKind = iota + 1 // a job's socket: a frame, a connection, a close
	inRuntime                        // a runtime's report on an instance (exited: its exit)
	inUserAbort                      // the user asks to abort (reason)
	// What the owner's own steps decide goes through step too, so that
	// step is the one writer of the facts:
	inBound      // bound to end: a timeout, a disruption, a worker-abort fault, a relay over the frame cap, the end
	inState      // the source's state for the target (state, size)
	inNoReturn   // an overlap's or a stopThenStart's point of no return, unless the user asked to abort
	inTookOver   // the target took over: the seam's moment (at)
	inApplied    // the target's target-applied was taken (at)
	inTargetTold // in a rollback, the target is told to stop (at)
	inAwait      // a step begins to wait for a job (wait)
	inWaited     // the wait ended: taken, broken off or timed out
	inTimedOut   // the wait's deadline passed with nothing it takes
)

// input is one event the owner takes, or one decision of its steps, as
// step sees it.
type input struct {
	kind inputKind
	side string // whose socket
	// socket is a socket event; recorded says its frame is on the
	// timeline already (a fault's passage recorded it).
	socket   sim.SocketEvent
	recorded bool
	// late says the listener judged the frame late; arrived is when it
	// arrived (as its hold ended, for one a fault held), which is what
	// the deadline of the wait in progress judges, and when a phase it
	// moves the migration to began.
	late    bool
	arrived time.Time
	// held is how long a delay-frame fault held the frame, and lateBy how
	// late it came for what (run.lateByLocked), for one that is late.
	held   time.Duration
	lateBy string
	// exited says a runtime event is the instance's exit.
	exited bool
	// reason is why the user asks to abort.
	reason string
	// at is the moment an owner's decision is about; state and size the
	// source's state and the size of the initial-state frame it makes;
	// wait what a step begins to wait for.
	at    time.Time
	state json.RawMessage
	size  int
	wait  wait
	now   time.Time
}

// effectKind is one kind of thing step asks the owner to do.
type effectKind int

const (
	doRecord     effectKind = iota + 1 // a timeline entry (phase, side, kind, detail, frame)
	doMove                             // enter phase: each side may send what it asks (asks)
	doHoldLogs                         // hold log writes until the cutover ends
	doRelay                            // write frame to side, with payload
	doFire                             // fire the faults armed on frame
	doHandOn                           // hand the event on to the migration's steps
	doAnswer                           // answer the user's abort: detail is the refusal, "" taken
	doMarkPassed                       // make the point of no return durable, before what crosses it is written
)

// effect is one thing step asks the owner to do, as data: the owner
// carries them out in order (run.decide).
type effect struct {
	do      effectKind
	phase   sim.Phase
	side    string
	kind    sim.TimelineKind
	detail  string
	info    *sim.FrameInfo
	frame   string
	payload json.RawMessage
}

// entry is the effect of a timeline entry.
func entry(phase sim.Phase, side, detail string, info *sim.FrameInfo) effect {
	return effect{do: doRecord, phase: phase, side: side, detail: detail, info: info}
}

// noted is the effect of a timeline entry of a kind clients act on.
func noted(kind sim.TimelineKind, phase sim.Phase, side, detail string) effect {
	return effect{do: doRecord, kind: kind, phase: phase, side: side, detail: detail}
}

// step decides what an event does to a migration: the state it leaves
// and what must be done, in order. It is pure. Its caller is run.decide,
// on the owner (or, once the owner has let go, on whoever posts the
// event: afterEnd), so the facts it changes have one writer at a time. The
// strategies' steps (strategies.go) then see the event if it is handed on.
func step(s state, in input) (state, []effect) { return stepTo(nil, s, in) }

// stepTo is step appending its effects to dst: the owner hands it one
// buffer again and again (run.decide), so deciding an event allocates
// nothing for them.
func stepTo(dst []effect, s state, in input) (state, []effect) {
	handOn := effect{do: doHandOn}
	switch in.kind {
	case inSocket:
		return stepSocket(dst, s, in)
	case inRuntime:
		if in.exited {
			// Bound to end: nothing is relayed past it.
			s.ending = true
		}
		return s, append(dst, handOn)
	case inUserAbort:
		// Decided as of when it arrived, as a job's frame is: one that
		// came at or after the deadline of the wait in progress finds the
		// wait timed out, whether or not its timer has fired yet.
		timedOut := stepDeadline(s.waiting.deadline, in.arrived, func() bool { return true })
		refusal := stepUserAbort(s.id, abortAsk{ended: s.ended, strategy: s.strategy, ponr: s.ponr, aborting: s.userAbort, ending: s.ending, timedOut: timedOut})
		if refusal != "" {
			return s, append(dst, effect{do: doAnswer, detail: refusal})
		}
		s.userAbort = in.reason
		// A source-stopped-output that arrives from now on is late, not
		// the point of no return.
		s.ending = true
		s.abortedBy = sideManager
		return s, append(dst,
			noted(sim.TimelineAbortRequested, s.phase, sideManager, "the user asked to abort"+strings.TrimPrefix(in.reason, "aborted by the user")),
			effect{do: doAnswer},
			handOn,
		)
	}
	return stepOwn(s, in), dst
}

// stepOwn is step for a decision of the owner's own steps (inBound,
// inState, inNoReturn, …): it changes a fact and asks nothing more of
// the owner, so it returns the state alone (run.decideLocked).
func stepOwn(s state, in input) state {
	switch in.kind {
	case inBound:
		// From here nothing is relayed, and the point of no return can
		// no longer be crossed.
		s.ending = true
	case inState:
		s.initialState, s.initialSize = in.state, in.size
	case inNoReturn:
		// The user's abort came first: the migration rolls back instead.
		if s.userAbort == "" {
			s.ponr = true
		}
	case inTookOver:
		s.readyAt = in.at
	case inApplied:
		s.appliedAt = in.at
	case inAwait:
		s.waiting = in.wait
	case inWaited:
		s.waiting = wait{}
	case inTimedOut:
		// One decision per deadline: what arrived before it was taken
		// first; from here what comes is late.
		s.timedOut = s.waiting.deadline
		s.ending = true
	case inTargetTold:
		// The first of the target's own abort, the worker's abort to it
		// and its removal.
		if s.targetToldAt.IsZero() {
			s.targetToldAt = in.at
		}
	default:
		panic(fmt.Sprintf("manager: input kind %d is not an owner's decision", in.kind))
	}
	return s
}

// stepSocket is step for what a job's socket reported: a frame, its
// connection, its close.
func stepSocket(dst []effect, s state, in input) (state, []effect) {
	ev, side := in.socket, in.side
	f := ev.Frame
	var fs frameStep
	var info *sim.FrameInfo
	if ev.Kind == sim.SocketFrame {
		// A frame is decided as of when it arrived: one handed on at or
		// after the deadline of the wait it is about (what the wait
		// takes, or an abort) is late, though the owner takes it before
		// its timer fires; one handed on before it is on time, though
		// taken after. The answer to an ask a relay made since is not
		// about the wait in progress.
		late := in.late || s.ending || stepDeadline(s.waiting.deadline, in.arrived, func() bool {
			return f.Type == protocol.TypeAbort || s.waiting.accepts(ev)
		})
		fs = stepFrame(s.phase, late, side, f.Type)
		info = frameInfo(dirIn, f.Type, ev.Size, payloadOf(f))
	}
	switch {
	case fs.late && in.held > 0:
		when := in.lateBy
		if when == "" {
			when = "after the migration was bound to end"
		}
		return s, append(dst, entry(s.phase, side, fmt.Sprintf("late %s from the %s: held %s by a delay-frame fault, it came %s; ignored", eventDetail(ev), side, in.held, when), info))
	case fs.late:
		return s, append(dst, entry(s.phase, side, lateDetail(ev, side), info))
	}
	effs := dst
	switch ev.Kind {
	case sim.SocketFrame:
		if !in.recorded {
			effs = append(effs, entry(s.phase, side, eventDetail(ev), info))
		}
		if fs.aborts {
			// In order with the relays: an answer the other side sent
			// after this abort is late.
			s.ending = true
			s.abortedBy = side
			if side == sideTarget && s.targetToldAt.IsZero() {
				s.targetToldAt = ev.At
			}
		}
		relay := effect{do: doRelay, frame: fs.relay, payload: f.Payload}
		switch fs.next {
		case sim.PhaseCutoverReady:
			s.readyAt = ev.At
			s.phase = fs.next
			relay.side = sideSource
			// The cutover has the CPU; the log writes wait for its end.
			effs = append(effs, effect{do: doMove, phase: s.phase}, effect{do: doHoldLogs}, relay)
		case sim.PhaseCutoverApply:
			s.stoppedAt = ev.At
			s.ponr = true
			s.phase = fs.next
			s.applySentAt = in.now
			s.handedOver = f.Payload
			relay.side = sideTarget
			effs = append(effs, effect{do: doMove, phase: s.phase},
				noted(sim.TimelinePointOfNoReturn, s.phase, sideManager, "point of no return: the source stopped its output"),
				effect{do: doMarkPassed}, relay)
		}
		effs = append(effs, effect{do: doFire, frame: f.Type})
	case sim.SocketConnected:
		// Faults armed on the hello fired as the listener read it
		// (fireAtHelloLocked); these fire only those of a migration that
		// began between that and now.
		effs = append(effs,
			noted(sim.TimelineConnected, s.phase, side, "connected (hello accepted)"),
			effect{do: doFire, frame: protocol.TypeHello},
			effect{do: doFire, frame: protocol.TypeHelloAck})
		if side == sideTarget && s.initialState != nil {
			// The listener wrote hello-ack and initial-state before it told
			// us of the connection, and reads the target's next frame only
			// after this: recorded here, they stay ahead of the target's
			// answer in the timeline.
			effs = append(effs,
				entry(s.phase, sideTarget, "hello-ack and initial-state sent", frameInfo(dirOut, protocol.TypeInitialState, s.initialSize, s.initialState)),
				effect{do: doFire, frame: protocol.TypeInitialState})
			// The target has its state: the handover waits for its
			// target-ready. The phase moves here, in order with the
			// target's frames, which this socket reads only after.
			if next, ok := stepConnected(s.phase, s.ending, side, true); ok {
				s.phase = next
				effs = append(effs, effect{do: doMove, phase: next})
			}
		}
	case sim.SocketDisconnected:
		s.ending = true
		effs = append(effs, noted(sim.TimelineSocketClosed, s.phase, side, socketClosed(ev)))
	}
	return s, append(effs, effect{do: doHandOn})
}

// lateDetail is the timeline entry of a frame that came late, and why.
func lateDetail(ev sim.SocketEvent, side string) string {
	why := "it crossed the end of the migration on the wire"
	if ev.Reason != "" {
		why = ev.Reason
	}
	return fmt.Sprintf("late %s from the %s: %s; ignored", eventDetail(ev), side, why)
}
