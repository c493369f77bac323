package e2e_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/normsim/normsim/internal/testjob"
	"github.com/normsim/normsim/normsimtest"
	"github.com/normsim/normsim/protocol"
	"github.com/normsim/normsim/sim"
)

// waitTimeline waits until the migration's timeline says text.
func waitTimeline(t *testing.T, s *normsimtest.Sim, id, text string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		m := s.Migration(t, id)
		for _, ev := range m.Events {
			if strings.Contains(ev.Detail, text) {
				return
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("timeline never said %q\n%s", text, normsimtest.Timeline(s.Migration(t, id)))
}

// requireHandsOverAgain proves the source is still connected and usable:
// a second migration asks it for its state, and that is the next frame
// it reads (no leftover abort before it).
func requireHandsOverAgain(t *testing.T, s *normsimtest.Sim, srcID string, sj *testjob.Job) {
	t.Helper()
	m, err := s.Migrate(srcID, sim.MigrateRequest{})
	if err != nil {
		t.Fatalf("migrate again: %v", err)
	}
	if f := sj.Read(); f.Type != protocol.TypeGetState || f.MigrationID != m.ID {
		t.Fatalf("the next frame the source read is %+v, want get-state of %s", f, m.ID)
	}
	sj.Send(protocol.JobFrame{Type: protocol.TypeStateRefused, Reason: "enough for one test"})
	normsimtest.RequireState(t, s.WaitMigration(t, m.ID, 10*time.Second), sim.MigrationRefused)
}

// TestAnswerAfterTheEndIsLateNotAProtocolError: the worker gives up on the
// source (a timeout) and sends abort; a correct source that had already
// sent source-stopped-output, or sends it before it reads the abort, is
// not closed with 4400: the frame is recorded on the ended migration's
// timeline and ignored, and the source stays connected.
func TestAnswerAfterTheEndIsLateNotAProtocolError(t *testing.T) {
	h := startHandover(t, sim.MigrateRequest{Timeouts: sim.Timeouts{Stop: sim.Duration(300 * time.Millisecond)}})
	h.cutoverReady()
	done := h.end() // the stop timeout passes: rolled back
	normsimtest.RequireState(t, done, sim.MigrationAborted)
	// The source answers as if it had not seen the abort yet.
	h.sj.Send(protocol.JobFrame{Type: protocol.TypeSourceStoppedOutput, Payload: json.RawMessage(`{"last":7}`)})
	h.sj.Send(protocol.JobFrame{Type: protocol.TypeAbort, Reason: "crossed too"})
	if f := h.sj.Read(); f.Type != protocol.TypeAbort || f.MigrationID != done.ID {
		t.Fatalf("source read %+v, want the worker's abort", f)
	}
	waitTimeline(t, h.s, done.ID, "late source-stopped-output from the source")
	waitTimeline(t, h.s, done.ID, "late abort: crossed too from the source")
	if m := h.s.Migration(t, done.ID); m.State != sim.MigrationAborted {
		t.Fatalf("a late frame changed the ended migration to %s", m.State)
	}
	requireHandsOverAgain(t, h.s, h.m.Source.Instance, h.sj)
}

// TestAnswerCrossingTheOtherSidesAbortIsLate: the target aborts while the
// source, which has not read the worker's abort yet, stops its output.
// The target's abort came first, so the migration is rolled back (aborted,
// not failed: the late source-stopped-output is no point of no return),
// and the source is told and stays connected.
func TestAnswerCrossingTheOtherSidesAbortIsLate(t *testing.T) {
	h := startHandover(t, sim.MigrateRequest{})
	h.cutoverReady()
	h.tj.Send(protocol.JobFrame{Type: protocol.TypeAbort, Reason: "target changed its mind"})
	waitTimeline(t, h.s, h.m.ID, "abort: target changed its mind")
	h.sj.Send(protocol.JobFrame{Type: protocol.TypeSourceStoppedOutput, Payload: json.RawMessage(`{"last":7}`)})
	done := h.end()
	normsimtest.RequireState(t, done, sim.MigrationAborted)
	if !strings.Contains(done.Reason, "the target aborted: target changed its mind") {
		t.Fatalf("reason %q", done.Reason)
	}
	if f := h.sj.Read(); f.Type != protocol.TypeAbort {
		t.Fatalf("source read %+v, want abort", f)
	}
	waitTimeline(t, h.s, done.ID, "late source-stopped-output from the source")
	// The target is not sent its own abort back: the next thing it sees
	// is its socket closing as it is removed.
	if _, data, err := h.tj.Conn().Read(t.Context()); err == nil {
		t.Fatalf("the target that aborted was sent %s", data)
	} else if s := websocket.CloseStatus(err); s != websocket.StatusNormalClosure {
		t.Fatalf("target socket ended with %v, want a normal close as it is removed", err)
	}
	requireHandsOverAgain(t, h.s, h.m.Source.Instance, h.sj)
}

// TestTheSideThatAbortsIsNotSentItsAbortBack: the source aborts at
// cutover-ready; the target is told, the source is not.
func TestTheSideThatAbortsIsNotSentItsAbortBack(t *testing.T) {
	h := startHandover(t, sim.MigrateRequest{})
	h.cutoverReady()
	h.sj.Send(protocol.JobFrame{Type: protocol.TypeAbort, Reason: "source says no"})
	if f := h.tj.Read(); f.Type != protocol.TypeAbort || !strings.Contains(f.Reason, "the source aborted: source says no") {
		t.Fatalf("target read %+v, want the source's abort", f)
	}
	done := h.end()
	normsimtest.RequireState(t, done, sim.MigrationAborted)
	for _, ev := range done.Events {
		if ev.Side == "source" && ev.Frame != nil && ev.Frame.Direction == "out" && ev.Frame.Type == protocol.TypeAbort {
			t.Fatalf("the timeline shows an abort sent to the source that aborted\n%s", normsimtest.Timeline(done))
		}
	}
	requireHandsOverAgain(t, h.s, h.m.Source.Instance, h.sj)
}

// TestReasonsSayWhoClosedWhat: a socket the job closed, one normsim closed
// for a protocol error, and an empty close reason each read as what
// happened.
func TestReasonsSayWhoClosedWhat(t *testing.T) {
	t.Run("the job closed it without a reason", func(t *testing.T) {
		h := startHandover(t, sim.MigrateRequest{})
		h.state()
		h.tj.Conn().Close(websocket.StatusNormalClosure, "")
		done := h.end()
		normsimtest.RequireState(t, done, sim.MigrationAborted)
		if want := "the target closed its socket with 1000 (no reason given) on target-ready"; done.Reason != want {
			t.Fatalf("reason %q, want %q", done.Reason, want)
		}
	})
	// Issue 34 round 5, F4: a job that closes its own socket while it is
	// moved, owing an answer, broke a promise as surely as one that exits;
	// it was graded pass with no one at fault.
	for _, tc := range []struct {
		name, side, reason string
		state              sim.MigrationState
		act                func(h *handover)
	}{
		{"the source closes instead of answering get-state", "source", "the source closed its socket with 1000 (no reason given) on get-state", sim.MigrationAborted,
			func(h *handover) {
				h.sj.Expect(protocol.TypeGetState)
				h.sj.Conn().Close(websocket.StatusNormalClosure, "")
			}},
		{"the target closes instead of answering cutover-apply", "target", "the target closed its socket with 1000 (done) on cutover-apply", sim.MigrationFailed,
			func(h *handover) {
				h.cutoverReady()
				h.sj.Send(protocol.JobFrame{Type: protocol.TypeSourceStoppedOutput, Payload: json.RawMessage(`{"n":1}`)})
				h.tj.Expect(protocol.TypeCutoverApply)
				h.tj.Conn().Close(websocket.StatusNormalClosure, "done")
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := startHandover(t, sim.MigrateRequest{})
			tc.act(h)
			done := h.end()
			normsimtest.RequireState(t, done, tc.state)
			if done.Reason != tc.reason {
				t.Errorf("reason %q, want %q", done.Reason, tc.reason)
			}
			j := done.Judged()
			if done.Broken == nil || done.Broken.Side != tc.side || j.Grade != sim.GradeFail || j.AtFault != tc.side {
				t.Errorf("broken %+v, judgement %s at fault %q: %s", done.Broken, j.Grade, j.AtFault, j.Why)
			}
		})
	}
	t.Run("normsim closed it for a frame out of phase", func(t *testing.T) {
		h := startHandover(t, sim.MigrateRequest{})
		h.state()
		h.tj.Send(protocol.JobFrame{Type: protocol.TypeState, Payload: json.RawMessage(`1`)})
		done := h.end()
		normsimtest.RequireState(t, done, sim.MigrationAborted)
		if want := "normsim closed the target's socket with 4400 (frame state is out of phase) on target-ready"; done.Reason != want {
			t.Fatalf("reason %q, want %q", done.Reason, want)
		}
		if strings.Contains(done.Reason, "dropped") {
			t.Fatalf("reason %q blames the job for a close normsim made", done.Reason)
		}
	})
}

// TestUnreadablePacketsAreInTheOutputReport: a job whose output holds
// datagrams the sink cannot read gets them counted in the migration's
// report, and its seam, seamless by the readable packets, is not vouched
// for.
func TestUnreadablePacketsAreInTheOutputReport(t *testing.T) {
	s := startSim(t, normsimtest.Options{})
	src, sj := launchExternal(t, s, "a")
	addr := src.Env["counter"]["NORMSIM_OUTPUT_ADDR"]
	out := func() net.Conn {
		c, err := net.Dial("udp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	send := func(c net.Conn, instance string, from, to int) {
		for seq := from; seq <= to; seq++ {
			fmt.Fprintf(c, `{"job":%q,"instance":%q,"seq":%d}`, src.JobID, instance, seq)
		}
	}
	srcOut := out()
	m, err := s.Migrate(src.ID, sim.MigrateRequest{})
	if err != nil {
		t.Fatal(err)
	}
	send(srcOut, src.ID, 1, 5)
	srcOut.Write([]byte("garbage"))
	fmt.Fprintf(srcOut, `{"job":%q,"instance":%q,"seq":6.5}`, src.JobID, src.ID)
	sj.Expect(protocol.TypeGetState)
	sj.Send(protocol.JobFrame{Type: protocol.TypeState, Payload: json.RawMessage(`{}`)})
	tgtID, env := targetEnv(t, s, m.ID)
	tj := testjob.Dial(t, env)
	tj.Expect(protocol.TypeInitialState)
	tj.Send(protocol.JobFrame{Type: protocol.TypeTargetReady, Payload: json.RawMessage(`null`)})
	sj.Expect(protocol.TypeCutoverReady)
	sj.Send(protocol.JobFrame{Type: protocol.TypeSourceStoppedOutput, Payload: json.RawMessage(`{"last":5}`)})
	tj.Expect(protocol.TypeCutoverApply)
	send(out(), tgtID, 6, 9)
	tj.Send(protocol.JobFrame{Type: protocol.TypeTargetApplied})
	done := s.WaitMigration(t, m.ID, 30*time.Second)
	normsimtest.RequireCompleted(t, done)
	o := done.Output
	if o == nil || o.Verdict != sim.VerdictUnknown || o.Unreadable == nil || o.Unreadable.FromJob != 2 ||
		!strings.Contains(o.Detail, "2 packets could not be read: 1 not a JSON object, 1 with a seq that is not an integer") {
		t.Fatalf("output %s\n%s", normsimtest.DescribeOutput(o), normsimtest.Timeline(done))
	}
}

// TestRollbackAndPointOfNoReturnAreDecidedOnce races the target's abort
// against the source's source-stopped-output, sent at the same moment,
// 150 times. Whichever the worker sees first decides, once: an aborted
// migration never passed the point of no return and never sent
// cutover-apply; a failed one passed it before the abort.
func TestRollbackAndPointOfNoReturnAreDecidedOnce(t *testing.T) {
	const races = 150
	s := startSim(t, normsimtest.Options{})
	src, sj := launchExternal(t, s, "a")
	counts := map[sim.MigrationState]int{}
	for i := range races {
		m, err := s.Migrate(src.ID, sim.MigrateRequest{})
		if err != nil {
			t.Fatalf("race %d: %v", i, err)
		}
		sj.Expect(protocol.TypeGetState)
		sj.Send(protocol.JobFrame{Type: protocol.TypeState, Payload: json.RawMessage(`{}`)})
		_, env := targetEnv(t, s, m.ID)
		tj := testjob.Dial(t, env)
		tj.Expect(protocol.TypeInitialState)
		tj.Send(protocol.JobFrame{Type: protocol.TypeTargetReady, Payload: json.RawMessage(`null`)})
		sj.Expect(protocol.TypeCutoverReady)
		done := make(chan struct{})
		go func() {
			defer close(done)
			tj.Send(protocol.JobFrame{Type: protocol.TypeAbort, Reason: "race"})
		}()
		sj.Send(protocol.JobFrame{Type: protocol.TypeSourceStoppedOutput, Payload: json.RawMessage(`{"last":1}`)})
		<-done
		end := s.WaitMigration(t, m.ID, 30*time.Second)
		counts[end.State]++
		ponr, applySent := false, false
		for _, ev := range end.Events {
			ponr = ponr || strings.HasPrefix(ev.Detail, "point of no return")
			applySent = applySent || (ev.Frame != nil && ev.Frame.Direction == "out" && ev.Frame.Type == protocol.TypeCutoverApply)
		}
		switch end.State {
		case sim.MigrationAborted:
			if ponr || applySent {
				t.Fatalf("race %d: aborted, yet the timeline shows the point of no return (%v) or cutover-apply sent (%v)\n%s", i, ponr, applySent, normsimtest.Timeline(end))
			}
			// The source was told; it stays connected for the next race.
			if f := sj.Read(); f.Type != protocol.TypeAbort {
				t.Fatalf("race %d: the source read %+v after the rollback, want abort", i, f)
			}
		case sim.MigrationFailed:
			if !ponr {
				t.Fatalf("race %d: failed without passing the point of no return\n%s", i, normsimtest.Timeline(end))
			}
			// After the point of no return nothing rolls back: the source
			// stays as it is; reconnect nothing, just move on.
		default:
			t.Fatalf("race %d ended %s (%s)", i, end.State, end.Reason)
		}
		tj.Conn().CloseNow()
	}
	t.Logf("%d races: %d aborted, %d failed", races, counts[sim.MigrationAborted], counts[sim.MigrationFailed])
}

// TestHeldFrameAfterTheTimeoutIsNotRelayed: a target-ready a fault holds
// as long as the target-ready timeout arrives when the migration has
// timed out; it never reaches the source as cutover-ready.
func TestHeldFrameAfterTheTimeoutIsNotRelayed(t *testing.T) {
	const d = 300 * time.Millisecond
	for i := range 5 {
		h := startHandover(t, sim.MigrateRequest{Timeouts: sim.Timeouts{TargetReady: sim.Duration(d)},
			Faults: []sim.Fault{{Kind: "delay-frame", Frame: "target-ready", Delay: sim.Duration(d)}}})
		h.state()
		// Sent once normsim waits for it, so its hold ends after the wait's
		// timeout: the frame is held past its timeout.
		for h.s.Migration(t, h.m.ID).Phase != "target-ready" {
			time.Sleep(time.Millisecond)
		}
		h.ready()
		done := h.end()
		normsimtest.RequireState(t, done, sim.MigrationAborted)
		if f := h.sj.Read(); f.Type != protocol.TypeAbort {
			t.Fatalf("run %d: the source read %+v, want the rollback's abort", i, f)
		}
		requireHandsOverAgain(t, h.s, h.m.Source.Instance, h.sj) // no cutover-ready came after the abort
	}
}

// framed is a payload that makes a job's frame of type typ exactly n bytes.
func framed(typ string, n int) json.RawMessage {
	head := len(`{"type":"` + typ + `","payload":""}`)
	return json.RawMessage(`"` + strings.Repeat("x", n-head) + `"`)
}

// TestRelayOverTheFrameCapIsRefused: a job's frame at the 64 KiB cap is
// valid, but relayed with the worker's own fields it would pass the cap
// the other job's client enforces. The worker does not send it: before
// anything is placed the migration is aborted, later it ends naming the
// frame, and never does a job get a frame over 64 KiB.
func TestRelayOverTheFrameCapIsRefused(t *testing.T) {
	t.Run("state as initial-state", func(t *testing.T) {
		h := startHandover(t, sim.MigrateRequest{})
		h.sj.Expect(protocol.TypeGetState)
		h.sj.Send(protocol.JobFrame{Type: protocol.TypeState, Payload: framed(protocol.TypeState, protocol.MaxFrameBytes)})
		done := h.end()
		normsimtest.RequireState(t, done, sim.MigrationAborted)
		if done.Target.Instance != "" || !strings.Contains(done.Reason, "over the job socket's 65536-byte frame cap (the state frame was 65536 bytes)") {
			t.Fatalf("target %q, reason %q", done.Target.Instance, done.Reason)
		}
		if f := h.sj.Read(); f.Type != protocol.TypeAbort {
			t.Fatalf("source read %+v, want abort", f)
		}
	})
	t.Run("target-ready as cutover-ready", func(t *testing.T) {
		h := startHandover(t, sim.MigrateRequest{})
		h.state()
		h.tj.Send(protocol.JobFrame{Type: protocol.TypeTargetReady, Payload: framed(protocol.TypeTargetReady, protocol.MaxFrameBytes)})
		done := h.end()
		normsimtest.RequireState(t, done, sim.MigrationAborted)
		if !strings.Contains(done.Reason, "could not relay cutover-ready to the source") {
			t.Fatalf("reason %q", done.Reason)
		}
		if f := h.sj.Read(); f.Type != protocol.TypeAbort {
			t.Fatalf("source read %+v, want abort", f)
		}
	})
	t.Run("source-stopped-output as cutover-apply", func(t *testing.T) {
		h := startHandover(t, sim.MigrateRequest{})
		h.cutoverReady()
		h.sj.Send(protocol.JobFrame{Type: protocol.TypeSourceStoppedOutput, Payload: framed(protocol.TypeSourceStoppedOutput, protocol.MaxFrameBytes)})
		done := h.end()
		normsimtest.RequireState(t, done, sim.MigrationFailed)
		if !strings.Contains(done.Reason, "could not relay cutover-apply to the target") {
			t.Fatalf("reason %q", done.Reason)
		}
	})
}

// TestStopAndMigrateAtOnceOneWins sends DELETE and migrate for the same
// instance at the same moment, 300 times: one of them wins and the other
// is refused; never both.
func TestStopAndMigrateAtOnceOneWins(t *testing.T) {
	const races = 300
	s := startSim(t, normsimtest.Options{})
	wins := map[string]int{}
	for i := range races {
		src, sj := launchExternal(t, s, "a")
		start := make(chan struct{})
		var stopErr, migErr error
		var m *sim.Migration
		var wg sync.WaitGroup
		wg.Add(2)
		go func() {
			defer wg.Done()
			<-start
			stopErr = s.Do(http.MethodDelete, "/api/v1/instances/"+src.ID, nil, nil)
		}()
		go func() { defer wg.Done(); <-start; m, migErr = s.Migrate(src.ID, sim.MigrateRequest{}) }()
		close(start)
		wg.Wait()
		switch {
		case stopErr == nil && migErr == nil:
			t.Fatalf("race %d: both the stop and migration %s succeeded", i, m.ID)
		case stopErr == nil:
			wins["stop"]++
		case migErr == nil:
			wins["migrate"]++
			var e *normsimtest.APIError
			if !errors.As(stopErr, &e) || e.Status != http.StatusConflict {
				t.Fatalf("race %d: the losing stop got %v, want 409", i, stopErr)
			}
			sj.Expect(protocol.TypeGetState)
			sj.Send(protocol.JobFrame{Type: protocol.TypeStateRefused, Reason: "race over"})
			s.WaitMigration(t, m.ID, 10*time.Second)
			if err := s.Do(http.MethodDelete, "/api/v1/instances/"+src.ID, nil, nil); err != nil {
				t.Fatalf("race %d: stop after the migration: %v", i, err)
			}
		default:
			t.Fatalf("race %d: neither won: stop %v, migrate %v", i, stopErr, migErr)
		}
	}
	t.Logf("%d races: the stop won %d, the migration %d", races, wins["stop"], wins["migrate"])
}

// TestSinkHoldsOnlyLiveJobs: the output sink keeps a running job's
// packets, refuses those naming a job normsim does not run, and forgets a
// job once its last instance is removed.
func TestSinkHoldsOnlyLiveJobs(t *testing.T) {
	s := startSim(t, normsimtest.Options{})
	src, _ := launchExternal(t, s, "a")
	c, err := net.Dial("udp", src.Env["counter"]["NORMSIM_OUTPUT_ADDR"])
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	sink := s.Main.Sink
	fmt.Fprintf(c, `{"job":"nobody-runs-this","instance":"x","seq":1}`)
	fmt.Fprintf(c, `{"job":%q,"instance":%q,"seq":1}`, src.JobID, src.ID)
	for deadline := time.Now().Add(10 * time.Second); !sink.Seen(src.JobID) || sink.Refused() < 1; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("seen %v, refused %d", sink.Seen(src.JobID), sink.Refused())
		}
	}
	if sink.Seen("nobody-runs-this") {
		t.Fatal("the sink kept packets of a job normsim does not run")
	}
	if err := s.Do(http.MethodDelete, "/api/v1/instances/"+src.ID, nil, nil); err != nil {
		t.Fatal(err)
	}
	if sink.Seen(src.JobID) {
		t.Fatal("the sink still holds a removed job's packets")
	}
}
