package jobclient

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/normsim/normsim/protocol"
)

func TestConnectDisabled(t *testing.T) {
	tests := []struct {
		name       string
		url, token string
	}{
		{"neither", "", ""},
		{"url only", "ws://127.0.0.1:1/instances/j/r", ""},
		{"token only", "", "tok"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv(protocol.EnvURL, tt.url)
			t.Setenv(protocol.EnvToken, tt.token)
			c := Connect(context.Background(), Handler{}, Options{Logger: testLogger(t)})
			if c.Enabled() || c.Connected() || c.Migration() != nil {
				t.Fatalf("disabled client: Enabled=%v Connected=%v Migration=%v", c.Enabled(), c.Connected(), c.Migration())
			}
			if err := c.WaitConnected(context.Background()); !errors.Is(err, ErrDisabled) {
				t.Fatalf("WaitConnected = %v, want ErrDisabled", err)
			}
			if err := c.Abort(context.Background(), "m", "r"); !errors.Is(err, ErrDisabled) {
				t.Fatalf("Abort = %v, want ErrDisabled", err)
			}
			select {
			case <-c.Done():
			default:
				t.Fatal("Done not closed for a disabled client")
			}
			if err := c.Close(); err != nil {
				t.Fatalf("Close = %v", err)
			}
		})
	}
}

func TestConnectBadURL(t *testing.T) {
	for _, u := range []string{"http://127.0.0.1:1/instances/j/r", "not a url", "ws:///instances/j/r"} {
		c := Connect(context.Background(), Handler{}, Options{URL: u, Token: "t", Logger: testLogger(t)})
		if !c.Enabled() {
			t.Errorf("%q: a configured client should report Enabled", u)
		}
		err := c.WaitConnected(context.Background())
		if err == nil || !strings.Contains(err.Error(), "not a ws:// or wss:// URL") {
			t.Errorf("%q: WaitConnected = %v", u, err)
		}
		if err := c.Close(); err != nil {
			t.Errorf("Close = %v", err)
		}
	}
}

func TestHelloFromEnvironment(t *testing.T) {
	w := newFakeWorker(t)
	t.Setenv(protocol.EnvURL, w.url())
	t.Setenv(protocol.EnvToken, "from-env")
	c := Connect(context.Background(), Handler{}, Options{Logger: testLogger(t)})
	t.Cleanup(func() { _ = c.Close() })
	if !c.Enabled() {
		t.Fatal("client not enabled with both variables set")
	}
	wc := w.accept("from-env")
	if wc.path != "/instances/job-1/key%201" {
		t.Errorf("dialled path %q", wc.path)
	}
	if c.Connected() {
		t.Fatal("connected before hello-ack")
	}
	wc.send(protocol.WorkerFrame{Type: protocol.TypeHelloAck})
	waitConnected(t, c)
	if !c.Connected() || c.Migration() != nil {
		t.Fatalf("after hello-ack: Connected=%v Migration=%v", c.Connected(), c.Migration())
	}
}

func TestSourceFlow(t *testing.T) {
	w := newFakeWorker(t)
	gotReady := make(chan string, 1)
	c := connect(t, w, Handler{
		GetState: func(ctx context.Context, id string) (json.RawMessage, error) {
			if id != "m1" {
				t.Errorf("GetState for %q", id)
			}
			return json.RawMessage(`{"b":1,  "a":[1.50,2e3]}`), nil
		},
		CutoverReady: func(ctx context.Context, id string, ready json.RawMessage) (json.RawMessage, error) {
			gotReady <- string(ready)
			return json.RawMessage(`{"pts":900000}`), nil
		},
		Abort: func(id, reason string) { t.Errorf("Abort(%q, %q) in a successful handover", id, reason) },
	})
	wc := acked(t, w, c, nil)

	wc.send(protocol.WorkerFrame{Type: protocol.TypeGetState, MigrationID: "m1"})
	f := wc.read()
	if f.Type != protocol.TypeState || string(f.Payload) != `{"b":1,  "a":[1.50,2e3]}` {
		t.Fatalf("answer to get-state: %+v (payload %s)", f, f.Payload)
	}
	wc.send(protocol.WorkerFrame{Type: protocol.TypeCutoverReady, MigrationID: "m1", Payload: json.RawMessage(`{"ready": true}`)})
	if got := recv(t, gotReady); got != `{"ready": true}` {
		t.Fatalf("CutoverReady got %s", got)
	}
	f = wc.read()
	if f.Type != protocol.TypeSourceStoppedOutput || string(f.Payload) != `{"pts":900000}` {
		t.Fatalf("answer to cutover-ready: %+v (payload %s)", f, f.Payload)
	}
}

