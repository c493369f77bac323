package sim

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"
)

// Store keeps every record normsim makes, so it survives a restart.
type Store interface {
	SaveInstance(ctx context.Context, in *Instance) error
	GetInstance(ctx context.Context, id string) (*Instance, error)
	ListInstances(ctx context.Context) ([]*Instance, error)
	DeleteInstance(ctx context.Context, id string) error

	SaveMigration(ctx context.Context, m *Migration) error // without Events
	GetMigration(ctx context.Context, id string) (*Migration, error)
	// GetMigrationSummary is GetMigration without the timeline (Events
	// nil): what a client polling where a migration is needs.
	GetMigrationSummary(ctx context.Context, id string) (*Migration, error)
	ListMigrations(ctx context.Context, f MigrationFilter) ([]*Migration, error)
	// CountMigrations counts what ListMigrations lists for f without its
	// Limit and Offset.
	CountMigrations(ctx context.Context, f MigrationFilter) (int, error)
	AppendMigrationEvents(ctx context.Context, migrationID string, evs []MigrationEvent) error

	// AppendEvents records changes, in order, all or none.
	AppendEvents(ctx context.Context, evs []Event) error
	ListEvents(ctx context.Context, f EventFilter) ([]Event, error)

	RecordFrames(ctx context.Context, frs []FrameRecord) error
	ListFrames(ctx context.Context, f FrameFilter) ([]FrameRecord, error)

	Close() error
}

// RecordStore is what a sim needs of its store: the records (Store), the
// captured logs and seam captures, and the figures and settings the API
// and the start-up read.
type RecordStore interface {
	Store
	LogStore
	SeamCaptures
	// Owner labels what this store's sim started, so that a later start
	// on the same store can tell its own leftovers.
	Owner() string
	// SetHolder names this sim to a second one started on the same store.
	SetHolder(who string)
	SetMigrationCap(n int)
	MigrationCap() int
	MigrationsPruned() int64
	// PrunedWritesDropped is how many records (a migration's save, its
	// timeline's events, its seam capture) came for a migration the cap
	// had dropped, and were let go of (sim.RecentlyPruned).
	PrunedWritesDropped() int64
	// EventsTrimmed is how many events were let go of to keep instances
	// within their bound (EventLimits).
	EventsTrimmed() int64
	Size(ctx context.Context) (bytes int64, migrations int, err error)
	FrameCounts(ctx context.Context, jobID, role string) (FrameCounts, error)
	Setting(ctx context.Context, key string) (string, error)
	SetSetting(ctx context.Context, key, value string) error
	// Checked is closed once the store's own check has run; Damaged then
	// says what it found.
	Checked() <-chan struct{}
	Damaged() error
}

// NoReturnMarks is a store's note of which running migrations have passed
// their point of no return, for the next start to tell the ones it can
// roll back from the ones it must not. The store's records are written
// behind the migrations (a journal), so a normsim killed a moment after a
// handover's cutover-apply may have stored nothing of it; a mark is
// written before what crosses the point is, and costs a write to a file,
// not a transaction: it outlives a killed normsim, not a crashed machine
// (whose jobs die with it). A store without marks rolls nothing back at
// start.
type NoReturnMarks interface {
	// MarkBegun notes a migration as begun, not past its point; MarkPassed
	// notes it past. MarkEnded lets its mark go once its end is recorded.
	MarkBegun(migrationID string) error
	MarkPassed(migrationID string) error
	MarkEnded(migrationID string)
	// Marks is what a normsim that was killed left: each migration it
	// had marked begun, and whether it had passed its point of no return.
	Marks() (map[string]bool, error)
	// ClearMarks forgets them, once recovery has ended each migration.
	ClearMarks() error
}

// MigrationFilter narrows ListMigrations, which lists newest first.
type MigrationFilter struct {
	JobID string
	State MigrationState
	// Limit is the most to list (0: every one); Offset how many of the
	// newest to skip first.
	Limit, Offset int
	// Except leaves these migrations out: the ones a manager holds in
	// memory and lists from there. The API takes no such parameter.
	Except []string
}

