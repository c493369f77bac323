package manager

import (
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/normsim/normsim/protocol"
	"github.com/normsim/normsim/sim"
)

// does lists the kinds of effects, in order, with what they name:
// "record(place-target source state)", "move(cutover-ready)",
// "relay(source cutover-ready)", "fire(state)", "handOn", "answer()".
func does(effs []effect) []string {
	var out []string
	for _, e := range effs {
		switch e.do {
		case doRecord:
			k := ""
			if e.kind != "" {
				k = string(e.kind) + " "
			}
			out = append(out, fmt.Sprintf("record(%s%s %s)", k, e.phase, e.side))
		case doMove:
			out = append(out, "move("+string(e.phase)+")")
		case doHoldLogs:
			out = append(out, "holdLogs")
		case doRelay:
			out = append(out, "relay("+e.side+" "+e.frame+")")
		case doFire:
			out = append(out, "fire("+e.frame+")")
		case doHandOn:
			out = append(out, "handOn")
		case doAnswer:
			out = append(out, "answer("+e.detail+")")
		case doMarkPassed:
			out = append(out, "markPassed")
		default:
			out = append(out, fmt.Sprintf("unknown(%d)", e.do))
		}
	}
	return out
}

func frameIn(side, typ string, at time.Time) input {
	return input{kind: inSocket, side: side, now: at.Add(time.Millisecond),
		socket: sim.SocketEvent{Kind: sim.SocketFrame, Role: side + "-1", At: at, Size: 40,
			Frame: protocol.JobFrame{Type: typ, Reason: "why", Payload: json.RawMessage(`{"n":1}`)}}}
}

// TestStepDecidesEveryFrameInEveryPhase: a frame from either side, of
// every type a job may send, in every phase, on time and late, against a
// migration running and one bound to end. step is pure, so each row is one
// call with no socket, process or store.
func TestStepDecidesEveryFrameInEveryPhase(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	types := []string{protocol.TypeState, protocol.TypeStateRefused, protocol.TypeTargetReady,
		protocol.TypeSourceStoppedOutput, protocol.TypeTargetApplied, protocol.TypeAbort}
	rows := 0
	for _, phase := range append(sim.Phases(), sim.PhaseRequested) {
		for _, side := range []string{sideSource, sideTarget} {
			for _, typ := range types {
				for _, late := range []bool{false, true} {
					for _, ending := range []bool{false, true} {
						rows++
						s := state{id: "m1", strategy: sim.Handover, phase: phase}
						s.ending = ending
						in := frameIn(side, typ, at)
						in.late = late
						name := fmt.Sprintf("%s from the %s in %s (late %v, ending %v)", typ, side, phase, late, ending)
						next, effs := step(s, in)
						got := does(effs)
						want := s
						var w []string
						fs := stepFrame(phase, late || ending, side, typ)
						switch {
						case late || ending:
							// Recorded as late, nothing else: not handed on,
							// no fault fires on it, nothing moves.
							w = []string{"record(" + string(phase) + " " + side + ")"}
						case typ == protocol.TypeAbort:
							want.ending, want.abortedBy = true, side
							if side == sideTarget {
								want.targetToldAt = at
							}
							w = []string{"record(" + string(phase) + " " + side + ")", "fire(abort)", "handOn"}
						case fs.next == sim.PhaseCutoverReady:
							want.phase, want.readyAt = sim.PhaseCutoverReady, at
							w = []string{"record(" + string(phase) + " target)", "move(cutover-ready)", "holdLogs", "relay(source cutover-ready)", "fire(target-ready)", "handOn"}
						case fs.next == sim.PhaseCutoverApply:
							want.phase, want.stoppedAt, want.ponr, want.applySentAt = sim.PhaseCutoverApply, at, true, in.now
							want.handedOver = in.socket.Frame.Payload // the position the seam's blame reads
							w = []string{"record(cutover-ready source)", "move(cutover-apply)", "record(point-of-no-return cutover-apply manager)", "markPassed", "relay(target cutover-apply)", "fire(source-stopped-output)", "handOn"}
						default:
							// Recorded and handed on to the steps, which
							// wait for it or not.
							w = []string{"record(" + string(phase) + " " + side + ")", "fire(" + typ + ")", "handOn"}
						}
						if !reflect.DeepEqual(next, want) {
							t.Errorf("%s: state\n%+v\nwant\n%+v", name, next, want)
						}
						if !slices.Equal(got, w) {
							t.Errorf("%s: effects %q\nwant %q", name, got, w)
						}
					}
				}
			}
		}
	}
	if rows != (len(sim.Phases())+1)*2*len(types)*4 {
		t.Fatalf("walked %d rows", rows)
	}
}

