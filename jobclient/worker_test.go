package jobclient

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/normsim/normsim/protocol"
)

// testTimeout bounds every wait in these tests; nothing should come close.
const testTimeout = 5 * time.Second

// fakeWorker is a loopback WebSocket server playing the worker. Each
// connection a client makes arrives on conns.
type fakeWorker struct {
	t     *testing.T
	srv   *httptest.Server
	conns chan *workerConn
}

type workerConn struct {
	t    *testing.T
	conn *websocket.Conn
	path string
	done chan struct{} // closed when the test is done with the connection
}

func newFakeWorker(t *testing.T) *fakeWorker {
	t.Helper()
	w := &fakeWorker{t: t, conns: make(chan *workerConn, 16)}
	w.srv = httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		c, err := websocket.Accept(rw, r, nil)
		if err != nil {
			t.Errorf("accept: %v", err)
			return
		}
		wc := &workerConn{t: t, conn: c, path: r.RequestURI, done: make(chan struct{})}
		w.conns <- wc
		<-wc.done
		_ = c.CloseNow()
	}))
	t.Cleanup(func() {
		// Release every connection handler so the server can shut down.
		for {
			select {
			case wc := <-w.conns:
				wc.release()
			default:
				w.srv.CloseClientConnections()
				w.srv.Close()
				return
			}
		}
	})
	return w
}

// url is the socket URL for instance job-1/"key 1" on this worker.
func (w *fakeWorker) url() string {
	u, err := url.Parse(w.srv.URL)
	if err != nil {
		w.t.Fatal(err)
	}
	port, err := strconv.Atoi(u.Port())
	if err != nil {
		w.t.Fatal(err)
	}
	return protocol.URL(u.Hostname(), port, "job-1", "key 1")
}

// accept waits for the client's next connection and checks its hello.
func (w *fakeWorker) accept(token string) *workerConn {
	w.t.Helper()
	select {
	case wc := <-w.conns:
		w.t.Cleanup(wc.release)
		f := wc.read()
		if f.Type != protocol.TypeHello || f.Token != token {
			w.t.Fatalf("first frame %+v, want hello with token %q", f, token)
		}
		return wc
	case <-time.After(testTimeout):
		w.t.Fatal("no connection from the client")
		return nil
	}
}

// noConnection checks that the client does not connect within d.
func (w *fakeWorker) noConnection(d time.Duration) {
	w.t.Helper()
	select {
	case wc := <-w.conns:
		wc.release()
		w.t.Fatal("the client connected again")
	case <-time.After(d):
	}
}

func (wc *workerConn) release() {
	select {
	case <-wc.done:
	default:
		close(wc.done)
	}
}

// read reads one frame and judges it as the worker does.
func (wc *workerConn) read() protocol.JobFrame {
	wc.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	typ, data, err := wc.conn.Read(ctx)
	if err != nil {
		wc.t.Fatalf("worker read: %v", err)
	}
	if typ != websocket.MessageText {
		wc.t.Fatalf("worker got a %v frame, want text", typ)
	}
	if len(data) > protocol.MaxFrameBytes {
		wc.t.Fatalf("client sent %d bytes, over the cap", len(data))
	}
	f, err := protocol.ParseJobFrame(data)
	if err != nil {
		wc.t.Fatalf("client sent a frame the worker refuses: %s: %v", data, err)
	}
	return f
}

// readClose waits for the client to close the connection and returns the
// close error.
func (wc *workerConn) readClose() error {
	wc.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	for {
		_, data, err := wc.conn.Read(ctx)
		if err != nil {
			return err
		}
		wc.t.Logf("frame while waiting for close: %s", data)
	}
}

func (wc *workerConn) send(f protocol.WorkerFrame) {
	wc.t.Helper()
	b, err := f.Marshal()
	if err != nil {
		wc.t.Fatal(err)
	}
	wc.sendRaw(string(b))
}

func (wc *workerConn) sendRaw(s string) {
	wc.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if err := wc.conn.Write(ctx, websocket.MessageText, []byte(s)); err != nil {
		wc.t.Fatalf("worker write: %v", err)
	}
}

func (wc *workerConn) close(code websocket.StatusCode, reason string) {
	wc.t.Helper()
	_ = wc.conn.Close(code, reason)
}

// testLogger writes the client's log through t.Log, so it shows with a
// failure and nowhere else.
func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type tWriter struct{ t *testing.T }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}

var _ io.Writer = tWriter{}

// connect starts a client against w and registers its Close.
func connect(t *testing.T, w *fakeWorker, h Handler) *Client {
	t.Helper()
	c := Connect(context.Background(), h, Options{
		URL: w.url(), Token: "s3cret", Logger: testLogger(t),
		MinBackoff: 5 * time.Millisecond, MaxBackoff: 20 * time.Millisecond,
	})
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return c
}

// acked connects, says hello-ack, and waits until the client knows.
func acked(t *testing.T, w *fakeWorker, c *Client, m *protocol.MigrationRef) *workerConn {
	t.Helper()
	wc := w.accept("s3cret")
	wc.send(protocol.WorkerFrame{Type: protocol.TypeHelloAck, Migration: m})
	waitConnected(t, c)
	return wc
}

func waitConnected(t *testing.T, c *Client) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if err := c.WaitConnected(ctx); err != nil {
		t.Fatalf("WaitConnected: %v", err)
	}
}

// recv waits for a value a handler sent.
func recv[T any](t *testing.T, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(testTimeout):
		t.Fatal("timed out waiting for a handler call")
		var zero T
		return zero
	}
}

func closeStatus(err error) websocket.StatusCode {
	var ce websocket.CloseError
	if errors.As(err, &ce) {
		return ce.Code
	}
	return -1
}