// Event is a change somewhere in the sim: an instance state change, a
// connection, a migration phase. It is what the event bus carries and the
// store keeps.
type Event struct {
	// ID is the live-update bus's number for the event (the SSE id a
	// reconnecting /api/v1/events client resumes after); not stored.
	ID        int64           `json:"-"`
	Seq       int64           `json:"seq"`
	At        time.Time       `json:"at"`
	Kind      EventKind       `json:"kind"`
	Instance  string          `json:"instance,omitempty"`
	Migration string          `json:"migration,omitempty"`
	Data      json.RawMessage `json:"data,omitempty"`
}

// EventKind is what an Event tells of; live-update clients (the
// dashboard's EventSource) listen by it.
type EventKind string

// Event kinds.
const (
	// EventInstanceState: an instance changed state (Data: from, to,
	// error, node).
	EventInstanceState EventKind = "instance.state"
	// EventInstanceConnected: its job connected to or left its socket.
	EventInstanceConnected EventKind = "instance.connected"
	// EventInstanceRuntime: its runtime noticed something about a service.
	EventInstanceRuntime EventKind = "instance.runtime"
	EventInstanceRemoved EventKind = "instance.removed"
	// EventMigrationEvent: a migration's timeline grew (Data: the
	// MigrationEvent).
	EventMigrationEvent EventKind = "migration.event"
	// EventMigrationEnded: a migration ended (Data: state, reason).
	EventMigrationEnded EventKind = "migration.ended"
)

// EventFilter narrows ListEvents.
type EventFilter struct {
	Instance  string
	Migration string
	AfterSeq  int64
	Limit     int
	// Tail lists the last Limit events (still oldest first) instead of
	// the first.
	Tail bool
}

// DescribedEvent is an event with what it tells of in words, as the API
// lists an instance's events.
type DescribedEvent struct {
	Event
	Text string `json:"text"`
}

// Described is ev with its DescribeEvent.
func Described(ev Event) DescribedEvent { return DescribedEvent{Event: ev, Text: DescribeEvent(ev)} }

// DescribeAll is each of evs Described, in order.
func DescribeAll(evs []Event) []DescribedEvent {
	out := make([]DescribedEvent, len(evs))
	for i, ev := range evs {
		out[i] = Described(ev)
	}
	return out
}

// DescribeEvent says what an event tells of, in one line for people.
func DescribeEvent(ev Event) string {
	var d struct {
		From, To, Error, Node string
		Connected, Replaced   bool
		Code                  int
		Reason, ClosedBy      string
		Service, Kind, Detail string
		ExitCode              *int
	}
	_ = json.Unmarshal(ev.Data, &d)
	switch ev.Kind {
	case EventInstanceState:
		s := fmt.Sprintf("%s → %s", cmp.Or(d.From, "placed"), d.To)
		if d.From == "" && d.Node != "" {
			s = fmt.Sprintf("placed on node %s: %s", d.Node, d.To)
		}
		if d.Error != "" {
			s += ": " + d.Error
		}
		return s
	case EventInstanceConnected:
		switch {
		case d.Replaced:
			return fmt.Sprintf("a newer connection of its job replaced the older one (closed %d: %s)", d.Code, cmp.Or(d.Reason, "no reason given"))
		case d.Connected:
			return "its job connected to the job socket"
		case d.Code != 0:
			how := fmt.Sprintf("(%d: %s)", d.Code, cmp.Or(d.Reason, "no reason given"))
			switch d.ClosedBy {
			case ClosedByJob.String():
				return "its job closed its socket " + how
			case ClosedByWorker.String():
				return "normsim closed its job's socket " + how
			case ConnectionLost.String():
				return "its job's connection was lost, without a close frame " + how
			}
			return "its job's socket closed " + how // recorded before closedBy was
		}
		return "its job's socket closed"
	case EventInstanceRuntime:
		s := fmt.Sprintf("service %s %s", d.Service, d.Kind)
		if d.Kind == string(ServiceExited) && d.ExitCode != nil {
			s += fmt.Sprintf(" (code %d)", *d.ExitCode)
		}
		if d.Detail != "" {
			s += ": " + d.Detail
		}
		return s
	case EventInstanceRemoved:
		if ev.Migration != "" {
			return "removed by migration " + ev.Migration
		}
		return "removed"
	}
	return string(ev.Kind) + " " + string(ev.Data)
}

