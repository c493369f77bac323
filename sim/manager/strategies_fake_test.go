package manager_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/normsim/normsim/protocol"
	"github.com/normsim/normsim/sim"
)

// Overlap and stopThenStart through the whole engine, with the jobs played
// by the test over fake sockets on the fake runtime: no listener, process
// or database. Each row plays the jobs and says how the migration must
// end, with the docs' rule it rests on (printed when the row fails):
//
//   - overlap (start-target → stop-source) passes its point of no return
//     once its target runs and the source is to be stopped; stopThenStart
//     (prepare-target → stop-source → start-target) once its source was
//     stopped (migrations.md, Aborting a migration). Before it anything that
//     ends the move rolls it back: aborted, the target removed, the source
//     left as it was. After it nothing rolls back: a stopThenStart whose
//     target does not start is failed (contract.md, stopThenStart).
//   - The jobs exchange no frame beyond hello-ack (contract.md, overlap),
//     so neither job is ever sent one, not even abort.
//   - validateFaults accepts every kind for these strategies, but no frame
//     is relayed: a fault armed on a frame fires only on the hello of a job
//     that connects while the move runs (the target's), as the manager
//     learns of it, or on hello-ack, which the listener answers it with
//     (faults.md). A fault armed on any other frame never fires.

// strategyCase is one way an overlap or a stopThenStart goes.
type strategyCase struct {
	name     string
	timeouts sim.Timeouts
	faults   []sim.Fault
	// output: the job sends packets to the output sink, so an overlap
	// also waits for the target's first packet.
	output bool
	// before readies the jobs before the migration is asked for.
	before func(t *testing.T, s *strategySim)
	// joins plays a well-behaved target: its job dials as its process
	// starts, before the runtime's start call returns (join).
	joins bool
	// play drives the jobs from the migration's start, if set.
	play func(t *testing.T, s *strategySim)
	// ends are the ends the rule allows: one where it fixes the end, two
	// where a fault lands just as the move may pass its point of no return.
	ends []strategyEnd
	// rollback is what the record of an aborted move says.
	rollback wantRollback
	// notes must be on the timeline, in this order.
	notes []timelineNote
	// neverFires: no armed fault may fire (nothing it is armed on passes).
	neverFires bool
	// within is how long the end may take once play returns, where the
	// docs want it at once (default: long enough for a busy machine).
	within time.Duration
	// after checks what is particular to the row once the move ended.
	after func(t *testing.T, s *strategySim, m *sim.Migration)
	// rule is what the docs say the row's end rests on.
	rule string
}

// strategyEnd is an end state, the phase it is reached in, and a part of
// its reason ("": the reason is empty).
type strategyEnd struct {
	state  sim.MigrationState
	phase  sim.Phase
	reason string
}

func (e strategyEnd) String() string {
	return fmt.Sprintf("%s in %s with %q", e.state, e.phase, e.reason)
}

// wantRollback is what an aborted move's rollback record says.
type wantRollback struct {
	target       string // how the target was removed; "" for any way
	source       string // sim.SourceRunning or sim.SourceGone
	sourceDetail string // a part of what became of the source
}

// timelineNote is a timeline entry; an empty field matches anything.
type timelineNote struct {
	phase  sim.Phase
	side   string
	kind   sim.TimelineKind
	noKind bool   // an entry without a kind: a note
	detail string // a part of it
}

func (n timelineNote) matches(ev sim.MigrationEvent) bool {
	return (n.phase == "" || ev.Phase == n.phase) && (n.side == "" || ev.Side == n.side) &&
		(n.kind == "" || ev.Kind == n.kind) && (!n.noKind || ev.Kind == "") && strings.Contains(ev.Detail, n.detail)
}

func (n timelineNote) String() string {
	return fmt.Sprintf("{phase %q side %q kind %q noKind %t detail %q}", n.phase, n.side, n.kind, n.noKind, n.detail)
}

// The ends and entries the tables use.
func abortedIn(p sim.Phase, reason string) strategyEnd {
	return strategyEnd{sim.MigrationAborted, p, reason}
}
func failedIn(p sim.Phase, reason string) strategyEnd {
	return strategyEnd{sim.MigrationFailed, p, reason}
}
func completedIn(p sim.Phase) strategyEnd { return strategyEnd{sim.MigrationCompleted, p, ""} }

var (
	leftRunning = wantRollback{source: sim.SourceRunning}
	// A target the rollback found ended already, or stopped on SIGTERM.
	targetGoneSourceRunning     = wantRollback{target: sim.TargetGone, source: sim.SourceRunning}
	targetExitedSourceRunning   = wantRollback{target: sim.TargetExited, source: sim.SourceRunning}
	sourceLeftRunning           = timelineNote{side: "source", detail: "source left running"}
	targetRemoved               = timelineNote{side: "target", kind: sim.TimelineTargetRemoved}
	sourceStopped               = timelineNote{phase: sim.PhaseStopSource, side: "source", kind: sim.TimelineSourceStopped}
	handoverFrames, handoverOns = neverPassedFrames()
)

// faultFired is the timeline entry of an armed fault firing.
func faultFired(kind, side, on string) timelineNote {
	who := "the " + side
	if side == "" {
		who = "the migration"
	}
	return timelineNote{side: "manager", kind: sim.TimelineFault, detail: fmt.Sprintf("fault: %s %s (armed on %s)", kind, who, on)}
}

