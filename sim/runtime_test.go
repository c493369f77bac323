package sim

import (
	"testing"
	"time"
)

// TestStopReportKilledWhy (issue 34): a migration's timeline said a
// source with stop_grace_period 3s was killed "after the 10s stop grace";
// it names the grace that ran out, each service's own where it has one.
func TestStopReportKilledWhy(t *testing.T) {
	rep := StopReport{Killed: []string{"job", "sidecar"}, OwnGrace: map[string]time.Duration{"job": 3 * time.Second}}
	want := "job still running after its own 3s stop grace; sidecar still running after the 10s stop grace"
	if got := rep.KilledWhy(10 * time.Second); got != want {
		t.Errorf("KilledWhy = %q, want %q", got, want)
	}
}
