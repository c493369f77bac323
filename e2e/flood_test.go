package e2e_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/normsim/normsim/internal/bench"
	"github.com/normsim/normsim/internal/memtest"
	"github.com/normsim/normsim/normsimtest"
	"github.com/normsim/normsim/protocol"
	"github.com/normsim/normsim/sim"
)

// TestFloodDuringHandover: a source job answers get-state with a flood of
// the one frame its phase allows (abort, at the 64 KiB cap). The first
// abort ends the migration, the rollback takes abort off what the job may
// say, and the next frame closes its socket with 4400: the flood cannot
// fill the timeline or memory, and the sim carries on.
func TestFloodDuringHandover(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, api, in, job := externalCounter(t, ctx)
	base := memtest.LiveHeap()
	m, err := api.Migrate(ctx, in.ID, sim.MigrateRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := job.Expect(ctx, protocol.TypeGetState); err != nil {
		t.Fatal(err)
	}
	prefix := `{"type":"abort","reason":"`
	frame := []byte(prefix + strings.Repeat("x", protocol.MaxFrameBytes-len(prefix)-2) + `"}`)
	// Half a second of flood, without reading: the worker has long closed
	// the socket, and drains what still comes until the job answers the
	// close.
	sent := 0
	for start := time.Now(); time.Since(start) < 500*time.Millisecond; sent++ {
		if err := job.SendRaw(ctx, frame); err != nil {
			break
		}
	}
	code, _, err := job.Closed(ctx)
	if err != nil || code != protocol.CloseProtocolError {
		t.Fatalf("flooding job closed with %d (%v), want 4400", code, err)
	}
	done := s.WaitMigration(t, m.ID, 30*time.Second)
	normsimtest.RequireState(t, done, sim.MigrationAborted)
	if !strings.Contains(done.Reason, "the source aborted") {
		t.Fatalf("reason %q", done.Reason)
	}
	aborts := 0
	for _, ev := range done.Events {
		if ev.Frame != nil && ev.Frame.Type == protocol.TypeAbort && ev.Frame.Direction == "in" {
			aborts++
		}
	}
	t.Logf("the job sent %d abort frames; the timeline kept %d", sent, aborts)
	if aborts > 100 {
		t.Fatalf("the timeline kept %d frames of the flood", aborts)
	}
	if heap := memtest.LiveHeap(); heap > base+64<<20 {
		t.Fatalf("live heap grew %d MiB from one flooding job", (heap-base)>>20)
	}
	// The sim carries on: another job hands over normally.
	in2, job2, err := bench.LaunchConnected(ctx, api, "counter", "a")
	if err != nil {
		t.Fatal(err)
	}
	defer job2.Close()
	h, err := bench.PlayHandover(ctx, api, in2.ID, job2, bench.HandoverOptions{To: "b"})
	if err != nil {
		t.Fatal(err)
	}
	h.TargetJob.Close()
}