func TestTargetFlow(t *testing.T) {
	w := newFakeWorker(t)
	gotState := make(chan string, 1)
	gotStopped := make(chan string, 1)
	c := connect(t, w, Handler{
		InitialState: func(ctx context.Context, id string, state json.RawMessage) (json.RawMessage, error) {
			gotState <- id + " " + string(state)
			return json.RawMessage(`"ready"`), nil
		},
		CutoverApply: func(ctx context.Context, id string, stoppedAt json.RawMessage) (Applied, error) {
			gotStopped <- id + " " + string(stoppedAt)
			skew := 1.5
			return Applied{
				Applied: []string{"video", "audio"},
				Failed:  []protocol.FailedApply{{ID: "captions", Reason: "no decoder"}},
				SkewMs:  &skew,
			}, nil
		},
	})
	wc := acked(t, w, c, &protocol.MigrationRef{ID: "m7", Side: "target"})
	if m := c.Migration(); m == nil || *m != (protocol.MigrationRef{ID: "m7", Side: "target"}) {
		t.Fatalf("Migration() = %+v", m)
	}

	wc.send(protocol.WorkerFrame{Type: protocol.TypeInitialState, MigrationID: "m7", Payload: json.RawMessage(`{"s":[1, 2]}`)})
	if got := recv(t, gotState); got != `m7 {"s":[1, 2]}` {
		t.Fatalf("InitialState got %q", got)
	}
	f := wc.read()
	if f.Type != protocol.TypeTargetReady || string(f.Payload) != `"ready"` {
		t.Fatalf("answer to initial-state: %+v", f)
	}
	wc.send(protocol.WorkerFrame{Type: protocol.TypeCutoverApply, MigrationID: "m7", Payload: json.RawMessage(`{"pts":900000}`)})
	if got := recv(t, gotStopped); got != `m7 {"pts":900000}` {
		t.Fatalf("CutoverApply got %q", got)
	}
	f = wc.read()
	skew := 1.5
	want := protocol.JobFrame{Type: protocol.TypeTargetApplied, Applied: []string{"video", "audio"},
		Failed: []protocol.FailedApply{{ID: "captions", Reason: "no decoder"}}, SkewMs: &skew}
	if !reflect.DeepEqual(f, want) {
		t.Fatalf("target-applied = %+v, want %+v", f, want)
	}
}

func TestCutoverApplyErrorIsReported(t *testing.T) {
	w := newFakeWorker(t)
	c := connect(t, w, Handler{
		CutoverApply: func(ctx context.Context, id string, stoppedAt json.RawMessage) (Applied, error) {
			return Applied{Applied: []string{"video"}}, errors.New("audio would not start")
		},
		Abort: func(id, reason string) { t.Errorf("Abort(%q, %q) past the point of no return", id, reason) },
	})
	wc := acked(t, w, c, &protocol.MigrationRef{ID: "m", Side: "target"})
	wc.send(protocol.WorkerFrame{Type: protocol.TypeCutoverApply, MigrationID: "m", Payload: json.RawMessage(`1`)})
	f := wc.read()
	want := protocol.JobFrame{Type: protocol.TypeTargetApplied, Applied: []string{"video"},
		Failed: []protocol.FailedApply{{ID: "cutover-apply", Reason: "audio would not start"}}}
	if !reflect.DeepEqual(f, want) {
		t.Fatalf("target-applied = %+v, want %+v", f, want)
	}
}