// The rules the rows rest on, as the docs state them.
const (
	ruleRollsBack = "contract.md, Abort before and after the point of no return: before it, an abort, a phase timeout, " +
		"a lost socket or an exited job on either side, a user's abort or a fault rolls the move back (aborted: the target " +
		"removed, the source left as it was); engine.md: once a move is bound to end (an exit, a lost socket, ...) the point " +
		"of no return can no longer be crossed"
	ruleFailsAfter = "contract.md: after the point of no return a job's abort, a timeout, a lost socket or an exit makes the " +
		"migration failed, nothing rolls back; a stopThenStart target that does not start leaves it failed (the source is " +
		"already stopped); migrations.md: completed means the target runs and the source is stopped"
	ruleHelloFault = "faults.md: a kill, stop, pause, drop-socket or worker-abort armed on hello or hello-ack fires as the " +
		"listener reads the hello, before hello-ack; one armed on a frame of the job it hits lands exactly there, before the worker " +
		"acts on that frame, which is lost with the job; worker-abort: rolled back before the point of no return, failed after"
	ruleUserAbort = "migrations.md, Aborting a migration: before the point of no return the user's abort rolls back at the " +
		"next step (only a runtime start in progress is waited for), the target removed, the source kept running, and " +
		"the move ends aborted with the reason \"aborted by the user: …\"; past it (an overlap's target is running and its " +
		"source is being stopped; a stopThenStart's source was stopped) it is refused with 409"
	ruleNeverFires = "faults.md: on is a frame type, the fault fires when such a frame passes; contract.md: in an overlap or " +
		"stopThenStart the jobs exchange no frame beyond hello-ack, so a fault armed on any other frame never fires and " +
		"changes nothing"
	ruleWaitForSocket = "migrations.md, choices where the contract is silent: overlap and stopThenStart wait for the socket " +
		"when the source was connected and the target node has a listener; contract.md: targetStart runs from the target " +
		"placed to running, and connected if the source was"
	ruleStopGrace = "contract.md: stopGrace is SIGTERM → SIGKILL whenever normsim stops an instance; migrations.md: the " +
		"rollback record says the target was killed when it did not exit within the stop grace"
)

