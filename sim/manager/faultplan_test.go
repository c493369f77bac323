package manager

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/normsim/normsim/protocol"
	"github.com/normsim/normsim/sim"
)

// The fault plan and the migration's transitions, tested without sockets:
// planPassage and stepFrame are pure; passLocked is run on a run whose
// sockets, runtime and frame way only record what they are asked.

// fakeWay records what passLocked asks of a frame's way.
type fakeWay struct{ calls []string }

func (w *fakeWay) arrived() { w.calls = append(w.calls, "arrived") }
func (w *fakeWay) pass(faulted bool) error {
	if faulted {
		w.calls = append(w.calls, "pass faulted")
	} else {
		w.calls = append(w.calls, "pass")
	}
	return nil
}
func (w *fakeWay) corrupt() error { w.calls = append(w.calls, "corrupt"); return nil }
func (w *fakeWay) hold(d time.Duration, what string) {
	w.calls = append(w.calls, fmt.Sprintf("hold %s %s", d, what))
}

// fakeSocket records the sockets a fault drops; nothing else may be called.
type fakeSocket struct {
	sim.JobSocket
	calls []string
}

// Drop: every job here is connected, so a drop-socket lands.
func (s *fakeSocket) Drop(jobID, role string) uint64 {
	s.calls = append(s.calls, "drop "+jobID+"/"+role)
	return 1
}

// fakeSignaler is the target's runtime: it records the signals it is
// asked to send, and fails them with err.
type fakeSignaler struct {
	sim.Runtime
	sent []string
	err  error
}

func (f *fakeSignaler) Name() string { return "fake" }
func (f *fakeSignaler) Signal(_ context.Context, id string, sig syscall.Signal) error {
	f.sent = append(f.sent, fmt.Sprintf("%s %s", sig, id))
	return f.err
}

type planRun struct {
	r                      *run
	srcSock, tgSock        *fakeSocket
	srcRuntime, tgtRuntime *fakeSignaler
}

// newPlanRun is a handover run in phase with faults armed. Its timeline is
// held back (deferring), so nothing reaches a journal or bus. A pause
// thaws at once: the manager's context is done.
func newPlanRun(t *testing.T, phase sim.Phase, faults ...sim.Fault) *planRun {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	pr := &planRun{srcSock: &fakeSocket{}, tgSock: &fakeSocket{}, srcRuntime: &fakeSignaler{}, tgtRuntime: &fakeSignaler{}}
	m := &Manager{now: func() time.Time { return time.Unix(0, 0) }, ctx: ctx,
		cfg: Config{Runtimes: sim.RuntimeSet{Runtimes: map[string]sim.Runtime{"fake": pr.srcRuntime}}}}
	t.Cleanup(m.wg.Wait)
	pr.r = &run{m: m, id: "mig-1", src: sim.Instance{ID: "src-1", JobID: "job-1", Runtime: "fake"},
		srcNode: &Node{Socket: pr.srcSock}, tgtNode: &Node{Socket: pr.tgSock}, rt: pr.tgtRuntime,
		faults: faults, fired: make([]bool, len(faults)), events: newEventQueue(),
		mig: sim.Migration{Phase: phase, Target: sim.MigrationEndpoint{Instance: "tgt-1"}}, deferring: true}
	return pr
}

// timeline is what the run recorded, as "side: detail", each checked to
// be in phase.
func (pr *planRun) timeline(t *testing.T, phase sim.Phase) []string {
	t.Helper()
	pr.r.m.wg.Wait()
	pr.r.handleArrived() // what other goroutines handed the owner
	pr.r.mu.Lock()
	defer pr.r.mu.Unlock()
	var out []string
	for _, ev := range pr.r.deferred {
		if ev.Phase != phase {
			t.Errorf("%q recorded in phase %q, want %q", ev.Detail, ev.Phase, phase)
		}
		out = append(out, ev.Side+": "+ev.Detail)
	}
	return out
}

var (
	inFromTarget = func(typ string) passage { return passage{typ: typ, dir: dirIn, side: sideTarget} }
	inFromSource = func(typ string) passage { return passage{typ: typ, dir: dirIn, side: sideSource} }
	outToTarget  = func(typ string) passage { return passage{typ: typ, dir: dirOut, side: sideTarget} }
	outToSource  = func(typ string) passage { return passage{typ: typ, dir: dirOut, side: sideSource} }
)

func on(kind, side, typ string) sim.Fault { return sim.Fault{Kind: kind, Side: side, On: typ} }
func frameFault(kind, typ, dir string) sim.Fault {
	return sim.Fault{Kind: kind, Frame: typ, Direction: dir}
}

