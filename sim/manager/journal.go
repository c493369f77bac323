package manager

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/normsim/normsim/internal/batchq"
	"github.com/normsim/normsim/sim"
)

// journal writes everything the manager records to the store, in order, on
// one goroutine: no caller (least of all a frame relay) waits for SQLite,
// and none blocks, so the manager may record while holding its locks.
// Callers are bounded by what the manager does (a migration's timeline is
// capped, instances and events come from requests and connections), so the
// queue is not: a slow store costs memory for a while, never a stalled relay.
//
// A write that fails (a full disk, a store that went read-only) is not
// dropped: the journal holds it, says the store is failing (Failing), and
// retries in order until the store writes again. Only past maxHeld held
// writes are the oldest given up, and counted (Lost).
type journal struct {
	store sim.Store
	log   *slog.Logger
	queue *batchq.Queue[journalOp]

	mu      sync.Mutex
	failing error       // why the last write failed; nil once one succeeds
	held    []journalOp // writes that failed, oldest first, to retry
	lost    int64       // records given up (maxHeld, or at Close; see records)
	stop    chan struct{}
	retried sync.WaitGroup
}

// journalOp is one write, or (writing nothing) a Flush waiting for what
// was queued before it to be written or held. A write with a key replaces
// the whole record the key names (an instance, a migration's document).
type journalOp struct {
	key   string
	write func(context.Context) error
	// A migration's record (write nil): its document when it changed, and
	// its timeline's events from from on. timeline is the run's own
	// append-only slice as it was when queued, so waiting events cost the
	// store's backlog nothing, and a record's document and events are
	// written together, in one place in the queue.
	migration   *sim.Migration
	migrationID string
	timeline    []sim.MigrationEvent
	from        int
	// base is how many of the timeline's events came before timeline[0]:
	// a run lets its stored events go (run.letEventsGo) and starts a new
	// slice, and two ops on different slices cannot share one.
	base int
	// events are changes for the events table (write nil). A batch writes
	// all of its events together, where the first of them was queued:
	// the rows of one statement cost about half of a statement each.
	events  []sim.Event
	flushed chan struct{}
	// stored, when set, runs on the journal's goroutine once the write
	// is committed: at once, or when a held write finally is.
	stored func()
}

// journalLinger is how long the journal lets a burst gather before writing
// it: a handover records a dozen events within a millisecond or two, and
// the relay that caused them should have the CPU first.
const journalLinger = time.Millisecond

// journalBatch is the most writes committed in one transaction.
const journalBatch = 512

// maxHeld bounds the writes held while the store fails; journalRetry is
// how often they are retried.
const (
	maxHeld      = 100_000
	journalRetry = 500 * time.Millisecond
)

// batcher is a store that can commit several writes in one transaction
// (sim/sqlite's Store).
type batcher interface {
	Batch(ctx context.Context, fn func(ctx context.Context)) error
}

func newJournal(store sim.Store, log *slog.Logger) *journal {
	j := &journal{store: store, log: log, stop: make(chan struct{})}
	j.queue = batchq.New(batchq.Limits{}, journalLinger, journalBatch, j.write)
	j.retried.Add(1)
	go j.retryLoop()
	return j
}

// retryLoop wakes the writer while writes are held, so they are retried
// even when nothing new is recorded.
func (j *journal) retryLoop() {
	defer j.retried.Done()
	t := time.NewTicker(journalRetry)
	defer t.Stop()
	for {
		select {
		case <-j.stop:
			return
		case <-t.C:
			if j.Failing() != nil {
				j.queue.Add(journalOp{}, 0)
			}
		}
	}
}

// Failing is why the store could not write, or nil when it writes.
func (j *journal) Failing() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.failing
}

// Pending counts the writes not yet in the store: queued, being written,
// or held while the store fails. A migration's document and the events
// waiting with it are one write.
func (j *journal) Pending() int {
	j.mu.Lock()
	held := len(j.held)
	j.mu.Unlock()
	return j.queue.Len() + held
}

// Held and Lost count the records waiting for the store and those given
// up, in the same unit (records: a migration's document and each of its
// events count one each).
func (j *journal) Held() (held int, lost int64) {
	j.mu.Lock()
	defer j.mu.Unlock()
	for _, op := range j.held {
		held += int(op.records())
	}
	return held, j.lost
}

