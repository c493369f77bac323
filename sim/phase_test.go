package sim_test

import (
	"testing"

	"github.com/normsim/normsim/sim"
)

func TestPhaseAdvanceNeverMovesBackwards(t *testing.T) {
	for _, tt := range []struct {
		from, next, want sim.Phase
	}{
		{"", sim.PhaseGetState, sim.PhaseGetState},
		{"", sim.PhaseStopSource, sim.PhaseStopSource},
		{sim.PhaseGetState, sim.PhasePlaceTarget, sim.PhasePlaceTarget},
		{sim.PhasePlaceTarget, sim.PhaseTargetReady, sim.PhaseTargetReady},
		// The cutover relay moved it on before the migration's goroutine
		// said target-ready.
		{sim.PhaseCutoverReady, sim.PhaseTargetReady, sim.PhaseCutoverReady},
		{sim.PhaseCutoverApply, sim.PhaseCutoverReady, sim.PhaseCutoverApply},
		{sim.PhaseCutoverApply, sim.PhaseStopSource, sim.PhaseStopSource},
		// Phases of one rank are alternatives, not steps.
		{sim.PhaseStartTarget, sim.PhaseTargetReady, sim.PhaseStartTarget},
		{sim.PhasePrepareTarget, sim.PhasePlaceTarget, sim.PhasePrepareTarget},
		// stopThenStart stops the source before it starts the target: the
		// migration stays in stop-source (as it always has).
		{sim.PhaseStopSource, sim.PhaseStartTarget, sim.PhaseStopSource},
	} {
		if got := tt.from.Advance(tt.next); got != tt.want {
			t.Errorf("%q.Advance(%q) = %q, want %q", tt.from, tt.next, got, tt.want)
		}
	}
}

func TestPhasesAreValidAndRanked(t *testing.T) {
	names := sim.PhaseNames()
	if len(names) != len(sim.Phases()) || len(names) != 8 {
		t.Fatalf("PhaseNames() = %v, Phases() = %v: want the 8 phases of docs/migrations.md", names, sim.Phases())
	}
	for i, p := range sim.Phases() {
		if !p.Valid() || p.Rank() == 0 || names[i] != string(p) {
			t.Errorf("phase %q: Valid %v, Rank %d, name %q", p, p.Valid(), p.Rank(), names[i])
		}
	}
	for _, p := range []sim.Phase{"", sim.PhaseRequested, "cutover"} {
		if p.Valid() {
			t.Errorf("%q.Valid() = true; a migration cannot end in it", p)
		}
	}
}
