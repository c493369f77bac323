package bench

import (
	"context"
	"errors"
	"fmt"

	"github.com/coder/websocket"

	"github.com/normsim/normsim/protocol"
)

// Job plays one job instance over a raw WebSocket: every frame is written
// and read by the caller, so a measurement sees exactly when a frame left
// and when the answer arrived. It is not safe for concurrent reads (one
// reader, as with any WebSocket), but Send may race with Read.
type Job struct {
	Conn *websocket.Conn
	// Ack is the hello-ack the worker answered with.
	Ack protocol.WorkerFrame
}

// DialJob connects to a job-socket URL, says hello with token, and waits
// for the hello-ack.
func DialJob(ctx context.Context, url, token string) (*Job, error) {
	c, _, err := websocket.Dial(ctx, url, &websocket.DialOptions{CompressionMode: websocket.CompressionDisabled})
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", url, err)
	}
	// The worker's frames carry a job's payload in an envelope: allow more
	// than the 64 KiB a job may send.
	c.SetReadLimit(1 << 20)
	j := &Job{Conn: c}
	if err := j.Send(ctx, protocol.JobFrame{Type: protocol.TypeHello, Token: token}); err != nil {
		c.CloseNow()
		return nil, err
	}
	ack, err := j.Read(ctx)
	if err != nil {
		c.CloseNow()
		return nil, err
	}
	if ack.Type != protocol.TypeHelloAck {
		c.CloseNow()
		return nil, fmt.Errorf("first frame is %s, want hello-ack", ack.Type)
	}
	j.Ack = ack
	return j, nil
}

// DialEnv connects as the service whose launch env is env
// (NORSK_WORKER_WS_URL and NORSK_WORKER_TOKEN).
func DialEnv(ctx context.Context, env map[string]string) (*Job, error) {
	if env[protocol.EnvURL] == "" || env[protocol.EnvToken] == "" {
		return nil, errors.New("the env has no job socket (" + protocol.EnvURL + ", " + protocol.EnvToken + ")")
	}
	return DialJob(ctx, env[protocol.EnvURL], env[protocol.EnvToken])
}

// Send writes one frame.
func (j *Job) Send(ctx context.Context, f protocol.JobFrame) error {
	b, err := f.Marshal()
	if err != nil {
		return err
	}
	return j.SendRaw(ctx, b)
}

// SendRaw writes bytes as one text frame.
func (j *Job) SendRaw(ctx context.Context, b []byte) error {
	if err := j.Conn.Write(ctx, websocket.MessageText, b); err != nil {
		return fmt.Errorf("send: %w", err)
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

// WaitClosed reads until the worker closes the socket and returns the
// close code (-1 when it ended without a close frame).
func (j *Job) WaitClosed(ctx context.Context) (websocket.StatusCode, error) {
	for {
		if _, _, err := j.Conn.Read(ctx); err != nil {
			if ctx.Err() != nil {
				return -1, ctx.Err()
			}
			return websocket.CloseStatus(err), nil
		}
	}
}

// Close drops the connection at once.
func (j *Job) Close() { j.Conn.CloseNow() }