func TestNilHandlersAnswer(t *testing.T) {
	w := newFakeWorker(t)
	c := connect(t, w, Handler{})
	wc := acked(t, w, c, nil)
	steps := []struct {
		send protocol.WorkerFrame
		want protocol.JobFrame
	}{
		{protocol.WorkerFrame{Type: protocol.TypeGetState, MigrationID: "a"}, protocol.JobFrame{Type: protocol.TypeState, Payload: json.RawMessage("null")}},
		{protocol.WorkerFrame{Type: protocol.TypeInitialState, MigrationID: "b", Payload: json.RawMessage("1")}, protocol.JobFrame{Type: protocol.TypeTargetReady, Payload: json.RawMessage("null")}},
		{protocol.WorkerFrame{Type: protocol.TypeCutoverReady, MigrationID: "a", Payload: json.RawMessage("2")}, protocol.JobFrame{Type: protocol.TypeSourceStoppedOutput, Payload: json.RawMessage("null")}},
		{protocol.WorkerFrame{Type: protocol.TypeCutoverApply, MigrationID: "b", Payload: json.RawMessage("3")}, protocol.JobFrame{Type: protocol.TypeTargetApplied}},
	}
	for _, s := range steps {
		wc.send(s.send)
		if got := wc.read(); !reflect.DeepEqual(got, s.want) {
			t.Fatalf("answer to %s: %+v, want %+v", s.send.Type, got, s.want)
		}
	}
}

func TestStateRefusal(t *testing.T) {
	tests := []struct {
		name   string
		err    error
		reason string
	}{
		{"refusal", &Refusal{Reason: "mid-recording"}, "mid-recording"},
		{"wrapped refusal", errors.Join(errors.New("context"), &Refusal{Reason: "busy"}), "busy"},
		{"failure", errors.New("disk unreadable"), "disk unreadable"},
		{"long failure", errors.New(strings.Repeat("é", 2000)), strings.Repeat("é", maxReasonBytes/2)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newFakeWorker(t)
			c := connect(t, w, Handler{
				GetState: func(context.Context, string) (json.RawMessage, error) { return nil, tt.err },
				Abort:    func(id, reason string) { t.Errorf("Abort(%q, %q) for a refusal", id, reason) },
			})
			wc := acked(t, w, c, nil)
			wc.send(protocol.WorkerFrame{Type: protocol.TypeGetState, MigrationID: "m"})
			f := wc.read()
			if f.Type != protocol.TypeStateRefused || f.Reason != tt.reason {
				t.Fatalf("answer %+v, want state-refused %q", f, tt.reason)
			}
		})
	}
}

func TestUnsendableStateIsRefused(t *testing.T) {
	tests := []struct {
		name   string
		state  json.RawMessage
		reason string
	}{
		{"too large", json.RawMessage(`"` + strings.Repeat("x", protocol.MaxFrameBytes) + `"`), "frame over the 64 KiB cap"},
		{"not JSON", json.RawMessage(`{oops}`), "payload is not valid JSON"},
		{"infinite", json.RawMessage(`[1e999]`), "not finite"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newFakeWorker(t)
			c := connect(t, w, Handler{
				GetState: func(context.Context, string) (json.RawMessage, error) { return tt.state, nil },
			})
			wc := acked(t, w, c, nil)
			wc.send(protocol.WorkerFrame{Type: protocol.TypeGetState, MigrationID: "m"})
			f := wc.read()
			if f.Type != protocol.TypeStateRefused || !strings.Contains(f.Reason, tt.reason) {
				t.Fatalf("answer %+v, want state-refused mentioning %q", f, tt.reason)
			}
		})
	}
}

func TestLargestFrameIsSent(t *testing.T) {
	w := newFakeWorker(t)
	overhead := len(`{"type":"state","payload":""}`)
	state := json.RawMessage(`"` + strings.Repeat("x", protocol.MaxFrameBytes-overhead) + `"`)
	c := connect(t, w, Handler{
		GetState: func(context.Context, string) (json.RawMessage, error) { return state, nil },
	})
	wc := acked(t, w, c, nil)
	wc.conn.SetReadLimit(2 * protocol.MaxFrameBytes)
	wc.send(protocol.WorkerFrame{Type: protocol.TypeGetState, MigrationID: "m"})
	if f := wc.read(); f.Type != protocol.TypeState || len(f.Payload) != len(state) {
		t.Fatalf("a frame of exactly %d bytes was not sent as state: %s, %d payload bytes", protocol.MaxFrameBytes, f.Type, len(f.Payload))
	}
}

type abortCall struct{ id, reason string }

