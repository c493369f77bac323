package bench

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/normsim/normsim/protocol"
)

// RawRelay is the peer a handover's cutover relay is measured against: a
// coder/websocket server that pairs two connections and forwards each frame
// from one to the other, nothing else (no parsing, no phases, no records).
type RawRelay struct {
	ln  net.Listener
	srv *http.Server
	wg  sync.WaitGroup

	mu      sync.Mutex
	waiting *websocket.Conn
	conns   map[*websocket.Conn]bool
}

// OpenRawRelay listens on a free loopback port and serves.
func OpenRawRelay() (*RawRelay, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	r := &RawRelay{ln: ln, conns: map[*websocket.Conn]bool{}}
	r.srv = &http.Server{Handler: http.HandlerFunc(r.serve), ReadHeaderTimeout: 5 * time.Second}
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		r.srv.Serve(ln)
	}()
	return r, nil
}

// URL is the relay's ws:// URL.
func (r *RawRelay) URL() string { return "ws://" + r.ln.Addr().String() + "/" }

// Close stops the relay and every pair's forwarding.
func (r *RawRelay) Close() error {
	err := r.srv.Close()
	r.mu.Lock()
	for c := range r.conns {
		c.CloseNow()
	}
	r.mu.Unlock()
	r.wg.Wait()
	return err
}

// serve pairs each connection with the next one and forwards both ways.
func (r *RawRelay) serve(w http.ResponseWriter, req *http.Request) {
	c, err := websocket.Accept(w, req, &websocket.AcceptOptions{CompressionMode: websocket.CompressionDisabled})
	if err != nil {
		return
	}
	c.SetReadLimit(1 << 20)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.conns[c] = true
	peer := r.waiting
	if peer == nil {
		// The connection is hijacked: it outlives this handler and waits
		// for its peer.
		r.waiting = c
		return
	}
	r.waiting = nil
	r.wg.Add(2)
	go func() { defer r.wg.Done(); r.forward(c, peer) }()
	go func() { defer r.wg.Done(); r.forward(peer, c) }()
}

func (r *RawRelay) forward(from, to *websocket.Conn) {
	defer func() {
		from.CloseNow()
		to.CloseNow()
		r.mu.Lock()
		delete(r.conns, from)
		r.mu.Unlock()
	}()
	ctx := context.Background()
	for {
		typ, data, err := from.Read(ctx)
		if err != nil {
			return
		}
		if err := to.Write(ctx, typ, data); err != nil {
			return
		}
	}
}

// RelayPair is two client connections through the relay.
type RelayPair struct {
	A, B *websocket.Conn
}

// Pair dials two connections that the relay joins. It waits for the relay
// (in this process) to hold the first before dialling the second, so call
// it from one goroutine at a time.
func (r *RawRelay) Pair(ctx context.Context) (*RelayPair, error) {
	opts := &websocket.DialOptions{CompressionMode: websocket.CompressionDisabled}
	a, _, err := websocket.Dial(ctx, r.URL(), opts)
	if err != nil {
		return nil, err
	}
	// Make sure a is the waiting one before b arrives.
	deadline := time.Now().Add(5 * time.Second)
	for {
		r.mu.Lock()
		ok := r.waiting != nil
		r.mu.Unlock()
		if ok {
			break
		}
		if time.Now().After(deadline) {
			a.CloseNow()
			return nil, errors.New("raw relay: first connection never arrived")
		}
		time.Sleep(100 * time.Microsecond)
	}
	b, _, err := websocket.Dial(ctx, r.URL(), opts)
	if err != nil {
		a.CloseNow()
		return nil, err
	}
	a.SetReadLimit(1 << 20)
	b.SetReadLimit(1 << 20)
	return &RelayPair{A: a, B: b}, nil
}

// Close closes both ends.
func (p *RelayPair) Close() {
	p.A.CloseNow()
	p.B.CloseNow()
}

// Relay sends f from A and returns how long until B has read and parsed
// it. The two ends do what a job's two ends do around the cutover relay
// (jobplay.Job's Send and Expect): marshal, write and read under ctx,
// parse; so the only difference left between the two measurements is the
// relay.
func (p *RelayPair) Relay(ctx context.Context, f protocol.JobFrame) (time.Duration, error) {
	t0 := time.Now()
	frame, err := f.Marshal()
	if err != nil {
		return 0, err
	}
	if err := p.A.Write(ctx, websocket.MessageText, frame); err != nil {
		return 0, err
	}
	_, got, err := p.B.Read(ctx)
	if err != nil {
		return 0, err
	}
	back, err := protocol.ParseJobFrame(got)
	d := time.Since(t0)
	if err != nil {
		return 0, err
	}
	if back.Type != f.Type || string(back.Payload) != string(f.Payload) {
		return 0, fmt.Errorf("raw relay delivered %s, sent %s", got, frame)
	}
	return d, nil
}