// overlapCases: start-target → stop-source; the point of no return is
// passed once the target runs and the source is to be stopped.
func overlapCases() []strategyCase {
	const (
		startTarget = sim.PhaseStartTarget
		stopSource  = sim.PhaseStopSource
	)
	cases := []strategyCase{
		{
			name:  "plain move: the target starts and connects, then the source is stopped",
			joins: true,
			ends:  []strategyEnd{completedIn(stopSource)},
			notes: overlapSteps(),
			rule:  "contract.md, overlap: normsim starts the target, waits until it runs (connected, as the source was), then stops the source",
		},
		{
			name:   "a source that was not connected: the target runs once started, and is not waited for on the socket",
			before: theSourceIsNotConnected,
			play:   func(t *testing.T, s *strategySim) { s.awaitTargetStart(t) }, // its job never dials
			ends:   []strategyEnd{completedIn(stopSource)},
			notes:  []timelineNote{{phase: startTarget, side: "target", detail: "target running"}, sourceStopped},
			rule:   ruleWaitForSocket,
		},
		{
			name:   "a job with output: the source is stopped once the target's first packet came",
			output: true,
			before: theSourceProduces,
			play: func(t *testing.T, s *strategySim) {
				tgt := s.connectTarget(t)
				s.produce(tgt.role, 4, 6)
			},
			ends:  []strategyEnd{completedIn(stopSource)},
			notes: []timelineNote{{phase: startTarget, side: "output", detail: "target output started"}, sourceStopped},
			rule:  "contract.md, overlap: if the job sends packets to the output sink, normsim also waits (up to targetReady) for the target's first packet before it stops the source",
		},
		{
			name:     "targetReady: a target that sends no output is waited for until targetReady, then the source is stopped anyway",
			output:   true,
			timeouts: sim.Timeouts{TargetReady: short},
			before:   theSourceProduces,
			play: func(t *testing.T, s *strategySim) {
				tgt := s.connectTarget(t)
				s.awaitNote(t, timelineNote{side: "output", detail: "no target output yet"})
				// Output once the source is being stopped: the seam is
				// then measured without waiting for it.
				s.produce(tgt.role, 4, 6)
			},
			ends: []strategyEnd{completedIn(stopSource)},
			notes: []timelineNote{
				{phase: startTarget, side: "output", detail: "no target output yet; stopping the source anyway"}, sourceStopped},
			rule: "contract.md, overlap: normsim waits up to targetReady for the target's first packet before it stops the source",
		},
		{
			name:     "the target fails to start (target-fail-start): rolled back, the source left running",
			faults:   []sim.Fault{{Kind: "target-fail-start"}},
			ends:     []strategyEnd{abortedIn(startTarget, "the target failed to start")},
			rollback: targetGoneSourceRunning,
			notes: []timelineNote{{phase: startTarget, kind: sim.TimelineFault, detail: "the target fails to start"},
				targetRemoved, sourceLeftRunning},
			rule: "contract.md, timeouts: a target that does not start (targetStart) leaves a handover or an overlap aborted; " + ruleRollsBack,
		},
		{
			name:     "targetStart: a target whose job never connects times out, rolled back",
			timeouts: sim.Timeouts{TargetStart: short},
			play:     func(t *testing.T, s *strategySim) { s.awaitTargetStart(t) },
			ends:     []strategyEnd{abortedIn(startTarget, "timed out")},
			rollback: targetExitedSourceRunning,
			notes:    []timelineNote{targetRemoved, sourceLeftRunning},
			rule:     "contract.md, timeouts: targetStart passing leaves an overlap aborted; " + ruleWaitForSocket,
		},
		{
			name:     "stopGrace: a frozen target that never connects is killed when the rollback removes it",
			timeouts: sim.Timeouts{TargetStart: short, StopGrace: short},
			play: func(t *testing.T, s *strategySim) {
				s.signal(t, s.awaitTargetStart(t), syscall.SIGSTOP) // it neither connects nor exits on SIGTERM
			},
			ends:     []strategyEnd{abortedIn(startTarget, "timed out")},
			rollback: wantRollback{target: sim.TargetKilled, source: sim.SourceRunning},
			notes:    []timelineNote{{side: "target", kind: sim.TimelineTargetRemoved, detail: "did not exit on SIGTERM"}},
			rule:     ruleStopGrace,
		},
		{
			name:     "the target's job crashes before it connects: rolled back, the source left running",
			play:     func(t *testing.T, s *strategySim) { s.signal(t, s.awaitTargetStart(t), syscall.SIGKILL) },
			ends:     []strategyEnd{abortedIn(startTarget, "killed by signal 9")},
			rollback: targetGoneSourceRunning,
			notes:    []timelineNote{targetRemoved, sourceLeftRunning},
			rule:     ruleRollsBack,
		},
		{
			name:   "the target's job crashes while the move waits for its first packet: rolled back at once",
			output: true,
			before: theSourceProduces,
			play: func(t *testing.T, s *strategySim) {
				tgt := s.connectTarget(t)
				// Running and connected: the move now waits for its output.
				s.awaitNote(t, timelineNote{side: "target", detail: "target running"})
				s.signal(t, tgt.role, syscall.SIGKILL)
			},
			ends:     []strategyEnd{abortedIn(startTarget, "killed by signal 9")},
			rollback: targetGoneSourceRunning,
			within:   500 * time.Millisecond, // targetReady is 30 s: the exit, not the wait, must end it
			rule:     ruleRollsBack,
		},
		{
			name: "the source's job crashes while the move waits for its target: rolled back, the source recorded gone",
			play: func(t *testing.T, s *strategySim) {
				role := s.awaitTargetStart(t)
				s.crashSource(t)
				// The target comes up all the same, unless the rollback
				// has removed it already.
				if j, ok := s.b.tryConnect(s.in.JobID, role); ok {
					s.setTarget(j)
				}
			},
			ends:     []strategyEnd{abortedIn(startTarget, "killed by signal 9")},
			rollback: wantRollback{target: sim.TargetExited, source: sim.SourceGone, sourceDetail: "killed by signal 9"},
			rule:     ruleRollsBack,
		},
		{
			name: "the user aborts while the target comes up: rolled back, the source left running",
			play: func(t *testing.T, s *strategySim) {
				role := s.awaitTargetStart(t)
				s.mustAbort(t)
				// Its job dials as the rollback removes it: it may find
				// itself gone already.
				s.b.tryConnect(s.in.JobID, role)
			},
			ends:     []strategyEnd{abortedIn(startTarget, "aborted by the user: wrong node")},
			rollback: targetExitedSourceRunning,
			notes: []timelineNote{{phase: startTarget, side: "manager", kind: sim.TimelineAbortRequested, detail: "wrong node"},
				targetRemoved, sourceLeftRunning},
			rule: ruleUserAbort,
		},
		{
			name: "the user's abort is not held until a target that never connects times out",
			// Long next to a rollback, short for the test.
			timeouts: sim.Timeouts{TargetStart: sim.Duration(300 * time.Millisecond)},
			play: func(t *testing.T, s *strategySim) {
				s.awaitTargetStart(t) // started, and its job never dials
				s.mustAbort(t)
			},
			ends:     []strategyEnd{abortedIn(startTarget, "aborted by the user: wrong node")},
			rollback: targetExitedSourceRunning,
			rule:     ruleUserAbort,
		},
		{
			name: "the user's abort while the source is being stopped is refused (409); the move completes",
			// A frozen source holds the move in stop-source until the
			// test resumes it.
			timeouts: sim.Timeouts{StopGrace: sim.Duration(5 * time.Second)},
			before:   func(t *testing.T, s *strategySim) { s.signal(t, s.in.ID, syscall.SIGSTOP) },
			joins:    true,
			play: func(t *testing.T, s *strategySim) {
				s.awaitNote(t, timelineNote{phase: stopSource, side: "source", detail: "stopping the source"})
				s.mustBeRefused(t)
				s.signal(t, s.in.ID, syscall.SIGCONT)
			},
			ends:  []strategyEnd{completedIn(stopSource)},
			notes: []timelineNote{sourceStopped},
			after: noAbortRequested,
			rule:  ruleUserAbort,
		},
		{
			name:     "stopGrace: a source that does not exit on SIGTERM is killed; the move completes",
			timeouts: sim.Timeouts{StopGrace: short},
			before:   func(t *testing.T, s *strategySim) { s.signal(t, s.in.ID, syscall.SIGSTOP) },
			joins:    true,
			ends:     []strategyEnd{completedIn(stopSource)},
			notes:    []timelineNote{{phase: stopSource, side: "source", kind: sim.TimelineSourceStopped, detail: "did not exit on SIGTERM"}},
			// The record says it, and the judgement holds it against the
			// source (attack round 11, C8: it passed).
			after: func(t *testing.T, s *strategySim, m *sim.Migration) {
				j := m.Judged()
				if m.SourceKilled == "" || j.Grade != sim.GradeTolerated || j.Findings[0].Check != sim.CheckStop || j.Findings[0].AtFault != "source" {
					t.Errorf("sourceKilled %q, judged %+v; want the kill recorded and tolerated against the source", m.SourceKilled, j)
				}
			},
			rule: ruleStopGrace,
		},
		{
			name:   "kill the source on the target's hello: rolled back with the source gone, or completed if past the point of no return",
			faults: []sim.Fault{{Kind: "kill", Side: "source", On: protocol.TypeHello}},
			joins:  true,
			// It lands right after the target's hello, just as the target
			// counts as running: either side of the point of no return.
			ends:     []strategyEnd{abortedIn(startTarget, "killed by signal 9"), completedIn(stopSource)},
			rollback: wantRollback{target: sim.TargetExited, source: sim.SourceGone, sourceDetail: "killed by signal 9"},
			notes:    []timelineNote{faultFired("kill", "source", protocol.TypeHello)},
			rule:     "faults.md: armed on a frame of the other job, it lands right after that frame was delivered; " + ruleRollsBack,
		},
		{
			name:     "stop the source on the target's hello: rolled back with the source gone, or completed if past the point of no return",
			faults:   []sim.Fault{{Kind: "stop", Side: "source", On: protocol.TypeHello}},
			joins:    true,
			ends:     []strategyEnd{abortedIn(startTarget, "exited with code 0"), completedIn(stopSource)},
			rollback: wantRollback{target: sim.TargetExited, source: sim.SourceGone, sourceDetail: "exited with code 0"},
			notes:    []timelineNote{faultFired("stop", "source", protocol.TypeHello)},
			rule:     "faults.md: armed on a frame of the other job, it lands right after that frame was delivered; " + ruleRollsBack,
		},
		{
			name:   "pause the source on the target's hello: its stop waits for the resume, the move completes",
			faults: []sim.Fault{{Kind: "pause", Side: "source", On: protocol.TypeHello, Delay: signalPause}},
			joins:  true,
			ends:   []strategyEnd{completedIn(stopSource)},
			notes:  []timelineNote{faultFired("pause", "source", protocol.TypeHello), sourceStopped},
			rule:   "faults.md: pause is SIGSTOP, SIGCONT after the delay; contract.md: stopGrace bounds the stop",
		},
		{
			name:   "drop the source's socket on the target's hello: rolled back with the source left running, or completed if past the point of no return",
			faults: []sim.Fault{{Kind: "drop-socket", Side: "source", On: protocol.TypeHello}},
			joins:  true,
			// Its process runs on: a rollback leaves it running.
			ends:     []strategyEnd{abortedIn(startTarget, "1006"), completedIn(stopSource)},
			rollback: targetExitedSourceRunning,
			notes:    []timelineNote{faultFired("drop-socket", "source", protocol.TypeHello)},
			rule:     "faults.md: armed on a frame of the other job, it lands right after that frame was delivered; " + ruleRollsBack,
		},
	}
	cases = append(cases, targetHelloCases(true, completedIn(stopSource))...)
	return append(cases, neverFiringCases(completedIn(stopSource))...)
}