// TestPassLockedDecidesEveryFault runs each passage with its faults in
// every phase: the decision does not depend on the phase, and everything
// it records is stamped with it.
func TestPassLockedDecidesEveryFault(t *testing.T) {
	const (
		ready   = protocol.TypeTargetReady
		cready  = protocol.TypeCutoverReady
		capply  = protocol.TypeCutoverApply
		stopped = protocol.TypeSourceStoppedOutput
	)
	delayed := frameFault(faultDelayFrame, ready, dirIn)
	delayed.Delay = sim.Duration(2 * time.Second)
	toSourceOnly := frameFault(faultDropFrame, capply, dirOut)
	toSourceOnly.Side = sideSource
	for _, tt := range []struct {
		name       string
		faults     []sim.Fault
		fired      []bool // already fired (default: none)
		p          passage
		noTarget   bool  // the target is not placed yet
		sigErr     error // the target's runtime fails its signals
		way        []string
		timeline   []string
		signals    []string // sent to the target
		srcSignals []string // sent to the source
		drops      []string // sockets dropped on the source's node
		spent      []bool   // fired after the passage
		aborted    string   // the worker-abort posted, if any
	}{
		{name: "no fault: passed on", p: inFromTarget(ready), way: []string{"pass"}},
		{name: "a fault on another frame", faults: []sim.Fault{on(faultKill, sideTarget, stopped)}, p: inFromTarget(ready),
			way: []string{"pass"}, spent: []bool{false}},
		{name: "kill the target on its frame: lost with it", faults: []sim.Fault{on(faultKill, sideTarget, ready)}, p: inFromTarget(ready),
			way:      []string{"arrived"},
			timeline: []string{"manager: fault: kill the target (armed on target-ready)", "manager: target-ready is lost with the target"},
			signals:  []string{"killed tgt-1"}, spent: []bool{true}},
		{name: "kill the target on a frame to it: lost with it", faults: []sim.Fault{on(faultKill, sideTarget, capply)}, p: outToTarget(capply),
			way:      []string{"arrived"},
			timeline: []string{"manager: fault: kill the target (armed on cutover-apply)", "manager: cutover-apply is lost with the target"},
			signals:  []string{"killed tgt-1"}, spent: []bool{true}},
		{name: "stop the target: lost with it", faults: []sim.Fault{on(faultStop, sideTarget, ready)}, p: inFromTarget(ready),
			way:      []string{"arrived"},
			timeline: []string{"manager: fault: stop the target (armed on target-ready)", "manager: target-ready is lost with the target"},
			signals:  []string{"terminated tgt-1"}, spent: []bool{true}},
		{name: "pause the target: the frame goes on", faults: []sim.Fault{on(faultPause, sideTarget, ready)}, p: inFromTarget(ready),
			way:      []string{"arrived", "pass"},
			timeline: []string{"manager: fault: pause the target (armed on target-ready)", "target: paused for 1s", "target: resumed"},
			signals:  []string{"stopped (signal) tgt-1", "continued tgt-1"}, spent: []bool{true}},
		{name: "a signal that fails loses nothing", faults: []sim.Fault{on(faultStop, sideTarget, ready)}, p: inFromTarget(ready), sigErr: errors.New("boom"),
			way:      []string{"arrived", "pass"},
			timeline: []string{"manager: fault: stop the target (armed on target-ready)", "manager: fault stop could not be delivered: boom"},
			signals:  []string{"terminated tgt-1"}, spent: []bool{true}},
		{name: "a fault on a target not placed yet is spent, and skipped", faults: []sim.Fault{on(faultKill, sideTarget, protocol.TypeGetState)},
			p: outToSource(protocol.TypeGetState), noTarget: true, way: []string{"pass"},
			timeline: []string{"manager: fault: kill the target (armed on get-state)", "manager: fault kill skipped: there is no target yet"},
			spent:    []bool{true}},
		{name: "no target yet: the hit is skipped, the frame goes on", faults: []sim.Fault{on(faultKill, sideTarget, ready)}, p: inFromTarget(ready), noTarget: true,
			way:      []string{"arrived", "pass"},
			timeline: []string{"manager: fault: kill the target (armed on target-ready)", "manager: fault kill skipped: there is no target yet"},
			spent:    []bool{true}},
		{name: "drop the source's socket on a frame to it", faults: []sim.Fault{on(faultDropSocket, sideSource, cready)}, p: outToSource(cready),
			way:      []string{"arrived"},
			timeline: []string{"manager: fault: drop-socket the source (armed on cutover-ready)", "manager: cutover-ready is lost with the source"},
			drops:    []string{"drop job-1/src-1"}, spent: []bool{true}},
		{name: "kill the source on its frame", faults: []sim.Fault{on(faultKill, sideSource, stopped)}, p: inFromSource(stopped),
			way:        []string{"arrived"},
			timeline:   []string{"manager: fault: kill the source (armed on source-stopped-output)", "manager: source-stopped-output is lost with the source"},
			srcSignals: []string{"killed src-1"}, spent: []bool{true}},
		{name: "a job's frame fires the other side's fault only as it is handled", faults: []sim.Fault{on(faultKill, sideSource, ready)}, p: inFromTarget(ready),
			way: []string{"pass"}, spent: []bool{false}},
		{name: "a frame to a job fires the other side's fault once sent", faults: []sim.Fault{on(faultKill, sideTarget, cready)}, p: outToSource(cready),
			way: []string{"pass"}, timeline: []string{"manager: fault: kill the target (armed on cutover-ready)"},
			signals: []string{"killed tgt-1"}, spent: []bool{true}},
		{name: "a lost frame fires the other side's fault at once", faults: []sim.Fault{on(faultKill, sideTarget, ready), on(faultDropSocket, sideSource, ready)},
			p: inFromTarget(ready), way: []string{"arrived"},
			timeline: []string{"manager: fault: kill the target (armed on target-ready)", "manager: target-ready is lost with the target",
				"manager: fault: drop-socket the source (armed on target-ready)"},
			signals: []string{"killed tgt-1"}, drops: []string{"drop job-1/src-1"}, spent: []bool{true, true}},
		{name: "worker-abort on a frame to a job", faults: []sim.Fault{on(faultWorkerAbort, "", capply)}, p: outToTarget(capply),
			way: []string{"pass"}, timeline: []string{"manager: fault: worker-abort the migration (armed on cutover-apply)"},
			spent: []bool{true}, aborted: "the worker aborted (fault armed on cutover-apply)"},
		{name: "worker-abort on a job's frame waits for it to be handled", faults: []sim.Fault{on(faultWorkerAbort, "", stopped)}, p: inFromSource(stopped),
			way: []string{"pass"}, spent: []bool{false}},
		{name: "drop a job's frame", faults: []sim.Fault{frameFault(faultDropFrame, ready, dirIn)}, p: inFromTarget(ready),
			way: []string{"arrived"}, timeline: []string{"manager: fault: dropped target-ready from the target"}, spent: []bool{true}},
		{name: "drop a frame to a job", faults: []sim.Fault{frameFault(faultDropFrame, capply, dirOut)}, p: outToTarget(capply),
			way: []string{"arrived"}, timeline: []string{"manager: fault: dropped cutover-apply to the target"}, spent: []bool{true}},
		{name: "duplicate a job's frame", faults: []sim.Fault{frameFault(faultDuplicateFrame, stopped, dirIn)}, p: inFromSource(stopped),
			way: []string{"arrived", "pass faulted", "pass faulted"}, timeline: []string{"manager: fault: source-stopped-output from the source delivered twice"}, spent: []bool{true}},
		{name: "duplicate a frame to a job", faults: []sim.Fault{frameFault(faultDuplicateFrame, cready, dirOut)}, p: outToSource(cready),
			way: []string{"arrived", "pass faulted", "pass faulted"}, timeline: []string{"manager: fault: cutover-ready to the source sent twice"}, spent: []bool{true}},
		{name: "corrupt a job's frame", faults: []sim.Fault{frameFault(faultCorruptFrame, ready, dirIn)}, p: inFromTarget(ready),
			way:      []string{"arrived", "corrupt"},
			timeline: []string{"manager: fault: target-ready from the target arrived corrupted; closing its socket with 4400"}, spent: []bool{true}},
		{name: "corrupt a frame to a job", faults: []sim.Fault{frameFault(faultCorruptFrame, cready, dirOut)}, p: outToSource(cready),
			way: []string{"arrived", "corrupt"}, timeline: []string{"manager: fault: corrupted cutover-ready to the source"}, spent: []bool{true}},
		{name: "delay a job's frame", faults: []sim.Fault{delayed}, p: inFromTarget(ready),
			way: []string{"arrived", "hold 2s target-ready from the target"}, timeline: []string{"manager: fault: target-ready from the target held for 2s"}, spent: []bool{true}},
		{name: "delay a frame to a job, by default 1s", faults: []sim.Fault{frameFault(faultDelayFrame, capply, dirOut)}, p: outToTarget(capply),
			way: []string{"arrived", "hold 1s cutover-apply to the target"}, timeline: []string{"manager: fault: cutover-apply to the target held for 1s"}, spent: []bool{true}},
		{name: "a frame fault for the other side", faults: []sim.Fault{toSourceOnly}, p: outToTarget(capply), way: []string{"pass"}, spent: []bool{false}},
		{name: "a frame fault for the other direction", faults: []sim.Fault{frameFault(faultDropFrame, protocol.TypeAbort, dirOut)}, p: inFromTarget(protocol.TypeAbort),
			way: []string{"pass"}, spent: []bool{false}},
		{name: "the first frame fault acts, the next waits for the next passage",
			faults: []sim.Fault{frameFault(faultDuplicateFrame, ready, dirIn), frameFault(faultDropFrame, ready, dirIn)}, p: inFromTarget(ready),
			way: []string{"arrived", "pass faulted", "pass faulted"}, timeline: []string{"manager: fault: target-ready from the target delivered twice"},
			spent: []bool{true, false}},
		{name: "a fault fires once", faults: []sim.Fault{frameFault(faultDropFrame, ready, dirIn)}, fired: []bool{true}, p: inFromTarget(ready),
			way: []string{"pass"}, spent: []bool{true}},
		{name: "a frame lost with its job spends no frame fault",
			faults: []sim.Fault{on(faultKill, sideTarget, ready), frameFault(faultDropFrame, ready, dirIn)}, p: inFromTarget(ready),
			way:      []string{"arrived"},
			timeline: []string{"manager: fault: kill the target (armed on target-ready)", "manager: target-ready is lost with the target"},
			signals:  []string{"killed tgt-1"}, spent: []bool{true, false}},
		{name: "a paused job's frame still meets its frame fault",
			faults: []sim.Fault{on(faultPause, sideTarget, ready), frameFault(faultDropFrame, ready, dirIn)}, p: inFromTarget(ready),
			way: []string{"arrived", "arrived"},
			timeline: []string{"manager: fault: pause the target (armed on target-ready)", "target: paused for 1s",
				"manager: fault: dropped target-ready from the target", "target: resumed"},
			signals: []string{"stopped (signal) tgt-1", "continued tgt-1"}, spent: []bool{true, true}},
		{name: "target-fail-start is no frame's", faults: []sim.Fault{{Kind: faultTargetFailStart}}, p: outToTarget(capply),
			way: []string{"pass"}, spent: []bool{false}},
	} {
		for _, phase := range append([]sim.Phase{""}, sim.Phases()...) {
			t.Run(tt.name+"/"+string(phase), func(t *testing.T) {
				pr := newPlanRun(t, phase, slices.Clone(tt.faults)...)
				if tt.fired != nil {
					copy(pr.r.fired, tt.fired)
				}
				if tt.noTarget {
					pr.r.mig.Target.Instance = ""
				}
				pr.tgtRuntime.err = tt.sigErr
				w := &fakeWay{}
				pr.r.mu.Lock()
				err := pr.r.passLocked(tt.p, w)
				pr.r.mu.Unlock()
				pr.r.flushWrites() // faults that strike after the frame wait for it
				if err != nil {
					t.Fatalf("passLocked: %v", err)
				}
				check := func(what string, got, want []string) {
					t.Helper()
					if !slices.Equal(got, want) {
						t.Errorf("%s:\n got %q\nwant %q", what, got, want)
					}
				}
				check("way", w.calls, tt.way)
				check("timeline", pr.timeline(t, phase), tt.timeline)
				check("signals to the target", pr.tgtRuntime.sent, tt.signals)
				check("signals to the source", pr.srcRuntime.sent, tt.srcSignals)
				check("sockets dropped", pr.srcSock.calls, tt.drops)
				if len(pr.tgSock.calls) > 0 {
					t.Errorf("target's socket asked %q", pr.tgSock.calls)
				}
				if tt.spent != nil && !slices.Equal(pr.r.fired, tt.spent) {
					t.Errorf("fired %v, want %v", pr.r.fired, tt.spent)
				}
				var aborted string
				if len(pr.r.steps) > 0 {
					aborted = pr.r.steps[0].reason
				}
				if aborted != tt.aborted || pr.r.ending != (tt.aborted != "") {
					t.Errorf("posted %q (ending %v), want %q", aborted, pr.r.ending, tt.aborted)
				}
			})
		}
	}
}