func TestWorkerAbortCancelsHandler(t *testing.T) {
	w := newFakeWorker(t)
	cancelled := make(chan error, 1)
	aborts := make(chan abortCall, 4)
	inHandler := make(chan struct{})
	c := connect(t, w, Handler{
		GetState: func(ctx context.Context, id string) (json.RawMessage, error) {
			if id == "slow" {
				close(inHandler)
				<-ctx.Done()
				cancelled <- ctx.Err()
				return json.RawMessage(`"too late"`), nil
			}
			return json.RawMessage(`"` + id + `"`), nil
		},
		Abort: func(id, reason string) { aborts <- abortCall{id, reason} },
	})
	wc := acked(t, w, c, nil)
	wc.send(protocol.WorkerFrame{Type: protocol.TypeGetState, MigrationID: "slow"})
	recv(t, inHandler)
	wc.send(protocol.WorkerFrame{Type: protocol.TypeAbort, MigrationID: "slow", Reason: "timed out"})
	if err := recv(t, cancelled); !errors.Is(err, context.Canceled) {
		t.Fatalf("handler ctx ended with %v", err)
	}
	if got := recv(t, aborts); got != (abortCall{"slow", "timed out"}) {
		t.Fatalf("Abort call %+v", got)
	}
	// The late answer is dropped: the next frame is the answer to the next
	// migration.
	wc.send(protocol.WorkerFrame{Type: protocol.TypeGetState, MigrationID: "next"})
	if f := wc.read(); f.Type != protocol.TypeState || string(f.Payload) != `"next"` {
		t.Fatalf("frame after the abort: %+v (payload %s)", f, f.Payload)
	}
	// A repeated abort does not call Abort again.
	wc.send(protocol.WorkerFrame{Type: protocol.TypeAbort, MigrationID: "slow", Reason: "again"})
	wc.send(protocol.WorkerFrame{Type: protocol.TypeAbort, MigrationID: "other", Reason: "operator"})
	if got := recv(t, aborts); got != (abortCall{"other", "operator"}) {
		t.Fatalf("Abort call %+v, want only the new migration's", got)
	}
}

func TestHandlerErrorAborts(t *testing.T) {
	w := newFakeWorker(t)
	aborts := make(chan abortCall, 2)
	c := connect(t, w, Handler{
		CutoverReady: func(context.Context, string, json.RawMessage) (json.RawMessage, error) {
			return nil, errors.New("encoder stuck")
		},
		Abort: func(id, reason string) { aborts <- abortCall{id, reason} },
	})
	wc := acked(t, w, c, nil)
	wc.send(protocol.WorkerFrame{Type: protocol.TypeGetState, MigrationID: "m"})
	wc.read()
	wc.send(protocol.WorkerFrame{Type: protocol.TypeCutoverReady, MigrationID: "m", Payload: json.RawMessage(`1`)})
	f := wc.read()
	if f.Type != protocol.TypeAbort || !strings.Contains(f.Reason, "encoder stuck") {
		t.Fatalf("frame %+v, want abort with the handler's error", f)
	}
	// The source must be told to resume.
	if got := recv(t, aborts); got.id != "m" || !strings.Contains(got.reason, "encoder stuck") {
		t.Fatalf("Abort call %+v", got)
	}
}

func TestClientAbort(t *testing.T) {
	w := newFakeWorker(t)
	aborts := make(chan abortCall, 2)
	c := connect(t, w, Handler{Abort: func(id, reason string) { aborts <- abortCall{id, reason} }})
	if err := c.Abort(context.Background(), "m", "early"); !errors.Is(err, ErrNotConnected) {
		t.Fatalf("Abort before connecting = %v, want ErrNotConnected", err)
	}
	wc := acked(t, w, c, &protocol.MigrationRef{ID: "m", Side: "target"})
	if err := c.Abort(context.Background(), "m", "operator changed their mind"); err != nil {
		t.Fatal(err)
	}
	if f := wc.read(); !reflect.DeepEqual(f, protocol.JobFrame{Type: protocol.TypeAbort, Reason: "operator changed their mind"}) {
		t.Fatalf("frame %+v", f)
	}
	if got := recv(t, aborts); got != (abortCall{"m", "operator changed their mind"}) {
		t.Fatalf("Abort call %+v", got)
	}
	// The target's initial-state for the aborted migration is not handled.
	wc.send(protocol.WorkerFrame{Type: protocol.TypeInitialState, MigrationID: "m", Payload: json.RawMessage(`1`)})
	wc.send(protocol.WorkerFrame{Type: protocol.TypeGetState, MigrationID: "m2"})
	if f := wc.read(); f.Type != protocol.TypeState {
		t.Fatalf("frame %+v, want the state for m2 and nothing for m", f)
	}
}

