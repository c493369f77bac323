package manager

import (
	"fmt"

	"github.com/normsim/normsim/sim"
)

// The fault plan: which armed faults fire on a frame's passage or at a
// step of the migration, and what they do, decided from the faults alone.
// It is pure so that every decision can be table-tested without sockets;
// passLocked (faults.go) carries a plan out, in either direction.

// Directions a frame travels, as faults and the timeline name them.
const (
	dirIn  = "in"  // job → worker
	dirOut = "out" // worker → job
)

// passage is one frame passing the manager: its type, the direction it
// travels, and the side (source or target) that sent or receives it.
type passage struct {
	typ  string
	dir  string
	side string
}

// what names the frame on the timeline: "target-ready from the target",
// "cutover-apply to the target".
func (p passage) what() string {
	if p.dir == dirIn {
		return p.typ + " from the " + p.side
	}
	return p.typ + " to the " + p.side
}

// passagePlan is what the armed faults do to one passage of a frame. Each
// list holds indexes into the migration's faults.
type passagePlan struct {
	// hits are the faults armed on the frame that strike the job on its
	// side (kill, stop, pause, drop-socket): they fire before the frame
	// goes on, so they land exactly there and not a relay later, and if
	// one lands (any but pause) the frame is lost with its job.
	hits []int
	// frame is the frame fault that acts on the frame (drop, duplicate,
	// corrupt or delay it), or -1.
	frame int
	// after are the faults armed on the frame that strike elsewhere (the
	// other side; the worker, for worker-abort): they fire once the frame
	// has passed, or at once if it is lost.
	after []int
}

// planPassage decides what the faults not fired yet do to a passage.
func planPassage(faults []sim.Fault, fired []bool, p passage) passagePlan {
	plan := passagePlan{frame: -1}
	for i, f := range faults {
		if fired[i] {
			continue
		}
		need := faultKinds[f.Kind]
		switch {
		case need.on && f.On == p.typ && need.side && f.Side == p.side:
			plan.hits = append(plan.hits, i)
		case need.on && f.On == p.typ:
			plan.after = append(plan.after, i)
		case need.frame && plan.frame < 0 && f.Frame == p.typ && f.Direction == p.dir && (f.Side == "" || f.Side == p.side):
			plan.frame = i
		}
	}
	return plan
}

// armedOn are the faults not fired yet that are armed on the passage of a
// frame type, whichever side they strike: what fires when the frame was
// sent by someone else (the listener's initial-state) or its hits have
// fired already (a job's frame as it is handled).
func armedOn(faults []sim.Fault, fired []bool, typ string) []int {
	var out []int
	for i, f := range faults {
		if !fired[i] && faultKinds[f.Kind].on && f.On == typ {
			out = append(out, i)
		}
	}
	return out
}

// planTargetStart is the fault that fails the target's start, or -1.
func planTargetStart(faults []sim.Fault, fired []bool) int {
	for i, f := range faults {
		if !fired[i] && f.Kind == faultTargetFailStart {
			return i
		}
	}
	return -1
}

// losesFrame reports whether a fault of kind that lands on the job a frame
// comes from or goes to loses the frame with it: a paused job still sends
// and reads once it thaws.
func losesFrame(kind string) bool { return faultKinds[kind].side && kind != faultPause }

// frameFaultNote is the timeline entry of a frame fault acting on a
// passage.
func frameFaultNote(f *sim.Fault, p passage) string {
	what := p.what()
	switch f.Kind {
	case faultDropFrame:
		return "fault: dropped " + what
	case faultDuplicateFrame:
		if p.dir == dirIn {
			return "fault: " + what + " delivered twice"
		}
		return "fault: " + what + " sent twice"
	case faultCorruptFrame:
		if p.dir == dirIn {
			return "fault: " + what + " arrived corrupted; closing its socket with 4400"
		}
		return "fault: corrupted " + what
	case faultDelayFrame:
		return fmt.Sprintf("fault: %s held for %s", what, faultDelay(f))
	}
	return "fault: " + f.Kind + " on " + what
}
