package manager

import (
	"github.com/normsim/normsim/sim"
)

// faultKinds are the faults a migration request may arm.
var faultKinds = map[string]string{
	"target-fail-start": "the target fails to start",
}

func validateFaults(fs []sim.Fault) error {
	for i, f := range fs {
		if _, ok := faultKinds[f.Kind]; !ok {
			return sim.Errorf(sim.EUnprocessable, "faults[%d].kind: unknown fault %q", i, f.Kind)
		}
	}
	return nil
}

// fault returns the armed fault of a kind (and side, when given).
func (r *run) fault(kind, side string) *sim.Fault {
	for i := range r.faults {
		f := &r.faults[i]
		if f.Kind == kind && (side == "" || f.Side == "" || f.Side == side) {
			return f
		}
	}
	return nil
}
