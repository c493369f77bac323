package manager

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/normsim/normsim/sim"
)

// journal writes everything the manager records to the store, in order, on
// one goroutine: no caller (least of all a frame relay) waits for SQLite.
type journal struct {
	store  sim.Store
	log    *slog.Logger
	ops    chan func(context.Context)
	mu     sync.RWMutex
	closed bool
	done   chan struct{}
}

func newJournal(store sim.Store, log *slog.Logger) *journal {
	j := &journal{store: store, log: log, ops: make(chan func(context.Context), 8192), done: make(chan struct{})}
	go j.loop()
	return j
}

func (j *journal) loop() {
	defer close(j.done)
	for op := range j.ops {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		op(ctx)
		cancel()
	}
}

func (j *journal) do(op func(context.Context)) {
	if j.store == nil {
		return
	}
	j.mu.RLock()
	defer j.mu.RUnlock()
	if !j.closed {
		j.ops <- op
	}
}

func (j *journal) instance(in *sim.Instance) {
	j.do(func(ctx context.Context) {
		if err := j.store.SaveInstance(ctx, in); err != nil {
			j.log.Error("save instance", "instance", in.ID, "err", err)
		}
	})
}

func (j *journal) deleteInstance(id string) {
	j.do(func(ctx context.Context) {
		if err := j.store.DeleteInstance(ctx, id); err != nil {
			j.log.Error("delete instance", "instance", id, "err", err)
		}
	})
}

func (j *journal) event(ev sim.Event) {
	j.do(func(ctx context.Context) {
		if err := j.store.AppendEvent(ctx, ev); err != nil {
			j.log.Error("append event", "kind", ev.Kind, "err", err)
		}
	})
}

func (j *journal) migration(m *sim.Migration) {
	j.do(func(ctx context.Context) {
		if err := j.store.SaveMigration(ctx, m); err != nil {
			j.log.Error("save migration", "migration", m.ID, "err", err)
		}
	})
}

func (j *journal) migrationEvent(id string, ev sim.MigrationEvent) {
	j.do(func(ctx context.Context) {
		if err := j.store.AppendMigrationEvents(ctx, id, []sim.MigrationEvent{ev}); err != nil {
			j.log.Error("append migration event", "migration", id, "err", err)
		}
	})
}

// Flush waits until every op queued before it has been written.
func (j *journal) Flush() {
	if j.store == nil {
		return
	}
	done := make(chan struct{})
	j.mu.RLock()
	if j.closed {
		j.mu.RUnlock()
		return
	}
	j.ops <- func(context.Context) { close(done) }
	j.mu.RUnlock()
	<-done
}

// Close writes what is queued and stops.
func (j *journal) Close() {
	j.mu.Lock()
	if !j.closed {
		j.closed = true
		close(j.ops)
	}
	j.mu.Unlock()
	<-j.done
}
