package jobsocket

import (
	"context"
	"log/slog"
	"strings"
	"sync"
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
	// Wait is the most a connection waits in Throttle for the store to
	// catch up before it reads on; 0 is DefaultRecordWait.
	Wait time.Duration
}

// DefaultRecorderLimits hold 16,384 records or 16 MiB of frame text.
var DefaultRecorderLimits = RecorderLimits{Records: 16384, Bytes: 16 << 20}

// DefaultRecordWait is long enough to ride out any burst the store can
// write, and short of a store that hangs.
const DefaultRecordWait = 10 * time.Second

// fairShare is how many of its records a connection may have waiting for
// the store before Throttle slows it: a job saying one frame per phase is
// never slowed for the records of a job that floods.
const fairShare = 8

// recordLinger is how long the recorder waits after the first frame of a
// burst before writing: the frames of a handover come in bursts, and a
// relay in flight (read one frame, write the other) finishes in tens of
// microseconds, so the SQLite write does not compete with it for the CPU.
const recordLinger = time.Millisecond

// recordBatch is the most records written in one transaction.
const recordBatch = 256

// recordTries is how often a batch is tried, 10 s each, before it is lost.
const recordTries = 5

// Recorder writes frame records to the store in batches, off the relay path.
// Record never blocks and never drops a record while the recorder is open:
// a record past the queue's limits is kept all the same. The back-pressure
// is Throttle, which a connection's read loop calls before it reads the
// next frame: while the queue is full and that connection has more than
// its fair share of records waiting, it waits for the store (up to
// RecorderLimits.Wait), which slows the job that floods and no other. So
// the frame that was read is delivered at once (a migration never waits on
// the store for it, and no phase times out because normsim was slow to
// record), and the queue exceeds its limits by at most a fair share per
// connection.
type Recorder struct {
	log   *slog.Logger
	wait  time.Duration
	queue *batchq.Queue[sim.FrameRecord]

	mu      sync.Mutex
	pending map[connKey]int // records queued, by connection
	// lost counts the records lost, by instance (LostOf): an instance
	// without any would look as if its job never spoke.
	lost map[instanceKey]int64
	// secrets are the job-socket tokens of each job's instances, on any
	// node, kept out of every record of the job: a source may quote its
	// token in the state its target is handed, a target in the payload
	// relayed to the source, and the record of either side must not
	// carry it (attack round 15, A-F6).
	secrets map[string]*jobSecrets

	dropped   atomic.Int64
	throttled atomic.Int64
	waitedOut atomic.Int64
	retried   atomic.Int64
}

// connKey names a connection's records.
type connKey struct{ node, jobID, role string }

// instanceKey names an instance's records, on whichever node.
type instanceKey struct{ jobID, role string }

func keyOf(f *sim.FrameRecord) connKey { return connKey{f.Node, f.JobID, f.Role} }

// NewRecorder starts a recorder bounded by limits.
func NewRecorder(store sim.Store, limits RecorderLimits, log *slog.Logger) *Recorder {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	r := &Recorder{log: log, wait: limits.Wait, pending: map[connKey]int{}, lost: map[instanceKey]int64{}, secrets: map[string]*jobSecrets{}}
	if r.wait <= 0 {
		r.wait = DefaultRecordWait
	}
	r.queue = batchq.New(batchq.Limits{Items: limits.Records, Size: limits.Bytes}, recordLinger, recordBatch,
		func(batch []sim.FrameRecord) {
			// A store busy with the journal for longer than a write's
			// deadline is behind, not broken: the batch is tried again
			// (the queue meanwhile slows the flooders) and only given up,
			// and counted, after recordTries.
			for try := 1; ; try++ {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				err := store.RecordFrames(ctx, batch)
				cancel()
				if err == nil {
					break
				}
				if try == recordTries {
					// Counted with the lost: a frame missing from a job's
					// history, however it went missing.
					if r.dropped.Add(int64(len(batch))) == int64(len(batch)) {
						log.Error("record frames: the store refused them; frame records are lost, and counted", "err", err, "count", len(batch), "tries", try)
					}
					r.mu.Lock()
					for i := range batch {
						r.lost[instanceKey{batch[i].JobID, batch[i].Role}]++
					}
					r.mu.Unlock()
					break
				}
				if r.retried.Add(1) == 1 {
					log.Warn("record frames: the store did not take a batch in time; trying again", "err", err)
				}
			}
			r.mu.Lock()
			for i := range batch {
				k := keyOf(&batch[i])
				if r.pending[k]--; r.pending[k] <= 0 {
					delete(r.pending, k)
				}
			}
			r.mu.Unlock()
		})
	return r
}