// targetHelloCases are the faults armed on the target's hello (one on
// hello-ack too), which fire as it connects: before an overlap's point of
// no return, so what ends the target rolls the move back, and after a
// stopThenStart's, so it fails it; a pause breaks nothing either way.
func targetHelloCases(beforeNoReturn bool, completed strategyEnd) []strategyCase {
	const startTarget = sim.PhaseStartTarget
	outcome, ruleEnd, when := "failed", ruleFailsAfter, "past"
	end := func(reason string) []strategyEnd { return []strategyEnd{failedIn(startTarget, reason)} }
	rollback := func(wantRollback) wantRollback { return wantRollback{} }
	if beforeNoReturn {
		outcome, ruleEnd, when = "rolled back", ruleRollsBack, "before"
		end = func(reason string) []strategyEnd { return []strategyEnd{abortedIn(startTarget, reason)} }
		rollback = func(w wantRollback) wantRollback { return w }
	}
	abortNotes := []timelineNote{faultFired("worker-abort", "", protocol.TypeHello)}
	if beforeNoReturn {
		abortNotes = append(abortNotes, targetRemoved, sourceLeftRunning)
	}
	return []strategyCase{
		{
			name:     "kill the target on hello: it dies before it counts as connected, " + outcome,
			faults:   []sim.Fault{{Kind: "kill", Side: "target", On: protocol.TypeHello}},
			before:   itsEndIsHeardLate,
			joins:    true,
			ends:     end("killed by signal 9"),
			rollback: rollback(targetGoneSourceRunning),
			notes:    []timelineNote{faultFired("kill", "target", protocol.TypeHello)},
			rule:     ruleHelloFault + "; " + ruleEnd,
		},
		{
			name:     "stop the target on hello: it exits before it counts as connected, " + outcome,
			faults:   []sim.Fault{{Kind: "stop", Side: "target", On: protocol.TypeHello}},
			before:   itsEndIsHeardLate,
			joins:    true,
			ends:     end("exited with code 0"),
			rollback: rollback(targetGoneSourceRunning),
			notes:    []timelineNote{faultFired("stop", "target", protocol.TypeHello)},
			rule:     ruleHelloFault + "; " + ruleEnd,
		},
		{
			name:   "drop the target's socket on hello: its connection is lost " + when + " the point of no return, " + outcome,
			faults: []sim.Fault{{Kind: "drop-socket", Side: "target", On: protocol.TypeHello}},
			joins:  true,
			// normsim dropped it itself: there is no exit to wait for.
			within:   500 * time.Millisecond,
			ends:     end("1006"),
			rollback: rollback(targetExitedSourceRunning),
			notes:    []timelineNote{faultFired("drop-socket", "target", protocol.TypeHello)},
			rule:     ruleHelloFault + "; " + ruleEnd,
		},
		{
			name:   "pause the target on hello: a freeze inside every timeout breaks nothing",
			faults: []sim.Fault{{Kind: "pause", Side: "target", On: protocol.TypeHello, Delay: signalPause}},
			joins:  true,
			ends:   []strategyEnd{completed},
			notes:  []timelineNote{faultFired("pause", "target", protocol.TypeHello), {side: "target", detail: "paused for"}},
			rule:   "faults.md: pause is SIGSTOP, SIGCONT after the delay; a paused job still runs",
		},
		{
			name:     "worker-abort on hello: the worker aborts " + when + " the point of no return, " + outcome,
			faults:   []sim.Fault{{Kind: "worker-abort", On: protocol.TypeHello}},
			joins:    true,
			ends:     end("the worker aborted"),
			rollback: rollback(targetExitedSourceRunning),
			notes:    abortNotes,
			rule:     ruleHelloFault,
		},
		{
			name:     "kill the target on hello-ack: it fires as the target connects, as on hello",
			faults:   []sim.Fault{{Kind: "kill", Side: "target", On: protocol.TypeHelloAck}},
			before:   itsEndIsHeardLate,
			joins:    true,
			ends:     end("killed by signal 9"),
			rollback: rollback(targetGoneSourceRunning),
			notes:    []timelineNote{faultFired("kill", "target", protocol.TypeHelloAck)},
			rule:     ruleHelloFault + "; " + ruleEnd,
		},
	}
}

