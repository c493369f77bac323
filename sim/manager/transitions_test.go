package manager

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/normsim/normsim/sim"
)

// TestAUserAbortIsDecidedByTheMigrationsState: the user's abort is taken
// only while nothing else has decided the migration's end; each refusal
// says what did. The first row that applies wins, in this order.
func TestAUserAbortIsDecidedByTheMigrationsState(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		ask  abortAsk
		want string // "" taken; else a part of the refusal
	}{
		{"running, before the point of no return", abortAsk{strategy: sim.Handover}, ""},
		{"running overlap", abortAsk{strategy: sim.Overlap}, ""},
		{"completed", abortAsk{ended: sim.MigrationCompleted, ponr: true}, "already ended completed; there is nothing to abort"},
		{"failed, though bound to end", abortAsk{ended: sim.MigrationFailed, ending: true}, "already ended failed"},
		{"handover past the point of no return", abortAsk{strategy: sim.Handover, ponr: true}, "past the point of no return (the source stopped its output and the target was told to apply)"},
		{"overlap past it", abortAsk{strategy: sim.Overlap, ponr: true}, "(the target is running and the source is being stopped)"},
		{"stopThenStart past it", abortAsk{strategy: sim.StopThenStart, ponr: true}, "(the source was stopped and the target is being started)"},
		{"asked twice", abortAsk{strategy: sim.Handover, aborting: "aborted by the user: first", ending: true}, "already being aborted (aborted by the user: first)"},
		{"a job's abort came first", abortAsk{strategy: sim.Handover, ending: true}, "already ending; it cannot be aborted now"},
	} {
		got := stepUserAbort("m1", tc.ask)
		if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) || (got != "" && !strings.HasPrefix(got, "migration m1 ")) {
			t.Errorf("%s: stepUserAbort = %q; want %q", tc.name, got, tc.want)
		}
	}
}

// TestOnlyAHandoverTargetGivenItsStateMovesOnConnect: a target that
// connects while its handover places it, with its initial state, is then
// asked for target-ready; any other connection moves nothing.
func TestOnlyAHandoverTargetGivenItsStateMovesOnConnect(t *testing.T) {
	t.Parallel()
	for _, phase := range append(sim.Phases(), sim.PhaseRequested) {
		for _, side := range []string{sideSource, sideTarget} {
			for _, withState := range []bool{false, true} {
				for _, ending := range []bool{false, true} {
					next, ok := stepConnected(phase, ending, side, withState)
					want := side == sideTarget && withState && !ending && phase == sim.PhasePlaceTarget
					if ok != want || (ok && next != sim.PhaseTargetReady) || (!ok && next != phase) {
						t.Errorf("stepConnected(%s, ending %v, %s, state %v) = %s, %v; want a move to target-ready: %v", phase, ending, side, withState, next, ok, want)
					}
				}
			}
		}
	}
}

// armSocket records what the migration lets each job send (Expect).
type armSocket struct {
	sim.JobSocket
	armed []string
}

func (s *armSocket) Expect(_, role string, types ...string) {
	s.armed = append(s.armed, role+": "+strings.Join(types, ","))
}

// TestEachPhaseLetsEachSideSendWhatItAsks: as a migration enters a phase,
// each side that is there is let send what the phase asks of it, and
// nothing else is armed; a target placed later is armed as it is placed.
// A missing arm is a correct job's answer closed with 4400 by the real
// listener.
func TestEachPhaseLetsEachSideSendWhatItAsks(t *testing.T) {
	t.Parallel()
	want := map[sim.Phase][]string{
		sim.PhaseGetState:     {"src-1: state,state-refused,abort"},
		sim.PhasePlaceTarget:  {"src-1: abort", "tgt-1: target-ready,abort"},
		sim.PhaseCutoverReady: {"src-1: source-stopped-output,abort"},
		sim.PhaseCutoverApply: {"tgt-1: target-applied,abort"},
	}
	for _, phase := range append(sim.Phases(), sim.PhaseRequested) {
		for _, placed := range []bool{false, true} {
			sock := &armSocket{}
			r := &run{src: sim.Instance{ID: "src-1", JobID: "job-1"}, srcNode: &Node{Socket: sock}, tgtNode: &Node{Socket: sock}}
			if placed {
				r.mig.Target.Instance = "tgt-1"
			}
			r.moveLocked(phase, time.Time{})
			if !placed {
				// The target is placed in this phase: armed then.
				r.mig.Target.Instance = "tgt-1"
				r.allowLocked(sideTarget)
			}
			w := want[phase]
			if !slices.Equal(sock.armed, w) {
				t.Errorf("entering %s (target placed before: %v) armed %q; want %q", phase, placed, sock.armed, w)
			}
		}
	}
}

