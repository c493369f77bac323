package jobsocket

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/normsim/normsim/internal/batchq"
	"github.com/normsim/normsim/sim"
)

// RecorderLimits bound what the recorder holds while the store catches up.
// Frames are up to 64 KiB each, so a count alone would let a flood of large
// frames hold a gigabyte; the byte budget counts each record's text.
type RecorderLimits struct {
	Records int
	Bytes   int
}

// DefaultRecorderLimits hold 16,384 records or 16 MiB of frame text.
var DefaultRecorderLimits = RecorderLimits{Records: 16384, Bytes: 16 << 20}

// recordLinger is how long the recorder waits after the first frame of a
// burst before writing: the frames of a handover come in bursts, and a
// relay in flight (read one frame, write the other) finishes in tens of
// microseconds, so the SQLite write does not compete with it for the CPU.
const recordLinger = time.Millisecond

// recordBatch is the most records written in one transaction.
const recordBatch = 256

// Recorder writes frame records to the store in batches, off the relay path:
// Record never blocks, and when the queue is full the record is dropped and
// counted rather than slowing a handover down.
type Recorder struct {
	log     *slog.Logger
	queue   *batchq.Queue[sim.FrameRecord]
	dropped atomic.Int64
}

// NewRecorder starts a recorder bounded by limits.
func NewRecorder(store sim.Store, limits RecorderLimits, log *slog.Logger) *Recorder {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	r := &Recorder{log: log}
	r.queue = batchq.New(batchq.Limits{Items: limits.Records, Size: limits.Bytes}, recordLinger, recordBatch,
		func(batch []sim.FrameRecord) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := store.RecordFrames(ctx, batch); err != nil {
				log.Error("record frames", "err", err, "count", len(batch))
			}
		})
	return r
}

// Record queues a frame record, or drops it when the queue is full.
func (r *Recorder) Record(f sim.FrameRecord) {
	if !r.queue.Add(f, len(f.Data)) && r.dropped.Add(1) == 1 {
		r.log.Warn("frame recorder queue full; dropping frame records from the timeline")
	}
}

// Dropped is how many records were dropped because the queue was full.
func (r *Recorder) Dropped() int64 { return r.dropped.Load() }

// Close writes what is queued and stops.
func (r *Recorder) Close() { r.queue.Close() }
