package conform

import (
	"fmt"
	"path"
	"strings"
	"time"

	"github.com/normsim/normsim/protocol"
	"github.com/normsim/normsim/sim"
)

// Case kinds: how a case is judged.
const (
	kindHandover = "handover"
	kindChain    = "chain"
	kindRefusal  = "refusal"
	kindFault    = "fault"
	kindMove     = "move"
)

// Sides a fault strikes.
const (
	sideSource = "source"
	sideTarget = "target"
)

// step is a point of the handover a fault strikes at: the frame whose
// passage fires it, and whether the point of no return lies behind it.
type step struct {
	name  string
	frame string
	// target says the target exists when the frame passes (a fault on
	// the target means something).
	target bool
	// pastNoReturn says the migration is past the point of no return
	// once this frame has been acted on.
	pastNoReturn bool
	// listener says the node's listener exchanges the frame as the
	// target connects, outside the migration's relay: no frame fault can
	// act on it (docs/faults.md), so none is in the matrix.
	listener bool
}

// handoverSteps are the contract's handover steps (section 2) a fault can
// strike at, in order.
var handoverSteps = []step{
	{name: "get-state", frame: protocol.TypeGetState},
	{name: "target placed", frame: protocol.TypeHello, target: true, listener: true},
	{name: "initial-state", frame: protocol.TypeInitialState, target: true, listener: true},
	{name: "target-ready", frame: protocol.TypeTargetReady, target: true},
	{name: "source-stopped-output", frame: protocol.TypeSourceStoppedOutput, target: true, pastNoReturn: true},
	{name: "target-applied", frame: protocol.TypeTargetApplied, target: true, pastNoReturn: true},
}

// Timeouts are the per-phase timeouts conform runs with unless the
// command line sets others: short, so a fault that makes a phase wait out
// its timeout costs seconds, not the production defaults' tens of seconds.
var Timeouts = sim.Timeouts{
	State:       sim.Duration(2 * time.Second),
	TargetStart: sim.Duration(15 * time.Second),
	TargetReady: sim.Duration(3 * time.Second),
	Stop:        sim.Duration(2 * time.Second),
	Apply:       sim.Duration(2 * time.Second),
	StopGrace:   sim.Duration(3 * time.Second),
}

// pauseFor is how long a pause fault freezes a job: well inside every
// phase's timeout, so a job that survives a short freeze completes.
const pauseFor = 500 * time.Millisecond

// Matrix is every case for a template of a strategy, in ID order; t are
// the run's timeouts (a delay past its phase's timeout is drawn from them).
func Matrix(strategy sim.Strategy, t sim.Timeouts) []Case {
	t = t.WithDefaults()
	switch strategy {
	case sim.Handover:
		return handoverMatrix(t)
	case sim.Overlap, sim.StopThenStart:
		return movingMatrix(strategy)
	}
	return nil
}

func handoverMatrix(t sim.Timeouts) []Case {
	one := func(fs ...sim.Fault) []Move { return []Move{{Faults: fs}} }
	cases := []Case{
		{ID: "1.1", Group: "handover", Name: "plain handover a→b", Kind: kindHandover, Moves: one(),
			Expect: "completed, the output seamless"},
		{ID: "1.2", Group: "handover", Name: "chain a→b→a→b", Kind: kindChain, Moves: []Move{{}, {}, {}},
			Expect: "every move completed, the output seamless each time: the state survives repeated moves"},
		{ID: "1.3", Group: "handover", Name: "refusal", Kind: kindRefusal, Moves: one(),
			Expect: "graded only when the job refuses: refused with a reason, nothing placed, the source still producing"},
	}
	for si, st := range handoverSteps {
		group := "faults at " + st.name
		n := 0
		add := func(name, expect string, f sim.Fault) {
			n++
			cases = append(cases, Case{ID: fmt.Sprintf("%d.%d", si+2, n), Group: group, Name: name, Kind: kindFault, Step: st.name,
				Moves: one(f), Expect: expect})
		}
		sides := []string{sideSource}
		if st.target {
			sides = append(sides, sideTarget)
		}
		for _, kind := range []string{"kill", "stop", "pause", "drop-socket"} {
			for _, side := range sides {
				f := sim.Fault{Kind: kind, Side: side, On: st.frame}
				if kind == "pause" {
					f.Delay = sim.Duration(pauseFor)
				}
				add(fmt.Sprintf("%s the %s on %s", verb(kind), side, st.frame), expectOf(st, f), f)
			}
		}
		abort := sim.Fault{Kind: "worker-abort", On: st.frame}
		add("the worker aborts on "+st.frame, expectOf(st, abort), abort)
		if !st.listener {
			// Half a timeout past the timeout: the phase gives up on the
			// frame well before it arrives, so the case is decided by
			// the timeout, not by a race with it.
			limit, _ := sim.FrameTimeout(st.frame, t)
			held := limit + limit/2
			late := sim.Fault{Kind: "delay-frame", Frame: st.frame, Delay: sim.Duration(held)}
			add(fmt.Sprintf("%s held past its phase's timeout (%s of %s)", st.frame, held, limit), expectOf(st, late), late)
			dup := sim.Fault{Kind: "duplicate-frame", Frame: st.frame}
			add(st.frame+" delivered twice", expectOf(st, dup), dup)
			bad := sim.Fault{Kind: "corrupt-frame", Frame: st.frame}
			add(st.frame+" corrupted", expectOf(st, bad), bad)
		}
		if st.frame == protocol.TypeHello {
			fail := sim.Fault{Kind: "target-fail-start"}
			add("the target fails to start", expectOf(st, fail), fail)
		}
	}
	for i := range cases {
		cases[i].Strategy = sim.Handover
	}
	return cases
}