func TestConnectionLostRollsBack(t *testing.T) {
	w := newFakeWorker(t)
	aborts := make(chan abortCall, 4)
	inHandler := make(chan struct{})
	c := connect(t, w, Handler{
		GetState: func(ctx context.Context, id string) (json.RawMessage, error) {
			close(inHandler)
			<-ctx.Done()
			return nil, ctx.Err()
		},
		Abort: func(id, reason string) { aborts <- abortCall{id, reason} },
	})
	wc := acked(t, w, c, nil)
	wc.send(protocol.WorkerFrame{Type: protocol.TypeGetState, MigrationID: "m"})
	recv(t, inHandler)
	wc.close(websocket.StatusInternalError, "worker restarting")
	if got := recv(t, aborts); got != (abortCall{"m", reasonConnectionLost}) {
		t.Fatalf("Abort call %+v", got)
	}
	// And the client comes back.
	acked(t, w, c, nil)
}

func TestConnectionLostAfterPointOfNoReturn(t *testing.T) {
	w := newFakeWorker(t)
	aborts := make(chan abortCall, 4)
	c := connect(t, w, Handler{Abort: func(id, reason string) { aborts <- abortCall{id, reason} }})
	wc := acked(t, w, c, nil)
	wc.send(protocol.WorkerFrame{Type: protocol.TypeGetState, MigrationID: "done"})
	wc.read()
	wc.send(protocol.WorkerFrame{Type: protocol.TypeCutoverReady, MigrationID: "done", Payload: json.RawMessage(`1`)})
	wc.read() // source-stopped-output: past the point of no return
	wc.send(protocol.WorkerFrame{Type: protocol.TypeGetState, MigrationID: "open"})
	wc.read()
	wc.close(websocket.StatusGoingAway, "")
	if got := recv(t, aborts); got != (abortCall{"open", reasonConnectionLost}) {
		t.Fatalf("Abort call %+v, want only the migration before its point of no return", got)
	}
	acked(t, w, c, nil)
	select {
	case got := <-aborts:
		t.Fatalf("unexpected Abort call %+v", got)
	default:
	}
}

// A cutover-apply that arrived before the connection dropped is past the
// point of no return: the target applies it, though the dispatcher reached
// it only after the connection was gone, and is not rolled back.
func TestCutoverApplyReceivedBeforeConnectionLost(t *testing.T) {
	w := newFakeWorker(t)
	aborts := make(chan abortCall, 4)
	applied := make(chan string, 1)
	inHandler := make(chan struct{})
	c := connect(t, w, Handler{
		// Keeps the dispatcher busy until the connection is gone, so the
		// cutover-apply behind it waits in the queue.
		GetState: func(ctx context.Context, id string) (json.RawMessage, error) {
			close(inHandler)
			<-ctx.Done()
			return nil, ctx.Err()
		},
		CutoverApply: func(ctx context.Context, id string, stoppedAt json.RawMessage) (Applied, error) {
			applied <- id + " " + string(stoppedAt)
			return Applied{}, nil
		},
		Abort: func(id, reason string) { aborts <- abortCall{id, reason} },
	})
	wc := acked(t, w, c, &protocol.MigrationRef{ID: "m7", Side: "target"})
	wc.send(protocol.WorkerFrame{Type: protocol.TypeGetState, MigrationID: "other"})
	recv(t, inHandler)
	wc.send(protocol.WorkerFrame{Type: protocol.TypeCutoverApply, MigrationID: "m7", Payload: json.RawMessage(`41`)})
	wc.close(websocket.StatusGoingAway, "")
	if got := recv(t, aborts); got != (abortCall{"other", reasonConnectionLost}) {
		t.Fatalf("Abort call %+v, want only the migration before its point of no return", got)
	}
	if got := recv(t, applied); got != "m7 41" {
		t.Fatalf("CutoverApply got %q", got)
	}
	acked(t, w, c, nil)
	select {
	case got := <-aborts:
		t.Fatalf("unexpected Abort call %+v", got)
	default:
	}
}

func TestReconnect(t *testing.T) {
	w := newFakeWorker(t)
	c := connect(t, w, Handler{})
	wc := acked(t, w, c, nil)
	wc.close(websocket.StatusInternalError, "boom")
	wc2 := w.accept("s3cret")
	if c.Connected() {
		t.Error("Connected before the new hello-ack")
	}
	wc2.send(protocol.WorkerFrame{Type: protocol.TypeHelloAck})
	waitConnected(t, c)
	// Abrupt loss (no close frame) reconnects too.
	_ = wc2.conn.CloseNow()
	acked(t, w, c, nil)
}