// write commits the held writes and then ops, in one transaction where the
// store can, holds what failed, then tells the flushes among them.
func (j *journal) write(ops []journalOp) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	j.mu.Lock()
	if len(j.held) > 0 {
		ops = append(j.held, ops...)
	}
	j.held = nil
	j.mu.Unlock()
	// Held writes and new ones may name the same record: only the last
	// snapshot is written, in the place of the first, so what refers to
	// the record (a migration's events) still comes after it (mergeOp, as
	// the queue merges what waits).
	first := make(map[string]int, len(ops))
	todo := make([]journalOp, 0, len(ops))
	events := -1 // where in todo the batch's events are written
	for _, op := range ops {
		switch {
		case !op.writes():
		case len(op.events) > 0:
			// The batch is one transaction: where in it an event is
			// written shows nowhere but in its order among the events.
			if events < 0 {
				events = len(todo)
				todo = append(todo, journalOp{events: make([]sim.Event, 0, countEvents(ops))})
			}
			todo[events].events = append(todo[events].events, op.events...)
		case op.key == "":
			todo = append(todo, op)
		default:
			if i, ok := first[op.key]; ok {
				mergeOp(&todo[i], op)
				continue
			}
			first[op.key] = len(todo)
			todo = append(todo, op)
		}
	}
	failed, err := j.commit(ctx, todo)
	j.settle(todo, failed, err)
	for i, op := range todo {
		if op.stored != nil && !slices.Contains(failed, i) {
			op.stored()
		}
	}
	for _, op := range ops {
		if op.flushed != nil {
			close(op.flushed)
		}
	}
}

// countEvents is how many events ops hold: one batch writes them together.
func countEvents(ops []journalOp) int {
	n := 0
	for _, op := range ops {
		n += len(op.events)
	}
	return n
}

// chain runs a, then b (either may be nil).
func chain(a, b func()) func() {
	switch {
	case a == nil:
		return b
	case b == nil:
		return a
	}
	return func() { a(); b() }
}

// commit runs the writes and returns the indexes in todo of those that
// did not take, with the first error. In a batch whose commit fails, none
// took.
func (j *journal) commit(ctx context.Context, todo []journalOp) ([]int, error) {
	var failed []int
	var first error
	run := func(ctx context.Context) {
		for i, op := range todo {
			if err := j.run(ctx, op); err != nil {
				failed = append(failed, i)
				if first == nil {
					first = err
				}
			}
		}
	}
	if b, ok := j.store.(batcher); ok && len(todo) > 1 {
		if err := b.Batch(ctx, run); err != nil {
			all := make([]int, len(todo))
			for i := range all {
				all[i] = i
			}
			return all, err
		}
		return failed, first
	}
	run(ctx)
	return failed, first
}

// writes reports whether op writes anything (a Flush or a retry's wake-up
// does not).
func (op *journalOp) writes() bool {
	return op.write != nil || op.migration != nil || op.from < len(op.timeline) || len(op.events) > 0
}

// records counts what op writes: a migration's document and each of its
// events, each event, or one record.
func (op *journalOp) records() int64 {
	if op.write != nil {
		return 1
	}
	if len(op.events) > 0 {
		return int64(len(op.events))
	}
	n := int64(len(op.timeline) - op.from)
	if op.migration != nil {
		n++
	}
	return n
}

// run makes op's write: a migration's document first, as its events refer
// to its row.
func (j *journal) run(ctx context.Context, op journalOp) error {
	if op.write != nil {
		return op.write(ctx)
	}
	if len(op.events) > 0 {
		return j.store.AppendEvents(ctx, op.events)
	}
	if op.migration != nil {
		if err := j.store.SaveMigration(ctx, op.migration); err != nil {
			return err
		}
	}
	if op.from < len(op.timeline) {
		return j.store.AppendMigrationEvents(ctx, op.migrationID, op.timeline[op.from:])
	}
	return nil
}

// settle records the outcome of a write: the writes of todo that failed
// held, and the failure, or the store writing again.
func (j *journal) settle(todo []journalOp, failedAt []int, err error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if len(failedAt) == 0 {
		if j.failing != nil {
			j.log.Info("the store writes again; the held records are written")
		}
		j.failing = nil
		return
	}
	if j.failing == nil {
		j.log.Error("the store cannot write; records are held and retried", "err", err, "held", len(failedAt))
	}
	j.failing = err
	j.held = make([]journalOp, len(failedAt))
	for n, i := range failedAt {
		j.held[n] = todo[i]
	}
	if over := len(j.held) - maxHeld; over > 0 {
		for _, op := range j.held[:over] {
			j.lost += op.records()
		}
		j.held = append([]journalOp(nil), j.held[over:]...)
		j.log.Error("the store cannot write; the oldest held records are given up", "lost", j.lost)
	}
}

