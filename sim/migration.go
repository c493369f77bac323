package sim

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// MigrationState is where a migration is. running until it ends in exactly
// one of the four end states.
type MigrationState string

// Migration states.
const (
	MigrationRunning   MigrationState = "running"
	MigrationCompleted MigrationState = "completed"
	// MigrationRefused: the source declined (state-refused); no target placed.
	MigrationRefused MigrationState = "refused"
	// MigrationAborted: rolled back before the point of no return: the
	// target removed, the source left as it was. That is running, unless
	// the source had itself exited or been killed: Rollback says which.
	MigrationAborted MigrationState = "aborted"
	// MigrationFailed: could not complete and could not roll back.
	MigrationFailed MigrationState = "failed"
)

// MigrationStates are the states a migration can be in, running first.
var MigrationStates = []MigrationState{MigrationRunning, MigrationCompleted, MigrationRefused, MigrationAborted, MigrationFailed}

// Ended reports whether the migration reached an end state.
func (s MigrationState) Ended() bool { return s != MigrationRunning && s != "" }

// ReasonInterrupted is the reason of a migration normsim was killed during.
const ReasonInterrupted = "interrupted"

// Migration is one move of a job from a source instance to a target instance.
type Migration struct {
	ID       string         `json:"id"`
	JobID    string         `json:"jobId"`
	Strategy Strategy       `json:"strategy"`
	State    MigrationState `json:"state"`
	Reason   string         `json:"reason"`
	// Phase is the last phase reached (where an abort or failure happened).
	Phase  Phase             `json:"phase"`
	Source MigrationEndpoint `json:"source"`
	Target MigrationEndpoint `json:"target"`
	Result MigrationResult   `json:"result"`
	Output *OutputReport     `json:"output"`
	// Rollback is what a rollback did and left, for an aborted migration.
	Rollback *RollbackReport `json:"rollback,omitempty"`
	// Broken names the promise whose breach ended the migration, and the
	// side that broke it: an answer that did not come in time, a frame
	// normsim closed the job's socket for, or an exit on its own while it
	// was moved. Set only when no fault of the migration struck that side
	// (one may have caused it).
	Broken *BrokenPromise `json:"broken,omitempty"`
	// Judgement is normsim's verdict on the job's promises, made when the
	// migration ended (Judge); read it through Judged.
	Judgement *Judgement       `json:"judgement,omitempty"`
	Durations Durations        `json:"durations"`
	Timeouts  Timeouts         `json:"timeouts"`
	Faults    []Fault          `json:"faults,omitempty"`
	StartedAt time.Time        `json:"startedAt"`
	EndedAt   *time.Time       `json:"endedAt,omitempty"`
	Events    []MigrationEvent `json:"events"`
	// SourceKilled says why the source, stopped once the migration no
	// longer needed it, was killed (SIGKILL): it did not exit on SIGTERM
	// within the stop grace. Empty when it did.
	SourceKilled string `json:"sourceKilled,omitempty"`
	// NotesCut counts the notes of frames discarded, sockets replaced and
	// reconnects that the timeline did not keep: a job can make those
	// without end (reconnecting, flooding a replaced socket), so only the
	// first MaxTimelineNotes are kept.
	NotesCut int64 `json:"notesCut,omitempty"`
	// Logs is what both sides printed during the migration; filled in
	// when the migration is read, never stored with its document.
	Logs *MigrationLogs `json:"logs,omitempty"`
}

// MigrationEndpoint is one side of a migration.
type MigrationEndpoint struct {
	Instance string `json:"instance"`
	Node     string `json:"node"`
	Runtime  string `json:"runtime,omitempty"`
	// Env is the target's env per service, present only when the target runs
	// on the external runtime so the developer can start it.
	Env map[string]map[string]string `json:"env,omitempty"`
}