func TestReconnectAfterDialFailure(t *testing.T) {
	w := newFakeWorker(t)
	u := w.url()
	w.srv.Close() // nothing listens: dials fail
	c := Connect(context.Background(), Handler{}, Options{URL: u, Token: "t", Logger: testLogger(t),
		MinBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := c.WaitConnected(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitConnected = %v", err)
	}
	select {
	case <-c.Done():
		t.Fatalf("client gave up after dial failures: %v", c.Err())
	default:
	}
}

func TestNoReconnectAfterTerminalClose(t *testing.T) {
	tests := []struct {
		code websocket.StatusCode
		want error
	}{
		{protocol.CloseReplaced, ErrReplaced},
		{protocol.CloseUnauthorized, ErrUnauthorized},
	}
	for _, tt := range tests {
		t.Run(tt.want.Error(), func(t *testing.T) {
			w := newFakeWorker(t)
			c := connect(t, w, Handler{})
			wc := w.accept("s3cret")
			wc.close(tt.code, "bye")
			select {
			case <-c.Done():
			case <-time.After(testTimeout):
				t.Fatal("client did not stop")
			}
			if !errors.Is(c.Err(), tt.want) {
				t.Fatalf("Err = %v, want %v", c.Err(), tt.want)
			}
			if err := c.WaitConnected(context.Background()); !errors.Is(err, tt.want) {
				t.Fatalf("WaitConnected = %v, want %v", err, tt.want)
			}
			if err := c.Abort(context.Background(), "m", "r"); !errors.Is(err, tt.want) {
				t.Fatalf("Abort = %v, want %v", err, tt.want)
			}
			// Backoff is at most 20ms here: give it many chances.
			w.noConnection(200 * time.Millisecond)
		})
	}
}

// TestStoppedInstanceDoesNotReconnect: a normal close (1000, "instance
// stopped") after hello-ack is the worker forgetting the instance, as it
// does to the source of a completed handover: the client stops with
// ErrStopped instead of reconnecting into a 4401.
func TestStoppedInstanceDoesNotReconnect(t *testing.T) {
	w := newFakeWorker(t)
	c := connect(t, w, Handler{})
	wc := acked(t, w, c, nil)
	wc.close(websocket.StatusNormalClosure, "instance stopped")
	select {
	case <-c.Done():
	case <-time.After(testTimeout):
		t.Fatal("client did not stop")
	}
	if !errors.Is(c.Err(), ErrStopped) {
		t.Fatalf("Err = %v, want %v", c.Err(), ErrStopped)
	}
	w.noConnection(200 * time.Millisecond)
}

// TestHelloTimeoutIsNotARefusal: of the 4401 closes, only the ones whose
// reason says the hello came too late are retried; any other 4401 reason
// means a wrong token or a path naming nothing, and stops the client with
// the reason in Err.
func TestHelloTimeoutIsNotARefusal(t *testing.T) {
	tests := []struct {
		name, reason string
		reconnect    bool
	}{
		{"hello timeout", "no hello within 5s", true},
		{"short hello timeout", "no hello within 100ms", true},
		{"capitalised", "No hello within 5000 ms", true},
		{"wrong token", "wrong token or unknown instance", false},
		{"bad path", "path names no instance", false},
		{"no reason", "", false},
		{"hello elsewhere in the reason", "hello: no", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newFakeWorker(t)
			c := connect(t, w, Handler{})
			w.accept("s3cret").close(protocol.CloseUnauthorized, tt.reason)
			if tt.reconnect {
				acked(t, w, c, nil)
				return
			}
			select {
			case <-c.Done():
			case <-time.After(testTimeout):
				t.Fatal("client did not stop")
			}
			if err := c.Err(); !errors.Is(err, ErrUnauthorized) || !strings.Contains(err.Error(), "4401") || !strings.Contains(err.Error(), tt.reason) {
				t.Fatalf("Err = %v, want ErrUnauthorized naming 4401 and %q", err, tt.reason)
			}
			w.noConnection(100 * time.Millisecond)
		})
	}
}

func TestInvalidWorkerFrame(t *testing.T) {
	tests := []struct {
		name   string
		acked  bool
		frame  string
		reason string
	}{
		{"wrong direction", true, `{"type":"hello","token":"x"}`, `unknown type "hello" for worker→job`},
		{"not JSON", true, `{"type":`, "frame is not valid JSON"},
		{"missing field", true, `{"type":"get-state"}`, "migrationId: missing"},
		{"infinite payload", true, `{"type":"cutover-apply","migrationId":"m","payload":1e400}`, "not finite"},
		{"second hello-ack", true, `{"type":"hello-ack"}`, "hello-ack after the first frame"},
		{"no hello-ack first", false, `{"type":"get-state","migrationId":"m"}`, "expected hello-ack first"},
		{"source side", false, `{"type":"hello-ack","migration":{"id":"m","side":"source"}}`, "migration.side"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newFakeWorker(t)
			called := make(chan string, 1)
			c := connect(t, w, Handler{GetState: func(context.Context, string) (json.RawMessage, error) {
				called <- "GetState"
				return nil, nil
			}})
			var wc *workerConn
			if tt.acked {
				wc = acked(t, w, c, nil)
			} else {
				wc = w.accept("s3cret")
			}
			wc.sendRaw(tt.frame)
			err := wc.readClose()
			if closeStatus(err) != protocol.CloseProtocolError {
				t.Fatalf("worker saw %v, want close %d", err, protocol.CloseProtocolError)
			}
			var ce websocket.CloseError
			if errors.As(err, &ce) && !strings.Contains(ce.Reason, tt.reason) {
				t.Errorf("close reason %q, want it to contain %q", ce.Reason, tt.reason)
			}
			select {
			case h := <-called:
				t.Fatalf("%s called for an invalid frame", h)
			default:
			}
			// The client reconnects.
			acked(t, w, c, nil)
		})
	}
}

