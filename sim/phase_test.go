package sim_test

import (
	"testing"

	"github.com/normsim/normsim/sim"
)

func TestPhasesAreValid(t *testing.T) {
	names := sim.PhaseNames()
	if len(names) != len(sim.Phases()) || len(names) != 8 {
		t.Fatalf("PhaseNames() = %v, Phases() = %v: want the 8 phases of docs/migrations.md", names, sim.Phases())
	}
	for i, p := range sim.Phases() {
		if !p.Valid() || names[i] != string(p) {
			t.Errorf("phase %q: Valid %v, name %q", p, p.Valid(), names[i])
		}
	}
	for _, p := range []sim.Phase{"", sim.PhaseRequested, "cutover"} {
		if p.Valid() {
			t.Errorf("%q.Valid() = true; a migration cannot end in it", p)
		}
	}
}