// FrameRecord is one frame a node received from or sent to a job.
type FrameRecord struct {
	At        time.Time `json:"at"`
	Node      string    `json:"node"`
	JobID     string    `json:"jobId"`
	Role      string    `json:"role"`
	Direction string    `json:"direction"` // in | out
	Type      string    `json:"type"`
	Size      int       `json:"size"`
	Data      string    `json:"data,omitempty"` // the frame text; hello tokens redacted
}

// FrameCounts are how many of an instance's frame records a store keeps,
// and how many (and how many bytes of their text) it let go of, oldest
// first, to stay within its bounds.
type FrameCounts struct {
	Kept         int64 `json:"kept"`
	Dropped      int64 `json:"dropped"`
	DroppedBytes int64 `json:"droppedBytes"`
	// Lost are the records the store refused (a full disk, say): never
	// kept, so the list holds nothing of them.
	Lost int64 `json:"lost,omitempty"`
}

// FrameTally is a number of frame records and the bytes of their text: of
// one instance (JobID, Role) or, with both empty, of all.
type FrameTally struct {
	JobID, Role string
	Frames      int64
	Bytes       int64
}

// TallyFrames counts a batch's frame records by instance, in the order
// the instances first appear, and in all. A record's bytes are its text's
// UTF-8 bytes. Every store counts with it.
func TallyFrames(frs []FrameRecord) (per []FrameTally, all FrameTally) {
	at := map[[2]string]int{}
	for _, f := range frs {
		k := [2]string{f.JobID, f.Role}
		i, ok := at[k]
		if !ok {
			i = len(per)
			at[k] = i
			per = append(per, FrameTally{JobID: f.JobID, Role: f.Role})
		}
		per[i].Frames++
		per[i].Bytes += int64(len(f.Data))
		all.Frames++
		all.Bytes += int64(len(f.Data))
	}
	return per, all
}

// FrameLimits bound the frame records a store keeps: per instance (a job
// that floods its socket with frames cannot crowd out the others' history)
// and in all. Bytes count each record's text. The oldest go first, and
// what went is counted (FrameCounts).
type FrameLimits struct {
	PerInstance      int64
	PerInstanceBytes int64
	Total            int64
	TotalBytes       int64
}

// InstanceOverflow says how many frames and bytes an instance that holds
// frames and bytes must let go of, oldest first (Overflow); ok is false
// while it is within its bound.
func (l FrameLimits) InstanceOverflow(frames, bytes int64) (dropFrames, dropBytes int64, ok bool) {
	return Overflow(frames, bytes, l.PerInstance, l.PerInstanceBytes)
}

// TotalOverflow is InstanceOverflow for all instances' frames together.
func (l FrameLimits) TotalOverflow(frames, bytes int64) (dropFrames, dropBytes int64, ok bool) {
	return Overflow(frames, bytes, l.Total, l.TotalBytes)
}

// TrimTo is the share of a bound that a store's trim leaves, so that a
// chatty instance is trimmed once per tenth of its bound rather than on
// every batch.
const TrimTo = 0.9

// Overflow says how much of n records of size bytes must go for them to
// hold TrimTo of the bounds maxN and maxSize again, once they hold more
// than either; ok is false while they are within both. A count that is
// not over may come out at or below zero: nothing need go for it.
func Overflow(n, size, maxN, maxSize int64) (dropN, dropSize int64, ok bool) {
	if n <= maxN && size <= maxSize {
		return 0, 0, false
	}
	return n - int64(float64(maxN)*TrimTo), size - int64(float64(maxSize)*TrimTo), true
}

