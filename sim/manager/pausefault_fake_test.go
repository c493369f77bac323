package manager_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/normsim/normsim/protocol"
	"github.com/normsim/normsim/sim"
)

// TestAPauseIsBoundedByItsPhaseTimeout: a pause's delay, like a held
// frame's, is at most twice the timeout of the phase of the frame it is
// armed on; more (a black-box attack asked for 1000h) is refused as the
// migration is asked for, naming the field, the bound and the fix. One
// within it, and one with no delay (its 1s default) however short the
// timeouts, are accepted.
func TestAPauseIsBoundedByItsPhaseTimeout(t *testing.T) {
	kill := sim.Fault{Kind: "kill", Side: "target", On: protocol.TypeTargetReady}
	for _, tc := range []struct {
		faults []sim.Fault
		to     sim.Timeouts
		want   []string // "" when accepted
	}{
		{[]sim.Fault{{Kind: "pause", Side: "source", On: protocol.TypeGetState, Delay: sim.Duration(1000 * time.Hour)}},
			sim.Timeouts{State: sim.Duration(2 * time.Second)},
			[]string{"faults[0].delay: 1000h0m0s is longer than twice the state timeout (2s) of the phase get-state belongs to",
				"at most 4s", "raise timeouts.state"}},
		{[]sim.Fault{kill, {Kind: "pause", Side: "target", On: protocol.TypeHello, Delay: sim.Duration(121 * time.Second)}},
			sim.Timeouts{},
			[]string{"faults[1].delay: 2m1s is longer than twice the targetStart timeout (1m0s)", "at most 2m0s", "raise timeouts.targetStart"}},
		{[]sim.Fault{{Kind: "pause", Side: "source", On: protocol.TypeGetState, Delay: sim.Duration(4 * time.Second)}},
			sim.Timeouts{State: sim.Duration(2 * time.Second)}, nil},
		{[]sim.Fault{{Kind: "pause", Side: "source", On: protocol.TypeGetState}},
			sim.Timeouts{State: sim.Duration(100 * time.Millisecond)}, nil},
	} {
		s := newFakeSimRuntime(t)
		mig, err := s.mgr.Migrate(context.Background(), s.in.ID, sim.MigrateRequest{To: "b", Strategy: string(sim.Handover),
			Timeouts: tc.to, Faults: tc.faults})
		if tc.want == nil {
			if err != nil {
				t.Errorf("%+v: refused: %v", tc.faults, err)
				continue
			}
			_, _ = s.mgr.AbortMigration(context.Background(), mig.ID, "the test is done")
			s.await(t, mig.ID)
			continue
		}
		if err == nil {
			t.Errorf("%+v: accepted, want 422", tc.faults)
			_, _ = s.mgr.AbortMigration(context.Background(), mig.ID, "the test is done")
			s.await(t, mig.ID)
			continue
		}
		if code := sim.ErrorCode(err); code != sim.EUnprocessable {
			t.Errorf("%+v: code %s, want %s (%v)", tc.faults, code, sim.EUnprocessable, err)
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%+v: %q does not say %q", tc.faults, err, w)
			}
		}
	}
}