// stopThenStartCases: prepare-target → stop-source → start-target; the
// point of no return is passed once the source was stopped.
func stopThenStartCases() []strategyCase {
	const (
		prepareTarget = sim.PhasePrepareTarget
		startTarget   = sim.PhaseStartTarget
	)
	cases := []strategyCase{
		{
			name:  "plain move: the target is prepared, the source stopped, then the target started",
			joins: true,
			ends:  []strategyEnd{completedIn(startTarget)},
			notes: stopThenStartSteps(),
			rule:  "contract.md, stopThenStart: normsim prepares the target without starting it, stops the source, then starts the target",
		},
		{
			name:   "a source that was not connected: the target runs once started, and is not waited for on the socket",
			before: theSourceIsNotConnected,
			play:   func(t *testing.T, s *strategySim) { s.awaitTargetStart(t) },
			ends:   []strategyEnd{completedIn(startTarget)},
			notes:  []timelineNote{sourceStopped, {phase: startTarget, side: "target", detail: "target running"}},
			rule:   ruleWaitForSocket,
		},
		{
			name:   "the target fails to start (target-fail-start): failed, the source already stopped",
			faults: []sim.Fault{{Kind: "target-fail-start"}},
			ends:   []strategyEnd{failedIn(startTarget, "the target failed to start")},
			notes:  []timelineNote{sourceStopped, {phase: startTarget, kind: sim.TimelineFault, detail: "the target fails to start"}},
			rule:   ruleFailsAfter,
		},
		{
			name:     "targetStart: a target whose job never connects times out, failed",
			timeouts: sim.Timeouts{TargetStart: short},
			play:     func(t *testing.T, s *strategySim) { s.awaitTargetStart(t) },
			ends:     []strategyEnd{failedIn(startTarget, "timed out")},
			rule:     "contract.md, timeouts: targetStart passing leaves a stopThenStart failed; " + ruleWaitForSocket,
		},
		{
			name: "the target's job crashes before it connects: failed",
			play: func(t *testing.T, s *strategySim) { s.signal(t, s.awaitTargetStart(t), syscall.SIGKILL) },
			ends: []strategyEnd{failedIn(startTarget, "killed by signal 9")},
			rule: ruleFailsAfter,
		},
		{
			name:     "stopGrace: a source that does not exit on SIGTERM is killed, then the target starts",
			timeouts: sim.Timeouts{StopGrace: short},
			before:   func(t *testing.T, s *strategySim) { s.signal(t, s.in.ID, syscall.SIGSTOP) },
			joins:    true,
			ends:     []strategyEnd{completedIn(startTarget)},
			notes: []timelineNote{{phase: sim.PhaseStopSource, side: "source", kind: sim.TimelineSourceStopped, detail: "did not exit on SIGTERM"},
				{phase: startTarget, side: "target", kind: sim.TimelineTargetStarted}},
			rule: ruleStopGrace,
		},
		{
			name:     "the source's job crashes while the target is prepared: rolled back, the source recorded gone",
			before:   holdTargetPrepare,
			joins:    true, // should the target start after all
			play:     func(t *testing.T, s *strategySim) { s.whilePreparing(t, s.crashSource) },
			ends:     []strategyEnd{abortedIn(prepareTarget, "killed by signal 9")},
			rollback: wantRollback{source: sim.SourceGone, sourceDetail: "killed by signal 9"},
			rule:     ruleRollsBack,
		},
		{
			name:     "the user aborts while the target is prepared: rolled back, the source left running",
			before:   holdTargetPrepare,
			joins:    true,
			play:     func(t *testing.T, s *strategySim) { s.whilePreparing(t, s.mustAbort) },
			ends:     []strategyEnd{abortedIn(prepareTarget, "aborted by the user: wrong node")},
			rollback: leftRunning,
			notes: []timelineNote{{phase: prepareTarget, side: "manager", kind: sim.TimelineAbortRequested, detail: "wrong node"},
				sourceLeftRunning},
			rule: ruleUserAbort,
		},
		{
			name: "the user's abort once the source was stopped is refused (409); the move completes",
			play: func(t *testing.T, s *strategySim) {
				role := s.awaitTargetStart(t) // started only once the source was stopped
				s.mustBeRefused(t)
				s.migrateAgainIsAConflict(t)
				s.connect(role)
			},
			ends:  []strategyEnd{completedIn(startTarget)},
			after: noAbortRequested,
			rule:  ruleUserAbort,
		},
	}
	cases = append(cases, targetHelloCases(false, completedIn(startTarget))...)
	// A fault on the source fires on the target's hello, when the source
	// was stopped already: it cannot land, and the timeline says so.
	for _, kind := range []string{"kill", "stop", "pause", "drop-socket"} {
		f := sim.Fault{Kind: kind, Side: "source", On: protocol.TypeHello}
		if kind == "pause" {
			f.Delay = signalPause
		}
		c := strategyCase{
			name:   kind + " the source on the target's hello: the source is stopped already, the fault cannot land",
			faults: []sim.Fault{f},
			joins:  true,
			ends:   []strategyEnd{completedIn(startTarget)},
			notes: []timelineNote{faultFired(kind, "source", protocol.TypeHello),
				{side: "manager", noKind: true, detail: "fault " + kind}},
			rule: "migrations.md, timeline kinds: fault — an armed fault fired; when it cannot land, a note without a kind says so right after",
		}
		cases = append(cases, c)
	}
	return append(cases, neverFiringCases(completedIn(startTarget))...)
}

// neverFiringCases arm faults on every frame these strategies never pass:
// the move completes as if none were armed.
func neverFiringCases(end strategyEnd) []strategyCase {
	var onFrames, frameFaults []sim.Fault
	for _, on := range handoverOns {
		onFrames = append(onFrames, sim.Fault{Kind: "worker-abort", On: on})
		for _, kind := range []string{"kill", "stop", "pause", "drop-socket"} {
			for _, side := range []string{"source", "target"} {
				onFrames = append(onFrames, sim.Fault{Kind: kind, Side: side, On: on})
			}
		}
	}
	for _, fr := range handoverFrames {
		for _, kind := range []string{"drop-frame", "duplicate-frame", "corrupt-frame", "delay-frame"} {
			frameFaults = append(frameFaults, sim.Fault{Kind: kind, Frame: fr.typ, Direction: fr.dir})
		}
	}
	return []strategyCase{
		{
			name:       "kill, stop, pause, drop-socket and worker-abort armed on frames only a handover passes never fire",
			faults:     onFrames,
			joins:      true,
			ends:       []strategyEnd{end},
			neverFires: true,
			rule:       ruleNeverFires,
		},
		{
			name:       "frame faults on every frame a migration relays never fire",
			faults:     frameFaults,
			joins:      true,
			ends:       []strategyEnd{end},
			neverFires: true,
			rule:       ruleNeverFires,
		},
	}
}

// relayedFrame is a frame type a handover relays, and the way it goes.
type relayedFrame struct{ typ, dir string }

