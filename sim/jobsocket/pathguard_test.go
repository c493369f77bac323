package jobsocket_test

import (
	"testing"

	"github.com/normsim/normsim/protocol"
	"github.com/normsim/normsim/sim/jobsocket"
)

// TestAPathThatDoesNotDecodeIsClosedWith4401: a path with a percent sign
// that starts no escape is no path at all (the contract): it is upgraded
// and closed with 4401, as the reference worker does, not answered 400
// by Go's HTTP server before the listener sees it (dialRaw fails on any
// answer but 101). A well-escaped path whose query has such a sign is
// refused the same way, as a path naming no instance.
func TestAPathThatDoesNotDecodeIsClosedWith4401(t *testing.T) {
	l, _ := MustListener(t, jobsocket.Config{})
	for _, path := range []string{"/instances/job-x/%A", "/instances/%/x", "/instances/j/a%ZZb", "/instances/j/%41?x=%"} {
		t.Run(path, func(t *testing.T) {
			j := dialRaw(t, l, path)
			if code, reason := j.readClose(); code != protocol.CloseUnauthorized || reason != "path names no instance" {
				t.Fatalf("closed %d %q, want 4401 \"path names no instance\"", code, reason)
			}
		})
	}
}