// RollbackReport is what a rollback did to each side, as it happened.
type RollbackReport struct {
	// Source is what became of the source: SourceRunning, or SourceGone
	// when it had exited or been killed before or during the rollback.
	Source       string `json:"source"`
	SourceDetail string `json:"sourceDetail"`
	// Target is how the target was removed ("" when none was placed):
	// TargetExited on SIGTERM, TargetKilled after the stop grace, or
	// TargetClosed (external runtime: normsim starts and stops no process
	// there, and only closed its socket, if it had one; TargetDetail says
	// which).
	Target       string `json:"target,omitempty"`
	TargetDetail string `json:"targetDetail,omitempty"`
	// Told are the sides sent abort by the worker.
	Told []string `json:"told"`
	// AtRestart: the rollback was made by normsim's next start, normsim
	// having been killed while the migration ran, before its point of no
	// return. No side was told abort: each job lost its socket then.
	AtRestart bool `json:"atRestart,omitempty"`
}

// BrokenPromise is a protocol promise a side broke, which ended its
// migration.
type BrokenPromise struct {
	Side    string `json:"side"`
	Promise string `json:"promise"`
	Detail  string `json:"detail"`
}

// What a rollback left of each side (RollbackReport).
const (
	SourceRunning = "running"
	SourceGone    = "gone"
	TargetExited  = "exited"
	TargetKilled  = "killed"
	TargetClosed  = "closed"
	TargetGone    = "gone" // it had already exited when it was removed
)

// MigrationResult is what the target reported in target-applied.
type MigrationResult struct {
	Applied []string      `json:"applied"`
	Failed  []FailedApply `json:"failed"`
	SkewMs  *float64      `json:"skewMs"`
}

// FailedApply is one participant the target could not apply.
type FailedApply struct {
	ID     string `json:"id"`
	Reason string `json:"reason"`
}

// Durations are the derived times that matter, in milliseconds.
type Durations struct {
	TotalMs       *float64 `json:"totalMs,omitempty"`
	TargetReadyMs *float64 `json:"targetReadyMs,omitempty"`
	CutoverMs     *float64 `json:"cutoverMs,omitempty"`
}

// Timeouts bound each phase of a migration. Zero fields take the defaults.
type Timeouts struct {
	State       Duration `json:"state,omitempty"`       // get-state → state
	TargetStart Duration `json:"targetStart,omitempty"` // target placed → running/connected
	TargetReady Duration `json:"targetReady,omitempty"` // initial-state → target-ready; an overlap target → its first packet
	Stop        Duration `json:"stop,omitempty"`        // cutover-ready → source-stopped-output
	Apply       Duration `json:"apply,omitempty"`       // cutover-apply → target-applied
	StopGrace   Duration `json:"stopGrace,omitempty"`   // SIGTERM → SIGKILL when stopping an instance
	// Linger is how long after the point of no return a handover's source
	// keeps running before it is stopped, so output it sends after
	// source-stopped-output reaches the sink and is judged.
	Linger Duration `json:"linger,omitempty"`
}

// DefaultTimeouts are the documented per-phase defaults (docs/migrations.md).
var DefaultTimeouts = Timeouts{
	State:       Duration(10 * time.Second),
	TargetStart: Duration(60 * time.Second),
	TargetReady: Duration(30 * time.Second),
	Stop:        Duration(10 * time.Second),
	Apply:       Duration(10 * time.Second),
	StopGrace:   Duration(10 * time.Second),
	// 250 ms: a source producing at 25 packets/s sends six packets in it.
	Linger: Duration(250 * time.Millisecond),
}

// TimeoutField is one field of Timeouts, by its JSON name, so the CLI,
// scenario files and the dashboard read and set them from one list.
type TimeoutField struct {
	Name  string // the JSON name: state, targetStart, …
	Label string // a form's label
	Help  string // what it bounds
	Value *Duration
}

// Fields lists t's fields, in the order a migration meets them.
func (t *Timeouts) Fields() []TimeoutField {
	return []TimeoutField{
		{"state", "State", "get-state → state", &t.State},
		{"targetStart", "Target start", "target placed → running (and connected)", &t.TargetStart},
		{"targetReady", "Target ready", "initial-state → target-ready (overlap: the target's first packet)", &t.TargetReady},
		{"stop", "Source stop", "cutover-ready → source-stopped-output", &t.Stop},
		{"apply", "Apply", "cutover-apply → target-applied", &t.Apply},
		{"stopGrace", "Stop grace", "SIGTERM → SIGKILL when stopping", &t.StopGrace},
		{"linger", "Linger", "point of no return → the handover's source is stopped", &t.Linger},
	}
}