func TestPlanPassageSplitsTheFaultsArmedOnIt(t *testing.T) {
	faults := []sim.Fault{
		on(faultKill, sideTarget, protocol.TypeTargetReady),                                            // 0: hits the target's frame
		on(faultPause, sideSource, protocol.TypeTargetReady),                                           // 1: strikes the other side
		on(faultWorkerAbort, "", protocol.TypeTargetReady),                                             // 2: the worker's
		frameFault(faultDelayFrame, protocol.TypeTargetReady, dirIn),                                   // 3: acts on it
		frameFault(faultDropFrame, protocol.TypeTargetReady, dirIn),                                    // 4: waits its turn
		{Kind: faultTargetFailStart},                                                                   // 5: a step's, not a frame's
		on(faultDropSocket, sideTarget, protocol.TypeTargetApplied),                                    // 6: another frame's
		{Kind: faultCorruptFrame, Frame: protocol.TypeTargetReady, Direction: dirIn, Side: sideSource}, // 7: the other side's
	}
	fired := make([]bool, len(faults))
	got := planPassage(faults, fired, inFromTarget(protocol.TypeTargetReady))
	if !slices.Equal(got.hits, []int{0}) || got.frame != 3 || !slices.Equal(got.after, []int{1, 2}) {
		t.Fatalf("plan = %+v; want hits [0], frame 3, after [1 2]", got)
	}
	if got := armedOn(faults, fired, protocol.TypeTargetReady); !slices.Equal(got, []int{0, 1, 2}) {
		t.Fatalf("armedOn = %v; want [0 1 2]", got)
	}
	fired[0], fired[3] = true, true
	got = planPassage(faults, fired, inFromTarget(protocol.TypeTargetReady))
	if len(got.hits) != 0 || got.frame != 4 || !slices.Equal(got.after, []int{1, 2}) {
		t.Fatalf("plan after 0 and 3 fired = %+v; want no hits, frame 4, after [1 2]", got)
	}
	if got := planTargetStart(faults, fired); got != 5 {
		t.Fatalf("planTargetStart = %d; want 5", got)
	}
	fired[5] = true
	if got := planTargetStart(faults, fired); got != -1 {
		t.Fatalf("planTargetStart once fired = %d; want -1", got)
	}
	for kind, need := range faultKinds {
		want := kind == faultKill || kind == faultStop || kind == faultDropSocket
		if got := losesFrame(kind); got != want {
			t.Errorf("losesFrame(%s) = %v, want %v (side %v)", kind, got, want, need.side)
		}
	}
}