// do queues a write; stored, when not nil, runs on the journal's
// goroutine once the write is in the store (at once without a store; a
// closed journal writes nothing more and does not run it).
//
// A keyed write replaces the same record's write still waiting, where it
// stands (as write does for held ones): while the store is behind, a
// migration's or an instance's snapshots are held once each, not once per
// phase.
func (j *journal) do(key string, write func(context.Context) error, stored func()) {
	j.add(journalOp{key: key, write: write, stored: stored})
}

func (j *journal) add(op journalOp) {
	if j.store == nil {
		if op.stored != nil {
			op.stored()
		}
		return
	}
	if op.key == "" {
		j.queue.Add(op, 0)
		return
	}
	j.queue.AddKeyed(op.key, op, mergeOp)
}

// mergeOp makes the waiting op write what the newer one does, and do what
// both were to do once stored. A migration's events are appended, so the
// waiting op keeps where its own began and writes on to the newer's end:
// the two cover consecutive events of one timeline.
func mergeOp(waiting *journalOp, newer journalOp) {
	waiting.write = newer.write
	if newer.migration != nil {
		waiting.migration = newer.migration
	}
	switch {
	case newer.from >= len(newer.timeline):
	case waiting.from >= len(waiting.timeline):
		waiting.timeline, waiting.from, waiting.base = newer.timeline, newer.from, newer.base
	case waiting.base == newer.base:
		waiting.timeline = newer.timeline
	default:
		// The run started a new slice since the waiting op was queued:
		// what both are to write, in order, in a slice of their own.
		own := slices.Concat(waiting.timeline[waiting.from:], newer.timeline[newer.from:])
		waiting.timeline, waiting.from, waiting.base = own, 0, -1
	}
	waiting.stored = chain(waiting.stored, newer.stored)
}

func (j *journal) instance(in *sim.Instance) {
	j.do("instance "+in.ID, func(ctx context.Context) error { return j.store.SaveInstance(ctx, in) }, nil)
}

// deleteInstanceThen deletes an instance's row, then runs stored once
// that is written (see do).
func (j *journal) deleteInstanceThen(id string, stored func()) {
	j.do("instance "+id, func(ctx context.Context) error { return j.store.DeleteInstance(ctx, id) }, stored)
}

func (j *journal) event(ev sim.Event) {
	j.add(journalOp{events: []sim.Event{ev}})
}

func (j *journal) migration(m *sim.Migration) { j.migrationThen(m, nil) }

// migrationThen writes m, then runs stored once m is in the store (see
// do): with every event of its timeline queued before it.
func (j *journal) migrationThen(m *sim.Migration, stored func()) {
	j.add(journalOp{key: "migration " + m.ID, migration: m, migrationID: m.ID, stored: stored})
}

// migrationEvent writes the last event of timeline, a migration's events
// after the first base (the run's own slice: only ever appended to).
func (j *journal) migrationEvent(id string, base int, timeline []sim.MigrationEvent) {
	j.add(journalOp{key: "migration " + id, migrationID: id, timeline: timeline, from: len(timeline) - 1, base: base})
}

// Flush waits until every op queued before it has been committed.
func (j *journal) Flush() {
	if j.store == nil {
		return
	}
	flushed := make(chan struct{})
	if j.queue.Add(journalOp{flushed: flushed}, 0) {
		<-flushed
	}
}

// Close writes what is queued and stops. What the store still cannot take
// then is lost, logged as such, and Close's error.
func (j *journal) Close() error {
	close(j.stop)
	j.retried.Wait()
	j.queue.Close()
	j.mu.Lock()
	defer j.mu.Unlock()
	var n int64
	for _, op := range j.held {
		n += op.records()
	}
	if n == 0 {
		return nil
	}
	j.lost += n
	j.log.Error("normsim stopped while the store could not write: records lost", "lost", n, "err", j.failing)
	j.held = nil
	why := j.failing
	if why == nil {
		why = errors.New("the store was failing")
	}
	return fmt.Errorf("close the journal: %d records lost, the store could not write them: %w", n, why)
}
