package manager_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/normsim/normsim/protocol"
	"github.com/normsim/normsim/sim"
)

// The contract's rule for every fault at every step of a handover, with a
// well-behaved job played over fake sockets: before the point of no return
// a lost connection or an abort rolls back (the other side is told, the
// target is removed, the source keeps running); after it nothing rolls
// back (no one is told to abort; a failure is reported).

// handoverSteps are the frames a fault may be armed on, in the order a
// handover passes them; the point of no return is source-stopped-output.
var handoverSteps = []string{
	protocol.TypeGetState, protocol.TypeState, protocol.TypeTargetReady, protocol.TypeCutoverReady,
	protocol.TypeSourceStoppedOutput, protocol.TypeCutoverApply, protocol.TypeTargetApplied,
}

func TestEveryFaultAtEveryStepKeepsTheRollbackRule(t *testing.T) {
	type cell struct {
		fault sim.Fault
		// want is the end state where the rule fixes it; "" leaves it to
		// the invariants alone.
		want sim.MigrationState
	}
	var cells []cell
	for i, on := range handoverSteps {
		before := i < slices.Index(handoverSteps, protocol.TypeSourceStoppedOutput)
		abortWant := sim.MigrationAborted
		if !before {
			// The worker allows no abort past the point of no return.
			abortWant = ""
		}
		cells = append(cells, cell{sim.Fault{Kind: "worker-abort", On: on}, abortWant})
		for _, side := range []string{"source", "target"} {
			want := sim.MigrationAborted
			if !before {
				want = sim.MigrationFailed
			}
			if on == protocol.TypeGetState || on == protocol.TypeState {
				if side == "target" {
					want = "" // there is no target yet: the fault is skipped
				}
			}
			if on == protocol.TypeSourceStoppedOutput && side == "source" {
				want = "" // lost with its frame, or past it: the invariants decide
			}
			if on == protocol.TypeTargetApplied && side == "source" {
				want = sim.MigrationCompleted // the target has applied; the source was to stop anyway
			}
			// Dropped right after the worker sent it (or the other side) a
			// frame, a socket's end is seen a moment later, as a
			// listener's is: the answer may come first (the source's stop,
			// crossing the point of no return; the target's
			// target-applied; a real job could as well). Either end keeps
			// the rule.
			if on == protocol.TypeTargetReady && side == "source" || // cutover-ready was just relayed to it
				on == protocol.TypeCutoverReady && side == "target" ||
				on == protocol.TypeSourceStoppedOutput && side == "target" ||
				on == protocol.TypeCutoverApply && side == "source" {
				want = ""
			}
			cells = append(cells, cell{sim.Fault{Kind: "drop-socket", Side: side, On: on}, want})
		}
	}
	for _, c := range cells {
		t.Run(fmt.Sprintf("%s %s on %s", c.fault.Kind, c.fault.Side, c.fault.On), func(t *testing.T) {
			t.Parallel()
			// Every cell ends on an event, none on a timeout: a long one
			// keeps a busy machine from ending a move early.
			checkRollbackRule(t, c.fault, c.want, sim.Duration(3*time.Second))
		})
	}
}

// TestEveryFrameFaultAtEveryStepKeepsTheRollbackRule: each frame of the
// handover dropped, delivered twice, corrupted, or held (within its
// phase's timeout), with a job that answers an ask once and closes with
// 4400 on a frame it cannot read.
func TestEveryFrameFaultAtEveryStepKeepsTheRollbackRule(t *testing.T) {
	ponr := slices.Index(handoverSteps, protocol.TypeSourceStoppedOutput)
	for i, frame := range handoverSteps {
		before := i < ponr
		// What ends a move whose frame never arrives, or whose side's
		// socket closes over it: a rollback before the point of no return,
		// a failure after it. source-stopped-output that never reaches the
		// worker never crossed it.
		lost := sim.MigrationAborted
		if !before && frame != protocol.TypeSourceStoppedOutput {
			lost = sim.MigrationFailed
		}
		for _, f := range []struct {
			kind string
			want sim.MigrationState
		}{
			{"drop-frame", lost},
			{"duplicate-frame", sim.MigrationCompleted},
			{"corrupt-frame", lost},
			{"delay-frame", sim.MigrationCompleted},
		} {
			// Only a dropped frame ends its move on a timeout; the others
			// get one long enough for a busy machine.
			fault, timeout := sim.Fault{Kind: f.kind, Frame: frame}, sim.Duration(3*time.Second)
			switch f.kind {
			case "drop-frame":
				timeout = short
			case "delay-frame":
				fault.Delay = sim.Duration(30 * time.Millisecond)
			}
			t.Run(f.kind+" "+frame, func(t *testing.T) {
				t.Parallel()
				checkRollbackRule(t, fault, f.want, timeout)
			})
		}
	}
}