// TestStepRecordsAFrameOnceAndSaysWhyItWasLate: a frame a fault's passage
// recorded already is not recorded again; a late one says why, and for
// one a delay-frame fault held, how late it came.
func TestStepRecordsAFrameOnceAndSaysWhyItWasLate(t *testing.T) {
	t.Parallel()
	at := time.Now()
	s := state{id: "m1", strategy: sim.Handover, phase: sim.PhaseCutoverReady}

	in := frameIn(sideSource, protocol.TypeSourceStoppedOutput, at)
	in.recorded = true
	_, effs := step(s, in)
	if got := does(effs); got[0] != "move(cutover-apply)" {
		t.Errorf("a recorded frame: %q; want no record of it first", got)
	}

	in = frameIn(sideSource, protocol.TypeSourceStoppedOutput, at)
	in.late = true
	in.socket.Reason = "its phase ended 3ms before"
	_, effs = step(s, in)
	if len(effs) != 1 || effs[0].detail != "late source-stopped-output from the source: its phase ended 3ms before; ignored" || effs[0].info == nil || effs[0].info.Direction != dirIn {
		t.Errorf("a late frame: %+v", effs)
	}

	in.held, in.lateBy = 250*time.Millisecond, "12ms after its phase timed out"
	_, effs = step(s, in)
	if len(effs) != 1 || effs[0].detail != "late source-stopped-output from the source: held 250ms by a delay-frame fault, it came 12ms after its phase timed out; ignored" {
		t.Errorf("a held late frame: %+v", effs)
	}
	in.lateBy = ""
	_, effs = step(s, in)
	if len(effs) != 1 || !strings.HasSuffix(effs[0].detail, "it came after the migration was bound to end; ignored") {
		t.Errorf("a held frame late because the migration is ending: %+v", effs)
	}
}

// TestStepOnConnectAndClose: a connection is noted and fires what is armed
// on the frames it begins with; only a handover target handed its state,
// while it is placed, moves the migration (to target-ready). A closed
// socket binds the migration to end.
func TestStepOnConnectAndClose(t *testing.T) {
	t.Parallel()
	initial := json.RawMessage(`{"frame":42}`)
	for _, phase := range append(sim.Phases(), sim.PhaseRequested) {
		for _, side := range []string{sideSource, sideTarget} {
			for _, withState := range []bool{false, true} {
				for _, ending := range []bool{false, true} {
					s := state{id: "m1", strategy: sim.Handover, phase: phase}
					s.ending = ending
					if withState {
						s.initialState, s.initialSize = initial, 77
					}
					name := fmt.Sprintf("%s connects in %s (state %v, ending %v)", side, phase, withState, ending)
					next, effs := step(s, input{kind: inSocket, side: side, socket: sim.SocketEvent{Kind: sim.SocketConnected}})
					w := []string{"record(connected " + string(phase) + " " + side + ")", "fire(hello)", "fire(hello-ack)"}
					want := s
					if side == sideTarget && withState {
						w = append(w, "record("+string(phase)+" target)", "fire(initial-state)")
						if phase == sim.PhasePlaceTarget && !ending {
							want.phase = sim.PhaseTargetReady
							w = append(w, "move(target-ready)")
						}
						if e := effs[3]; e.info == nil || e.info.Direction != dirOut || e.info.Type != protocol.TypeInitialState || e.info.Size != 77 || string(e.info.Payload) != string(initial) {
							t.Errorf("%s: the initial state is recorded as %+v", name, e.info)
						}
					}
					w = append(w, "handOn")
					if got := does(effs); !slices.Equal(got, w) {
						t.Errorf("%s: effects %q\nwant %q", name, got, w)
					}
					if !reflect.DeepEqual(next, want) {
						t.Errorf("%s: state %+v, want %+v", name, next, want)
					}

					next, effs = step(s, input{kind: inSocket, side: side, socket: sim.SocketEvent{Kind: sim.SocketDisconnected, Code: 1011, Reason: "bye", ClosedBy: sim.ClosedByJob}})
					want = s
					want.ending = true
					if got, w := does(effs), []string{"record(socket-closed " + string(phase) + " " + side + ")", "handOn"}; !slices.Equal(got, w) || effs[0].detail != "socket closed by the job with 1011 (bye)" {
						t.Errorf("%s, then closes: effects %q (%q), want %q", name, got, effs[0].detail, w)
					}
					if !reflect.DeepEqual(next, want) {
						t.Errorf("%s, then closes: state %+v", name, next)
					}
				}
			}
		}
	}
}