func TestBinaryFrameIsProtocolError(t *testing.T) {
	w := newFakeWorker(t)
	c := connect(t, w, Handler{})
	wc := acked(t, w, c, nil)
	if err := wc.conn.Write(context.Background(), websocket.MessageBinary, []byte(`{"type":"get-state","migrationId":"m"}`)); err != nil {
		t.Fatal(err)
	}
	if err := wc.readClose(); closeStatus(err) != protocol.CloseProtocolError {
		t.Fatalf("worker saw %v", err)
	}
}

func TestCloseIsNormalAndFinal(t *testing.T) {
	w := newFakeWorker(t)
	var mu sync.Mutex
	var aborted []string
	inHandler := make(chan struct{})
	c := Connect(context.Background(), Handler{
		InitialState: func(ctx context.Context, id string, state json.RawMessage) (json.RawMessage, error) {
			close(inHandler)
			<-ctx.Done() // Close must cancel this, or Close would hang
			return nil, ctx.Err()
		},
		Abort: func(id, reason string) {
			mu.Lock()
			aborted = append(aborted, id)
			mu.Unlock()
		},
	}, Options{URL: w.url(), Token: "s3cret", Logger: testLogger(t), MinBackoff: time.Millisecond, MaxBackoff: time.Millisecond})
	wc := acked(t, w, c, &protocol.MigrationRef{ID: "m", Side: "target"})
	wc.send(protocol.WorkerFrame{Type: protocol.TypeInitialState, MigrationID: "m", Payload: json.RawMessage(`1`)})
	recv(t, inHandler)

	closed := make(chan error, 1)
	go func() { closed <- c.Close() }()
	if err := wc.readClose(); closeStatus(err) != websocket.StatusNormalClosure {
		t.Fatalf("worker saw %v, want a normal close", err)
	}
	if err := recv(t, closed); err != nil {
		t.Fatalf("Close = %v", err)
	}
	// Close waited for the handler and the rollback.
	mu.Lock()
	got := append([]string(nil), aborted...)
	mu.Unlock()
	if !reflect.DeepEqual(got, []string{"m"}) {
		t.Fatalf("Abort calls %v, want [m]", got)
	}
	if !errors.Is(c.Err(), ErrClosed) || c.Connected() {
		t.Fatalf("after Close: Err=%v Connected=%v", c.Err(), c.Connected())
	}
	w.noConnection(50 * time.Millisecond)
	if err := c.Close(); err != nil {
		t.Fatalf("second Close = %v", err)
	}
}

