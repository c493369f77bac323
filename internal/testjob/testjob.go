// Package testjob plays a job over a raw WebSocket for tests that control
// every frame: internal/jobplay's Job, with each step failing the test on an
// error instead of returning it. It links no simulator, so the domain's unit
// tests (sim/jobsocket, sim/manager) use it as well as end-to-end tests.
package testjob

import (
	"context"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/normsim/normsim/internal/jobplay"
	"github.com/normsim/normsim/protocol"
)

// stepTimeout bounds each read and write: long enough for a loaded -race
// run, short enough that a missing frame fails the test rather than hangs.
const stepTimeout = 15 * time.Second

// Job is one connected job instance.
type Job struct {
	tb  testing.TB
	raw *jobplay.Job
	// Ack is the hello-ack the worker answered with.
	Ack protocol.WorkerFrame
}

// Dial connects as the service whose launch env is env, says hello and
// reads the hello-ack. The connection is dropped when the test ends.
func Dial(tb testing.TB, env map[string]string) *Job {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), stepTimeout)
	defer cancel()
	raw, err := jobplay.DialEnv(ctx, env)
	if err != nil {
		tb.Fatalf("connect the job: %v", err)
	}
	tb.Cleanup(raw.Close)
	return &Job{tb: tb, raw: raw, Ack: raw.Ack}
}

// Connect opens the WebSocket at url and says nothing, for a test that
// plays the hello (or something else) itself. opts may be nil. The
// connection is dropped when the test ends.
func Connect(tb testing.TB, url string, opts *websocket.DialOptions) *Job {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), stepTimeout)
	defer cancel()
	raw, err := jobplay.Connect(ctx, url, opts)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(raw.Close)
	return &Job{tb: tb, raw: raw}
}

// Hello says hello with token and returns the hello-ack the worker must
// answer with (also kept in Ack).
func (j *Job) Hello(token string) protocol.WorkerFrame {
	j.tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), stepTimeout)
	defer cancel()
	if err := j.raw.Hello(ctx, token); err != nil {
		j.tb.Fatal(err)
	}
	j.Ack = j.raw.Ack
	return j.Ack
}

// Conn is the WebSocket, for a test that reads, writes or closes it itself.
func (j *Job) Conn() *websocket.Conn { return j.raw.Conn }

// Send writes one frame.
func (j *Job) Send(f protocol.JobFrame) {
	j.tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), stepTimeout)
	defer cancel()
	if err := j.raw.Send(ctx, f); err != nil {
		j.tb.Fatalf("send %s: %v", f.Type, err)
	}
}

// SendText writes frame as one text frame, as it is: malformed, out of
// phase or over the cap if the test says so.
func (j *Job) SendText(frame string) {
	j.tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), stepTimeout)
	defer cancel()
	if err := j.raw.SendRaw(ctx, []byte(frame)); err != nil {
		j.tb.Fatal(err)
	}
}

// Read reads one frame from the worker.
func (j *Job) Read() protocol.WorkerFrame {
	j.tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), stepTimeout)
	defer cancel()
	f, err := j.raw.Read(ctx)
	if err != nil {
		j.tb.Fatal(err)
	}
	return f
}

// Expect reads one frame and fails the test unless it is of type typ.
func (j *Job) Expect(typ string) protocol.WorkerFrame {
	j.tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), stepTimeout)
	defer cancel()
	f, err := j.raw.Expect(ctx, typ)
	if err != nil {
		j.tb.Fatal(err)
	}
	return f
}

// Closed reads until the worker closes the socket, within the time given,
// and returns the close frame's code and reason. It fails the test when
// the socket ended without a close frame or did not end in time.
func (j *Job) Closed(within time.Duration) (websocket.StatusCode, string) {
	j.tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	code, reason, err := j.raw.Closed(ctx)
	if err != nil {
		j.tb.Fatal(err)
	}
	return code, reason
}