// checkRollbackRule hands a well-behaved job over with one fault and
// checks the contract's rule on how it ended; want, when set, is the end
// state the rule fixes for that fault.
func checkRollbackRule(t *testing.T, fault sim.Fault, want sim.MigrationState, timeout sim.Duration) {
	s := newFakeSim(t)
	mig, err := s.mgr.Migrate(context.Background(), s.in.ID, sim.MigrateRequest{To: "b", Strategy: string(sim.Handover),
		Timeouts: sim.Timeouts{State: timeout, TargetReady: timeout, Stop: timeout, Apply: timeout}, Faults: []sim.Fault{fault}})
	if err != nil {
		t.Fatal(err)
	}
	src, tgt := playWellBehaved(t, s, mig.ID)
	m := s.await(t, mig.ID)
	got := told(src, tgt)
	if want != "" && m.State != want {
		t.Errorf("ended %s (%s), want %s", m.State, m.Reason, want)
	}
	ponr := slices.ContainsFunc(m.Events, func(ev sim.MigrationEvent) bool { return ev.Kind == sim.TimelinePointOfNoReturn })
	switch m.State {
	case sim.MigrationAborted:
		if ponr {
			t.Errorf("aborted after the point of no return (%s)", m.Reason)
		}
		if m.Rollback == nil {
			t.Fatalf("aborted without a rollback record (%s)", m.Reason)
		}
		if m.Rollback.Source != sim.SourceRunning {
			t.Errorf("the rollback left the source %s (%s)", m.Rollback.Source, m.Rollback.SourceDetail)
		}
		// The worker says it told each side it did tell, and no
		// other: the record and what the jobs got agree.
		if rec := slices.Sorted(slices.Values(m.Rollback.Told)); !slices.Equal(rec, got) {
			t.Errorf("the rollback record says it told %v; the jobs got abort: %v", rec, got)
		}
	case sim.MigrationFailed, sim.MigrationCompleted:
		checkNothingRolledBack(t, m, ponr, got)
	default:
		t.Errorf("ended %s (%s)", m.State, m.Reason)
	}
}

// checkNothingRolledBack checks a move that failed or completed: it must
// have passed the point of no return, told no one to abort and kept no
// rollback record.
func checkNothingRolledBack(t *testing.T, m *sim.Migration, ponr bool, told []string) {
	t.Helper()
	if !ponr {
		t.Errorf("%s before the point of no return (%s): that is a rollback", m.State, m.Reason)
	}
	if len(told) > 0 {
		t.Errorf("%s past the point of no return, yet %v were told to abort", m.State, told)
	}
	if m.Rollback != nil {
		t.Errorf("%s with a rollback record %+v", m.State, m.Rollback)
	}
}

// player is one well-behaved job: it answers what it is sent, in order,
// and notes whether it was told to abort.
type player struct {
	j       *job
	aborted chan struct{} // closed at the first abort
	done    chan struct{}
}

// playWellBehaved plays the source and, once placed, the target as a job
// that keeps the contract would, until the migration ends; it returns
// once both players have stopped reading.
func playWellBehaved(t *testing.T, s *fakeSim, id string) (src, tgt *player) {
	t.Helper()
	// What the worker sends as it ends (an abort, perhaps behind a held
	// frame) is read before the players stop.
	return playWellBehavedFor(t, s, id, 50*time.Millisecond)
}

