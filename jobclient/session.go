package jobclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/normsim/normsim/protocol"
)

// A session is one WebSocket connection to the worker. Its serve loop reads
// frames and never calls a handler; a dispatcher goroutine takes the frames
// from a queue and calls the handler one frame at a time. The split is what
// lets an abort through while a handler is busy: the reader cancels the
// handler's context at once, and the dispatcher reports the abort after the
// handler returns, so a job never sees Abort while still inside a handler
// for the same migration.
type session struct {
	c    *Client
	conn *websocket.Conn
	// ctx ends with the connection; writes are bounded by it.
	ctx    context.Context
	cancel context.CancelFunc

	dispatcher sync.WaitGroup
	wake       chan struct{} // buffered 1: the queue grew or closed

	mu     sync.Mutex
	queue  []protocol.WorkerFrame
	closed bool // the connection is gone: no more handler calls but a received cutover-apply's
	migs   map[string]*migration
}

// migration is what this side knows about one migration on this connection.
type migration struct {
	// ctx is given to the migration's handlers. It derives from the client's
	// lifetime, not the connection's, because past the point of no return a
	// handler must finish even if the connection drops.
	ctx    context.Context
	cancel context.CancelFunc

	ended     bool // aborted, refused or done: send nothing more for it
	committed bool // past the point of no return: a lost connection no longer rolls it back
	notified  bool // Handler.Abort has been called for it
	asked     bool // get-state has been answered (or is being): a repeat is ignored
}

func newSession(c *Client, conn *websocket.Conn) *session {
	s := &session{
		c:    c,
		conn: conn,
		wake: make(chan struct{}, 1),
		migs: make(map[string]*migration),
	}
	s.ctx, s.cancel = context.WithCancel(c.ctx)
	s.dispatcher.Go(s.dispatch)
	return s
}

// serve says hello and reads frames until the connection ends.
func (s *session) serve() (acked bool, err error) {
	// A Read whose context is cancelled drops the TCP connection without a
	// close frame, so Read gets no context; closing the client closes the
	// socket properly instead, which ends the Read.
	defer s.closeWhen(func(f func()) func() bool { return context.AfterFunc(s.c.ctx, f) },
		websocket.StatusNormalClosure, "")()

	hello, err := encode(protocol.JobFrame{Type: protocol.TypeHello, Token: s.c.token})
	if err != nil {
		return false, err
	}
	if err := s.write(s.ctx, hello); err != nil {
		return false, err
	}
	stopAckTimer := s.closeWhen(func(f func()) func() bool { return time.AfterFunc(s.c.helloAckTimeout, f).Stop },
		protocol.CloseProtocolError, "no hello-ack in time")
	defer stopAckTimer()

	for {
		typ, data, err := s.conn.Read(context.Background())
		if err != nil {
			return acked, err
		}
		if typ != websocket.MessageText {
			return acked, s.protocolError("binary frames are not part of the protocol")
		}
		f, err := protocol.ParseWorkerFrame(data)
		if err != nil {
			return acked, s.protocolError(err.Error())
		}
		switch {
		case !acked && f.Type != protocol.TypeHelloAck:
			return acked, s.protocolError("expected hello-ack first, got " + f.Type)
		case !acked:
			stopAckTimer()
			acked = true
			s.ack(f.Migration)
		case f.Type == protocol.TypeHelloAck:
			return acked, s.protocolError("hello-ack after the first frame")
		default:
			s.receive(f)
		}
	}
}

// closeWhen arranges for the connection to be closed with code and reason
// when a trigger fires (arm installs the callback and returns its stop
// function), and returns a stop function that disarms the trigger or, if it
// already fired, waits until the close is done, so that no goroutine of the
// session outlives it. stop may be called more than once.
func (s *session) closeWhen(arm func(func()) func() bool, code websocket.StatusCode, reason string) (stop func()) {
	closed := make(chan struct{})
	disarm := arm(func() {
		defer close(closed)
		_ = s.conn.Close(code, reason)
	})
	return sync.OnceFunc(func() {
		if !disarm() {
			<-closed
		}
	})
}

// protocolError closes the connection over a frame the client cannot accept.
// The client reconnects afterwards: a worker that misspoke once may not again.
func (s *session) protocolError(reason string) error {
	err := fmt.Errorf("worker broke the protocol: %s", reason)
	s.c.log.Warn("job socket: closing", "err", err)
	_ = s.conn.Close(protocol.CloseProtocolError, truncate(reason, maxCloseReasonBytes))
	return err
}

