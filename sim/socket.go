package sim

import (
	"context"
	"errors"
	"time"

	"github.com/normsim/normsim/protocol"
)

// ErrNotConnected: a frame for a job whose socket is not connected now.
var ErrNotConnected = errors.New("job is not connected")

// JobSocket is a node's job-socket listener as the manager drives it
// (sim/jobsocket implements it). Jobs are known by job ID and role (the
// instance ID).
type JobSocket interface {
	// Register accepts connections for an instance.
	Register(SocketRegistration)
	// Unregister closes the instance's connection normally and refuses new
	// ones.
	Unregister(jobID, role string)
	// Expect allows the frame types the job may send next, beside the ones
	// it may always send.
	Expect(jobID, role string, types ...string)
	// Expire ends the asks made with Expect: a frame that still answers one
	// arrives marked Late.
	Expire(jobID, role string)
	// Owe says an ask of a migration that has ended reached the job only
	// now (a frame a fault held): a frame of one of types that the
	// current phase does not allow may be its answer, and arrives Late
	// instead of closing the socket, until the next Expire.
	Owe(jobID, role string, types ...string)
	// Settle ends the migration an instance was launched as the target
	// of: a later connection of it gets a plain hello-ack, without the
	// migration or its initial state.
	Settle(jobID, role string)
	// Disconnect closes the job's connection with code and reason.
	Disconnect(jobID, role string, code int, reason string)
	// CatchUp returns once what the job sent before the call has been
	// read and reported: a frame, or the end of its connection (a close
	// frame, or a connection that went away), that reached the node
	// before it is told before it returns. It waits for what had
	// arrived when it was called, up to the socket's close timeout, and
	// not for what a job that never stops sending sends after.
	CatchUp(jobID, role string)
	// Connected reports whether the job is connected now.
	Connected(jobID, role string) bool
	// Drop ends the job's connection without a close frame, as a network
	// that went away would, and returns the connection it cut
	// (SocketEvent.Conn), 0 when the job had none. Its newest is cut: one
	// whose hello is being heard counts (SocketHello). A frame read from
	// it just before the drop may still be reported after it; a worker
	// that dropped a connection takes nothing more from it.
	Drop(jobID, role string) (conn uint64)
	// SendRaw writes data as one frame of type typ.
	SendRaw(ctx context.Context, jobID, role, typ string, data []byte) error
}

// SocketRegistration is an instance a job socket accepts connections for.
type SocketRegistration struct {
	JobID string
	Role  string
	Token string
	// Migration is set for an instance launched as a migration target: its
	// hello-ack carries it.
	Migration *protocol.MigrationRef
	// InitialState, when set, is sent right after hello-ack, before any other
	// frame, on every authenticated connection.
	InitialState *protocol.WorkerFrame
}

// SocketEventKind says what happened on a job's socket.
type SocketEventKind int

// Socket event kinds.
const (
	SocketConnected SocketEventKind = iota + 1
	SocketDisconnected
	SocketFrame
	// SocketReplaced: a newer connection of the instance took over, and
	// its older one is being closed with 4409 (Code, Reason). It comes
	// before the newer one's SocketConnected.
	SocketReplaced
	// SocketDiscarded: a frame the listener read and did not pass on,
	// without closing the connection for it (Reason says why). Frame is
	// set when the frame parsed.
	SocketDiscarded
	// SocketHello: the job said a valid hello, and hello-ack (and a
	// migration target's initial-state) is not written yet. It is
	// reported synchronously, before SocketReplaced and SocketConnected,
	// so a fault armed on the hello strikes before the job can read its
	// answer. The connection is not the instance's yet (Connected may be
	// false); the handler may signal the job or Drop it, and a dropped
	// connection gets no answer and no SocketConnected.
	SocketHello
)

func (k SocketEventKind) String() string {
	switch k {
	case SocketConnected:
		return "connected"
	case SocketDisconnected:
		return "disconnected"
	case SocketFrame:
		return "frame"
	case SocketReplaced:
		return "replaced"
	case SocketDiscarded:
		return "discarded"
	case SocketHello:
		return "hello"
	}
	return "unknown"
}

// SocketEvent is what a job socket tells the manager.
type SocketEvent struct {
	Kind  SocketEventKind
	Node  string
	JobID string
	Role  string
	// Conn numbers the connection a SocketFrame came on, one number per
	// connection the socket accepted (0 where unknown).
	Conn uint64
	At   time.Time
	// Frame and Size are set for SocketFrame events.
	Frame protocol.JobFrame
	Size  int
	// Late marks a frame that answers an ask which has since expired
	// (Expire): the job sent it before it could read that the migration
	// ended. It is no protocol error; the manager records it and ignores it.
	// Reason, when set, says why it is late (an ask delivered after its
	// migration ended, Owe).
	Late bool
	// Replaced marks a frame (or a discarded one) read on a connection
	// after a newer one of its instance replaced it (4409): the job sent it
	// before it read that close.
	Replaced bool
	// Code and Reason are set for SocketDisconnected and SocketReplaced
	// events: the close code (ours or the job's) and why. Reason is also
	// why a SocketDiscarded frame was not passed on.
	Code   int
	Reason string
	// ClosedBy says who ended the connection, for SocketDisconnected events.
	ClosedBy Closer
}

// Closer says which end closed a job's connection.
type Closer int

// Who closed a connection.
const (
	// ClosedByJob: the job sent a close frame.
	ClosedByJob Closer = iota + 1
	// ClosedByWorker: the listener closed it (a protocol error, a
	// replacement, a slow reader, a stop, or a fault).
	ClosedByWorker
	// ConnectionLost: the connection ended without a close frame from
	// either side (the job's process died, or the network went away).
	ConnectionLost
)

func (c Closer) String() string {
	switch c {
	case ClosedByJob:
		return "job"
	case ClosedByWorker:
		return "worker"
	case ConnectionLost:
		return "lost"
	}
	return "unknown"
}
