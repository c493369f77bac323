package cli

import (
	"strings"
	"testing"
	"time"

	"github.com/normsim/normsim/sim"
)

// The external countdown and the source's goodbye follow the timeline's
// kinds, not its wording: reworded details change nothing, and a detail
// that reads like the moment without its kind moves nothing.
func TestExternalWatchFollowsTimelineKinds(t *testing.T) {
	start := time.Unix(1000, 0)
	mig := &sim.Migration{ID: "mig-1", Strategy: sim.Handover, State: sim.MigrationRunning, StartedAt: start,
		Source:   sim.MigrationEndpoint{Instance: "a-1", Node: "a", Runtime: sim.RuntimeExternal},
		Target:   sim.MigrationEndpoint{Instance: "b-1", Node: "b", Runtime: sim.RuntimeExternal, Env: map[string]map[string]string{"job": {"K": "v"}}},
		Timeouts: sim.Timeouts{TargetStart: sim.Duration(time.Minute), TargetReady: sim.Duration(time.Minute)},
		Events: []sim.MigrationEvent{
			{Seq: 1, At: start, Side: "target", Detail: "target b-1 created on node b (external runtime)"}, // no kind: not the moment
			{Seq: 2, At: start.Add(10 * time.Second), Side: "target", Kind: sim.TimelineTargetCreated, Detail: "placed b-1"},
		}}
	var out strings.Builder
	w := newExternalWatch(&out)
	w.tick(mig, start.Add(20*time.Second))
	if !w.placedAt.Equal(start.Add(10 * time.Second)) {
		t.Fatalf("placed at %v, want the target-created event's time", w.placedAt)
	}
	if !strings.Contains(out.String(), "waiting for your target job to connect: 50s left") {
		t.Fatalf("no countdown from the target-created event:\n%s", out.String())
	}
	mig.Events = append(mig.Events,
		sim.MigrationEvent{Seq: 3, At: start.Add(21 * time.Second), Side: "target", Detail: "connected (hello accepted)"},
		sim.MigrationEvent{Seq: 4, At: start.Add(22 * time.Second), Side: "source", Kind: sim.TimelineConnected, Detail: "hello"})
	w.tick(mig, start.Add(25*time.Second))
	if w.connected {
		t.Fatal("connected without a target event of kind connected")
	}
	mig.Events = append(mig.Events, sim.MigrationEvent{Seq: 5, At: start.Add(30 * time.Second), Side: "target", Kind: sim.TimelineConnected, Detail: "hello accepted"})
	w.tick(mig, start.Add(31*time.Second))
	if !w.connected {
		t.Fatal("not connected after the target's connected event")
	}

	var bye strings.Builder
	mig.Events = append(mig.Events, sim.MigrationEvent{Seq: 6, Side: "source", Detail: "source stopped"})
	sourceEnded(&bye, mig)
	if bye.Len() != 0 {
		t.Fatalf("said goodbye without a source-stopped event:\n%s", bye.String())
	}
	mig.Events = append(mig.Events, sim.MigrationEvent{Seq: 7, Side: "source", Kind: sim.TimelineSourceStopped, Detail: "closed the source's socket"})
	sourceEnded(&bye, mig)
	if !strings.Contains(bye.String(), "Your source job (instance a-1 on node a) was stopped") {
		t.Fatalf("no goodbye after the source-stopped event:\n%s", bye.String())
	}
}

// A watch that first sees the migration ended (an abort --wait, a
// migrate that lost the race) does not ask for the target to be started:
// it was removed, and its env gets 4401 (attack round 11, A3).
func TestExternalWatchOfAnEndedMigrationAsksNothing(t *testing.T) {
	start := time.Unix(1000, 0)
	mig := &sim.Migration{ID: "mig-1", Strategy: sim.Handover, State: sim.MigrationAborted, StartedAt: start,
		Target:   sim.MigrationEndpoint{Instance: "b-1", Node: "b", Runtime: sim.RuntimeExternal, Env: map[string]map[string]string{"job": {"K": "v"}}},
		Timeouts: sim.Timeouts{TargetStart: sim.Duration(time.Minute)},
		Events:   []sim.MigrationEvent{{Seq: 1, At: start, Side: "target", Kind: sim.TimelineTargetCreated, Detail: "placed b-1"}}}
	var out strings.Builder
	w := newExternalWatch(&out)
	w.tick(mig, start.Add(time.Second))
	w.tick(mig, start.Add(2*time.Second))
	if strings.Contains(out.String(), "start its job yourself") || strings.Contains(out.String(), "waits up to") {
		t.Fatalf("an ended migration's target was asked for:\n%s", out.String())
	}
}
