package bench

import (
	"context"
	"testing"
	"time"
)

// TestBareSimPlaysEveryHandover runs the load against the bare server for
// two rounds: every handover must pass PlayHandover's checks (the frames
// in order, both payloads relayed unchanged, the source closed with 1000,
// the migration ended completed), so the floor is measured on the same
// protocol the sim speaks, and the bare server leaves nothing running.
func TestBareSimPlaysEveryHandover(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rep, err := Run(ctx, Config{Sim: SimBare, Jobs: 40, Rounds: 2})
	if err != nil {
		t.Fatalf("run: %v (errors %v)", err, rep)
	}
	if rep.Completed != 80 || rep.Failed != 0 || len(rep.Errors) > 0 {
		t.Fatalf("%d completed, %d failed, errors %v; want 80 and none", rep.Completed, rep.Failed, rep.Errors)
	}
	if rep.Peak != nil {
		t.Errorf("the bare server answered stats: %+v", rep.Peak)
	}
	if rep.GoroutinesAfter > rep.GoroutinesBefore {
		t.Errorf("goroutines %d before, %d after: the bare server left some running", rep.GoroutinesBefore, rep.GoroutinesAfter)
	}
}