func (s *session) ack(m *protocol.MigrationRef) {
	if m != nil {
		s.mu.Lock()
		s.migration(m.ID) // a target's migration is live from the start
		s.mu.Unlock()
		s.c.log.Info("job socket connected as a migration target", "migration", m.ID)
	} else {
		s.c.log.Info("job socket connected")
	}
	s.c.ack(s, m)
}

// receive queues a frame for the dispatcher. An abort also cancels the
// migration's handler now, without waiting its turn.
func (s *session) receive(f protocol.WorkerFrame) {
	s.mu.Lock()
	switch f.Type {
	case protocol.TypeAbort:
		m := s.migration(f.MigrationID)
		m.ended = true
		m.cancel()
	case protocol.TypeCutoverApply:
		// Received, the source has stopped: the migration is past its
		// point of no return even if the connection drops before the
		// dispatcher reaches the frame, and the target must still apply
		// it. Rolling it back would leave both sides silent.
		if m := s.migration(f.MigrationID); !m.ended {
			m.committed = true
		}
	}
	s.queue = append(s.queue, f)
	s.mu.Unlock()
	s.signal()
}

func (s *session) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// finish ends the session: no more handler calls, but for a cutover-apply
// already received (past the point of no return); every migration that had
// not passed the point of no return is rolled back (the worker does the same
// on its side when a connection is lost); then it waits for the dispatcher.
func (s *session) finish() {
	s.c.unack(s)
	s.cancel()
	s.mu.Lock()
	s.closed = true
	ids := make([]string, 0, len(s.migs))
	for id, m := range s.migs {
		if !m.ended && !m.committed {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids) // a stable order for the Abort calls
	for _, id := range ids {
		m := s.migs[id]
		m.ended = true
		m.cancel()
		s.queue = append(s.queue, protocol.WorkerFrame{Type: protocol.TypeAbort, MigrationID: id, Reason: reasonConnectionLost})
	}
	s.mu.Unlock()
	s.signal()
	s.dispatcher.Wait()
	_ = s.conn.CloseNow()
	s.mu.Lock()
	for _, m := range s.migs {
		m.cancel() // release the contexts of migrations that finished
	}
	s.mu.Unlock()
}

// migration returns the state of a migration, creating it. s.mu must be held.
func (s *session) migration(id string) *migration {
	m, ok := s.migs[id]
	if !ok {
		m = &migration{}
		m.ctx, m.cancel = context.WithCancel(s.c.ctx)
		s.migs[id] = m
	}
	return m
}

func (s *session) dispatch() {
	for {
		f, ok := s.next()
		if !ok {
			return
		}
		switch f.Type {
		case protocol.TypeAbort:
			s.notifyAbort(f.MigrationID, f.Reason)
		case protocol.TypeGetState:
			s.getState(f.MigrationID)
		case protocol.TypeInitialState:
			s.initialState(f.MigrationID, f.Payload)
		case protocol.TypeCutoverReady:
			s.cutoverReady(f.MigrationID, f.Payload)
		case protocol.TypeCutoverApply:
			s.cutoverApply(f.MigrationID, f.Payload)
		}
	}
}

// next waits for the next queued frame; ok is false once the session is
// closed and the queue drained.
func (s *session) next() (f protocol.WorkerFrame, ok bool) {
	for {
		s.mu.Lock()
		if len(s.queue) > 0 {
			f = s.queue[0]
			s.queue = s.queue[1:]
			s.mu.Unlock()
			return f, true
		}
		closed := s.closed
		s.mu.Unlock()
		if closed {
			return f, false
		}
		<-s.wake
	}
}

// begin returns the migration a handler is about to be called for, or false
// when there is no point: it has ended, or the connection is gone.
// A migration past its point of no return (a cutover-apply received
// before the connection went) is still handled on a closed session.
func (s *session) begin(id string) (*migration, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		m, ok := s.migs[id]
		return m, ok && m.committed && !m.ended
	}
	m := s.migration(id)
	return m, !m.ended
}

// live reports whether a handler's answer for m should still be sent.
func (s *session) live(m *migration) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return !m.ended && !s.closed
}