// playWellBehavedFor is playWellBehaved with the players stopped settle
// after the migration ended.
func playWellBehavedFor(t *testing.T, s *fakeSim, id string, settle time.Duration) (src, tgt *player) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	src = play(ctx, s.src, func(wf protocol.WorkerFrame) *protocol.JobFrame {
		switch wf.Type {
		case protocol.TypeGetState:
			return &protocol.JobFrame{Type: protocol.TypeState, Payload: json.RawMessage(`{"n":1}`)}
		case protocol.TypeCutoverReady:
			return &protocol.JobFrame{Type: protocol.TypeSourceStoppedOutput, Payload: json.RawMessage(`{"last":5}`)}
		}
		return nil
	})
	placed := make(chan *player, 1)
	go func() {
		select {
		case reg := <-s.b.registered:
			if !s.targetCanDial(ctx, id, reg.Role) {
				placed <- nil
				return
			}
			placed <- play(ctx, s.b.connect(reg.JobID, reg.Role), func(wf protocol.WorkerFrame) *protocol.JobFrame {
				switch wf.Type {
				case protocol.TypeInitialState:
					return &protocol.JobFrame{Type: protocol.TypeTargetReady}
				case protocol.TypeCutoverApply:
					return &protocol.JobFrame{Type: protocol.TypeTargetApplied, Applied: []string{"video"}}
				}
				return nil
			})
		case <-ctx.Done():
			placed <- nil
		}
	}()
	s.await(t, id)
	time.Sleep(settle)
	cancel()
	<-src.done
	if tgt = <-placed; tgt != nil {
		<-tgt.done
	}
	return src, tgt
}

// play answers the job's frames with answer until ctx ends.
func play(ctx context.Context, j *job, answer func(protocol.WorkerFrame) *protocol.JobFrame) *player {
	p := &player{j: j, aborted: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(p.done)
		answered := map[string]bool{}
		for ctx.Err() == nil {
			wf, ok := j.next(10 * time.Millisecond)
			if !ok {
				continue
			}
			if wf.Type == protocol.TypeAbort {
				p.toldAbort()
				continue
			}
			if strings.HasPrefix(wf.Type, "corrupt:") {
				// A frame it cannot read: a client closes with 4400.
				j.close(protocol.CloseProtocolError)
				continue
			}
			// A frame delivered twice is one ask: answered once.
			if answered[wf.Type] {
				continue
			}
			answered[wf.Type] = true
			if f := answer(wf); f != nil && j.open() {
				j.send(*f)
			}
		}
		// An abort that reached the job before it stopped reading was
		// sent to it, read or not.
		if slices.ContainsFunc(j.unread(), func(wf protocol.WorkerFrame) bool { return wf.Type == protocol.TypeAbort }) {
			p.toldAbort()
		}
	}()
	return p
}

// toldAbort notes the job was told to abort.
func (p *player) toldAbort() {
	select {
	case <-p.aborted:
	default:
		close(p.aborted)
	}
}

// unread takes, without waiting, what reached the job and was not read.
func (j *job) unread() []protocol.WorkerFrame {
	j.f.mu.Lock()
	c := j.f.conns[fakeKey{j.id, j.role}]
	j.f.mu.Unlock()
	var out []protocol.WorkerFrame
	for {
		select {
		case wf := <-c.inbox:
			out = append(out, wf)
		default:
			return out
		}
	}
}

// told are the sides that got an abort, sorted.
func told(src, tgt *player) []string {
	var out []string
	for side, p := range map[string]*player{"source": src, "target": tgt} {
		if p == nil {
			continue
		}
		select {
		case <-p.aborted:
			out = append(out, side)
		default:
		}
	}
	slices.Sort(out)
	return out
}

// open says whether the job's connection is still up.
func (j *job) open() bool { return j.f.Connected(j.id, j.role) }

// targetCanDial waits until the target's job can first dial: once its
// env shows (external runtime), or its process has started (fake
// runtime); false if the migration or ctx ended first.
func (s *fakeSim) targetCanDial(ctx context.Context, id, role string) bool {
	if s.rt != nil {
		return s.rt.awaitStart(ctx, role)
	}
	return s.targetEnvShown(ctx, id, role)
}

// targetEnvShown waits until the migration shows the target's env (when
// an external target's job can first dial), false if it ended first.
func (s *fakeSim) targetEnvShown(ctx context.Context, id, role string) bool {
	for after := 0; ; {
		m, err := s.mgr.AwaitMigration(ctx, id, after)
		if err != nil {
			return false
		}
		if m.Target.Instance == role && m.Target.Env != nil {
			return true
		}
		if m.State.Ended() {
			return false
		}
		after = len(m.Events)
	}
}
