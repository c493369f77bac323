package e2e_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/normsim/normsim/internal/jobplay"
	"github.com/normsim/normsim/internal/testjob"
	"github.com/normsim/normsim/normsimtest"
	"github.com/normsim/normsim/protocol"
	"github.com/normsim/normsim/sim"
)

// handoverUntil runs a handover with raw jobs, the test answering each
// frame, up to (and including) the step named stop.
type handover struct {
	t      *testing.T
	s      *normsimtest.Sim
	m      *sim.Migration
	sj, tj *testjob.Job
}

func startHandover(t *testing.T, req sim.MigrateRequest) *handover {
	t.Helper()
	s := startSim(t, normsimtest.Options{})
	src, sj := launchExternal(t, s, "a")
	m, err := s.Migrate(src.ID, req)
	if err != nil {
		t.Fatal(err)
	}
	return &handover{t: t, s: s, m: m, sj: sj}
}

func (h *handover) state() {
	h.sj.Expect(protocol.TypeGetState)
	h.sj.Send(protocol.JobFrame{Type: protocol.TypeState, Payload: json.RawMessage(`{"n":1}`)})
	_, env := targetEnv(h.t, h.s, h.m.ID)
	h.tj = testjob.Dial(h.t, env)
	h.tj.Expect(protocol.TypeInitialState)
}

func (h *handover) ready() {
	h.tj.Send(protocol.JobFrame{Type: protocol.TypeTargetReady, Payload: json.RawMessage(`null`)})
}

// cutoverReady runs the handover up to the source's cutover-ready.
func (h *handover) cutoverReady() {
	h.t.Helper()
	h.state()
	h.ready()
	h.sj.Expect(protocol.TypeCutoverReady)
}

func (h *handover) end() *sim.Migration { return h.s.WaitMigration(h.t, h.m.ID, 30*time.Second) }

func short() sim.Timeouts {
	d := sim.Duration(400 * time.Millisecond)
	return sim.Timeouts{State: d, TargetReady: d, Stop: d, Apply: d}
}

func requireTimeline(t *testing.T, m *sim.Migration, text string) {
	t.Helper()
	for _, ev := range m.Events {
		if strings.Contains(ev.Detail, text) {
			return
		}
	}
	t.Fatalf("timeline has no %q\n%s", text, normsimtest.Timeline(m))
}

func TestFaultDropFrameAfterPointOfNoReturnFails(t *testing.T) {
	h := startHandover(t, sim.MigrateRequest{Timeouts: short(), Faults: []sim.Fault{{Kind: "drop-frame", Frame: "cutover-apply"}}})
	h.cutoverReady()
	h.sj.Send(protocol.JobFrame{Type: protocol.TypeSourceStoppedOutput, Payload: json.RawMessage(`{"last":3}`)})
	m := h.end()
	normsimtest.RequireState(t, m, sim.MigrationFailed)
	if m.Phase != "cutover-apply" || !strings.Contains(m.Reason, "target-applied") {
		t.Fatalf("phase %s reason %q", m.Phase, m.Reason)
	}
	requireTimeline(t, m, "fault: dropped cutover-apply to the target")
}

func TestFaultDropIncomingTargetReadyAborts(t *testing.T) {
	h := startHandover(t, sim.MigrateRequest{Timeouts: short(), Faults: []sim.Fault{{Kind: "drop-frame", Frame: "target-ready"}}})
	h.state()
	h.ready()
	m := h.end()
	normsimtest.RequireState(t, m, sim.MigrationAborted)
	requireTimeline(t, m, "fault: dropped target-ready from the target")
	h.sj.Expect(protocol.TypeAbort)
}

func TestFaultDelayAndDuplicateStillComplete(t *testing.T) {
	h := startHandover(t, sim.MigrateRequest{Faults: []sim.Fault{
		{Kind: "delay-frame", Frame: "get-state", Delay: sim.Duration(200 * time.Millisecond)},
		{Kind: "duplicate-frame", Frame: "cutover-ready"},
	}})
	start := time.Now()
	h.state()
	if time.Since(start) < 150*time.Millisecond {
		t.Fatal("get-state was not held")
	}
	h.ready()
	h.sj.Expect(protocol.TypeCutoverReady)
	h.sj.Expect(protocol.TypeCutoverReady) // the duplicate
	h.sj.Send(protocol.JobFrame{Type: protocol.TypeSourceStoppedOutput, Payload: json.RawMessage(`{"last":3}`)})
	h.tj.Expect(protocol.TypeCutoverApply)
	h.tj.Send(protocol.JobFrame{Type: protocol.TypeTargetApplied})
	m := h.end()
	normsimtest.RequireCompleted(t, m)
	requireTimeline(t, m, "held for 200ms")
	requireTimeline(t, m, "sent twice")
}

