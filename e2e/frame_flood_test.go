package e2e_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/normsim/normsim/internal/testjob"
	"github.com/normsim/normsim/normsimtest"
	"github.com/normsim/normsim/protocol"
	"github.com/normsim/normsim/sim"
)

// TestAFrameFloodIsBounded (issue 34 item 6): a job that reconnects and
// sends a large out-of-phase frame, again and again, grew the store
// without bound. Its frame records stay within the bound per instance,
// and what went is counted where a user reads the frames.
func TestAFrameFloodIsBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("floods a job socket")
	}
	s := startSim(t, normsimtest.Options{})
	in := s.Launch(t, sim.LaunchRequest{Template: "counter", Node: "a", Runtime: sim.RuntimeExternal})
	env := in.Env["counter"]
	big := `{"type":"state","payload":"` + strings.Repeat("x", 60<<10) + `"}`
	const rounds = 120 // 120 × 60 KiB: past the 4 MiB an instance keeps
	for range rounds {
		j := testjob.Dial(t, env) // says hello, reads hello-ack
		j.SendText(big)           // no migration asked for it: out of phase
		if code, _ := j.Closed(5 * time.Second); code != protocol.CloseProtocolError {
			t.Fatalf("an out-of-phase frame closed the socket with %d", code)
		}
	}
	ctx := context.Background()
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := s.Client.FrameCounts(ctx, in.ID)
		if err != nil {
			t.Fatal(err)
		}
		// Each round records hello, hello-ack and the big frame.
		if c.Kept+c.Dropped >= 3*rounds {
			frs, err := s.Client.Frames(ctx, in.ID, 10000)
			if err != nil {
				t.Fatal(err)
			}
			kept := 0
			for _, f := range frs {
				kept += len(f.Data)
			}
			if c.Dropped == 0 || int64(len(frs)) != c.Kept || kept > 4<<20 {
				t.Fatalf("after %d rounds the instance keeps %d frames (%d bytes), counts %+v", rounds, len(frs), kept, c)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the frames were not all recorded: %+v", c)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