// jobSecrets are one job's tokens: its registered instances' (live), and
// the last few of those that went while another stayed (former), as a
// target handed its source's state may echo the source's token after the
// source is gone. all is both, made again as they change (rarely) and
// never changed in place, so a record reads it without a copy.
type jobSecrets struct {
	live   map[string]string // role → token
	former []string
	all    []string
}

func (s *jobSecrets) remake() {
	all := make([]string, 0, len(s.live)+len(s.former))
	for _, t := range s.live {
		all = append(all, t)
	}
	s.all = append(all, s.former...)
}

// formerSecrets bounds the tokens kept of a job's instances that are gone.
const formerSecrets = 4

// Know adds an instance's token to those kept out of its job's records.
func (r *Recorder) Know(jobID, role, token string) {
	if token == "" {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.secrets[jobID]
	if s == nil {
		s = &jobSecrets{live: map[string]string{}}
		r.secrets[jobID] = s
	}
	s.live[role] = token
	s.remake()
}

// Forget is Know undone as the instance is unregistered: its token is
// still kept out of its job's records while the job has another
// instance, and forgotten with the job's last.
func (r *Recorder) Forget(jobID, role string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.secrets[jobID]
	if s == nil {
		return
	}
	token, ok := s.live[role]
	if !ok {
		return
	}
	delete(s.live, role)
	if len(s.live) == 0 {
		delete(r.secrets, jobID)
		return
	}
	s.former = append(s.former, token)
	if len(s.former) > formerSecrets {
		s.former = s.former[len(s.former)-formerSecrets:]
	}
	s.remake()
}

// Record queues a frame record, with its job's tokens redacted; it never
// waits. Only a recorder that was closed loses the record, counted.
func (r *Recorder) Record(f sim.FrameRecord) {
	k := keyOf(&f)
	r.mu.Lock()
	var tokens []string
	if s := r.secrets[f.JobID]; s != nil {
		tokens = s.all
	}
	r.pending[k]++
	r.mu.Unlock()
	for _, t := range tokens {
		if strings.Contains(f.Data, t) {
			f.Data = strings.ReplaceAll(f.Data, t, "<redacted>")
		}
	}
	if r.queue.AddOver(f, len(f.Data)) {
		return
	}
	r.mu.Lock()
	if r.pending[k]--; r.pending[k] <= 0 {
		delete(r.pending, k)
	}
	r.lost[instanceKey{f.JobID, f.Role}]++
	r.mu.Unlock()
	r.dropped.Add(1)
}

// Throttle is the back-pressure on the connection of node, jobID and role:
// while the queue is full and the connection has more than its fair share
// of records waiting, it waits for the store to catch up, up to the
// recorder's wait.
func (r *Recorder) Throttle(node, jobID, role string) {
	k := connKey{node, jobID, role}
	var deadline *time.Timer
	for {
		full, room := r.queue.Full()
		if !full {
			return
		}
		r.mu.Lock()
		mine := r.pending[k]
		r.mu.Unlock()
		if mine <= fairShare {
			return
		}
		if deadline == nil {
			if r.throttled.Add(1) == 1 {
				r.log.Info("frame recorder queue full; connections with many frames waiting for the store are slowed until it catches up")
			}
			deadline = time.NewTimer(r.wait)
			defer deadline.Stop()
		}
		r.queue.Hurry() // a full queue has nothing to linger for
		select {
		case <-room:
		case <-deadline.C:
			if r.waitedOut.Add(1) == 1 {
				r.log.Warn("frame recorder: the store has not caught up for " + r.wait.String() + "; a connection reads on, its records still queued")
			}
			return
		}
	}
}

// Dropped is how many records were lost: recorded after Close, or refused
// by the store.
func (r *Recorder) Dropped() int64 { return r.dropped.Load() }

// LostOf is how many of the records of the instance role of job jobID
// were lost (Dropped counts them all).
func (r *Recorder) LostOf(jobID, role string) int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lost[instanceKey{jobID, role}]
}

// Throttled is how many times a connection waited in Throttle for the store.
func (r *Recorder) Throttled() int64 { return r.throttled.Load() }

// Close writes what is queued and stops.
func (r *Recorder) Close() { r.queue.Close() }
