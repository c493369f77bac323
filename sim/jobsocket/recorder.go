package jobsocket

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/normsim/normsim/sim"
)

// Recorder writes frame records to the store in batches, off the relay path:
// Record never blocks, and when the queue is full the record is dropped and
// counted rather than slowing a handover down.
type Recorder struct {
	store   sim.Store
	log     *slog.Logger
	queue   chan sim.FrameRecord
	dropped atomic.Int64
	done    chan struct{}
	once    sync.Once
}

// NewRecorder starts a recorder with a queue of size records.
func NewRecorder(store sim.Store, size int, log *slog.Logger) *Recorder {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	r := &Recorder{store: store, log: log, queue: make(chan sim.FrameRecord, size), done: make(chan struct{})}
	go r.loop()
	return r
}

// Record queues a frame record.
func (r *Recorder) Record(f sim.FrameRecord) {
	select {
	case r.queue <- f:
	default:
		if r.dropped.Add(1) == 1 {
			r.log.Warn("frame recorder queue full; dropping frame records from the timeline")
		}
	}
}

// Dropped is how many records were dropped because the queue was full.
func (r *Recorder) Dropped() int64 { return r.dropped.Load() }

// Close flushes what is queued and stops.
func (r *Recorder) Close() {
	r.once.Do(func() { close(r.queue) })
	<-r.done
}

func (r *Recorder) loop() {
	defer close(r.done)
	batch := make([]sim.FrameRecord, 0, 256)
	flush := func() {
		if len(batch) == 0 {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if err := r.store.RecordFrames(ctx, batch); err != nil {
			r.log.Error("record frames", "err", err, "count", len(batch))
		}
		cancel()
		batch = batch[:0]
	}
	for f := range r.queue {
		batch = append(batch, f)
		// Take whatever else is already queued, then write it in one go.
	more:
		for len(batch) < cap(batch) {
			select {
			case f, ok := <-r.queue:
				if !ok {
					break more
				}
				batch = append(batch, f)
			default:
				break more
			}
		}
		flush()
	}
	flush()
}