// TimeoutNames are the JSON names of Timeouts' fields.
func TimeoutNames() []string {
	var t Timeouts
	fs := t.Fields()
	names := make([]string, len(fs))
	for i, f := range fs {
		names[i] = f.Name
	}
	return names
}

// Field returns the field named name, or false.
func (t *Timeouts) Field(name string) (*Duration, bool) {
	for _, f := range t.Fields() {
		if f.Name == name {
			return f.Value, true
		}
	}
	return nil, false
}

// MaxTimeout is the longest a phase may wait: a day covers a developer
// stopped at a breakpoint; a longer one is a typo (5000000000s), and sums
// of such timeouts overflow.
const MaxTimeout = 24 * time.Hour

// Check refuses a timeout longer than MaxTimeout, naming it.
func (t *Timeouts) Check() error {
	for _, f := range t.Fields() {
		if d := f.Value.D(); d > MaxTimeout {
			return Errorf(EUnprocessable, "timeouts.%s: %s is longer than a phase may wait (%s); give at most %s", f.Name, d, MaxTimeout, MaxTimeout)
		}
	}
	return nil
}

// Longest is the longest a migration with these timeouts (zero fields
// take the defaults) can take in its timed steps: a handover can use up
// every phase's timeout one after another, then lingers and stops the
// source. A caller waiting for the end adds a margin for untimed steps.
func (t Timeouts) Longest() time.Duration {
	t = t.WithDefaults()
	return t.State.D() + t.TargetStart.D() + t.TargetReady.D() + t.Stop.D() + t.Apply.D() + t.Linger.D() + t.StopGrace.D()
}

// WithDefaults fills zero fields from DefaultTimeouts.
func (t Timeouts) WithDefaults() Timeouts { return t.Over(DefaultTimeouts) }

// Over fills t's zero fields from base: a request's timeouts over the
// run's (normsim up --timeouts, a scenario's top-level timeouts), which
// are over DefaultTimeouts.
func (t Timeouts) Over(base Timeouts) Timeouts {
	pick := func(v, d Duration) Duration {
		if v <= 0 {
			return d
		}
		return v
	}
	return Timeouts{
		State:       pick(t.State, base.State),
		TargetStart: pick(t.TargetStart, base.TargetStart),
		TargetReady: pick(t.TargetReady, base.TargetReady),
		Stop:        pick(t.Stop, base.Stop),
		Apply:       pick(t.Apply, base.Apply),
		StopGrace:   pick(t.StopGrace, base.StopGrace),
		Linger:      pick(t.Linger, base.Linger),
	}
}

// ParseTimeouts reads "phase=duration" settings, comma-separated or one
// per element ("state=10s,targetReady=5m"), as the CLI's --timeouts and
// --timeout take them, into t. Each name is one of TimeoutNames.
func ParseTimeouts(specs []string, t *Timeouts) error {
	for _, spec := range specs {
		for _, s := range strings.Split(spec, ",") {
			s = strings.TrimSpace(s)
			if s == "" {
				continue
			}
			k, v, ok := strings.Cut(s, "=")
			f, known := t.Field(strings.TrimSpace(k))
			if !ok || !known {
				return Errorf(EInvalid, "want PHASE=DURATION with PHASE one of %s; got %q", strings.Join(TimeoutNames(), ", "), s)
			}
			d, err := time.ParseDuration(strings.TrimSpace(v))
			if err != nil || d <= 0 {
				return Errorf(EInvalid, "%s: %q is not a positive duration like 5s or 2m", k, v)
			}
			if d > MaxTimeout {
				return Errorf(EInvalid, "%s: %s is longer than a phase may wait (%s)", k, d, MaxTimeout)
			}
			*f = Duration(d)
		}
	}
	return nil
}