// TestStepOnExitAndTheUsersAbort: an exit binds the migration to end, any
// other runtime event changes nothing; the user's abort is taken or
// refused as stepUserAbort says, and only a taken one reaches the steps.
func TestStepOnExitAndTheUsersAbort(t *testing.T) {
	t.Parallel()
	s := state{id: "m1", strategy: sim.Handover, phase: sim.PhaseCutoverReady}
	next, effs := step(s, input{kind: inRuntime, side: sideTarget, exited: true})
	if !next.ending || !slices.Equal(does(effs), []string{"handOn"}) {
		t.Errorf("an exit: ending %v, %q", next.ending, does(effs))
	}
	next, effs = step(s, input{kind: inRuntime, side: sideTarget})
	if !reflect.DeepEqual(next, s) || !slices.Equal(does(effs), []string{"handOn"}) {
		t.Errorf("a runtime event that is no exit: %+v, %q", next, does(effs))
	}

	next, effs = step(s, input{kind: inUserAbort, reason: "aborted by the user: wrong node"})
	want := s
	want.ending, want.abortedBy, want.userAbort = true, sideManager, "aborted by the user: wrong node"
	if !reflect.DeepEqual(next, want) {
		t.Errorf("the user's abort: state %+v, want %+v", next, want)
	}
	if got, w := does(effs), []string{"record(abort-requested cutover-ready manager)", "answer()", "handOn"}; !slices.Equal(got, w) || effs[0].detail != "the user asked to abort: wrong node" {
		t.Errorf("the user's abort: %q (%q), want %q", got, effs[0].detail, w)
	}

	for _, s := range []state{next, {id: "m1", strategy: sim.Handover, phase: sim.PhaseCutoverApply, facts: facts{ponr: true}}, {id: "m1", ended: sim.MigrationCompleted}} {
		again, effs := step(s, input{kind: inUserAbort, reason: "aborted by the user: again"})
		refusal := stepUserAbort("m1", abortAsk{ended: s.ended, strategy: s.strategy, ponr: s.ponr, aborting: s.userAbort, ending: s.ending})
		if !reflect.DeepEqual(again, s) || len(effs) != 1 || effs[0].do != doAnswer || effs[0].detail != refusal || refusal == "" {
			t.Errorf("an abort refused (%q): state %+v, effects %+v", refusal, again, effs)
		}
	}
}

// TestAUsersAbortAtTheDeadlineFindsItTimedOut (attack round 9b, F2): an
// abort the API handed on at or after the deadline of the wait in
// progress is refused, as a job's frame then is late, whether or not the
// timer has fired: 9 of 120 such aborts ended the migration "aborted by
// the user" instead of timed out. One before it is taken.
func TestAUsersAbortAtTheDeadlineFindsItTimedOut(t *testing.T) {
	t.Parallel()
	deadline := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	s := state{id: "m1", strategy: sim.Handover, phase: sim.PhaseCutoverReady}
	s.waiting = wait{role: "src", frames: []string{protocol.TypeSourceStoppedOutput}, deadline: deadline}
	for _, at := range []time.Time{deadline, deadline.Add(time.Millisecond)} {
		next, effs := step(s, input{kind: inUserAbort, reason: "aborted by the user", arrived: at})
		if !reflect.DeepEqual(next, s) || len(effs) != 1 || effs[0].do != doAnswer || !strings.Contains(effs[0].detail, "timed out before the abort arrived") {
			t.Errorf("an abort at deadline%+v: state %+v, effects %+v; want it refused, the state as it was", at.Sub(deadline), next, effs)
		}
	}
	next, _ := step(s, input{kind: inUserAbort, reason: "aborted by the user", arrived: deadline.Add(-time.Millisecond)})
	if next.userAbort == "" {
		t.Errorf("an abort before the deadline was not taken: %+v", next)
	}
}

