package jobsocket

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

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
	store  sim.Store
	log    *slog.Logger
	limits RecorderLimits

	mu      sync.Mutex
	pending []sim.FrameRecord
	bytes   int // frame text held in pending
	closed  bool
	wake    chan struct{} // capacity 1: there is something to write, or closed

	dropped atomic.Int64
	done    chan struct{}
}

// NewRecorder starts a recorder bounded by limits.
func NewRecorder(store sim.Store, limits RecorderLimits, log *slog.Logger) *Recorder {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	r := &Recorder{store: store, log: log, limits: limits, wake: make(chan struct{}, 1), done: make(chan struct{})}
	go r.loop()
	return r
}

// Record queues a frame record, or drops it when the queue is full.
func (r *Recorder) Record(f sim.FrameRecord) {
	r.mu.Lock()
	if r.closed || len(r.pending) >= r.limits.Records || r.bytes+len(f.Data) > r.limits.Bytes {
		r.mu.Unlock()
		if r.dropped.Add(1) == 1 {
			r.log.Warn("frame recorder queue full; dropping frame records from the timeline")
		}
		return
	}
	r.pending = append(r.pending, f)
	r.bytes += len(f.Data)
	r.mu.Unlock()
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// Dropped is how many records were dropped because the queue was full.
func (r *Recorder) Dropped() int64 { return r.dropped.Load() }

// Close writes what is queued and stops.
func (r *Recorder) Close() {
	r.mu.Lock()
	if !r.closed {
		r.closed = true
		select {
		case r.wake <- struct{}{}:
		default:
		}
	}
	r.mu.Unlock()
	<-r.done
}

func (r *Recorder) loop() {
	defer close(r.done)
	var spare []sim.FrameRecord
	for range r.wake {
		r.mu.Lock()
		closed := r.closed
		r.mu.Unlock()
		if !closed {
			time.Sleep(recordLinger)
		}
		r.mu.Lock()
		batch := r.pending
		r.pending, r.bytes = spare, 0
		closed = r.closed
		r.mu.Unlock()
		for rest := batch; len(rest) > 0; {
			n := min(len(rest), recordBatch)
			r.write(rest[:n])
			rest = rest[n:]
		}
		clear(batch) // let go of the frame text
		spare = batch[:0]
		if closed {
			return
		}
	}
}

func (r *Recorder) write(batch []sim.FrameRecord) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := r.store.RecordFrames(ctx, batch); err != nil {
		r.log.Error("record frames", "err", err, "count", len(batch))
	}
}