// TestEachStrategyWalksItsDocumentedPhases: the phases each strategy's
// table enters, with those the job's frames move a handover to
// (stepConnected, stepFrame), are the documented ones in order; each has
// one point of no return, where docs/migrations.md puts it; and every
// wait is bounded by a timeout a user can set.
func TestEachStrategyWalksItsDocumentedPhases(t *testing.T) {
	t.Parallel()
	want := map[sim.Strategy]struct {
		phases []sim.Phase
		// noReturnIn is the phase the point of no return is crossed in.
		noReturnIn sim.Phase
	}{
		sim.Handover: {[]sim.Phase{sim.PhaseGetState, sim.PhasePlaceTarget, sim.PhaseTargetReady, sim.PhaseCutoverReady, sim.PhaseCutoverApply, sim.PhaseStopSource},
			sim.PhaseCutoverReady},
		sim.Overlap:       {[]sim.Phase{sim.PhaseStartTarget, sim.PhaseStopSource}, sim.PhaseStartTarget},
		sim.StopThenStart: {[]sim.Phase{sim.PhasePrepareTarget, sim.PhaseStopSource, sim.PhaseStartTarget}, sim.PhaseStopSource},
	}
	for _, st := range sim.Strategies {
		if _, ok := want[st]; !ok {
			t.Errorf("the contract's strategy %s has no documented phases here", st)
		}
		if len(strategies[st]) == 0 {
			t.Errorf("the contract's strategy %s has no table of steps", st)
		}
	}
	if len(strategies) != len(sim.Strategies) {
		t.Errorf("%d strategy tables for the contract's %d strategies", len(strategies), len(sim.Strategies))
	}
	r := &run{timeouts: sim.DefaultTimeouts}
	for st, w := range want {
		var walked []sim.Phase
		var crossed []sim.Phase
		phase := sim.PhaseRequested
		move := func(p sim.Phase) {
			phase = p
			walked = append(walked, p)
		}
		for i, s := range strategies[st] {
			if s.timeout != "" {
				func() {
					defer func() {
						if p := recover(); p != nil {
							t.Errorf("%s step %d: %v", st, i, p)
						}
					}()
					r.limit(s.timeout)
				}()
			}
			if s.enter != "" {
				move(s.enter)
			}
			switch s.act {
			case awaitConnected:
				if next, ok := stepConnected(phase, false, sideTarget, true); ok {
					move(next)
				}
			case awaitFrame:
				if s.timeout == "" {
					t.Errorf("%s step %d waits for %s with no timeout", st, i, s.frame)
				}
				if fs := stepFrame(phase, false, s.side, s.frame); fs.next != "" {
					if fs.next == sim.PhaseCutoverApply {
						crossed = append(crossed, phase)
					}
					move(fs.next)
				}
			case noReturn:
				crossed = append(crossed, phase)
			}
		}
		if !slices.Equal(walked, w.phases) {
			t.Errorf("%s walks %v; the documented phases are %v", st, walked, w.phases)
		}
		if len(crossed) != 1 || crossed[0] != w.noReturnIn {
			t.Errorf("%s crosses the point of no return in %v; want once, in %s", st, crossed, w.noReturnIn)
		}
	}
}