// TestStepWalksAHandoverFromTheJobsFrames: a handover's cutover, driven
// by its jobs' events through step alone, relays each frame once, to the
// side it asks, after the phase that lets that side answer is entered,
// and crosses the point of no return exactly at source-stopped-output.
func TestStepWalksAHandoverFromTheJobsFrames(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	s := state{id: "m1", strategy: sim.Handover, phase: sim.PhasePlaceTarget}
	s.initialState, s.initialSize = json.RawMessage(`{}`), 40
	events := []input{
		{kind: inSocket, side: sideTarget, socket: sim.SocketEvent{Kind: sim.SocketConnected}},
		frameIn(sideTarget, protocol.TypeTargetReady, at),
		// Answered twice: the second is no cutover any more.
		frameIn(sideTarget, protocol.TypeTargetReady, at.Add(time.Millisecond)),
		frameIn(sideSource, protocol.TypeSourceStoppedOutput, at.Add(2*time.Millisecond)),
		frameIn(sideTarget, protocol.TypeTargetApplied, at.Add(3*time.Millisecond)),
	}
	var phases []sim.Phase
	var relays []string
	ponrAt := -1
	for i, in := range events {
		before := s
		var effs []effect
		s, effs = step(s, in)
		if !before.ponr && s.ponr {
			ponrAt = i
		}
		for _, e := range effs {
			switch e.do {
			case doMove:
				phases = append(phases, e.phase)
			case doRelay:
				// What the relay asks must be armed before it is written.
				if len(phases) == 0 || mayAnswer(phases[len(phases)-1], e.side) == nil {
					t.Errorf("event %d: %s relayed to the %s before its phase lets it answer", i, e.frame, e.side)
				}
				relays = append(relays, e.side+" "+e.frame)
			}
		}
		if len(phases) > 0 && s.phase != phases[len(phases)-1] {
			t.Errorf("event %d: state in %s, but the last move was to %s", i, s.phase, phases[len(phases)-1])
		}
	}
	if w := []sim.Phase{sim.PhaseTargetReady, sim.PhaseCutoverReady, sim.PhaseCutoverApply}; !slices.Equal(phases, w) {
		t.Errorf("phases %v, want %v", phases, w)
	}
	if w := []string{"source cutover-ready", "target cutover-apply"}; !slices.Equal(relays, w) {
		t.Errorf("relays %q, want %q", relays, w)
	}
	if ponrAt != 3 {
		t.Errorf("the point of no return was crossed at event %d, want 3 (source-stopped-output)", ponrAt)
	}
	if s.readyAt != at || s.stoppedAt != at.Add(2*time.Millisecond) || s.ending {
		t.Errorf("moments: ready %v, stopped %v, ending %v", s.readyAt, s.stoppedAt, s.ending)
	}
}

// TestStepIsPure: the same state and event give the same decision, and
// the state passed in is left as it was.
func TestStepIsPure(t *testing.T) {
	t.Parallel()
	at := time.Now()
	s := state{id: "m1", strategy: sim.Handover, phase: sim.PhaseCutoverReady}
	s.initialState = json.RawMessage(`{"a":1}`)
	keep := s
	in := frameIn(sideSource, protocol.TypeSourceStoppedOutput, at)
	n1, e1 := step(s, in)
	n2, e2 := step(s, in)
	if !reflect.DeepEqual(n1, n2) || !reflect.DeepEqual(e1, e2) {
		t.Error("step decided the same event two ways")
	}
	if !reflect.DeepEqual(s, keep) {
		t.Error("step changed the state it was given")
	}
	// The owner's buffer: appended to, what it held kept, the same
	// decision.
	buf := make([]effect, 1, 16)
	buf[0] = effect{do: doAnswer, detail: "before"}
	n3, e3 := stepTo(buf, s, in)
	if !reflect.DeepEqual(n3, n1) || len(e3) != len(e1)+1 || e3[0].detail != "before" || !reflect.DeepEqual(e3[1:], e1) || &e3[0] != &buf[0] {
		t.Errorf("stepTo into a buffer: %q, want %q after what it held, in the same buffer", does(e3), does(e1))
	}
}

