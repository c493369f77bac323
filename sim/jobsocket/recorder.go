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
	// Wait is the most a frame's connection waits for room in a full
	// queue before its record is given up (and counted); 0 is
	// DefaultRecordWait.
	Wait time.Duration
}

// DefaultRecorderLimits hold 16,384 records or 16 MiB of frame text.
var DefaultRecorderLimits = RecorderLimits{Records: 16384, Bytes: 16 << 20}

// DefaultRecordWait is long enough to ride out any burst the store can
// write, and short of a store that hangs.
const DefaultRecordWait = 10 * time.Second

// recordLinger is how long the recorder waits after the first frame of a
// burst before writing: the frames of a handover come in bursts, and a
// relay in flight (read one frame, write the other) finishes in tens of
// microseconds, so the SQLite write does not compete with it for the CPU.
const recordLinger = time.Millisecond

// recordBatch is the most records written in one transaction.
const recordBatch = 256

// Recorder writes frame records to the store in batches, off the relay path.
// While its queue has room, Record never blocks; when the store falls
// behind and the queue is full, Record waits for room, which slows the
// connection whose frame it is (back-pressure), rather than drop a record
// of what the job said. Only a store stuck for RecorderLimits.Wait loses
// records, and those are counted.
type Recorder struct {
	log       *slog.Logger
	wait      time.Duration
	queue     *batchq.Queue[sim.FrameRecord]
	dropped   atomic.Int64
	throttled atomic.Int64
}

// NewRecorder starts a recorder bounded by limits.
func NewRecorder(store sim.Store, limits RecorderLimits, log *slog.Logger) *Recorder {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	r := &Recorder{log: log, wait: limits.Wait}
	if r.wait <= 0 {
		r.wait = DefaultRecordWait
	}
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

// Record queues a frame record. When the queue is full it waits for room
// (up to RecorderLimits.Wait), and only then drops the record, counted.
func (r *Recorder) Record(f sim.FrameRecord) {
	if r.queue.Add(f, len(f.Data)) {
		return
	}
	if r.throttled.Add(1) == 1 {
		r.log.Info("frame recorder queue full; the connections whose frames wait are slowed until the store catches up")
	}
	if !r.queue.AddWait(f, len(f.Data), r.wait) && r.dropped.Add(1) == 1 {
		r.log.Error("frame recorder: the store has not caught up for " + r.wait.String() + "; frame records are lost, and counted")
	}
}

// Dropped is how many records were lost: the queue stayed full for
// RecorderLimits.Wait, or the recorder was closed.
func (r *Recorder) Dropped() int64 { return r.dropped.Load() }

// Throttled is how many records waited for room: each slowed the
// connection it was recorded on.
func (r *Recorder) Throttled() int64 { return r.throttled.Load() }

// Close writes what is queued and stops.
func (r *Recorder) Close() { r.queue.Close() }