// neverPassedFrames are the frames a frame fault may act on (abort both
// ways), and those an on-fault may be armed on besides the connection's
// hello and hello-ack: none passes an overlap or a stopThenStart.
func neverPassedFrames() ([]relayedFrame, []string) {
	frames := []relayedFrame{
		{protocol.TypeGetState, "out"}, {protocol.TypeState, "in"}, {protocol.TypeStateRefused, "in"},
		{protocol.TypeTargetReady, "in"}, {protocol.TypeCutoverReady, "out"}, {protocol.TypeSourceStoppedOutput, "in"},
		{protocol.TypeCutoverApply, "out"}, {protocol.TypeTargetApplied, "in"}, {protocol.TypeAbort, "in"}, {protocol.TypeAbort, "out"},
	}
	ons := []string{protocol.TypeInitialState}
	for _, fr := range frames {
		if !slices.Contains(ons, fr.typ) {
			ons = append(ons, fr.typ)
		}
	}
	return frames, ons
}

// overlapSteps are an overlap's steps on the timeline, each in its phase.
func overlapSteps() []timelineNote {
	return []timelineNote{
		{phase: sim.PhaseStartTarget, side: "target", kind: sim.TimelineTargetCreated},
		{phase: sim.PhaseStartTarget, side: "target", kind: sim.TimelineTargetStarted},
		{phase: sim.PhaseStartTarget, side: "target", kind: sim.TimelineConnected},
		{phase: sim.PhaseStartTarget, side: "target", detail: "target running"},
		sourceStopped,
		{phase: sim.PhaseStopSource, side: "manager", kind: sim.TimelineEnded, detail: "completed"},
	}
}

// stopThenStartSteps are a stopThenStart's steps on the timeline: the
// target is started only after the source was stopped.
func stopThenStartSteps() []timelineNote {
	return []timelineNote{
		{phase: sim.PhasePrepareTarget, side: "target", kind: sim.TimelineTargetCreated},
		sourceStopped,
		{phase: sim.PhaseStartTarget, side: "target", kind: sim.TimelineTargetStarted},
		{phase: sim.PhaseStartTarget, side: "target", kind: sim.TimelineConnected},
		{phase: sim.PhaseStartTarget, side: "target", detail: "target running"},
		{phase: sim.PhaseStartTarget, side: "manager", kind: sim.TimelineEnded, detail: "completed"},
	}
}

func TestStrategyOverlapWithFakeJobs(t *testing.T) {
	t.Parallel()
	runStrategyCases(t, sim.Overlap, "relay-overlap", overlapCases())
}

func TestStrategyStopThenStartWithFakeJobs(t *testing.T) {
	t.Parallel()
	runStrategyCases(t, sim.StopThenStart, "plain", stopThenStartCases())
}

// strategyPhases are each strategy's phases in order, after the request.
var strategyPhases = map[sim.Strategy][]sim.Phase{
	sim.Overlap:       {sim.PhaseRequested, sim.PhaseStartTarget, sim.PhaseStopSource},
	sim.StopThenStart: {sim.PhaseRequested, sim.PhasePrepareTarget, sim.PhaseStopSource, sim.PhaseStartTarget},
}

func runStrategyCases(t *testing.T, strategy sim.Strategy, template string, cases []strategyCase) {
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := newStrategySim(t, template, tc.output)
			if tc.before != nil {
				tc.before(t, s)
			}
			if tc.joins {
				s.join(t)
			}
			mig, err := s.mgr.Migrate(context.Background(), s.in.ID, sim.MigrateRequest{To: "b", Strategy: string(strategy),
				Timeouts: tc.timeouts, Faults: tc.faults})
			if err != nil {
				t.Fatal(err)
			}
			s.id = mig.ID
			if tc.play != nil {
				tc.play(t, s)
			}
			within := tc.within
			if within == 0 {
				within = 3 * time.Second
			}
			m := s.awaitEnd(t, within, tc.rule)
			defer func() {
				if t.Failed() {
					t.Logf("the docs' rule for this row: %s\ntimeline:\n%s", tc.rule, timeline(m))
				}
			}()
			i := slices.IndexFunc(tc.ends, func(e strategyEnd) bool { return e.state == m.State })
			if i < 0 || m.Phase != tc.ends[i].phase || !reasonHas(m.Reason, tc.ends[i].reason) {
				t.Errorf("ended %s in %s (%q), want %s", m.State, m.Phase, m.Reason, endsText(tc.ends))
			}
			checkStrategyRecord(t, s, m, tc.rollback)
			checkPhaseOrder(t, m, strategyPhases[strategy])
			checkNotes(t, m, tc.notes)
			if tc.neverFires {
				for _, ev := range m.Events {
					if ev.Kind == sim.TimelineFault {
						t.Errorf("a fault armed on a frame this strategy never passes fired: %q", ev.Detail)
					}
				}
			}
			checkNothingSent(t, s)
			if tc.after != nil {
				tc.after(t, s, m)
			}
		})
	}
}

func reasonHas(reason, part string) bool {
	if part == "" {
		return reason == ""
	}
	return strings.Contains(reason, part)
}

func endsText(ends []strategyEnd) string {
	out := make([]string, len(ends))
	for i, e := range ends {
		out[i] = e.String()
	}
	return strings.Join(out, ", or ")
}

