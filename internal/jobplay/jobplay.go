// Package jobplay plays a job over a raw WebSocket: every frame of the
// job-socket protocol is written and read by the caller, so a measurement
// sees exactly when a frame left and when the answer arrived, and a test can
// send what a well-behaved job never would. It imports nothing of the
// project but the wire contract (protocol), so the domain's unit tests use it
// without linking the simulator; internal/bench measures with it and
// internal/testjob wraps it to fail a test on an error.
package jobplay

import (
	"context"
	"errors"
	"fmt"

	"github.com/coder/websocket"

	"github.com/normsim/normsim/protocol"
)

// readLimit is what a job accepts from the worker: more than the 64 KiB a
// job may send, because the worker's frames carry a job's payload in an
// envelope.
const readLimit = 1 << 20

// Job is one job instance's end of the socket. It is not safe for
// concurrent reads (one reader, as with any WebSocket), but Send may race
// with Read.
type Job struct {
	Conn *websocket.Conn
	// Ack is the hello-ack the worker answered with, once Hello returned.
	Ack protocol.WorkerFrame
}

// Connect opens the WebSocket at url and says nothing yet, for a caller
// that plays the hello itself. opts may be nil (no compression, as a job
// dials).
func Connect(ctx context.Context, url string, opts *websocket.DialOptions) (*Job, error) {
	c, _, err := websocket.Dial(ctx, url, opts)
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", url, err)
	}
	c.SetReadLimit(readLimit)
	return &Job{Conn: c}, nil
}

// Dial connects to a job-socket URL, says hello with token, and waits for
// the hello-ack.
func Dial(ctx context.Context, url, token string) (*Job, error) {
	j, err := Connect(ctx, url, nil)
	if err != nil {
		return nil, err
	}
	if err := j.Hello(ctx, token); err != nil {
		j.Close()
		return nil, err
	}
	return j, nil
}

// DialEnv connects as the service whose launch env is env
// (NORSK_WORKER_WS_URL and NORSK_WORKER_TOKEN).
func DialEnv(ctx context.Context, env map[string]string) (*Job, error) {
	if env[protocol.EnvURL] == "" || env[protocol.EnvToken] == "" {
		return nil, errors.New("the env has no job socket (" + protocol.EnvURL + ", " + protocol.EnvToken + ")")
	}
	return Dial(ctx, env[protocol.EnvURL], env[protocol.EnvToken])
}

// Hello says hello with token and reads the worker's answer, which must be
// a hello-ack; it is kept in Ack.
func (j *Job) Hello(ctx context.Context, token string) error {
	if err := j.Send(ctx, protocol.JobFrame{Type: protocol.TypeHello, Token: token}); err != nil {
		return err
	}
	ack, err := j.Read(ctx)
	if err != nil {
		return fmt.Errorf("no hello-ack: %w", err)
	}
	if ack.Type != protocol.TypeHelloAck {
		return fmt.Errorf("first frame is %s, want hello-ack", ack.Type)
	}
	j.Ack = ack
	return nil
}

// Send writes one frame.
func (j *Job) Send(ctx context.Context, f protocol.JobFrame) error {
	b, err := f.Marshal()
	if err != nil {
		return err
	}
	return j.SendRaw(ctx, b)
}

// SendRaw writes bytes as one text frame, whatever they are.
func (j *Job) SendRaw(ctx context.Context, b []byte) error {
	if err := j.Conn.Write(ctx, websocket.MessageText, b); err != nil {
		return fmt.Errorf("send: %w", err)
	}
	return nil
}

// SendBinary writes bytes as one binary frame, which the contract forbids.
func (j *Job) SendBinary(ctx context.Context, b []byte) error {
	if err := j.Conn.Write(ctx, websocket.MessageBinary, b); err != nil {
		return fmt.Errorf("send binary: %w", err)
	}
	return nil
}

// Read reads and parses one frame from the worker.
func (j *Job) Read(ctx context.Context) (protocol.WorkerFrame, error) {
	_, data, err := j.Conn.Read(ctx)
	if err != nil {
		return protocol.WorkerFrame{}, fmt.Errorf("read: %w", err)
	}
	f, err := protocol.ParseWorkerFrame(data)
	if err != nil {
		return protocol.WorkerFrame{}, fmt.Errorf("the worker sent an invalid frame %.200s: %w", data, err)
	}
	return f, nil
}

// Expect reads one frame and fails unless it is of type typ.
func (j *Job) Expect(ctx context.Context, typ string) (protocol.WorkerFrame, error) {
	f, err := j.Read(ctx)
	if err != nil {
		return f, fmt.Errorf("waiting for %s: %w", typ, err)
	}
	if f.Type != typ {
		return f, fmt.Errorf("got %s (reason %q), want %s", f.Type, f.Reason, typ)
	}
	return f, nil
}

// Closed reads, discarding what comes, until the worker closes the socket,
// and returns the close frame's code and reason; an error when the socket
// ended without a close frame, or ctx ended first.
func (j *Job) Closed(ctx context.Context) (websocket.StatusCode, string, error) {
	for {
		_, _, err := j.Conn.Read(ctx)
		if err == nil {
			continue
		}
		if ctx.Err() != nil {
			return -1, "", ctx.Err()
		}
		var ce websocket.CloseError
		if errors.As(err, &ce) {
			return ce.Code, ce.Reason, nil
		}
		return -1, "", fmt.Errorf("socket ended without a close frame: %w", err)
	}
}

// Close drops the connection at once.
func (j *Job) Close() { j.Conn.CloseNow() }