// movingMatrix is the matrix of a job that promised overlap or
// stopThenStart: it speaks no handover, so only what its runtime can do
// to it applies.
func movingMatrix(strategy sim.Strategy) []Case {
	one := func(fs ...sim.Fault) []Move { return []Move{{Faults: fs}} }
	what := "the target started before the source stops"
	if strategy == sim.StopThenStart {
		what = "the source stopped before the target starts"
	}
	cases := []Case{
		{ID: "1.1", Group: string(strategy), Name: string(strategy) + " a→b", Kind: kindMove, Moves: one(),
			Expect: "completed, " + what + "; the gap or overlap measured"},
		{ID: "1.2", Group: string(strategy), Name: string(strategy) + " a→b→a→b", Kind: kindChain, Moves: []Move{{}, {}, {}},
			Expect: "every move completed"},
		{ID: "2.1", Group: "faults", Name: "the target fails to start", Kind: kindFault, Moves: one(sim.Fault{Kind: "target-fail-start"}),
			Expect: "ended with the start's error reported; the source still producing"},
	}
	if strategy == sim.StopThenStart {
		cases[2].Expect = "ended with the start's error reported; the source was stopped first, as stopThenStart does, so nothing of the job runs"
	}
	for i := range cases {
		cases[i].Strategy = strategy
	}
	return cases
}

func verb(kind string) string {
	switch kind {
	case "drop-socket":
		return "drop the socket of"
	}
	return kind
}

// expectOf is, in words, what the contract prescribes when fault f
// strikes at st: before the point of no return a break rolls back,
// after it nothing does.
func expectOf(st step, f sim.Fault) string {
	rollback := "rolled back: the target removed, the source still producing and able to hand over cleanly afterwards"
	if f.Side == sideSource && (f.Kind == "kill" || f.Kind == "stop") {
		rollback = "rolled back: the target removed; the source is gone with the fault, and nothing of the job is left running"
	}
	switch f.Kind {
	case "pause":
		return "a short freeze: completed and seamless, or rolled back cleanly"
	case "duplicate-frame":
		return "completed and seamless, or rolled back cleanly: a frame delivered twice must not break the job"
	}
	if !st.pastNoReturn {
		return rollback
	}
	if st.frame == protocol.TypeSourceStoppedOutput && ((f.Side == sideSource && f.Kind != "pause") || (f.Frame == st.frame && f.Kind != "duplicate-frame")) {
		// The frame is lost before it is acted on: the point of no
		// return is never passed.
		return rollback
	}
	return "failed, reported, nothing rolled back"
}

// Select keeps the cases whose ID or name matches pattern, a
// comma-separated list of: a path.Match glob against the ID ("3.*",
// "2.1"), or else a case-insensitive substring of the ID, group or name
// ("kill", "target-ready"). The cases keep the matrix's order.
func Select(cases []Case, pattern string) []Case {
	if strings.TrimSpace(pattern) == "" {
		return cases
	}
	var pats []string
	for _, p := range strings.Split(pattern, ",") {
		if p = strings.TrimSpace(p); p != "" {
			pats = append(pats, p)
		}
	}
	var out []Case
	for _, c := range cases {
		for _, p := range pats {
			if ok, _ := path.Match(p, c.ID); ok || c.ID == p ||
				strings.Contains(strings.ToLower(c.Group+" "+c.Name), strings.ToLower(p)) {
				out = append(out, c)
				break
			}
		}
	}
	return out
}