// Fault is a fault armed on a protocol event of a migration, never on the
// wall clock: it fires when a frame of type On passes (in either direction)
// during the migration. Each fault fires once and is recorded on the
// timeline. See docs/faults.md for the kinds.
type Fault struct {
	Kind string `json:"kind"`
	// Side is the job the fault hits: source or target.
	Side string `json:"side,omitempty"`
	// On is the frame type whose passage arms the fault (kill, stop, pause,
	// drop-socket, worker-abort). Frame faults fire on their Frame instead.
	On string `json:"on,omitempty"`
	// Frame is the frame type a frame fault (delay-frame, drop-frame,
	// duplicate-frame, corrupt-frame) acts on.
	Frame string `json:"frame,omitempty"`
	// Direction of the frame: out (worker → job) or in (job → worker);
	// defaults to the direction that frame type travels.
	Direction string `json:"direction,omitempty"`
	// Delay is how long delay-frame holds the frame or pause freezes the job
	// (default 1s; at most twice the timeout of the frame's phase, and a
	// pause ends with its migration).
	Delay Duration `json:"delay,omitempty"`
}

// MigrationEvent is one entry on a migration's timeline.
type MigrationEvent struct {
	Seq   int       `json:"seq"`
	At    time.Time `json:"at"`
	Phase Phase     `json:"phase"`
	Side  string    `json:"side"` // manager | source | target | output
	// Kind names the moments clients act on; most events have none.
	// Detail is for people and may be reworded.
	Kind   TimelineKind `json:"kind,omitempty"`
	Detail string       `json:"detail"`
	Frame  *FrameInfo   `json:"frame,omitempty"`
}

// AbortRequest is the body of POST /api/v1/migrations/{id}/abort (it may
// be empty): why, in the user's words, for the timeline and the reason.
type AbortRequest struct {
	Reason string `json:"reason,omitempty"`
}

// TimelineKind is the kind of moment a timeline event records
// (docs/migrations.md, "Timeline").
type TimelineKind string

// Timeline kinds.
const (
	TimelineRequested TimelineKind = "requested"
	// TimelineTargetCreated: the target instance was placed (its ID is the
	// migration's target.instance).
	TimelineTargetCreated TimelineKind = "target-created"
	TimelineTargetStarted TimelineKind = "target-started"
	// TimelineConnected: the side's job connected to its socket (hello
	// accepted); TimelineSocketClosed: its socket closed.
	TimelineConnected    TimelineKind = "connected"
	TimelineSocketClosed TimelineKind = "socket-closed"
	// TimelinePointOfNoReturn: the source stopped its output; from here
	// nothing rolls back.
	TimelinePointOfNoReturn TimelineKind = "point-of-no-return"
	// TimelineSourceStopped: normsim stopped the source (on the external
	// runtime: closed its socket; the developer ends the process).
	TimelineSourceStopped TimelineKind = "source-stopped"
	TimelineTargetRemoved TimelineKind = "target-removed"
	// TimelineAbortRequested: the user asked to abort the migration (the
	// API, normsim abort, the dashboard); before the point of no return
	// it rolls back at its next step.
	TimelineAbortRequested TimelineKind = "abort-requested"
	// TimelineEnded: the migration reached its end state.
	TimelineEnded TimelineKind = "ended"
	// TimelineFault: an armed fault fired, its trigger passed
	// (docs/faults.md); detail says what it does. When it cannot land (no
	// such side yet, a signal refused) a note without a kind says so next.
	TimelineFault TimelineKind = "fault"
)

// FrameInfo describes a frame on the timeline.
type FrameInfo struct {
	Direction string          `json:"direction"` // in (job → worker) | out (worker → job)
	Type      string          `json:"type"`
	Size      int             `json:"size"`
	Payload   json.RawMessage `json:"payload,omitempty"`
	// PayloadNote says why Payload is a JSON string of the payload's text
	// rather than the payload itself (NewFrameInfo).
	PayloadNote string `json:"payloadNote,omitempty"`
}

// MaxRecordedDepth is the deepest a payload the record keeps as JSON may
// nest: encoding/json, and so the API, the event stream and the stores,
// refuse deeper. A frame may nest as deep as 64 KiB allows (32,768), as
// JSON.parse reads it, and is relayed unchanged.
const MaxRecordedDepth = 10000

