package protocol

import (
	"encoding/json"
	"time"
	"unicode/utf8"
)

// Constants of the job socket, as the reference publishes them.
const (
	// DefaultPort is the port of the first worker node's listener; normsim
	// gives further nodes the ports that follow it.
	DefaultPort = 6797

	// MaxFrameBytes is the largest frame a job may send: a frame of exactly
	// this many bytes is accepted, one byte more closes the socket with
	// CloseFrameTooLarge.
	MaxFrameBytes = 64 * 1024

	// HelloTimeout is how long a worker waits, from the upgrade, for a valid
	// hello before it closes with CloseUnauthorized.
	HelloTimeout = 5 * time.Second

	// ContainerHost is the name a container reaches its own worker's host
	// under. It resolves on native Linux only because every service gets an
	// extra_hosts entry "host.docker.internal:host-gateway".
	ContainerHost = "host.docker.internal"

	// Capability is the node capability a worker advertises while its
	// listener is up; a handover target must have it.
	Capability = "norsk.io/job-socket"

	// EnvURL names the environment variable that carries the full
	// ws://host:port/instances/<jobId>/<role> URL to a job. It is absent
	// when the node runs without a listener.
	EnvURL = "NORSK_WORKER_WS_URL"

	// EnvToken names the environment variable that carries the token a job
	// sends in its hello. It is absent when the node runs without a listener.
	EnvToken = "NORSK_WORKER_TOKEN"

	// CloseStopped (1000, a normal closure) is how the worker closes the
	// socket of an instance it stops or removes, with ReasonStopped.
	CloseStopped  = 1000
	ReasonStopped = "instance stopped"

	// CloseProtocolError closes a socket over a frame that breaks the
	// protocol: unparseable, wrong direction, or wrong phase.
	CloseProtocolError = 4400

	// CloseUnauthorized closes a socket that sent no hello in time, sent a
	// wrong token, or named no instance in its path.
	CloseUnauthorized = 4401

	// ReasonHelloTimeout begins the reason of a CloseUnauthorized sent
	// because no hello came within HelloTimeout (normsim's listener adds
	// the timeout: "no hello within 5s"), or came before the connection
	// was closed early because too many were waiting to say hello ("no
	// hello within 40ms: closed early, …"). The reason is all that tells
	// that close, after which a job with the right token may try again,
	// from a refused token, after which it must not.
	ReasonHelloTimeout = "no hello within"

	// CloseReplaced closes a socket that a newer connection for the same
	// instance took over.
	CloseReplaced = 4409

	// CloseFrameTooLarge closes a socket that sent a frame over
	// MaxFrameBytes.
	CloseFrameTooLarge = 4413
)

// Frame type names. A frame's "type" member names one of these; which ones
// are valid depends on the direction (see JobFrame and WorkerFrame). TypeAbort
// is valid in both directions, with different fields.
const (
	// Job → worker.
	TypeHello               = "hello"
	TypeState               = "state"
	TypeStateRefused        = "state-refused"
	TypeTargetReady         = "target-ready"
	TypeSourceStoppedOutput = "source-stopped-output"
	TypeTargetApplied       = "target-applied"
	TypeAbort               = "abort"

	// Worker → job.
	TypeHelloAck     = "hello-ack"
	TypeGetState     = "get-state"
	TypeInitialState = "initial-state"
	TypeCutoverReady = "cutover-ready"
	TypeCutoverApply = "cutover-apply"
)

// JobFrame is a frame a job sends to its worker. It is flat: only the fields
// that belong to its Type are meaningful, and Marshal emits only those.
//
//	hello                  Token
//	state                  Payload (null is a valid acceptance)
//	state-refused          Reason
//	target-ready           Payload
//	source-stopped-output  Payload
//	target-applied         Applied, Failed, SkewMs (each optional)
//	abort                  Reason
type JobFrame struct {
	// Type is one of the job → worker frame types.
	Type string
	// Token is the hello's token.
	Token string
	// Payload holds the exact bytes of the payload value as received, never
	// re-encoded, so a worker can relay it byte for byte. A nil Payload
	// marshals as null.
	Payload json.RawMessage
	// Reason is why a state was refused or a migration aborted.
	Reason string
	// Applied lists what a target applied; nil when absent.
	Applied []string
	// Failed lists what a target failed to apply; nil when absent.
	Failed []FailedApply
	// SkewMs is the output skew the target measured; nil when absent.
	SkewMs *float64
}

// FailedApply is one item of a target-applied frame's failed list: a
// participant the target could not apply, past the point of no return, so it
// is reported rather than rolled back.
type FailedApply struct {
	ID     string `json:"id"`
	Reason string `json:"reason"`
}

// WorkerFrame is a frame a worker sends to a job. Like JobFrame it is flat.
//
//	hello-ack      Migration (optional)
//	get-state      MigrationID
//	initial-state  MigrationID, Payload
//	cutover-ready  MigrationID, Payload
//	cutover-apply  MigrationID, Payload
//	abort          MigrationID, Reason
type WorkerFrame struct {
	// Type is one of the worker → job frame types.
	Type string
	// Migration is set in a hello-ack only when the instance was launched as
	// a migration target; nil means absent.
	Migration *MigrationRef
	// MigrationID names the migration every other frame belongs to.
	MigrationID string
	// Payload holds the exact bytes of the payload value as received. A nil
	// Payload marshals as null.
	Payload json.RawMessage
	// Reason is why the migration was aborted.
	Reason string
}

// MigrationRef is the migration a hello-ack announces to a target.
type MigrationRef struct {
	ID string `json:"id"`
	// Side is always "target": only a target is launched into a migration.
	Side string `json:"side"`
}

// FrameError is why a frame was refused. A listener closes the socket with
// CloseProtocolError and Reason as the close reason, so Reason is kept short
// (at most maxReasonBytes bytes, valid UTF-8), well inside the 123 bytes a
// WebSocket close reason may carry.
type FrameError struct {
	// Reason names the rule that was broken, e.g. "frame is not valid JSON"
	// or "invalid frame: token: expected string, got null".
	Reason string
}

// Error returns the reason unchanged, so it can be sent as a close reason.
func (e *FrameError) Error() string { return e.Reason }

// maxReasonBytes caps FrameError.Reason; a frame can put arbitrary text in a
// reason through its type name or a number literal.
const maxReasonBytes = 120

func frameErr(reason string) *FrameError {
	return &FrameError{Reason: Truncate(reason, maxReasonBytes)}
}

// Truncate cuts s to at most n bytes without splitting a rune, marking the
// cut with an ellipsis: for reasons that travel in frames or close frames
// (a close reason may hold at most 123 bytes).
func Truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const ellipsis = "…"
	cut := n - len(ellipsis)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + ellipsis
}