// TestEveryStepEndsAsDocumented: whatever ends a strategy's step (its
// timeout, a disruption, an abort) ends the migration aborted, rolled
// back, before the point of no return, and failed after it
// (docs/migrations.md); a refused get-state ends it refused. Rows marked
// "" cannot fail.
func TestEveryStepEndsAsDocumented(t *testing.T) {
	t.Parallel()
	const ab, fl = sim.MigrationAborted, sim.MigrationFailed
	want := map[sim.Strategy][]sim.MigrationState{
		// ask state, place, start, connect, target-ready, source-stopped-output, target-applied, linger, stop the source
		sim.Handover: {ab, ab, ab, ab, ab, ab, fl, fl, fl},
		// place and start, running, (timeline), output, no return, (took over), stop the source
		sim.Overlap: {ab, ab, "", ab, ab, "", fl},
		// prepare, go on, stop the source, no return, start, running, go on, (took over), (timeline)
		sim.StopThenStart: {ab, ab, ab, ab, fl, fl, fl, "", ""},
	}
	cannotFail := map[act]bool{targetRunning: true, targetUp: true}
	for st, states := range want {
		steps := strategies[st]
		if len(steps) != len(states) {
			t.Errorf("%s has %d steps; the table here has %d", st, len(steps), len(states))
			continue
		}
		ponr := false
		phase := sim.PhaseRequested
		for i, s := range steps {
			if s.enter != "" {
				phase = s.enter
			}
			if cannotFail[s.act] != (states[i] == "") {
				t.Errorf("%s step %d (act %d): can fail %v, the table here says %q", st, i, s.act, !cannotFail[s.act], states[i])
			}
			if states[i] != "" {
				why := endf("timed out after 2s waiting for step %d", i)
				if got, reason := stepEnd(why, ponr); got != states[i] || reason != why.Error() {
					t.Errorf("%s step %d failing ends %s (%q); want %s", st, i, got, reason, states[i])
				}
			}
			switch s.act {
			case awaitConnected:
				if next, ok := stepConnected(phase, false, sideTarget, true); ok {
					phase = next
				}
			case awaitFrame:
				if next := stepFrame(phase, false, s.side, s.frame).next; next != "" {
					ponr = ponr || next == sim.PhaseCutoverApply
					phase = next
				}
			case noReturn:
				ponr = true
			}
		}
		if got, _ := stepEnd(nil, ponr); got != sim.MigrationCompleted {
			t.Errorf("%s ran every step and ends %s, want completed", st, got)
		}
	}
	if got, reason := stepEnd(&refused{"busy"}, false); got != sim.MigrationRefused || reason != "busy" {
		t.Errorf("a refused get-state ends %s (%q), want refused (busy)", got, reason)
	}
}

// TestStepBrokenBlamesOnlyAPromiseTheRecordProves: a side is named only
// for an end it brought on itself, in a migration that did not complete
// and where no fault struck that side.
func TestStepBrokenBlamesOnlyAPromiseTheRecordProves(t *testing.T) {
	late := brokenf(sideSource, sim.PromiseAnswerInTime, "timed out after 10s waiting for the source's state")
	for _, tc := range []struct {
		name   string
		err    error
		state  sim.MigrationState
		struck map[string]bool
		want   string // the side blamed; "" for none
	}{
		{"a missed answer", late, sim.MigrationAborted, nil, sideSource},
		{"past the point of no return too", late, sim.MigrationFailed, nil, sideSource},
		{"not when a fault struck that side", late, sim.MigrationAborted, map[string]bool{sideSource: true}, ""},
		{"when a fault struck only the other side", late, sim.MigrationAborted, map[string]bool{sideTarget: true}, sideSource},
		{"not a completed migration", late, sim.MigrationCompleted, nil, ""},
		{"not an end no side brought on", endf("the target aborted: no decoder"), sim.MigrationAborted, nil, ""},
		{"not a refusal", &refused{"busy"}, sim.MigrationRefused, nil, ""},
	} {
		b := stepBroken(tc.err, tc.state, tc.struck)
		switch {
		case tc.want == "" && b != nil:
			t.Errorf("%s: blames %+v, want no side", tc.name, b)
		case tc.want != "" && (b == nil || b.Side != tc.want || b.Detail != tc.err.Error() || b.Promise == ""):
			t.Errorf("%s: blames %+v, want the %s with the reason and its promise", tc.name, b, tc.want)
		}
	}
}

// TestAFrameIsLateOnlyForTheWaitItIsAbout: a frame is late when it was
// handed on at or after the deadline of the wait it is about, and on time
// before it, whenever the owner takes it.
func TestAFrameIsLateOnlyForTheWaitItIsAbout(t *testing.T) {
	t.Parallel()
	deadline := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name     string
		deadline time.Time
		arrived  time.Time
		about    bool
		late     bool
	}{
		{"no wait in progress", time.Time{}, deadline.Add(time.Hour), true, false},
		{"a nanosecond before the deadline", deadline, deadline.Add(-time.Nanosecond), true, false},
		{"at the deadline", deadline, deadline, true, true},
		{"after it", deadline, deadline.Add(time.Millisecond), true, true},
		{"after it, answering a later ask", deadline, deadline.Add(time.Millisecond), false, false},
	} {
		if got := stepDeadline(tc.deadline, tc.arrived, func() bool { return tc.about }); got != tc.late {
			t.Errorf("%s: late = %v, want %v", tc.name, got, tc.late)
		}
	}
}
