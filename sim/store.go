package sim

import (
	"context"
	"encoding/json"
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
	ListMigrations(ctx context.Context, f MigrationFilter) ([]*Migration, error)
	AppendMigrationEvents(ctx context.Context, migrationID string, evs []MigrationEvent) error

	AppendEvent(ctx context.Context, ev Event) error
	ListEvents(ctx context.Context, f EventFilter) ([]Event, error)

	RecordFrames(ctx context.Context, frs []FrameRecord) error
	ListFrames(ctx context.Context, f FrameFilter) ([]FrameRecord, error)

	Close() error
}

// MigrationFilter narrows ListMigrations.
type MigrationFilter struct {
	JobID string
	State MigrationState
	Limit int
}

// Event is a change somewhere in the sim: an instance state change, a
// connection, a migration phase. It is what the event bus carries and the
// store keeps.
type Event struct {
	Seq       int64           `json:"seq"`
	At        time.Time       `json:"at"`
	Kind      string          `json:"kind"` // instance.state, instance.connected, migration.event, ...
	Instance  string          `json:"instance,omitempty"`
	Migration string          `json:"migration,omitempty"`
	Data      json.RawMessage `json:"data,omitempty"`
}

// EventFilter narrows ListEvents.
type EventFilter struct {
	Instance  string
	Migration string
	AfterSeq  int64
	Limit     int
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

// FrameFilter narrows ListFrames.
type FrameFilter struct {
	JobID string
	Role  string
	Limit int
}