// MaxTimelineNotes is how many notes of frames discarded, sockets
// replaced and reconnects a migration's timeline keeps; MaxNotePayload
// how much of a discarded frame's payload each keeps.
const (
	MaxTimelineNotes = 100
	MaxNotePayload   = 4 << 10
)

// NewFrameInfo is a frame for the timeline. A payload nested deeper than
// MaxRecordedDepth is kept as its text, a JSON string, and PayloadNote
// says so: the whole record stays readable.
func NewFrameInfo(dir, typ string, size int, payload json.RawMessage) *FrameInfo {
	f := &FrameInfo{Direction: dir, Type: typ, Size: size, Payload: payload}
	// Each level takes an opening and a closing byte: a shorter payload
	// cannot be too deep, and is not scanned.
	if len(payload) <= 2*MaxRecordedDepth {
		return f
	}
	if d := jsonDepth(payload); d > MaxRecordedDepth {
		text, _ := json.Marshal(string(payload))
		f.Payload = text
		f.PayloadNote = fmt.Sprintf("the payload nests %d levels deep, deeper than the record's JSON can (%d): kept as its text", d, MaxRecordedDepth)
	}
	return f
}

// jsonDepth is how deep valid JSON nests its arrays and objects.
func jsonDepth(b []byte) int {
	depth, deepest := 0, 0
	inString, escaped := false, false
	for _, c := range b {
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == '[' || c == '{':
			depth++
			deepest = max(deepest, depth)
		case c == ']' || c == '}':
			depth--
		}
	}
	return deepest
}

// OutputReport is the output-continuity verdict at the seam of a migration.
type OutputReport struct {
	// Verdict: seamless | gap | overlap | duplicate | glitch | no-output |
	// unknown.
	Verdict string `json:"verdict"`
	// LastSource is the last sequence number the source sent before it
	// stopped (in a handover: at or before source-stopped-output);
	// FirstTarget the target's first.
	LastSource  *int64   `json:"lastSource,omitempty"`
	FirstTarget *int64   `json:"firstTarget,omitempty"`
	GapMs       *float64 `json:"gapMs,omitempty"`
	OverlapMs   *float64 `json:"overlapMs,omitempty"`
	Lost        int64    `json:"lost"`
	Duplicated  int64    `json:"duplicated"`
	// AtFault names the side that broke the protocol's promise about
	// output, when the packets prove it: "source" (it produced after
	// source-stopped-output), "target" (it produced before cutover-apply)
	// or "source and target". Empty when no side can be blamed.
	AtFault string `json:"atFault,omitempty"`
	// SourceAfterStop counts the source's packets that arrived after its
	// source-stopped-output; TargetBeforeApply the target's that arrived
	// before cutover-apply was sent.
	SourceAfterStop   int64 `json:"sourceAfterStop,omitempty"`
	TargetBeforeApply int64 `json:"targetBeforeApply,omitempty"`
	// TargetAfterAbort counts, in a rolled-back handover, the target's
	// packets that arrived after the worker told it abort (or, when it
	// was not told, after its removal began).
	TargetAfterAbort int64 `json:"targetAfterAbort,omitempty"`
	// MaybeDuplicated counts the target's packets whose numbers fall where
	// the sink, to keep its record of the job's numbers bounded, merged
	// ranges across numbers that may never have been sent: whether they
	// repeat is not known, and they are not in Duplicated.
	MaybeDuplicated int64 `json:"maybeDuplicated,omitempty"`
	// CoalescedRanges counts the holes the sink had so filled in its
	// record of the job's numbers (sim.SentRanges.Coalesced).
	CoalescedRanges int64 `json:"coalescedRanges,omitempty"`
	// RepeatedFrom, on a duplicate, names the other instances whose
	// numbers the target repeated when the target itself continued
	// exactly after the source's own last number: numbers sent after the
	// source's last by an instance it never heard of, such as the target
	// of an earlier handover that failed past the point of no return. A
	// receiver sees them twice, but this handover did not lose its place.
	RepeatedFrom []string `json:"repeatedFrom,omitempty"`
	// Unreadable counts the packets the sink received during the
	// migration but could not read; they are not part of the verdict.
	Unreadable *UnreadablePackets `json:"unreadable,omitempty"`
	Detail     string             `json:"detail,omitempty"`
	// SwitchAt is when the seam happened for a receiver: the target's
	// first packet (or media datagram) arrived; nil when it sent none.
	SwitchAt *time.Time `json:"switchAt,omitempty"`
	// Media is the seam of the job's media (MPEG-TS or RTP to its
	// NORMSIM_MEDIA_URL), judged as a receiver would; Verdict is then
	// the worse of the two.
	Media *MediaReport `json:"media,omitempty"`
}

