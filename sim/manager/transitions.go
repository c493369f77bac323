package manager

import (
	"slices"

	"github.com/normsim/normsim/protocol"
	"github.com/normsim/normsim/sim"
)

// cutovers are the frames a job sends that move a handover's cutover: who
// sends it, the phases it does so in, the phase it moves the migration to,
// the frame it is relayed to the other side as, and what that side may
// answer. A cutover frame in any other phase moves nothing (the socket's
// phase rules judge it).
var cutovers = []struct {
	from   string
	typ    string
	in     []sim.Phase
	next   sim.Phase
	relay  string
	expect []string
}{
	{sideTarget, protocol.TypeTargetReady, []sim.Phase{sim.PhasePlaceTarget, sim.PhaseTargetReady}, sim.PhaseCutoverReady,
		protocol.TypeCutoverReady, []string{protocol.TypeSourceStoppedOutput, protocol.TypeAbort}},
	// The point of no return: from here nothing rolls back.
	{sideSource, protocol.TypeSourceStoppedOutput, []sim.Phase{sim.PhaseCutoverReady}, sim.PhaseCutoverApply,
		protocol.TypeCutoverApply, []string{protocol.TypeTargetApplied, protocol.TypeAbort}},
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
	// frame it is relayed to the other side as (with what that side may
	// answer); "" when it moves nothing.
	next   sim.Phase
	relay  string
	expect []string
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
			return frameStep{next: c.next, relay: c.relay, expect: c.expect}
		}
	}
	return frameStep{}
}