func TestFaultCorruptFrames(t *testing.T) {
	t.Run("out", func(t *testing.T) {
		h := startHandover(t, sim.MigrateRequest{Timeouts: short(), Faults: []sim.Fault{{Kind: "corrupt-frame", Frame: "get-state"}}})
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, data, err := h.sj.Conn().Read(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := protocol.ParseWorkerFrame(data); err == nil {
			t.Fatalf("corrupted frame %s parses", data)
		}
		m := h.end()
		normsimtest.RequireState(t, m, sim.MigrationAborted)
	})
	t.Run("in", func(t *testing.T) {
		h := startHandover(t, sim.MigrateRequest{Faults: []sim.Fault{{Kind: "corrupt-frame", Frame: "state"}}})
		h.sj.Expect(protocol.TypeGetState)
		h.sj.Send(protocol.JobFrame{Type: protocol.TypeState, Payload: json.RawMessage(`1`)})
		if code, _ := h.sj.Closed(10 * time.Second); code != protocol.CloseProtocolError {
			t.Fatalf("source closed with %d, want 4400", code)
		}
		m := h.end()
		normsimtest.RequireState(t, m, sim.MigrationAborted)
		if !strings.Contains(m.Reason, "normsim closed the source's socket with 4400 (frame is not valid JSON)") {
			t.Fatalf("reason %q", m.Reason)
		}
	})
}

func TestFaultWorkerAbortAndDropSocket(t *testing.T) {
	t.Run("worker-abort", func(t *testing.T) {
		h := startHandover(t, sim.MigrateRequest{Faults: []sim.Fault{{Kind: "worker-abort", On: "target-ready"}}})
		h.state()
		h.ready()
		// The source had been sent cutover-ready just before the worker
		// aborted, and answers at once: that answer is late, not a point
		// of no return.
		h.sj.Expect(protocol.TypeCutoverReady)
		h.sj.Send(protocol.JobFrame{Type: protocol.TypeSourceStoppedOutput, Payload: json.RawMessage(`{"last":1}`)})
		m := h.end()
		normsimtest.RequireState(t, m, sim.MigrationAborted)
		if !strings.Contains(m.Reason, "worker aborted") {
			t.Fatalf("reason %q", m.Reason)
		}
		h.sj.Expect(protocol.TypeAbort)
	})
	t.Run("drop-socket", func(t *testing.T) {
		// Armed on initial-state, the drop strikes as the listener reads
		// the target's hello, before it answers: the target gets neither
		// hello-ack nor its state, only the connection's abrupt end.
		h := startHandover(t, sim.MigrateRequest{Faults: []sim.Fault{{Kind: "drop-socket", Side: "target", On: "initial-state"}}})
		h.sj.Expect(protocol.TypeGetState)
		h.sj.Send(protocol.JobFrame{Type: protocol.TypeState, Payload: json.RawMessage(`{"n":1}`)})
		_, env := targetEnv(t, h.s, h.m.ID)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if j, err := jobplay.DialEnv(ctx, env); err == nil || websocket.CloseStatus(err) != -1 {
			if j != nil {
				j.Close()
			}
			t.Fatalf("the target's hello: %v, want an abrupt end before hello-ack", err)
		}
		m := h.end()
		normsimtest.RequireState(t, m, sim.MigrationAborted)
		h.sj.Expect(protocol.TypeAbort)
	})
}

func TestFaultValidation(t *testing.T) {
	s := startSim(t, normsimtest.Options{})
	src, _ := launchExternal(t, s, "a")
	for _, tt := range []struct {
		f    sim.Fault
		says string
	}{
		{sim.Fault{Kind: "explode"}, "kind: must be one of"},
		{sim.Fault{Kind: "kill", On: "target-ready"}, "side: required"},
		{sim.Fault{Kind: "drop-socket", Side: "target"}, "on: required"},
		{sim.Fault{Kind: "drop-socket", Side: "target", On: "nope"}, "not a frame type"},
		{sim.Fault{Kind: "drop-frame"}, "frame: required"},
		{sim.Fault{Kind: "drop-frame", Frame: "abort"}, "direction: required"},
		{sim.Fault{Kind: "drop-frame", Frame: "state", Direction: "out"}, "only travels in"},
		{sim.Fault{Kind: "kill", Side: "source", On: "get-state"}, "cannot"}, // external runtime has no signals
	} {
		_, err := s.Migrate(src.ID, sim.MigrateRequest{Faults: []sim.Fault{tt.f}})
		var e *normsimtest.APIError
		if !errors.As(err, &e) || e.Status != 422 || !strings.Contains(e.Message, tt.says) {
			t.Errorf("fault %+v: %v, want 422 saying %q", tt.f, err, tt.says)
		}
	}
}

// TestFaultsOnRealProcesses kills, stops and pauses real counter processes.
func TestFaultsOnRealProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes")
	}
	for _, tt := range []struct {
		name     string
		strategy string
		faults   []sim.Fault
		timeouts sim.Timeouts
		state    sim.MigrationState
		reason   string
	}{
		{"kill target before the point of no return", "handover",
			[]sim.Fault{{Kind: "kill", Side: "target", On: "target-ready"}}, sim.Timeouts{}, sim.MigrationAborted, "the target"},
		{"stop target after the point of no return", "handover",
			[]sim.Fault{{Kind: "stop", Side: "target", On: "cutover-apply"}}, sim.Timeouts{Apply: sim.Duration(5 * time.Second)}, sim.MigrationFailed, ""},
		{"pause source past its state timeout", "handover",
			[]sim.Fault{{Kind: "pause", Side: "source", On: "get-state", Delay: sim.Duration(time.Second)}},
			sim.Timeouts{State: sim.Duration(500 * time.Millisecond)}, sim.MigrationAborted, "timed out"},
		{"target fails to start in stopThenStart", "stopThenStart",
			[]sim.Fault{{Kind: "target-fail-start"}}, sim.Timeouts{}, sim.MigrationFailed, "failed to start"},
		{"target fails to start in handover", "handover",
			[]sim.Fault{{Kind: "target-fail-start"}}, sim.Timeouts{}, sim.MigrationAborted, "failed to start"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := startSim(t, normsimtest.Options{Runtime: sim.RuntimeProcess})
			in := s.Launch(t, sim.LaunchRequest{Template: "counter", Node: "a"})
			s.WaitConnected(t, in.ID)
			m := s.MigrateAndWait(t, in.ID, sim.MigrateRequest{Strategy: tt.strategy, Faults: tt.faults, Timeouts: tt.timeouts})
			normsimtest.RequireState(t, m, tt.state)
			t.Logf("%s: %s\n%s", m.State, m.Reason, normsimtest.Timeline(m))
			if !strings.Contains(m.Reason, tt.reason) {
				t.Fatalf("reason %q, want it to mention %q\n%s", m.Reason, tt.reason, normsimtest.Timeline(m))
			}
			if tt.state == sim.MigrationAborted {
				// Rolled back: the source is still producing.
				src := s.WaitInstance(t, in.ID, 10*time.Second, "running", func(i sim.Instance) bool { return i.State == sim.InstanceRunning })
				_ = src
			}
		})
	}
}

