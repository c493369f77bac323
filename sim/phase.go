package sim

import "slices"

// Phase is the step a migration is in (docs/migrations.md). It travels as
// its name: "get-state", "cutover-apply", …
type Phase string

// Phases of a migration. A handover goes get-state → place-target →
// target-ready → cutover-ready → cutover-apply → stop-source; an overlap
// start-target → stop-source; a stopThenStart prepare-target → stop-source
// → start-target.
const (
	// PhaseRequested is the phase of the first timeline event only: the
	// request, before any phase began. A migration never ends in it.
	PhaseRequested     Phase = "requested"
	PhaseGetState      Phase = "get-state"
	PhasePlaceTarget   Phase = "place-target"
	PhasePrepareTarget Phase = "prepare-target"
	PhaseStartTarget   Phase = "start-target"
	PhaseTargetReady   Phase = "target-ready"
	PhaseCutoverReady  Phase = "cutover-ready"
	// PhaseCutoverApply begins at the point of no return.
	PhaseCutoverApply Phase = "cutover-apply"
	PhaseStopSource   Phase = "stop-source"
)

// phases are the phases a migration can be in (and end in), handover's in
// order, then those only the other strategies have: the order in which
// scenario files and their schema list them.
var phases = []Phase{PhaseGetState, PhasePlaceTarget, PhaseTargetReady, PhaseCutoverReady, PhaseCutoverApply,
	PhaseStopSource, PhaseStartTarget, PhasePrepareTarget}

// Phases lists the phases a migration can end in.
func Phases() []Phase { return slices.Clone(phases) }

// PhaseNames are the names of Phases, as a scenario's expect.phase takes
// them.
func PhaseNames() []string {
	names := make([]string, len(phases))
	for i, p := range phases {
		names[i] = string(p)
	}
	return names
}

// Valid reports whether p is one of Phases.
func (p Phase) Valid() bool { return slices.Contains(phases, p) }

// String returns the phase's name.
func (p Phase) String() string { return string(p) }