func (s *session) getState(id string) {
	m, ok := s.begin(id)
	if !ok {
		return
	}
	// A get-state delivered twice is one question: answering it twice
	// would put a state out of phase and cost the handover.
	s.mu.Lock()
	repeat := m.asked
	m.asked = true
	s.mu.Unlock()
	if repeat {
		s.c.log.Warn("get-state repeated for a migration already asked; ignored", "migration", id)
		return
	}
	var state json.RawMessage
	var err error
	if s.c.h.GetState != nil {
		state, err = s.c.h.GetState(m.ctx, id)
	}
	if !s.live(m) {
		return
	}
	if err != nil {
		var r *Refusal
		reason := err.Error()
		if errors.As(err, &r) {
			reason = r.Reason
			s.c.log.Info("migration refused", "migration", id, "reason", reason)
		} else {
			s.c.log.Warn("migration refused: GetState failed", "migration", id, "err", err)
		}
		s.refuse(m, id, reason)
		return
	}
	b, err := encode(protocol.JobFrame{Type: protocol.TypeState, Payload: state})
	if err != nil {
		s.c.log.Error("migration refused: the state cannot be sent", "migration", id, "err", err)
		s.refuse(m, id, "state cannot be sent: "+err.Error())
		return
	}
	s.send(id, b)
}

// refuse declines a migration. Nothing has happened yet, so there is nothing
// to roll back and Handler.Abort is not called.
func (s *session) refuse(m *migration, id, reason string) {
	s.mu.Lock()
	m.ended = true
	s.mu.Unlock()
	if b, err := encode(protocol.JobFrame{Type: protocol.TypeStateRefused, Reason: reasonText(reason)}); err == nil {
		s.send(id, b)
	}
}

func (s *session) initialState(id string, state json.RawMessage) {
	m, ok := s.begin(id)
	if !ok {
		return
	}
	var ready json.RawMessage
	var err error
	if s.c.h.InitialState != nil {
		ready, err = s.c.h.InitialState(m.ctx, id, state)
	}
	if !s.live(m) {
		return
	}
	if err != nil {
		s.abortFromHandler(m, id, "InitialState failed", err)
		return
	}
	b, err := encode(protocol.JobFrame{Type: protocol.TypeTargetReady, Payload: ready})
	if err != nil {
		s.abortFromHandler(m, id, "target-ready cannot be sent", err)
		return
	}
	s.send(id, b)
}

func (s *session) cutoverReady(id string, targetReady json.RawMessage) {
	m, ok := s.begin(id)
	if !ok {
		return
	}
	var stoppedAt json.RawMessage
	var err error
	if s.c.h.CutoverReady != nil {
		stoppedAt, err = s.c.h.CutoverReady(m.ctx, id, targetReady)
	}
	if !s.live(m) {
		// Aborted while stopping; the queued Abort tells the source to resume.
		return
	}
	if err != nil {
		s.abortFromHandler(m, id, "CutoverReady failed", err)
		return
	}
	b, err := encode(protocol.JobFrame{Type: protocol.TypeSourceStoppedOutput, Payload: stoppedAt})
	if err != nil {
		// The source has stopped but cannot say where: roll back, so it
		// resumes, rather than leave both sides silent.
		s.abortFromHandler(m, id, "source-stopped-output cannot be sent", err)
		return
	}
	// Commit before writing: once the bytes are out the worker may act on
	// them before Write returns, and a connection lost after that must not
	// roll this side back.
	s.mu.Lock()
	if m.ended { // aborted since the live check; the queued abort rolls back
		s.mu.Unlock()
		return
	}
	m.committed, m.ended = true, true
	s.mu.Unlock()
	if !s.send(id, b) {
		// A frame that did not go out cannot have passed the point of no
		// return, and the worker rolls back on the lost connection: so must
		// the source.
		s.notifyAbort(id, reasonConnectionLost)
	}
}