// checkStrategyRecord checks the migration's record, and the instances
// against it: an aborted move has a rollback record (the target removed,
// the source as the row says, and no side told anything); a move past its
// point of no return has none, and left its instances as they are: a
// completed one runs the target and has stopped the source.
func checkStrategyRecord(t *testing.T, s *strategySim, m *sim.Migration, want wantRollback) {
	t.Helper()
	ctx := context.Background()
	src, srcErr := s.mgr.Instance(ctx, s.in.ID)
	if srcErr != nil {
		t.Errorf("the source is not held after the move: %v", srcErr)
	}
	var tgt sim.Instance
	var tgtErr error = sim.Errorf(sim.ENotFound, "no target was placed")
	if m.Target.Instance != "" {
		tgt, tgtErr = s.mgr.Instance(ctx, m.Target.Instance)
	}
	if m.State != sim.MigrationAborted {
		if m.Rollback != nil {
			t.Errorf("a %s move has a rollback record: %+v", m.State, *m.Rollback)
		}
		if tgtErr != nil {
			t.Errorf("the target is not held after a %s move (nothing rolls back past the point of no return): %v", m.State, tgtErr)
		}
		if srcErr == nil && src.State == sim.InstanceRunning {
			t.Errorf("the source runs on after a %s move: it was to be stopped", m.State)
		}
		if m.State == sim.MigrationCompleted && tgtErr == nil && tgt.State != sim.InstanceRunning {
			t.Errorf("the move completed, yet the target is %s (%s): completed means the target runs", tgt.State, tgt.Error)
		}
		return
	}
	rb := m.Rollback
	if rb == nil {
		t.Error("an aborted move has no rollback record")
		return
	}
	if len(rb.Told) > 0 {
		t.Errorf("the rollback record says it told %v abort: these jobs exchange no frame beyond hello-ack", rb.Told)
	}
	if m.Target.Instance != "" {
		if tgtErr == nil {
			t.Errorf("the target %s is still held after the rollback (%s)", m.Target.Instance, tgt.State)
		}
		if rb.Target == "" || want.target != "" && rb.Target != want.target {
			t.Errorf("the rollback says the target was removed %q (%s), want %q", rb.Target, rb.TargetDetail, cmpOr(want.target, "any way"))
		}
	}
	if rb.Source != want.source || !strings.Contains(rb.SourceDetail, want.sourceDetail) {
		t.Errorf("the rollback says the source is %s (%s), want %s with %q", rb.Source, rb.SourceDetail, want.source, want.sourceDetail)
	}
	if srcErr == nil && (src.State == sim.InstanceRunning) != (rb.Source == sim.SourceRunning) {
		t.Errorf("the rollback says the source is %s, yet it is held as %s (%s)", rb.Source, src.State, src.Error)
	}
}

func cmpOr(s, or string) string {
	if s == "" {
		return or
	}
	return s
}

// checkPhaseOrder: each entry is drawn in a phase of the strategy, and the
// phases only move forward.
func checkPhaseOrder(t *testing.T, m *sim.Migration, order []sim.Phase) {
	t.Helper()
	at := 0
	for _, ev := range m.Events {
		i := slices.Index(order, ev.Phase)
		switch {
		case i < 0:
			t.Errorf("%q is drawn in %s, not a phase of %s", ev.Detail, ev.Phase, m.Strategy)
		case i < at:
			t.Errorf("%q is drawn in %s, after the move was in %s", ev.Detail, ev.Phase, order[at])
		default:
			at = i
		}
	}
}

// checkNotes: the notes are on the timeline in this order.
func checkNotes(t *testing.T, m *sim.Migration, notes []timelineNote) {
	t.Helper()
	at := 0
	for _, n := range notes {
		i := slices.IndexFunc(m.Events[at:], n.matches)
		if i < 0 {
			t.Errorf("no %s on the timeline after entry %d", n, at)
			return
		}
		at += i + 1
	}
}

// checkNothingSent: neither job was sent a frame, abort included: in an
// overlap or a stopThenStart a job exchanges none beyond hello-ack, which
// is the listener's (and every frame the worker sends in a move is
// written before its end shows).
func checkNothingSent(t *testing.T, s *strategySim) {
	t.Helper()
	for _, j := range []*job{s.src, s.target()} {
		if j == nil {
			continue
		}
		for _, wf := range j.unread() {
			t.Errorf("the %s was sent %s: it should exchange no frame beyond hello-ack", j.role, wf.Type)
		}
	}
}

// noAbortRequested: a refused abort is not on the timeline.
func noAbortRequested(t *testing.T, _ *strategySim, m *sim.Migration) {
	t.Helper()
	if slices.ContainsFunc(m.Events, func(ev sim.MigrationEvent) bool { return ev.Kind == sim.TimelineAbortRequested }) {
		t.Error("the refused abort is on the timeline as requested")
	}
}

// strategySim is a fakeSim on the fake runtime whose job declares the
// strategy under test, and the migration the row plays.
type strategySim struct {
	*fakeSim
	out *fakeOutput // nil unless the row's job sends output
	id  string      // the migration

	mu  sync.Mutex
	tgt *job // the target's connection, once it connected
	wg  sync.WaitGroup

	// prepareHeld is closed while the target's placement is held in the
	// runtime's Prepare (holdTargetPrepare), until release.
	prepareHeld chan struct{}
	release     func()
}

func newStrategySim(t *testing.T, template string, output bool) *strategySim {
	t.Helper()
	s := &strategySim{}
	var sink sim.OutputSink
	if output {
		s.out = newFakeOutput()
		sink = s.out
	}
	s.fakeSim = buildFakeSimOf(t, template, sink, true)
	// Before the manager closes: the jobs played on goroutines stop with
	// the test's context.
	t.Cleanup(s.wg.Wait)
	return s
}

// target is the target's connection, nil if it never connected.
func (s *strategySim) target() *job {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tgt
}

func (s *strategySim) setTarget(j *job) {
	s.mu.Lock()
	s.tgt = j
	s.mu.Unlock()
}

// awaitTargetStart is the target once placed and its process started,
// when its job could first dial.
func (s *strategySim) awaitTargetStart(t *testing.T) string {
	t.Helper()
	reg := s.b.registeredTarget()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	if !s.rt.awaitStart(ctx, reg.Role) {
		t.Fatalf("the target %s did not start within 5s", reg.Role)
	}
	return reg.Role
}

// connectTarget has the target's job dial once its process has started.
func (s *strategySim) connectTarget(t *testing.T) *job {
	t.Helper()
	return s.connect(s.awaitTargetStart(t))
}

// connect has the target's job dial.
func (s *strategySim) connect(role string) *job {
	j := s.b.connect(s.in.JobID, role)
	s.setTarget(j)
	return j
}

// join plays a well-behaved target, whenever it is placed and started
// until the test ends: its job dials as its process starts, and the start
// call returns once it has connected (as a container's start can return
// after its job dialled). The target's connection is then the
// migration's before it sees the target connected: the move cannot end
// before it has heard of the connection, and the faults armed on it.
func (s *strategySim) join(t *testing.T) {
	ctx := t.Context()
	dialed := make(chan struct{})
	source := s.in.ID
	s.rt.hook(func(r *fakeRuntime) {
		r.starting = func(id string) {
			if id != source {
				<-dialed
			}
		}
	})
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer close(dialed)
		var reg sim.SocketRegistration
		select {
		case reg = <-s.b.registered:
		case <-ctx.Done():
			return
		}
		if !s.rt.awaitStart(ctx, reg.Role) {
			return
		}
		if j, ok := s.b.tryConnect(reg.JobID, reg.Role); ok {
			s.setTarget(j)
		}
	}()
}

