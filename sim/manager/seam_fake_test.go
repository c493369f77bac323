package manager_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/normsim/normsim/protocol"
	"github.com/normsim/normsim/sim"
)

// fakeOutput is the output sink in memory: the test sends each packet as
// the job would, stamped as it arrives.
type fakeOutput struct {
	mu       sync.Mutex
	pkts     []sim.Packet
	watchers map[chan struct{}]bool
}

var _ sim.OutputSink = (*fakeOutput)(nil)

func newFakeOutput() *fakeOutput { return &fakeOutput{watchers: map[chan struct{}]bool{}} }

func (o *fakeOutput) send(jobID, instance string, seq int64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.pkts = append(o.pkts, sim.Packet{At: time.Now(), JobID: jobID, Instance: instance, Seq: seq})
	for w := range o.watchers {
		select {
		case w <- struct{}{}:
		default:
		}
	}
}

func (o *fakeOutput) Packets(jobID string, since time.Time) []sim.Packet {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []sim.Packet
	for _, p := range o.pkts {
		if p.JobID == jobID && !p.At.Before(since) {
			out = append(out, p)
		}
	}
	return out
}

func (o *fakeOutput) Sent(jobID string) sim.SentRanges {
	o.mu.Lock()
	defer o.mu.Unlock()
	seqs := map[string][]int64{}
	for _, p := range o.pkts {
		if p.JobID == jobID {
			seqs[p.Instance] = append(seqs[p.Instance], p.Seq)
		}
	}
	sent := sim.SentRanges{ByInstance: map[string][]sim.SeqRange{}}
	for in, ss := range seqs {
		slices.Sort(ss)
		var rs []sim.SeqRange
		for _, n := range slices.Compact(ss) {
			if len(rs) > 0 && rs[len(rs)-1].To+1 == n {
				rs[len(rs)-1].To = n
				continue
			}
			rs = append(rs, sim.SeqRange{From: n, To: n})
		}
		sent.ByInstance[in] = rs
	}
	return sent
}

func (o *fakeOutput) Seen(jobID string) bool { return len(o.Packets(jobID, time.Time{})) > 0 }

func (o *fakeOutput) Watch(string) (<-chan struct{}, func()) {
	w := make(chan struct{}, 1)
	o.mu.Lock()
	o.watchers[w] = true
	o.mu.Unlock()
	return w, func() {
		o.mu.Lock()
		delete(o.watchers, w)
		o.mu.Unlock()
	}
}

func (o *fakeOutput) Unreadable(string, time.Time) *sim.UnreadablePackets { return nil }
func (o *fakeOutput) Forget(string)                                       {}

// TestASourceThatKeepsProducingIsCaughtHoweverFastTheTargetStarts: a
// source that goes on producing after its source-stopped-output fails the
// handover with the source at fault, even when the migration ends at once
// (the worker aborts on target-applied, conform's case 7.9) and the
// target's first packets come with it: the seam is judged only once a
// source's packets after the frame can no longer be ones that were in
// flight. Before, a verdict taken within sim.InFlight of the frame
// forgave the source and blamed the target for the numbers it repeated.
func TestASourceThatKeepsProducingIsCaughtHoweverFastTheTargetStarts(t *testing.T) {
	for _, tc := range []struct {
		name   string
		faults []sim.Fault
		state  sim.MigrationState
	}{
		{"completed", nil, sim.MigrationCompleted},
		{"the worker aborts on target-applied", []sim.Fault{{Kind: "worker-abort", On: protocol.TypeTargetApplied}}, sim.MigrationFailed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s, out, id := handoverAfter(t, 41, tc.faults...)
			tgt := toTargetReady(t, s, id)
			stopSource(t, s, 41)
			// The source says it stopped at 41 and goes on: 42, 43, …
			// every 10 ms.
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			out.send(s.in.JobID, s.in.ID, 42)
			produce(ctx, out, s.in.JobID, s.in.ID, 43, nil)
			// The target produces once told to apply, as it must.
			tgt.expect(protocol.TypeCutoverApply)
			for n := int64(42); n <= 44; n++ {
				out.send(s.in.JobID, tgt.role, n)
			}
			tgt.send(protocol.JobFrame{Type: protocol.TypeTargetApplied, Applied: []string{"video"}})
			m := s.await(t, id)
			if m.State != tc.state {
				t.Errorf("ended %s (%s), want %s", m.State, m.Reason, tc.state)
			}
			o := m.Output
			if o == nil || o.SourceAfterStop == 0 || o.AtFault != "source" {
				t.Fatalf("output %+v, want the source's packets after source-stopped-output counted against it", o)
			}
			j := m.Judged()
			if j.Grade != sim.GradeFail || !strings.Contains(j.Why, "after source-stopped-output") {
				t.Errorf("judged %s: %s; want fail for the source's output after it stopped", j.Grade, j.Why)
			}
		})
	}
}

