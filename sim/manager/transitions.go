package manager

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/normsim/normsim/protocol"
	"github.com/normsim/normsim/sim"
)

// cutovers are the frames a job sends that move a handover's cutover: who
// sends it, the phases it does so in, the phase it moves the migration to,
// and the frame it is relayed to the other side as (which may answer what
// asks says for that phase). A cutover frame in any other phase moves
// nothing (the socket's phase rules judge it).
var cutovers = []struct {
	from  string
	typ   string
	in    []sim.Phase
	next  sim.Phase
	relay string
}{
	{sideTarget, protocol.TypeTargetReady, []sim.Phase{sim.PhasePlaceTarget, sim.PhaseTargetReady}, sim.PhaseCutoverReady, protocol.TypeCutoverReady},
	// The point of no return: from here nothing rolls back.
	{sideSource, protocol.TypeSourceStoppedOutput, []sim.Phase{sim.PhaseCutoverReady}, sim.PhaseCutoverApply, protocol.TypeCutoverApply},
}

// asks are what a handover's job may send next as the migration enters a
// phase: the owner arms them (run.moveLocked → sim.JobSocket.Expect) as it
// moves the phase, before it writes the frame they answer, and arms a
// target placed later as it is placed; the listener lets each be answered
// once. A side
// a phase asks nothing of keeps what it was last allowed (abort, at
// least) until its part ends (Expire at the end; after target-applied the
// target keeps abort alone, awaitApplied). Any other frame closes the
// job's socket with 4400.
var asks = []struct {
	phase sim.Phase
	side  string
	may   []string
}{
	{sim.PhaseGetState, sideSource, []string{protocol.TypeState, protocol.TypeStateRefused, protocol.TypeAbort}},
	{sim.PhasePlaceTarget, sideSource, []string{protocol.TypeAbort}},
	{sim.PhasePlaceTarget, sideTarget, []string{protocol.TypeTargetReady, protocol.TypeAbort}},
	{sim.PhaseCutoverReady, sideSource, []string{protocol.TypeSourceStoppedOutput, protocol.TypeAbort}},
	{sim.PhaseCutoverApply, sideTarget, []string{protocol.TypeTargetApplied, protocol.TypeAbort}},
}

// mayAnswer is what the side may send next as a handover enters phase
// (asks); nil when the phase asks nothing of it.
func mayAnswer(phase sim.Phase, side string) []string {
	for _, a := range asks {
		if a.phase == phase && a.side == side {
			return a.may
		}
	}
	return nil
}

// frameStep is what a frame a job sent does to its migration.
type frameStep struct {
	// late: it crossed the end of the migration on the wire. It is
	// recorded as late and nothing acts on it.
	late bool
	// aborts: the job aborted; the migration ends, and only the other
	// side is told.
	aborts bool
	// next is the phase a cutover frame moves the migration to, relay the
	// frame it is relayed to the other side as (what that side may answer
	// is next's row of asks); "" when it moves nothing.
	next  sim.Phase
	relay string
}

// stepFrame decides what a frame of typ from side does to a migration in
// phase; ending says the migration is bound to end (or the socket judged
// the frame late).
func stepFrame(phase sim.Phase, ending bool, side, typ string) frameStep {
	if ending {
		return frameStep{late: true}
	}
	if typ == protocol.TypeAbort {
		return frameStep{aborts: true}
	}
	for _, c := range cutovers {
		if c.from == side && c.typ == typ && slices.Contains(c.in, phase) {
			return frameStep{next: c.next, relay: c.relay}
		}
	}
	return frameStep{}
}

// abortAsk is what a user's abort finds its migration in.
type abortAsk struct {
	ended    sim.MigrationState // its end state, "" while it runs
	strategy sim.Strategy
	ponr     bool   // past the point of no return
	aborting string // why the user asked already, if they did
	ending   bool   // bound to end by something else
	timedOut bool   // asked at or after the deadline of the wait in progress
}

// stepUserAbort decides a user's abort: "" takes it (the migration rolls
// back and ends aborted), anything else is why it is refused (409).
func stepUserAbort(id string, a abortAsk) string {
	switch {
	case a.ended.Ended():
		return fmt.Sprintf("migration %s already ended %s; there is nothing to abort", id, a.ended)
	case a.ponr:
		return fmt.Sprintf("migration %s is past the point of no return (%s): nothing can roll back now; it ends on its own", id, noReturnWhy(a.strategy))
	case a.aborting != "":
		return fmt.Sprintf("migration %s is already being aborted (%s)", id, a.aborting)
	case a.ending:
		return fmt.Sprintf("migration %s is already ending; it cannot be aborted now", id)
	case a.timedOut:
		return fmt.Sprintf("migration %s timed out before the abort arrived: the timeout ends it", id)
	}
	return ""
}

// noReturnWhy says what the point of no return of a strategy is.
func noReturnWhy(st sim.Strategy) string {
	switch st {
	case sim.Overlap:
		return "the target is running and the source is being stopped"
	case sim.StopThenStart:
		return "the source was stopped and the target is being started"
	}
	return "the source stopped its output and the target was told to apply"
}

// stepConnected is the phase a migration in phase moves to as side's job
// connects: a handover target, given its state with the hello-ack, is
// then asked for target-ready. withState says the connection was handed
// an initial state; ending, that the migration is bound to end. ok is
// false when the connection moves nothing.
func stepConnected(phase sim.Phase, ending bool, side string, withState bool) (next sim.Phase, ok bool) {
	if side == sideTarget && withState && phase == sim.PhasePlaceTarget && !ending {
		return sim.PhaseTargetReady, true
	}
	return phase, false
}

// stepEnd decides how a migration ends, from what ended its steps (nil
// when every step ran) and whether it had passed the point of no return:
// completed; refused by the source; aborted, and rolled back, before the
// point of no return; failed after it, where nothing rolls back.
func stepEnd(err error, ponr bool) (state sim.MigrationState, reason string) {
	var rf *refused
	switch {
	case err == nil:
		return sim.MigrationCompleted, ""
	case errors.As(err, &rf):
		return sim.MigrationRefused, rf.reason
	case !ponr:
		return sim.MigrationAborted, err.Error()
	}
	return sim.MigrationFailed, err.Error()
}

// stepBroken decides whether a side broke a promise and so ended the
// migration (errBroken: a missed answer, a frame its socket was closed
// for, an exit of its own, an abort past cutover-apply), and returns it
// for the record; nil when none did, when the migration completed, or
// when a fault of the migration struck that side (struck), since the
// fault may be what broke it. A fault that struck only the other side
// excuses nothing.
func stepBroken(err error, state sim.MigrationState, struck map[string]bool) *sim.BrokenPromise {
	var b *errBroken
	if state == sim.MigrationCompleted || !errors.As(err, &b) || struck[b.side] {
		return nil
	}
	return &sim.BrokenPromise{Side: b.side, Promise: b.promise, Detail: b.reason}
}

// stepDeadline decides whether a frame is late for the wait in progress:
// it arrived (was handed to the owner) at or after the wait's deadline
// (zero while nothing is awaited), and it is about that wait (what the
// wait accepts, or an abort; asked only past the deadline). One decision
// per deadline: a frame that beat it is on time however late the owner
// takes it, and the answer to an ask a relay made since is never late for
// the wait before it.
func stepDeadline(deadline, arrived time.Time, about func() bool) bool {
	return !deadline.IsZero() && !arrived.Before(deadline) && about()
}