func (s *session) cutoverApply(id string, stoppedAt json.RawMessage) {
	m, ok := s.begin(id)
	if !ok {
		return
	}
	s.mu.Lock()
	m.committed = true // the source has stopped: from here nothing rolls back
	s.mu.Unlock()
	var applied Applied
	var err error
	if s.c.h.CutoverApply != nil {
		applied, err = s.c.h.CutoverApply(m.ctx, id, stoppedAt)
	}
	if err != nil {
		s.c.log.Error("CutoverApply failed past the point of no return; reporting it", "migration", id, "err", err)
		applied.Failed = append(slices.Clip(applied.Failed), protocol.FailedApply{ID: failedHandlerID, Reason: reasonText(err.Error())})
	}
	if !s.live(m) {
		s.mu.Lock()
		m.ended = true // applied: a repeat of the frame is not applied twice
		s.mu.Unlock()
		return
	}
	b, err := encode(protocol.JobFrame{Type: protocol.TypeTargetApplied,
		Applied: applied.Applied, Failed: applied.Failed, SkewMs: applied.SkewMs})
	if err != nil {
		// Still report that the cutover happened, and why the summary is missing.
		s.c.log.Error("target-applied cannot be sent as returned; sending a summary of the failure", "migration", id, "err", err)
		b, err = encode(protocol.JobFrame{Type: protocol.TypeTargetApplied,
			Failed: []protocol.FailedApply{{ID: failedHandlerID, Reason: reasonText("target-applied cannot be sent: " + err.Error())}}})
		if err != nil {
			return
		}
	}
	s.send(id, b)
	s.mu.Lock()
	m.ended = true
	s.mu.Unlock()
}

// abortFromHandler aborts a migration whose handler failed: the worker is
// told, and so is the job, through Handler.Abort, so that rollback has one
// place.
func (s *session) abortFromHandler(m *migration, id, what string, err error) {
	s.c.log.Warn("aborting migration: "+what, "migration", id, "err", err)
	reason := reasonText(what + ": " + err.Error())
	s.mu.Lock()
	m.ended = true
	m.cancel()
	s.mu.Unlock()
	// A handler that failed because the session is ending (Close, or the
	// connection going) cannot tell the worker anything: writing with the
	// session's context already cancelled would tear the socket down
	// instead of letting it close normally. The job still rolls back.
	if s.ctx.Err() == nil {
		if b, err := encode(protocol.JobFrame{Type: protocol.TypeAbort, Reason: reason}); err == nil {
			s.send(id, b)
		}
	}
	s.notifyAbort(id, reason)
}

// abortFromJob is Client.Abort on this connection.
func (s *session) abortFromJob(ctx context.Context, id, reason string) error {
	reason = reasonText(reason)
	b, err := encode(protocol.JobFrame{Type: protocol.TypeAbort, Reason: reason})
	if err != nil {
		return err
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return ErrNotConnected
	}
	m := s.migration(id)
	m.ended = true
	m.cancel()
	s.queue = append(s.queue, protocol.WorkerFrame{Type: protocol.TypeAbort, MigrationID: id, Reason: reason})
	s.mu.Unlock()
	s.signal()
	if err := s.write(ctx, b); err != nil {
		return fmt.Errorf("jobclient: send abort for migration %s: %w", id, err)
	}
	return nil
}

// notifyAbort calls Handler.Abort, at most once per migration.
func (s *session) notifyAbort(id, reason string) {
	s.mu.Lock()
	m := s.migration(id)
	already := m.notified
	m.notified, m.ended = true, true
	m.cancel()
	s.mu.Unlock()
	if already {
		return
	}
	s.c.log.Info("migration aborted", "migration", id, "reason", reason)
	if s.c.h.Abort != nil {
		s.c.h.Abort(id, reason)
	}
}

// send writes a frame the dispatcher produced and reports whether it went
// out. A failed write means the connection is going; the serve loop will see
// that and the session will end, so it is only logged.
func (s *session) send(migrationID string, b []byte) bool {
	if err := s.write(s.ctx, b); err != nil {
		s.c.log.Warn("job socket: write failed", "migration", migrationID, "err", err)
		return false
	}
	return true
}

func (s *session) write(ctx context.Context, b []byte) error {
	ctx, cancel := context.WithTimeout(ctx, writeTimeout)
	defer cancel()
	// A write must also end with the connection, whatever ctx the caller gave.
	stop := context.AfterFunc(s.ctx, cancel)
	defer stop()
	return s.conn.Write(ctx, websocket.MessageText, b)
}

// encode marshals a frame and enforces the frame cap, which the worker
// enforces by closing the socket.
func encode(f protocol.JobFrame) ([]byte, error) {
	b, err := f.Marshal()
	if err != nil {
		return nil, err
	}
	if len(b) > protocol.MaxFrameBytes {
		return nil, fmt.Errorf("%w: %s frame would be %d bytes", ErrFrameTooLarge, f.Type, len(b))
	}
	return b, nil
}