// EventLimits bound the events a store keeps of one instance: its state
// changes, connections and runtime events. A job that reconnects in a loop
// adds two a time, and its instance's events would grow the store without
// end; past PerInstance the instance's oldest are let go (down to TrimTo
// of it) and counted (EventsTrimmed). Events of no instance (a
// migration's end) go as their migrations are pruned. Past Total events
// in all (many instances each just under its bound, launched and removed
// in a loop, as conform's cases are), the oldest of all go, down to
// TrimTo of it, counted the same.
type EventLimits struct {
	PerInstance int64
	Total       int64
}

// DefaultEventLimits keep an instance's last 2,000 events (a launch and a
// handover say about a dozen) and 500,000 in all (about 120 MiB; a
// 10,000-job bench says about 150,000).
var DefaultEventLimits = EventLimits{PerInstance: 2000, Total: 500000}

// TotalKept is how many of n events in all a trim keeps; ok is false
// while n is within the bound (or there is none).
func (l EventLimits) TotalKept(n int64) (keep int64, ok bool) {
	if l.Total <= 0 || n <= l.Total {
		return n, false
	}
	return int64(float64(l.Total) * TrimTo), true
}

// CountEvents adds evs to counts, each instance's events since a trim
// last counted them, and returns the instances now past the bound: a
// store counts those again and trims them (counts only say when to look).
func (l EventLimits) CountEvents(counts map[string]int64, evs []Event) (over []string) {
	for _, ev := range evs {
		if ev.Instance == "" {
			continue
		}
		counts[ev.Instance]++
		if _, ok := l.EventsKept(counts[ev.Instance]); ok && !slices.Contains(over, ev.Instance) {
			over = append(over, ev.Instance)
		}
	}
	return over
}

// EventsKept is how many of n events of one instance past limit's bound a
// trim keeps; ok is false while n is within it.
func (l EventLimits) EventsKept(n int64) (keep int64, ok bool) {
	if n <= l.PerInstance {
		return n, false
	}
	return int64(float64(l.PerInstance) * TrimTo), true
}

// DefaultFrameLimits keep 2,000 frames or 4 MiB of frame text per
// instance (a migration says about ten frames), and 100,000 or 64 MiB in
// all.
var DefaultFrameLimits = FrameLimits{PerInstance: 2000, PerInstanceBytes: 4 << 20, Total: 100000, TotalBytes: 64 << 20}

// FramesDroppedNote says, for a reader of an instance's frames, what was
// let go of and why.
func FramesDroppedNote(c FrameCounts) string {
	l := DefaultFrameLimits
	return fmt.Sprintf("normsim | %d earlier frame record(s) (%d bytes) of this instance were dropped: normsim keeps the last %d frames or %d MiB of an instance, and %d or %d MiB in all (docs/contract-choices.md)",
		c.Dropped, c.DroppedBytes, l.PerInstance, l.PerInstanceBytes>>20, l.Total, l.TotalBytes>>20)
}

// FramesLostNote says that frame records of an instance could not be
// stored: without it an instance whose every record was refused looks as
// if its job never said hello.
func FramesLostNote(c FrameCounts) string {
	return fmt.Sprintf("normsim | %d frame record(s) of this instance could not be stored (the store refused them; is its disk full?) and are lost: its job spoke more than is listed", c.Lost)
}

// FrameCountNotes are what a reader of an instance's frames is told of
// the records it will not see: those lost (FramesLostNote), then those
// dropped (FramesDroppedNote); none when it sees them all.
func FrameCountNotes(c FrameCounts) []string {
	var notes []string
	if c.Lost > 0 {
		notes = append(notes, FramesLostNote(c))
	}
	if c.Dropped > 0 {
		notes = append(notes, FramesDroppedNote(c))
	}
	return notes
}

// FrameFilter narrows ListFrames.
type FrameFilter struct {
	JobID string
	// Role is the instance the frames were said by or to.
	Role  string
	Limit int
	// Tail lists the last Limit frames (still oldest first) instead of
	// the first.
	Tail bool
}