// itsEndIsHeardLate: a job's end reaches the manager a moment after the
// signal, as on a loaded host. A kill armed on the target's hello lands
// before the hello counts (faults.md), so the move must not take the
// target for running meanwhile; without the delay, whether it hears of
// the end first is a race, and the row would pass or fail by chance.
func itsEndIsHeardLate(_ *testing.T, s *strategySim) {
	s.rt.hook(func(r *fakeRuntime) { r.reportDelay = 100 * time.Millisecond })
}

// signal delivers sig to an instance's job, as the kernel would.
func (s *strategySim) signal(t *testing.T, id string, sig syscall.Signal) {
	t.Helper()
	if err := s.rt.Signal(context.Background(), id, sig); err != nil {
		t.Fatalf("%s to %s: %v", sig, id, err)
	}
}

// crashSource kills the source's job, and returns once the manager has
// heard it exit.
func (s *strategySim) crashSource(t *testing.T) {
	t.Helper()
	s.signal(t, s.in.ID, syscall.SIGKILL)
	awaitInstance(t, s.fakeSim, s.in.ID, func(in sim.Instance) bool { return in.State == sim.InstanceFailed })
}

// theSourceIsNotConnected: the source's job closed its socket and runs on.
func theSourceIsNotConnected(t *testing.T, s *strategySim) {
	// Running first: a job that is not connected is not waited for as
	// it starts, and could be refused as still starting.
	awaitInstance(t, s.fakeSim, s.in.ID, func(in sim.Instance) bool { return in.State == sim.InstanceRunning })
	s.src.close(1000)
	awaitInstance(t, s.fakeSim, s.in.ID, func(in sim.Instance) bool { return !in.Connected })
}

// theSourceProduces: the sink has seen the job's output, from the source.
func theSourceProduces(_ *testing.T, s *strategySim) { s.produce(s.in.ID, 1, 3) }

// produce sends the instance's packets numbered from to to.
func (s *strategySim) produce(instance string, from, to int64) {
	for n := from; n <= to; n++ {
		s.out.send(s.in.JobID, instance, n)
	}
}

// mustAbort is the user's abort, which must be taken.
func (s *strategySim) mustAbort(t *testing.T) {
	t.Helper()
	if _, err := s.mgr.AbortMigration(context.Background(), s.id, "wrong node"); err != nil {
		t.Errorf("the user's abort before the point of no return: %v, want it taken", err)
	}
}

// mustBeRefused is the user's abort past the point of no return: a 409
// saying so.
func (s *strategySim) mustBeRefused(t *testing.T) {
	t.Helper()
	_, err := s.mgr.AbortMigration(context.Background(), s.id, "too late")
	if sim.ErrorCode(err) != sim.EConflict || !strings.Contains(sim.ErrorMessage(err), "point of no return") {
		t.Errorf("the user's abort past the point of no return: %v, want a conflict (409) saying so", err)
	}
}

// migrateAgainIsAConflict is a second migrate of the job while its move
// runs: 409, the move named, whatever it did to the source so far (a
// stopThenStart's stopped source once got 422 "is stopped").
func (s *strategySim) migrateAgainIsAConflict(t *testing.T) {
	t.Helper()
	_, err := s.mgr.Migrate(context.Background(), s.in.ID, sim.MigrateRequest{To: "b", Strategy: string(sim.StopThenStart)})
	if sim.ErrorCode(err) != sim.EConflict || !strings.Contains(sim.ErrorMessage(err), "already migrating ("+s.id+")") {
		t.Errorf("a second migrate while the move runs: %v, want a conflict (409) naming %s", err, s.id)
	}
}

// holdTargetPrepare holds the target's placement in the runtime's
// Prepare, the move in prepare-target, until whilePreparing lets it go.
func holdTargetPrepare(t *testing.T, s *strategySim) {
	held, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	s.prepareHeld, s.release = held, func() { once.Do(func() { close(release) }) }
	t.Cleanup(s.release) // before the manager closes
	source := s.in.ID
	s.rt.hook(func(r *fakeRuntime) {
		r.preparing = func(id string) {
			if id == source {
				return
			}
			close(held)
			<-release
		}
	})
}

// whilePreparing does what while the target's placement is held, then
// lets it go on.
func (s *strategySim) whilePreparing(t *testing.T, what func(*testing.T)) {
	t.Helper()
	select {
	case <-s.prepareHeld:
	case <-time.After(5 * time.Second):
		t.Fatal("the target was not prepared within 5s")
	}
	what(t)
	s.release()
}

// awaitNote waits until the timeline has an entry n matches.
func (s *strategySim) awaitNote(t *testing.T, n timelineNote) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for after := 0; ; {
		m, err := s.mgr.AwaitMigration(ctx, s.id, after)
		switch {
		case m != nil && slices.ContainsFunc(m.Events, n.matches):
			return
		case err != nil || m == nil:
			t.Fatalf("no %s on the timeline within 5s: %v", n, err)
		case m.State.Ended():
			t.Fatalf("the move ended %s (%s) before %s:\n%s", m.State, m.Reason, n, timeline(m))
		}
		after = len(m.Events)
	}
}

// awaitEnd is the migration once it has ended, within d.
func (s *strategySim) awaitEnd(t *testing.T, d time.Duration, rule string) *sim.Migration {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	for after := 0; ; {
		m, err := s.mgr.AwaitMigration(ctx, s.id, after)
		if err == nil && m.State.Ended() {
			return m
		}
		if err != nil {
			if m == nil {
				t.Fatalf("await %s: %v", s.id, err)
			}
			t.Fatalf("the move is still %s in %s %s after play: it should have ended by now\nthe docs' rule for this row: %s\ntimeline:\n%s",
				m.State, m.Phase, d, rule, timeline(m))
		}
		after = len(m.Events)
	}
}
