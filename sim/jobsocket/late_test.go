package jobsocket_test

import (
	"context"
	"testing"
	"time"

	"github.com/normsim/normsim/internal/testjob"
	"github.com/normsim/normsim/protocol"
	"github.com/normsim/normsim/sim"
	"github.com/normsim/normsim/sim/jobsocket"
)

// connected connects as j/s and waits until the listener has reported it.
func connected(t *testing.T, l *jobsocket.Listener, ev *events) *testjob.Job {
	t.Helper()
	c := dial(t, l, protocol.Path("j", "s"))
	c.Hello(token)
	ev.wait(t, jobsocket.Connected)
	return c
}

// TestExpiredAsksAreAnsweredLateOnce: after Expire, each frame the phase
// allowed is accepted once more and flagged late; a second copy is out of
// phase (4400). Late answers end once the job answers a newer ask.
func TestExpiredAsksAreAnsweredLateOnce(t *testing.T) {
	l, ev := MustListener(t, jobsocket.Config{})
	l.Register(jobsocket.Registration{JobID: "j", Role: "s", Token: token})
	c := connected(t, l, ev)

	l.Expect("j", "s", protocol.TypeSourceStoppedOutput, protocol.TypeAbort)
	l.Expire("j", "s")
	c.SendText(`{"type":"source-stopped-output","payload":1}`)
	if f := ev.wait(t, jobsocket.Frame); !f.Late || f.Frame.Type != protocol.TypeSourceStoppedOutput {
		t.Fatalf("got %+v, want a late source-stopped-output", f)
	}
	// A newer ask and its answer: what was late is no longer acceptable.
	l.Expect("j", "s", protocol.TypeState, protocol.TypeStateRefused, protocol.TypeAbort)
	c.SendText(`{"type":"state","payload":null}`)
	if f := ev.wait(t, jobsocket.Frame); f.Late || f.Frame.Type != protocol.TypeState {
		t.Fatalf("got %+v, want an on-time state", f)
	}
	c.SendText(`{"type":"abort","reason":"x"}`) // abort stays allowed through the phase
	if f := ev.wait(t, jobsocket.Frame); f.Late {
		t.Fatalf("abort in phase flagged late: %+v", f)
	}
	l.Expire("j", "s")
	c.SendText(`{"type":"abort","reason":"crossed"}`)
	if f := ev.wait(t, jobsocket.Frame); !f.Late {
		t.Fatalf("abort after Expire not flagged late: %+v", f)
	}
	c.SendText(`{"type":"abort","reason":"again"}`)
	if code, reason := c.Closed(5 * time.Second); code != protocol.CloseProtocolError || reason != "frame abort is out of phase" {
		t.Fatalf("a second late abort closed with %d %q, want 4400 out of phase", code, reason)
	}
	if d := ev.wait(t, jobsocket.Disconnected); d.ClosedBy != jobsocket.ClosedByWorker || d.Code != protocol.CloseProtocolError {
		t.Fatalf("disconnect %+v, want closed by the worker with 4400", d)
	}
}

// TestDisconnectSaysWhoClosed: a job's close frame, and a connection torn
// down without one, are told apart from closes the listener made.
func TestDisconnectSaysWhoClosed(t *testing.T) {
	l, ev := MustListener(t, jobsocket.Config{})
	l.Register(jobsocket.Registration{JobID: "j", Role: "s", Token: token})
	c := connected(t, l, ev)
	c.Conn().Close(1000, "")
	if d := ev.wait(t, jobsocket.Disconnected); d.ClosedBy != jobsocket.ClosedByJob || d.Code != 1000 {
		t.Fatalf("got %+v, want closed by the job with 1000", d)
	}
	connected(t, l, ev).Conn().CloseNow()
	if d := ev.wait(t, jobsocket.Disconnected); d.ClosedBy != jobsocket.ConnectionLost || d.Code != 1006 {
		t.Fatalf("got %+v, want a lost connection (1006)", d)
	}
}

// TestHelloBeforeRegistrationWaits: a job whose hello reaches a listener
// still being set up (a restarted normsim recovering its instances) waits
// for the registrations instead of being refused as unknown.
func TestHelloBeforeRegistrationWaits(t *testing.T) {
	registered := make(chan struct{})
	hellos := &helloSeen{seen: make(chan struct{}, 1)}
	rec := jobsocket.NewRecorder(hellos, jobsocket.RecorderLimits{}, nil)
	defer rec.Close()
	l, ev := MustListener(t, jobsocket.Config{Registered: registered, Recorder: rec})
	c := dial(t, l, protocol.Path("j", "s"))
	c.SendText(hello(token))
	// The listener records a hello as soon as it has read it: from then
	// on it waits for the registrations.
	select {
	case <-hellos.seen:
	case <-time.After(10 * time.Second):
		t.Fatal("the hello was never read")
	}
	l.Register(jobsocket.Registration{JobID: "j", Role: "s", Token: token})
	close(registered)
	if f := c.Read(); f.Type != protocol.TypeHelloAck {
		t.Fatalf("got %+v, want hello-ack once the instance is registered", f)
	}
	ev.wait(t, jobsocket.Connected)
}

// helloSeen is a store that tells when a hello frame is recorded.
type helloSeen struct {
	sim.Store
	seen chan struct{}
}

func (s *helloSeen) RecordFrames(_ context.Context, frs []sim.FrameRecord) error {
	for _, f := range frs {
		if f.Type == protocol.TypeHello {
			select {
			case s.seen <- struct{}{}:
			default:
			}
		}
	}
	return nil
}

// TestOwedAnswersAreLateNotOutOfPhase: an ask of an ended migration that
// reached the job late (Owe) may be answered: that answer, beyond what
// the current phase allows, arrives late instead of closing the socket.
// A frame the phase allows is the current ask's answer (answers carry no
// migration id), owed or not; what is owed ends with the next Expire.
func TestOwedAnswersAreLateNotOutOfPhase(t *testing.T) {
	l, ev := MustListener(t, jobsocket.Config{})
	l.Register(jobsocket.Registration{JobID: "j", Role: "s", Token: token})
	c := connected(t, l, ev)

	l.Expect("j", "s", protocol.TypeState, protocol.TypeStateRefused, protocol.TypeAbort)
	l.Owe("j", "s", protocol.TypeState, protocol.TypeStateRefused)
	c.SendText(`{"type":"state","payload":"first"}`)
	if f := ev.wait(t, jobsocket.Frame); f.Late || f.Frame.Type != protocol.TypeState {
		t.Fatalf("got %+v, want the current ask's state, on time", f)
	}
	c.SendText(`{"type":"state","payload":"second"}`)
	if f := ev.wait(t, jobsocket.Frame); !f.Late || f.Reason == "" {
		t.Fatalf("got %+v, want the owed state, late, with why", f)
	}
	// Owed, and never answered: gone with the next Expire.
	l.Owe("j", "s", protocol.TypeState, protocol.TypeStateRefused)
	l.Expire("j", "s")
	l.Expect("j", "s", protocol.TypeTargetReady, protocol.TypeAbort)
	c.SendText(`{"type":"state","payload":"again"}`)
	if code, reason := c.Closed(5 * time.Second); code != protocol.CloseProtocolError || reason != "frame state is out of phase" {
		t.Fatalf("closed with %d %q, want 4400 out of phase", code, reason)
	}
}
