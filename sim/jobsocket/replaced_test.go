package jobsocket_test

import (
	"testing"
	"time"

	"github.com/normsim/normsim/internal/testjob"
	"github.com/normsim/normsim/protocol"
	"github.com/normsim/normsim/sim/jobsocket"
)

// next is the next event the listener reports, of any kind.
func (e *events) next(t *testing.T) jobsocket.Event {
	t.Helper()
	select {
	case ev := <-e.c:
		return ev
	case <-time.After(10 * time.Second):
		t.Fatal("no event")
	}
	return jobsocket.Event{}
}

// askedForState connects a job as j/r and asks it for its state, as a
// migration's get-state does.
func askedForState(t *testing.T) (*jobsocket.Listener, *events, *testjob.Job) {
	t.Helper()
	l, ev := MustListener(t, jobsocket.Config{})
	l.Register(jobsocket.Registration{JobID: "j", Role: "r", Token: token})
	old := dial(t, l, "/instances/j/r")
	old.Hello(token)
	ev.wait(t, jobsocket.Connected)
	l.Expect("j", "r", protocol.TypeState, protocol.TypeStateRefused, protocol.TypeAbort)
	return l, ev, old
}

// TestFramesOfAReplacedConnection (issue 29 item 7): a newer hello
// replaces a connection with 4409, and the replacement is reported. What
// the job sent on the old socket before it read that close is read, not
// lost in the close handshake: the answer the instance is asked for is
// passed on, marked Replaced; anything else is reported discarded with
// why. The newer connection repeating that answer is not closed for it.
func TestFramesOfAReplacedConnection(t *testing.T) {
	t.Parallel()
	l, ev, old := askedForState(t)

	newer := dial(t, l, "/instances/j/r")
	newer.Hello(token)
	if got := ev.next(t); got.Kind != jobsocket.Hello {
		t.Fatalf("got %+v, want the newer connection's hello", got)
	}
	if got := ev.next(t); got.Kind != jobsocket.Replaced || got.Code != protocol.CloseReplaced || got.ClosedBy != jobsocket.ClosedByWorker {
		t.Fatalf("got %+v, want the replacement (4409, by the worker)", got)
	}
	if got := ev.next(t); got.Kind != jobsocket.Connected {
		t.Fatalf("got %+v, want the newer connection", got)
	}

	// The old socket's client has not read the close: it still sends.
	old.SendText(`{"type":"state","payload":{"n":1}}`)
	if got := ev.next(t); got.Kind != jobsocket.Frame || !got.Replaced || got.Frame.Type != protocol.TypeState || string(got.Frame.Payload) != `{"n":1}` {
		t.Fatalf("got %+v, want the state, read on the replaced socket", got)
	}
	old.SendText(`{"type":"target-ready","payload":null}`)
	if got := ev.next(t); got.Kind != jobsocket.Discarded || !got.Replaced || got.Frame.Type != protocol.TypeTargetReady ||
		got.Reason != "frame target-ready is out of phase" {
		t.Fatalf("got %+v, want target-ready discarded as out of phase", got)
	}
	old.SendText(`{"type":`)
	if got := ev.next(t); got.Kind != jobsocket.Discarded || !got.Replaced || got.Reason == "" {
		t.Fatalf("got %+v, want a broken frame discarded", got)
	}

	// The job repeats its answer on the newer connection: discarded, and
	// the connection stays.
	newer.SendText(`{"type":"state","payload":{"n":1}}`)
	if got := ev.next(t); got.Kind != jobsocket.Discarded || got.Replaced || got.Frame.Type != protocol.TypeState {
		t.Fatalf("got %+v, want the repeated state discarded", got)
	}
	newer.SendText(`{"type":"abort","reason":"x"}`)
	if got := ev.next(t); got.Kind != jobsocket.Frame || got.Replaced || got.Frame.Type != protocol.TypeAbort {
		t.Fatalf("got %+v, want the newer connection's abort", got)
	}
	if n := l.Discarded(); n != 3 {
		t.Errorf("Discarded() = %d, want 3", n)
	}
	if code, _ := old.Closed(5 * time.Second); code != protocol.CloseReplaced {
		t.Fatalf("old connection closed with %d, want 4409", code)
	}
	if !l.Connected("j", "r") {
		t.Fatal("the newer connection is gone")
	}
}

// TestAnAskIsTheInstancesNotTheConnections (round 13, A5): the docs said
// an ask the old connection had not answered must be answered on the old
// connection, while the listener took the answer on the new one. The
// phase is the instance's: the answer is taken on either connection,
// once, as a worker that keeps its phase per instance takes it, and the
// docs now say so.
func TestAnAskIsTheInstancesNotTheConnections(t *testing.T) {
	t.Parallel()
	l, ev, old := askedForState(t)

	newer := dial(t, l, "/instances/j/r")
	newer.Hello(token)
	ev.wait(t, jobsocket.Connected)
	newer.SendText(`{"type":"state","payload":{"n":2}}`)
	if got := ev.wait(t, jobsocket.Frame); got.Replaced || got.Frame.Type != protocol.TypeState || string(got.Frame.Payload) != `{"n":2}` {
		t.Fatalf("got %+v, want the state answered on the newer connection, passed on", got)
	}
	// Once: the old connection's copy of the answer is not used again.
	old.SendText(`{"type":"state","payload":{"n":1}}`)
	if got := ev.next(t); got.Kind != jobsocket.Discarded || !got.Replaced {
		t.Fatalf("got %+v, want the old connection's late copy discarded", got)
	}
	if !l.Connected("j", "r") {
		t.Fatal("the newer connection is gone")
	}
}
