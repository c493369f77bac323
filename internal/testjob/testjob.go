// Package testjob plays a job over a raw WebSocket for tests that control
// every frame: internal/bench's Job, with each step failing the test on an
// error instead of returning it.
package testjob

import (
	"context"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/normsim/normsim/internal/bench"
	"github.com/normsim/normsim/protocol"
)

// stepTimeout bounds each read and write: long enough for a loaded -race
// run, short enough that a missing frame fails the test rather than hangs.
const stepTimeout = 15 * time.Second

// Job is one connected job instance.
type Job struct {
	tb  testing.TB
	raw *bench.Job
	// Ack is the hello-ack the worker answered with.
	Ack protocol.WorkerFrame
}

// Dial connects as the service whose launch env is env, says hello and
// reads the hello-ack. The connection is dropped when the test ends.
func Dial(tb testing.TB, env map[string]string) *Job {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), stepTimeout)
	defer cancel()
	raw, err := bench.DialEnv(ctx, env)
	if err != nil {
		tb.Fatalf("connect the job: %v", err)
	}
	tb.Cleanup(raw.Close)
	return &Job{tb: tb, raw: raw, Ack: raw.Ack}
}

// Conn is the WebSocket, for a test that reads or closes it itself.
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