// UnreadablePackets are output packets the sink could not read: not JSON,
// naming no job or instance, or without an integer seq.
type UnreadablePackets struct {
	// Count is how many, by this job's senders (FromJob) and by senders
	// the sink could not tie to any job (Unattributed).
	Count        int64 `json:"count"`
	FromJob      int64 `json:"fromJob"`
	Unattributed int64 `json:"unattributed"`
	// Reasons counts them by what was wrong.
	Reasons map[string]int64 `json:"reasons"`
	// Example is the first one, cut to a readable length.
	Example string `json:"example,omitempty"`
}

// Duration is a time.Duration that reads and writes JSON as milliseconds (a
// number) or a Go duration string ("5s").
type Duration time.Duration

// MarshalJSON writes the duration in milliseconds.
func (d Duration) MarshalJSON() ([]byte, error) {
	// Whole milliseconds as integers; a fraction only where there is one,
	// so that a 400 µs timeout is not recorded as 0.
	if d%Duration(time.Millisecond) == 0 {
		return json.Marshal(time.Duration(d).Milliseconds())
	}
	return json.Marshal(float64(d) / float64(time.Millisecond))
}

// UnmarshalJSON reads milliseconds or a duration string.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var ms float64
	if err := json.Unmarshal(b, &ms); err == nil {
		if ms < 0 {
			return Errorf(EInvalid, "duration must not be negative; got %v", ms)
		}
		if ms > float64(math.MaxInt64/int64(time.Millisecond)) {
			// It would wrap to a negative time.Duration, read as unset.
			return Errorf(EInvalid, "duration %v ms is longer than any wait can be (about 292 years)", ms)
		}
		*d = Duration(ms * float64(time.Millisecond))
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		if _, err := strconv.ParseFloat(string(b), 64); errors.Is(err, strconv.ErrRange) {
			return Errorf(EInvalid, "duration %s ms is longer than any wait can be (about 292 years)", b)
		}
		return Errorf(EInvalid, "duration must be milliseconds or a string like \"5s\"; got %s", b)
	}
	v, err := time.ParseDuration(s)
	if err != nil && overflows(s) {
		return Errorf(EInvalid, "duration %q is longer than any wait can be (about 292 years)", s)
	}
	if err != nil || v < 0 {
		return Errorf(EInvalid, "duration must be milliseconds or a string like \"5s\"; got %q", s)
	}
	*d = Duration(v)
	return nil
}

// overflows says whether s is written as a duration (numbers each with a
// unit) that time.ParseDuration refused only for its size: "9999999h".
func overflows(s string) bool {
	s = strings.TrimPrefix(s, "+")
	if s == "" {
		return false
	}
	for s != "" {
		i := strings.IndexFunc(s, func(r rune) bool { return (r < '0' || r > '9') && r != '.' })
		if i <= 0 {
			return false // no number, or a number without its unit
		}
		s = s[i:]
		j := strings.IndexFunc(s, func(r rune) bool { return r >= '0' && r <= '9' || r == '.' })
		if j < 0 {
			j = len(s)
		}
		switch s[:j] {
		case "ns", "us", "µs", "μs", "ms", "s", "m", "h":
		default:
			return false
		}
		s = s[j:]
	}
	return true
}

// D returns the time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// MigrateRequest asks for a running instance to be moved. Every field is
// optional: To defaults to the other node, Strategy to the declared one,
// Runtime to the source's.
type MigrateRequest struct {
	To       string   `json:"to"`
	Strategy string   `json:"strategy"`
	Runtime  string   `json:"runtime"`
	Timeouts Timeouts `json:"timeouts"`
	Faults   []Fault  `json:"faults"`
}