// TestASourcePacketInFlightIsForgiven: the source's last packet, sent just
// before its source-stopped-output but stamped just after it, is no fault:
// the seam is seamless and nobody is blamed.
func TestASourcePacketInFlightIsForgiven(t *testing.T) {
	s, out, id := handoverAfter(t, 40)
	tgt := toTargetReady(t, s, id)
	stopSource(t, s, 41)
	out.send(s.in.JobID, s.in.ID, 41) // in flight: 41 is within the position handed over
	applied(t, tgt, 41)
	for n := int64(42); n <= 44; n++ {
		out.send(s.in.JobID, tgt.role, n)
	}
	m := s.await(t, id)
	if o := m.Output; o == nil || o.Verdict != sim.VerdictSeamless || o.AtFault != "" {
		t.Fatalf("output %+v, want seamless with nobody at fault", o)
	}
}

// TestAnExternalTargetThatIgnoresAbortIsCaught: on the external runtime
// normsim only closes a removed target's socket, so a target that ignores
// the abort it was told goes on producing after the migration's end. Its
// packets after the abort are watched for, counted and held against it,
// and the record says how long normsim watched: before, the count ran the
// moment the socket closed and the rollback was judged pass.
func TestAnExternalTargetThatIgnoresAbortIsCaught(t *testing.T) {
	t.Parallel()
	s, out, id := handoverAfter(t, 41)
	tgt := toInitialState(t, s, id)
	// The target ignores the abort and produces every 10 ms, whatever it
	// is told, until the test ends.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	produce(ctx, out, s.in.JobID, tgt.role, 100, nil)
	if _, err := s.mgr.AbortMigration(context.Background(), id, "the test says no"); err != nil {
		t.Fatal(err)
	}
	m := s.await(t, id)
	if m.State != sim.MigrationAborted {
		t.Fatalf("ended %s (%s), want aborted", m.State, m.Reason)
	}
	o := m.Output
	if o == nil || o.TargetAfterAbort == 0 || o.AtFault != "target" || !strings.Contains(o.Detail, "watched until") {
		t.Fatalf("output %+v, want the target's packets after its abort counted against it, saying how long they were watched", o)
	}
	if j := m.Judged(); j.Grade != sim.GradeFail || j.AtFault != "target" {
		t.Errorf("judged %s at fault %q: %s; want fail, the target", j.Grade, j.AtFault, j.Why)
	}
}

// TestAnExternalSourceThatDrainsIsInTheOverlap: on the external runtime an
// overlap's source is told to stop only by its socket's close, and a job
// that drains its pipeline produces a while longer. Those packets are the
// overlap's too: they are waited for, and the record says how long.
func TestAnExternalSourceThatDrainsIsInTheOverlap(t *testing.T) {
	t.Parallel()
	out := newFakeOutput()
	s := buildFakeSimOf(t, "relay-overlap", out, false)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	// The source produces every 10 ms until 150 ms after its socket was
	// closed.
	var until time.Time
	produce(ctx, out, s.in.JobID, s.in.ID, 1, func() bool {
		if until.IsZero() && !s.a.Connected(s.in.JobID, s.in.ID) {
			until = time.Now().Add(150 * time.Millisecond)
		}
		return until.IsZero() || time.Now().Before(until)
	})
	time.Sleep(50 * time.Millisecond)
	mig, err := s.mgr.Migrate(ctx, s.in.ID, sim.MigrateRequest{To: "b", Strategy: string(sim.Overlap)})
	if err != nil {
		t.Fatal(err)
	}
	reg := s.b.registeredTarget()
	s.awaitTargetEnv(t, mig.ID, reg.Role)
	s.b.connect(reg.JobID, reg.Role)
	produce(ctx, out, s.in.JobID, reg.Role, 1000, nil)
	m := s.await(t, mig.ID)
	if m.State != sim.MigrationCompleted {
		t.Fatalf("ended %s (%s)\n%s", m.State, m.Reason, sim.FormatTimeline(m))
	}
	o := m.Output
	if o == nil || o.OverlapMs == nil || *o.OverlapMs < 100 || !strings.Contains(o.Detail, "watched until") {
		t.Fatalf("output %+v, want an overlap of the 150 ms the source drained, saying how long it was watched", o)
	}
}

// produce sends the instance's packets, numbered from n, every 10 ms
// while more says so (nil: always), until ctx ends.
func produce(ctx context.Context, out *fakeOutput, jobID, instance string, n int64, more func() bool) {
	go func() {
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for ; ; n++ {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				if more == nil || more() {
					out.send(jobID, instance, n)
				}
			}
		}
	}()
}

// handoverAfter is a fake sim whose source has sent 1..last, and the
// handover of it begun.
func handoverAfter(t *testing.T, last int64, faults ...sim.Fault) (*fakeSim, *fakeOutput, string) {
	t.Helper()
	out := newFakeOutput()
	s := newFakeSimWith(t, out)
	for n := int64(1); n <= last; n++ {
		out.send(s.in.JobID, s.in.ID, n)
	}
	mig, err := s.mgr.Migrate(context.Background(), s.in.ID, sim.MigrateRequest{To: "b", Strategy: string(sim.Handover), Faults: faults})
	if err != nil {
		t.Fatal(err)
	}
	return s, out, mig.ID
}