// TestTheOwnersDecisionsChangeOneFactEach: what the owner's steps decide
// goes through step like any event; each decision changes its fact alone
// and asks nothing else of the owner.
func TestTheOwnersDecisionsChangeOneFactEach(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	base := state{id: "m1", strategy: sim.Overlap, phase: sim.PhaseStartTarget}
	for _, tc := range []struct {
		name string
		s    func(*state)
		in   input
		want func(*state)
	}{
		{"bound to end", nil, input{kind: inBound}, func(s *state) { s.ending = true }},
		{"bound to end twice", func(s *state) { s.ending = true }, input{kind: inBound}, func(s *state) { s.ending = true }},
		{"the source's state", nil, input{kind: inState, state: json.RawMessage(`{"n":1}`), size: 70},
			func(s *state) { s.initialState, s.initialSize = json.RawMessage(`{"n":1}`), 70 }},
		{"the point of no return", nil, input{kind: inNoReturn}, func(s *state) { s.ponr = true }},
		{"the point of no return after the user's abort", func(s *state) { s.userAbort, s.ending = "aborted by the user", true },
			input{kind: inNoReturn}, func(s *state) { s.userAbort, s.ending = "aborted by the user", true }},
		{"the target took over", nil, input{kind: inTookOver, at: at}, func(s *state) { s.readyAt = at }},
		{"target-applied", nil, input{kind: inApplied, at: at}, func(s *state) { s.appliedAt = at }},
		{"the target told to stop", nil, input{kind: inTargetTold, at: at}, func(s *state) { s.targetToldAt = at }},
		{"the target told to stop, after its own abort", func(s *state) { s.targetToldAt = at.Add(-time.Second) },
			input{kind: inTargetTold, at: at}, func(s *state) { s.targetToldAt = at.Add(-time.Second) }},
	} {
		s := base
		if tc.s != nil {
			tc.s(&s)
		}
		want := base
		tc.want(&want)
		next, effs := step(s, tc.in)
		if !reflect.DeepEqual(next, want) || len(effs) != 0 {
			t.Errorf("%s: state %+v, effects %q\nwant %+v and none", tc.name, next, does(effs), want)
		}
	}
}

// TestOnlyStepChangesTheFacts: step is the one writer of a migration's
// facts; the owner keeps what it returns (run.decide, run.decideLocked)
// and nothing else assigns a fact. Read from the package's source, so a
// new assignment anywhere else fails here.
func TestOnlyStepChangesTheFacts(t *testing.T) {
	t.Parallel()
	fields := map[string]bool{}
	ft := reflect.TypeOf(facts{})
	for i := range ft.NumField() {
		fields[ft.Field(i).Name] = true
	}
	fset := token.NewFileSet()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	keeps := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				var lhs []ast.Expr
				switch n := n.(type) {
				case *ast.AssignStmt:
					lhs = n.Lhs
				case *ast.IncDecStmt:
					lhs = []ast.Expr{n.X}
				case *ast.UnaryExpr:
					if n.Op == token.AND {
						lhs = []ast.Expr{n.X} // a pointer to a fact is a way to write it
					}
				}
				for _, e := range lhs {
					sel, ok := e.(*ast.SelectorExpr)
					if !ok {
						continue
					}
					where := fset.Position(sel.Pos())
					switch {
					case sel.Sel.Name == "facts":
						if fn.Name.Name != "decide" && fn.Name.Name != "decideLocked" {
							t.Errorf("%s: %s sets a migration's facts; only run.decide and run.decideLocked keep what step returns", where, fn.Name.Name)
						}
						keeps++
					case fields[sel.Sel.Name] && name != "step.go":
						t.Errorf("%s: %s assigns the fact %s outside step", where, fn.Name.Name, sel.Sel.Name)
					}
				}
				return true
			})
		}
	}
	if keeps != 2 {
		t.Errorf("the facts are kept in %d places, want 2 (decide, decideLocked)", keeps)
	}
}