// TestStepFrameInEveryPhase checks what each frame a job can send does in
// each phase, from each side: only the two cutover cells move anything.
func TestStepFrameInEveryPhase(t *testing.T) {
	type cell struct {
		phase     sim.Phase
		side, typ string
	}
	moves := map[cell]frameStep{
		{sim.PhasePlaceTarget, sideTarget, protocol.TypeTargetReady}:          {next: sim.PhaseCutoverReady, relay: protocol.TypeCutoverReady},
		{sim.PhaseTargetReady, sideTarget, protocol.TypeTargetReady}:          {next: sim.PhaseCutoverReady, relay: protocol.TypeCutoverReady},
		{sim.PhaseCutoverReady, sideSource, protocol.TypeSourceStoppedOutput}: {next: sim.PhaseCutoverApply, relay: protocol.TypeCutoverApply},
	}
	var types []string
	for typ := range jobFrames {
		types = append(types, typ)
	}
	slices.Sort(types)
	if len(types) != 7 {
		t.Fatalf("job frame types %v; want the protocol's 7", types)
	}
	n := 0
	for _, phase := range append([]sim.Phase{"", sim.PhaseRequested}, sim.Phases()...) {
		for _, side := range []string{sideSource, sideTarget} {
			for _, typ := range types {
				for _, ending := range []bool{false, true} {
					got := stepFrame(phase, ending, side, typ)
					want, moved := moves[cell{phase, side, typ}]
					switch {
					case ending:
						want = frameStep{late: true}
					case typ == protocol.TypeAbort:
						want = frameStep{aborts: true}
					case moved:
						n++
						if order := sim.Phases(); slices.Index(order, want.next) <= slices.Index(order, phase) { // a handover's phases, in order
							t.Errorf("%s from the %s in %s moves the migration back to %s", typ, side, phase, want.next)
						}
					}
					if got.late != want.late || got.aborts != want.aborts || got.next != want.next || got.relay != want.relay {
						t.Errorf("stepFrame(%q, ending %v, %s, %s) = %+v; want %+v", phase, ending, side, typ, got, want)
					}
				}
			}
		}
	}
	if n != len(moves) {
		t.Fatalf("%d cutover cells met; the table has %d", n, len(moves))
	}
}
