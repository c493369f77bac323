package manager

import (
	"context"
	"log/slog"
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
type journal struct {
	store sim.Store
	log   *slog.Logger
	queue *batchq.Queue[journalOp]
}

// journalOp is one write, or (write nil) a Flush waiting for what was
// queued before it to be committed. A write with a key replaces the whole
// record the key names (an instance, a migration's document).
type journalOp struct {
	key     string
	write   func(context.Context)
	flushed chan struct{}
}

// journalLinger is how long the journal lets a burst gather before writing
// it: a handover records a dozen events within a millisecond or two, and
// the relay that caused them should have the CPU first.
const journalLinger = time.Millisecond

// journalBatch is the most writes committed in one transaction.
const journalBatch = 512

// batcher is a store that can commit several writes in one transaction
// (sim/sqlite's Store).
type batcher interface {
	Batch(ctx context.Context, fn func(ctx context.Context)) error
}

func newJournal(store sim.Store, log *slog.Logger) *journal {
	j := &journal{store: store, log: log}
	j.queue = batchq.New(batchq.Limits{}, journalLinger, journalBatch, j.write)
	return j
}

// write commits ops, in one transaction where the store can, then tells
// the flushes among them.
func (j *journal) write(ops []journalOp) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// A burst holds several snapshots of an instance or a migration as it
	// moves through its phases: only the last is written, in the place of
	// the first, so what refers to the record (a migration's events) still
	// comes after it.
	last := map[string]int{}
	for i, op := range ops {
		if op.key != "" {
			last[op.key] = i
		}
	}
	run := func(ctx context.Context) {
		for _, op := range ops {
			switch {
			case op.write == nil:
			case op.key == "":
				op.write(ctx)
			default:
				if i, ok := last[op.key]; ok {
					ops[i].write(ctx)
					delete(last, op.key)
				}
			}
		}
	}
	if b, ok := j.store.(batcher); ok && len(ops) > 1 {
		if err := b.Batch(ctx, run); err != nil {
			j.log.Error("write journal", "ops", len(ops), "err", err)
		}
	} else {
		run(ctx)
	}
	for _, op := range ops {
		if op.flushed != nil {
			close(op.flushed)
		}
	}
}

func (j *journal) do(key string, write func(context.Context)) {
	if j.store == nil {
		return
	}
	j.queue.Add(journalOp{key: key, write: write}, 0)
}

func (j *journal) instance(in *sim.Instance) {
	j.do("instance "+in.ID, func(ctx context.Context) {
		if err := j.store.SaveInstance(ctx, in); err != nil {
			j.log.Error("save instance", "instance", in.ID, "err", err)
		}
	})
}

func (j *journal) deleteInstance(id string) {
	j.do("instance "+id, func(ctx context.Context) {
		if err := j.store.DeleteInstance(ctx, id); err != nil {
			j.log.Error("delete instance", "instance", id, "err", err)
		}
	})
}

func (j *journal) event(ev sim.Event) {
	j.do("", func(ctx context.Context) {
		if err := j.store.AppendEvent(ctx, ev); err != nil {
			j.log.Error("append event", "kind", ev.Kind, "err", err)
		}
	})
}

func (j *journal) migration(m *sim.Migration) {
	j.do("migration "+m.ID, func(ctx context.Context) {
		if err := j.store.SaveMigration(ctx, m); err != nil {
			j.log.Error("save migration", "migration", m.ID, "err", err)
		}
	})
}

func (j *journal) migrationEvent(id string, ev sim.MigrationEvent) {
	j.do("", func(ctx context.Context) {
		if err := j.store.AppendMigrationEvents(ctx, id, []sim.MigrationEvent{ev}); err != nil {
			j.log.Error("append migration event", "migration", id, "err", err)
		}
	})
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

// Close writes what is queued and stops.
func (j *journal) Close() { j.queue.Close() }