func TestContextEndStopsClient(t *testing.T) {
	w := newFakeWorker(t)
	ctx, cancel := context.WithCancel(context.Background())
	c := Connect(ctx, Handler{}, Options{URL: w.url(), Token: "s3cret", Logger: testLogger(t)})
	wc := acked(t, w, c, nil)
	cancel()
	if err := wc.readClose(); closeStatus(err) != websocket.StatusNormalClosure {
		t.Fatalf("worker saw %v", err)
	}
	<-c.Done()
	if !errors.Is(c.Err(), context.Canceled) {
		t.Fatalf("Err = %v", c.Err())
	}
	_ = c.Close()
}

func TestBackoff(t *testing.T) {
	c := &Client{minBackoff: 100 * time.Millisecond, maxBackoff: time.Second}
	for n, ceiling := range []time.Duration{100, 200, 400, 800, 1000, 1000} {
		ceiling *= time.Millisecond
		for range 50 {
			d := c.backoff(n)
			if d < ceiling/2 || d > ceiling {
				t.Fatalf("backoff(%d) = %v, want within [%v, %v]", n, d, ceiling/2, ceiling)
			}
		}
	}
	if d := c.backoff(1000); d > time.Second {
		t.Fatalf("backoff(1000) = %v overflows the cap", d)
	}
	// A job that outlived its worker (normsim up --keep) is back within
	// about two seconds of the restart, however long the worker was gone.
	def := &Client{minBackoff: defaultMinBackoff, maxBackoff: defaultMaxBackoff}
	for n := range 40 {
		if d := def.backoff(n); d > 2*time.Second {
			t.Fatalf("default backoff(%d) = %v, over 2s", n, d)
		}
	}
}

func TestReasonText(t *testing.T) {
	tests := []struct{ in, want string }{
		{"plain", "plain"},
		{"bad\xffbyte", "bad\uFFFDbyte"},
		{strings.Repeat("a", maxReasonBytes+10), strings.Repeat("a", maxReasonBytes)},
		{strings.Repeat("a", maxReasonBytes-1) + "é", strings.Repeat("a", maxReasonBytes-1)},
	}
	for _, tt := range tests {
		if got := reasonText(tt.in); got != tt.want {
			t.Errorf("reasonText(%.20q...) = %.20q... (%d bytes), want %d bytes", tt.in, got, len(got), len(tt.want))
		}
	}
}

func TestNoHelloAck(t *testing.T) {
	w := newFakeWorker(t)
	c := newClient(Handler{}, Options{URL: w.url(), Token: "s3cret", Logger: testLogger(t),
		MinBackoff: time.Millisecond, MaxBackoff: time.Millisecond})
	c.helloAckTimeout = 50 * time.Millisecond
	c.start(context.Background())
	t.Cleanup(func() { _ = c.Close() })
	wc := w.accept("s3cret") // and never acknowledge
	err := wc.readClose()
	if closeStatus(err) != protocol.CloseProtocolError {
		t.Fatalf("worker saw %v, want close %d", err, protocol.CloseProtocolError)
	}
	acked(t, w, c, nil) // it tries again
}

// A get-state delivered twice (a worker that resent it, a duplicating
// network) is answered once: the second state would be out of phase.
func TestRepeatedGetStateIsAnsweredOnce(t *testing.T) {
	w := newFakeWorker(t)
	var asked atomic.Int32
	c := connect(t, w, Handler{
		GetState: func(ctx context.Context, id string) (json.RawMessage, error) {
			asked.Add(1)
			return json.RawMessage(`{"n":1}`), nil
		},
	})
	wc := acked(t, w, c, nil)
	wc.send(protocol.WorkerFrame{Type: protocol.TypeGetState, MigrationID: "m1"})
	wc.send(protocol.WorkerFrame{Type: protocol.TypeGetState, MigrationID: "m1"})
	// Another migration's get-state is a new question, and its answer is
	// the next frame: nothing was sent for the repeat in between.
	wc.send(protocol.WorkerFrame{Type: protocol.TypeGetState, MigrationID: "m2"})
	for i := range 2 {
		if f := wc.read(); f.Type != protocol.TypeState {
			t.Fatalf("answer %d: %+v", i+1, f)
		}
	}
	if n := asked.Load(); n != 2 {
		t.Fatalf("GetState called %d times, want 2 (once per migration)", n)
	}
}
