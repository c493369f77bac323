package docker

import (
	"maps"
	"slices"
	"testing"

	"github.com/normsim/normsim/sim"
)

// TestRecoveryDecisions: what Recover adopts and removes, without an
// engine: only this owner's containers count, an instance is adopted when
// all its containers run and the store had it starting or running, and
// everything not adopted is removed.
func TestRecoveryDecisions(t *testing.T) {
	const owner = "0123456789abcdef"
	mine := map[string]string{sim.LabelOwner: owner}
	owned := []Owned{
		{Instance: "up", Service: "a", Running: true, Labels: mine},
		{Instance: "up", Service: "b", Running: true, Labels: mine},
		{Instance: "half", Service: "a", Running: true, Labels: mine},
		{Instance: "half", Service: "b", Running: false, Labels: mine},
		{Instance: "starting", Service: "a", Running: true, Labels: mine},
		{Instance: "stopping", Service: "a", Running: true, Labels: mine},
		{Instance: "unknown", Service: "a", Running: true, Labels: mine},
		{Instance: "ended", Service: "a", Running: true, Labels: mine},
		{Instance: "theirs", Service: "a", Running: true, Labels: map[string]string{sim.LabelOwner: "fedcba9876543210"}},
		// Issue 34: a one-shot that completed (exit 0) and a service the
		// engine is restarting end nothing under docker compose up; a
		// restart of normsim failed both instances and removed their
		// running job containers.
		{Instance: "oneshot", Service: "init", Completed: true, Labels: mine},
		{Instance: "oneshot", Service: "job", Running: true, Labels: mine},
		{Instance: "restarting", Service: "job", Restarting: true, Labels: mine},
		{Instance: "restarting", Service: "main", Running: true, Labels: mine},
		{Instance: "all-done", Service: "init", Completed: true, Labels: mine},
	}
	left := leftovers(owner, owned)
	if want := map[string]bool{"up": true, "half": false, "starting": true, "stopping": true, "unknown": true, "ended": true,
		"oneshot": true, "restarting": true, "all-done": false}; !maps.Equal(left, want) {
		t.Fatalf("leftovers = %v, want %v", left, want)
	}
	for _, tc := range []struct {
		in   sim.Instance
		want bool
	}{
		{sim.Instance{ID: "up", State: sim.InstanceRunning}, true},
		{sim.Instance{ID: "starting", State: sim.InstanceStarting}, true},
		{sim.Instance{ID: "half", State: sim.InstanceRunning}, false},
		{sim.Instance{ID: "stopping", State: sim.InstanceStopping}, false},
		{sim.Instance{ID: "gone", State: sim.InstanceRunning}, false},
		{sim.Instance{ID: "theirs", State: sim.InstanceRunning}, false},
		{sim.Instance{ID: "oneshot", State: sim.InstanceRunning}, true},
		{sim.Instance{ID: "restarting", State: sim.InstanceRunning}, true},
		{sim.Instance{ID: "all-done", State: sim.InstanceRunning}, false},
	} {
		if got := adoptable(tc.in, left); got != tc.want {
			t.Errorf("adoptable(%s %s) = %v, want %v", tc.in.ID, tc.in.State, got, tc.want)
		}
	}
	recovered := map[string]sim.Recovery{"up": {Adopted: true}, "starting": {Adopted: true},
		"half": {Reason: "no longer running"}, "stopping": {Reason: "no longer running"}, "gone": {Reason: "no longer running"}}
	if got, want := unadopted(recovered, left), []string{"all-done", "ended", "gone", "half", "oneshot", "restarting", "stopping", "unknown"}; !slices.Equal(got, want) {
		t.Fatalf("removed %v, want %v", got, want)
	}
}
