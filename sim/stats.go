package sim

import "context"

// Stats is what a running sim costs and what it could not keep, at one
// moment: GET /api/v1/stats. A load test reads it from outside (normsim
// bench does), so a record the sim lost is counted where the user can see
// it, not only in a log line at exit.
type Stats struct {
	// Goroutines is the sim's goroutine count.
	Goroutines int `json:"goroutines"`
	// HeapLiveBytes is the heap the last garbage collection found live.
	HeapLiveBytes uint64 `json:"heapLiveBytes"`
	// RSSBytes and PeakRSSBytes are the process's resident set now and at
	// its peak (Linux; 0 elsewhere).
	RSSBytes     int64 `json:"rssBytes"`
	PeakRSSBytes int64 `json:"peakRssBytes"`
	// Instances and Connected count the instances the manager knows and
	// those whose job socket is connected.
	Instances int `json:"instances"`
	Connected int `json:"connected"`
	// Records says what happened to the frame records of every job socket.
	Records RecordStats `json:"records"`
	// Store says what the store holds.
	Store StoreStats `json:"store"`
	// Events says what the live-update bus (GET /api/v1/events) carried.
	Events EventStats `json:"events"`
	// Memory says where the resident memory is.
	Memory MemoryStats `json:"memory"`
	// HTTP counts the API's and dashboard's connections.
	HTTP HTTPStats `json:"http"`
}

// HTTPStats counts the connections to the API and dashboard, which are
// bounded below the open-file limit (docs/contract-choices.md).
type HTTPStats struct {
	// Connections is how many are open now.
	Connections int `json:"connections"`
	// ConnectionsEvicted counts those closed, past a bound, to make room
	// for a newer one: each the one that had waited longest for a request
	// (idle between requests, or not having sent its first). A connection
	// serving a request, such as /api/v1/events, is never closed.
	// ConnectionsRefused counts the newcomers closed at once because every
	// connection within the bound was serving a request.
	ConnectionsEvicted int64 `json:"connectionsEvicted"`
	ConnectionsRefused int64 `json:"connectionsRefused"`
}

// MemoryStats splits the sim's resident memory by what holds it, from the
// Go runtime's own accounting (runtime/metrics) and the kernel's resident
// set.
type MemoryStats struct {
	// HeapObjectsBytes is the heap in objects: live ones, and dead ones
	// the collector has not swept yet.
	HeapObjectsBytes uint64 `json:"heapObjectsBytes"`
	// HeapFreeBytes is heap that holds no object and is still resident:
	// the room a heap grows into before the next collection (GOGC), and
	// what it has not returned to the system yet.
	HeapFreeBytes uint64 `json:"heapFreeBytes"`
	// StacksBytes is the goroutines' stacks.
	StacksBytes uint64 `json:"stacksBytes"`
	// StacksUsedBytes is how much of the stacks the goroutines used, as
	// the last collection found them: the rest of StacksBytes is room a
	// stack grew into once (a goroutine keeps its stack's size until a
	// collection finds it mostly unused), or stacks freed since.
	StacksUsedBytes uint64 `json:"stacksUsedBytes"`
	// RuntimeBytes is the Go runtime's own: its metadata, buffers and
	// profiling buckets.
	RuntimeBytes uint64 `json:"runtimeBytes"`
	// OutsideGoBytes is about what is resident but not the Go runtime's:
	// the binary's code and data as far as they were read, and memory
	// SQLite maps for itself (an in-memory store's pages). The resident
	// set less what the runtime holds resident, so an estimate; 0 where
	// the resident set is not known.
	OutsideGoBytes uint64 `json:"outsideGoBytes"`
	// LimitBytes is the Go runtime's soft memory limit (up --memory-limit
	// or GOMEMLIMIT), 0 when there is none: near it the collector runs
	// more often. What is outside Go is outside the limit.
	LimitBytes int64 `json:"limitBytes,omitempty"`
}

// EventStats counts the live-update events and their subscribers.
type EventStats struct {
	// Published is how many events the bus published.
	Published int64 `json:"published"`
	// Subscribers is how many subscribers it has now.
	Subscribers int `json:"subscribers"`
	// DroppedSubscribers is how many fell too far behind and were dropped
	// (each told so: an /api/v1/events stream ends with a dropped event).
	DroppedSubscribers int64 `json:"droppedSubscribers"`
	// PeakBacklog is the most events an /api/v1/events subscriber has had
	// waiting at once (past its limit, 65,536, it is dropped), and
	// PeakBacklogBytes the most bytes (past 16 MiB it is dropped).
	PeakBacklog      int   `json:"peakBacklog"`
	PeakBacklogBytes int64 `json:"peakBacklogBytes"`
}

// RecordStats counts the frame records that could not go straight to the
// store.
type RecordStats struct {
	// FramesWaited is how many times a connection with many records
	// waiting for the store was slowed before its next read (the
	// recorder's back-pressure); no record is dropped for it.
	FramesWaited int64 `json:"framesWaited"`
	// FramesLost is how many frame records were lost: refused by the
	// store, or recorded as the sim stopped.
	FramesLost int64 `json:"framesLost"`
	// ConnectionsRefused counts connections the job sockets turned away
	// because too many were waiting to say hello: each the one that had
	// waited longest, closed with 4401 to make room for a newer upgrade
	// (which is never refused). ConnectionsEvicted counts those closed
	// because too many had not upgraded (the oldest first).
	ConnectionsRefused int64 `json:"connectionsRefused"`
	ConnectionsEvicted int64 `json:"connectionsEvicted"`
}

// StoreStats is the size of what the store keeps.
type StoreStats struct {
	// Bytes is the database's size (pages in use, including an in-memory
	// one's).
	Bytes int64 `json:"bytes"`
	// Migrations is how many migrations the store holds.
	Migrations int `json:"migrations"`
	// MigrationsPruned is how many finished migrations were dropped,
	// oldest first, to stay within the store's cap (--keep-migrations).
	MigrationsPruned int64 `json:"migrationsPruned"`
	// PrunedWritesDropped counts the records that came for a migration
	// already dropped by that cap (its last timeline events, a late save),
	// let go of.
	PrunedWritesDropped int64 `json:"prunedWritesDropped"`
	// MigrationsCap is that cap; 0 keeps every migration.
	MigrationsCap int `json:"migrationsCap"`
	// EventsTrimmed is how many events were let go of, an instance's
	// oldest first, to keep each within its bound (sim.EventLimits).
	EventsTrimmed int64 `json:"eventsTrimmed"`
	// Pending is how many of the manager's writes (an instance, an event,
	// a migration's document with its new events) wait for the store: how
	// far it is behind.
	Pending int `json:"pending"`
	// MarksLost counts the point-of-no-return marks (sim.NoReturnMarks)
	// that could not be written: a migration among them is not rolled
	// back by the next start, or may be rolled back wrongly.
	MarksLost int64 `json:"marksLost"`
	// Frames are the frame records kept, and those let go of, oldest
	// first, to stay within the store's bounds (docs/contract-choices.md).
	Frames FrameCounts `json:"frames"`
}

// StatsReader reads a sim's Stats.
type StatsReader interface {
	Stats(ctx context.Context) (Stats, error)
}