// TestStepJudgesAFrameByTheDeadlineOfTheWaitItIsAbout: a frame is judged
// as of when it arrived against the deadline of the step's wait: before
// it, on time (relayed); at or after it, late, if it is about that wait
// (what the wait takes, or an abort from either side); the answer to an
// ask a relay made since is never late for the wait before it. When the
// wait times out, the migration is bound to end and the deadline kept.
func TestStepJudgesAFrameByTheDeadlineOfTheWaitItIsAbout(t *testing.T) {
	t.Parallel()
	deadline := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	waiting := func(phase sim.Phase) state {
		s, _ := step(state{id: "m1", strategy: sim.Handover, phase: phase},
			input{kind: inAwait, wait: wait{role: "source-1", frames: []string{protocol.TypeSourceStoppedOutput}, deadline: deadline}})
		return s
	}
	for _, tc := range []struct {
		name    string
		phase   sim.Phase
		side    string
		typ     string
		arrived time.Duration // from the deadline
		late    bool
	}{
		{"source-stopped-output just before", sim.PhaseCutoverReady, sideSource, protocol.TypeSourceStoppedOutput, -time.Nanosecond, false},
		{"source-stopped-output at the deadline", sim.PhaseCutoverReady, sideSource, protocol.TypeSourceStoppedOutput, 0, true},
		{"source-stopped-output after it", sim.PhaseCutoverReady, sideSource, protocol.TypeSourceStoppedOutput, time.Millisecond, true},
		{"the source's abort after it", sim.PhaseCutoverReady, sideSource, protocol.TypeAbort, time.Millisecond, true},
		{"the target's abort after it", sim.PhaseCutoverReady, sideTarget, protocol.TypeAbort, time.Millisecond, true},
		{"the source's abort before it", sim.PhaseCutoverReady, sideSource, protocol.TypeAbort, -time.Millisecond, false},
		// cutover-apply went out before the deadline; the wait for
		// source-stopped-output has not taken that frame yet.
		{"target-applied after it, answering a relay made since", sim.PhaseCutoverApply, sideTarget, protocol.TypeTargetApplied, time.Millisecond, false},
	} {
		s := waiting(tc.phase)
		in := frameIn(tc.side, tc.typ, deadline)
		in.arrived = deadline.Add(tc.arrived)
		_, effs := step(s, in)
		late := len(effs) == 1 && strings.HasPrefix(effs[0].detail, "late ")
		if late != tc.late {
			t.Errorf("%s: late %v, want %v (%q)", tc.name, late, tc.late, does(effs))
		}
	}

	s, _ := step(waiting(sim.PhaseCutoverReady), input{kind: inTimedOut})
	if !s.ending || !s.timedOut.Equal(deadline) {
		t.Errorf("timed out: ending %v, timedOut %v", s.ending, s.timedOut)
	}
	s, _ = step(s, input{kind: inWaited})
	if !s.waiting.deadline.IsZero() || !s.timedOut.Equal(deadline) {
		t.Errorf("after the wait: waiting %+v, timedOut %v", s.waiting, s.timedOut)
	}
	// Between waits no frame is late for a deadline.
	in := frameIn(sideSource, protocol.TypeSourceStoppedOutput, deadline)
	in.arrived = deadline.Add(time.Hour)
	if _, effs := step(state{id: "m1", strategy: sim.Handover, phase: sim.PhaseCutoverReady}, in); len(effs) < 2 {
		t.Errorf("a frame with no wait in progress: %q", does(effs))
	}
}

// TestAWaitTakesOnlyWhatItWaitsFor: a wait takes its job's frames of the
// types it names, or, naming none, its job's connection; nothing of
// another job's.
func TestAWaitTakesOnlyWhatItWaitsFor(t *testing.T) {
	t.Parallel()
	frame := func(role, typ string) sim.SocketEvent {
		return sim.SocketEvent{Kind: sim.SocketFrame, Role: role, Frame: protocol.JobFrame{Type: typ}}
	}
	connected := func(role string) sim.SocketEvent { return sim.SocketEvent{Kind: sim.SocketConnected, Role: role} }
	state := wait{role: "s", frames: []string{protocol.TypeState, protocol.TypeStateRefused}}
	connect := wait{role: "t"}
	for _, tc := range []struct {
		w    wait
		ev   sim.SocketEvent
		want bool
	}{
		{state, frame("s", protocol.TypeState), true},
		{state, frame("s", protocol.TypeStateRefused), true},
		{state, frame("s", protocol.TypeAbort), false},
		{state, frame("t", protocol.TypeState), false},
		{state, connected("s"), false},
		{connect, connected("t"), true},
		{connect, connected("s"), false},
		{connect, frame("t", protocol.TypeTargetReady), false},
		{wait{}, connected(""), false},
	} {
		if got := tc.w.accepts(tc.ev); got != tc.want {
			t.Errorf("%+v accepts %+v: %v, want %v", tc.w, tc.ev, got, tc.want)
		}
	}
}