// TestFaultAfterTheFrameItWasArmedOn: a fault armed on a frame the job
// sends fires once that frame has arrived, so the timeline shows the frame
// first and then the fault. (drop-socket: the one such fault an external
// job, played by the test, can take.)
func TestFaultAfterTheFrameItWasArmedOn(t *testing.T) {
	for _, kind := range []string{"drop-socket"} {
		t.Run(kind, func(t *testing.T) {
			h := startHandover(t, sim.MigrateRequest{Timeouts: short(), Faults: []sim.Fault{{Kind: kind, Side: "source", On: "state"}}})
			h.sj.Expect(protocol.TypeGetState)
			h.sj.Send(protocol.JobFrame{Type: protocol.TypeState, Payload: json.RawMessage(`{"n":1}`)})
			m := h.s.WaitMigration(t, h.m.ID, 30*time.Second)
			frame, fault := -1, -1
			for i, ev := range m.Events {
				switch {
				case frame < 0 && ev.Frame != nil && ev.Frame.Type == protocol.TypeState:
					frame = i
				case fault < 0 && strings.HasPrefix(ev.Detail, "fault: "+kind):
					fault = i
				}
			}
			if frame < 0 || fault < 0 || fault < frame {
				t.Fatalf("want the state frame (at %d) before the fault armed on it (at %d)\n%s", frame, fault, normsimtest.Timeline(m))
			}
		})
	}
}

// TestFiredFaultsAreTimelineKindFault: a fault whose trigger passed is a
// timeline event of kind fault, which clients read without parsing its
// text; the note that it could not land (its side does not exist yet)
// follows without a kind.
func TestFiredFaultsAreTimelineKindFault(t *testing.T) {
	h := startHandover(t, sim.MigrateRequest{Timeouts: short(), Faults: []sim.Fault{
		{Kind: "drop-socket", Side: "target", On: "state"}, // no target yet when state passes: skipped
		{Kind: "drop-frame", Frame: "target-ready"},
	}})
	h.state()
	h.ready()
	m := h.end()
	var kinds []string
	for _, e := range m.Events {
		if strings.Contains(e.Detail, "fault") {
			kinds = append(kinds, string(e.Kind)+": "+e.Detail)
		}
	}
	want := []string{"fault: fault: drop-socket the target (armed on state)", ": fault drop-socket skipped: there is no target yet", "fault: fault: dropped target-ready from the target"}
	if strings.Join(kinds, "\n") != strings.Join(want, "\n") {
		t.Fatalf("fault events (kind: detail):\n%s\nwant\n%s", strings.Join(kinds, "\n"), strings.Join(want, "\n"))
	}
}
