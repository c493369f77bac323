package manager

import (
	"errors"
	"testing"

	"github.com/normsim/normsim/sim"
)

// TestASlowReaderIsBlamed (attack round 9b, F4): a job whose socket
// normsim closed with 1008 because a write to it did not finish (it did
// not read its frames, or the pongs to its own pings) broke a promise, as
// a job that sends a malformed frame does: the migration it ends names its
// side at fault. One normsim closed for a fault of its own (a replaced
// connection, say) blames no one.
func TestASlowReaderIsBlamed(t *testing.T) {
	r := &run{src: sim.Instance{ID: "src"}}
	for _, c := range []struct {
		ev      sim.SocketEvent
		promise string
	}{
		{sim.SocketEvent{Kind: sim.SocketDisconnected, ClosedBy: sim.ClosedByWorker, Code: 1008, Reason: "job too slow to read frames"}, sim.PromiseReads},
		{sim.SocketEvent{Kind: sim.SocketDisconnected, ClosedBy: sim.ClosedByWorker, Code: 4400, Reason: "not a valid frame"}, sim.PromiseWellFormed},
		{sim.SocketEvent{Kind: sim.SocketDisconnected, ClosedBy: sim.ClosedByWorker, Code: 4409, Reason: "replaced by a newer connection"}, ""},
	} {
		err := r.disruption(runEvent{kind: evSocket, instance: "tgt", socket: c.ev})
		var b *errBroken
		got := ""
		if errors.As(err, &b) {
			got = b.promise
			if b.side != sideTarget {
				t.Errorf("close %d: blamed the %s, want the target", c.ev.Code, b.side)
			}
		}
		if err == nil || got != c.promise {
			t.Errorf("close %d: %v, broken promise %q; want %q", c.ev.Code, err, got, c.promise)
		}
	}
}
