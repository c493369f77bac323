package e2e_test

import (
	"strings"
	"testing"
	"time"

	"github.com/normsim/normsim/internal/testjob"
	"github.com/normsim/normsim/normsimtest"
	"github.com/normsim/normsim/protocol"
	"github.com/normsim/normsim/sim"
)

// Issue 34 round 13, A-F2: a target-ready sent right at its deadline was
// in the target's frame records and, in 2-4 runs of 30, nowhere on the
// migration's timeline: the listener read it as the rollback removed the
// target, and the manager, finding the instance gone, let its news go.
// Every frame a target sent is on the timeline now, relayed, late or
// discarded, whichever side of the deadline it fell.
func TestATargetReadyAtItsDeadlineIsOnTheTimeline(t *testing.T) {
	runs := 20
	if testing.Short() {
		runs = 4
	}
	const deadline = 150 * time.Millisecond
	s := startSim(t, normsimtest.Options{})
	for i := range runs {
		src, sj := launchExternal(t, s, "a")
		m, err := s.Migrate(src.ID, sim.MigrateRequest{Strategy: string(sim.Handover),
			Timeouts: sim.Timeouts{TargetReady: sim.Duration(deadline), Stop: sim.Duration(100 * time.Millisecond)}})
		if err != nil {
			t.Fatal(err)
		}
		sj.Expect(protocol.TypeGetState)
		sj.Send(protocol.JobFrame{Type: protocol.TypeState})
		tgtID, env := targetEnv(t, s, m.ID)
		tj := testjob.Dial(t, env)
		tj.Expect(protocol.TypeInitialState)
		// Around the deadline: from 4 ms before it to 4 ms after.
		time.Sleep(deadline + time.Duration(i%9-4)*time.Millisecond)
		tj.Send(protocol.JobFrame{Type: protocol.TypeTargetReady})
		done := s.WaitMigration(t, m.ID, 30*time.Second)
		var frames []sim.FrameRecord
		if err := s.Do("GET", "/api/v1/instances/"+tgtID+"/frames?tail=100", nil, &frames); err != nil {
			t.Fatal(err)
		}
		recorded := false
		for _, f := range frames {
			recorded = recorded || f.Direction == "in" && f.Type == protocol.TypeTargetReady
		}
		onTimeline := func(m *sim.Migration) bool {
			for _, ev := range m.Events {
				if ev.Side == "target" && (ev.Frame != nil && ev.Frame.Type == protocol.TypeTargetReady ||
					strings.Contains(ev.Detail, protocol.TypeTargetReady)) {
					return true
				}
			}
			return false
		}
		// A frame read as the target was being removed is discarded, and
		// said on the ended migration's timeline a moment after its end
		// (late answers and discarded frames are noted there): look again
		// for a second before calling it lost.
		for wait := time.Now().Add(time.Second); recorded && !onTimeline(done) && time.Now().Before(wait); time.Sleep(20 * time.Millisecond) {
			if err := s.Do("GET", "/api/v1/migrations/"+m.ID, nil, done); err != nil {
				t.Fatal(err)
			}
		}
		if recorded && !onTimeline(done) {
			t.Fatalf("run %d of %d: the target's target-ready is in its frame records and not on the timeline (%s: %s)\n%s",
				i+1, runs, done.State, done.Reason, normsimtest.Timeline(done))
		}
		tj.Conn().CloseNow()
		sj.Conn().CloseNow()
	}
}