// TestTheEndOfAMigrationResumesWhatItsPauseHolds: a migration aborted
// while its pause fault holds a job resumes that job as it ends, before
// the end is visible, and says so on the timeline: the record's "left
// running" is then true. The pause's own resume, due long after, sends no
// second SIGCONT, even as normsim stops.
func TestTheEndOfAMigrationResumesWhatItsPauseHolds(t *testing.T) {
	for _, tc := range []struct {
		fault sim.Fault
		// target says the paused job is the target, which the rollback
		// removes: resumed first, it exits on SIGTERM instead of being
		// killed after the stop grace.
		target bool
	}{
		{sim.Fault{Kind: "pause", Side: "source", On: protocol.TypeGetState, Delay: sim.Duration(20 * time.Second)}, false},
		{sim.Fault{Kind: "pause", Side: "target", On: protocol.TypeHello, Delay: sim.Duration(2 * time.Minute)}, true},
	} {
		t.Run(tc.fault.Side, func(t *testing.T) {
			t.Parallel()
			var s *fakeSim
			var paused string
			// Registered first, so run last: after the manager closed and
			// every pause's own resume has had its turn.
			t.Cleanup(func() {
				if s != nil && paused != "" && s.rt.signalled(paused, syscall.SIGCONT) != 1 {
					t.Errorf("the %s got SIGCONT %d times, want once", tc.fault.Side, s.rt.signalled(paused, syscall.SIGCONT))
				}
			})
			s = newFakeSimRuntime(t)
			mig, err := s.mgr.Migrate(context.Background(), s.in.ID, sim.MigrateRequest{To: "b", Strategy: string(sim.Handover),
				Faults: []sim.Fault{tc.fault}})
			if err != nil {
				t.Fatal(err)
			}
			s.playUntilEnd(t, mig.ID)
			m := s.awaitEvent(t, mig.ID, "paused for ")
			paused = m.Source.Instance
			if tc.target {
				paused = m.Target.Instance
			}
			if !s.rt.paused(paused) {
				t.Fatalf("the %s is not paused after %q", tc.fault.Side, "paused for")
			}
			if _, err := s.mgr.AbortMigration(context.Background(), mig.ID, "the user gave up"); err != nil {
				t.Fatal(err)
			}
			m = s.await(t, mig.ID)
			if m.State != sim.MigrationAborted {
				t.Fatalf("ended %s (%s), want aborted by the user:\n%s", m.State, m.Reason, timeline(m))
			}
			if s.rt.paused(paused) {
				t.Errorf("the %s is still paused after its migration ended:\n%s", tc.fault.Side, timeline(m))
			}
			resumed := "resumed: the migration ended while its pause fault held the " + tc.fault.Side
			i := slices.IndexFunc(m.Events, func(ev sim.MigrationEvent) bool { return ev.Detail == resumed })
			end := slices.IndexFunc(m.Events, func(ev sim.MigrationEvent) bool { return ev.Kind == sim.TimelineEnded })
			if i < 0 || i > end || m.Events[i].Side != tc.fault.Side {
				t.Errorf("no %q by the %s before the end on the timeline:\n%s", resumed, tc.fault.Side, timeline(m))
			}
			if rb := m.Rollback; rb == nil || rb.Source != sim.SourceRunning {
				t.Errorf("rollback %+v, want the source left running", rb)
			} else if tc.target && rb.Target != sim.TargetExited {
				t.Errorf("the paused target was %s (%s), want it resumed and exited on SIGTERM", rb.Target, rb.TargetDetail)
			}
		})
	}
}

// awaitEvent is the migration once its timeline has an event whose detail
// begins with prefix; the test fails if it ends first.
func (s *fakeSim) awaitEvent(t *testing.T, id, prefix string) *sim.Migration {
	t.Helper()
	return s.awaitUntil(t, id, fmt.Sprintf("%q", prefix), func(m *sim.Migration) bool {
		return slices.ContainsFunc(m.Events, func(ev sim.MigrationEvent) bool { return strings.HasPrefix(ev.Detail, prefix) })
	})
}

// playUntilEnd plays a well-behaved source and target (as
// playWellBehaved does) without waiting for the end; they stop as the
// test does.
func (s *fakeSim) playUntilEnd(t *testing.T, id string) {
	ctx, cancel := context.WithCancel(context.Background())
	src := play(ctx, s.src, func(wf protocol.WorkerFrame) *protocol.JobFrame {
		if wf.Type == protocol.TypeGetState {
			return &protocol.JobFrame{Type: protocol.TypeState, Payload: json.RawMessage(`{"n":1}`)}
		}
		return nil
	})
	tgt := make(chan *player, 1)
	go func() {
		select {
		case reg := <-s.b.registered:
			if s.targetCanDial(ctx, id, reg.Role) {
				tgt <- play(ctx, s.b.connect(reg.JobID, reg.Role), func(wf protocol.WorkerFrame) *protocol.JobFrame {
					if wf.Type == protocol.TypeInitialState {
						return &protocol.JobFrame{Type: protocol.TypeTargetReady}
					}
					return nil
				})
				return
			}
		case <-ctx.Done():
		}
		tgt <- nil
	}()
	t.Cleanup(func() {
		cancel()
		<-src.done
		if p := <-tgt; p != nil {
			<-p.done
		}
	})
}
