package e2e_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/normsim/normsim/internal/testjob"
	"github.com/normsim/normsim/normsimtest"
	"github.com/normsim/normsim/protocol"
	"github.com/normsim/normsim/sim"
)

// TestFrameOverTheCapInEveryPhase: in each phase of a handover the side
// whose turn it is answers with a 1 MiB frame. Its socket closes with 4413;
// before the point of no return the migration rolls back and the other side
// gets abort, after it the migration fails; either way the reason names
// 4413.
func TestFrameOverTheCapInEveryPhase(t *testing.T) {
	big := []byte(`{"type":"abort","reason":"` + strings.Repeat("x", 1<<20) + `"}`)
	for _, tt := range []struct {
		phase   sim.Phase
		source  bool // the source sends the frame, else the target
		aborted bool // rolled back, else failed
	}{
		{"get-state", true, true},
		{"target-ready", false, true},
		{"cutover-ready", true, true},
		{"cutover-apply", false, false},
	} {
		t.Run(string(tt.phase), func(t *testing.T) {
			s := startSim(t, normsimtest.Options{})
			src, sj := launchExternal(t, s, "a")
			m, err := s.Migrate(src.ID, sim.MigrateRequest{})
			if err != nil {
				t.Fatal(err)
			}
			sj.Expect(protocol.TypeGetState)
			var tj *testjob.Job
			if tt.phase != "get-state" {
				sj.Send(protocol.JobFrame{Type: protocol.TypeState, Payload: json.RawMessage(`{"n":1}`)})
				_, env := targetEnv(t, s, m.ID)
				tj = testjob.Dial(t, env)
				tj.Expect(protocol.TypeInitialState)
			}
			if tt.phase == "cutover-ready" || tt.phase == "cutover-apply" {
				tj.Send(protocol.JobFrame{Type: protocol.TypeTargetReady, Payload: json.RawMessage(`null`)})
				sj.Expect(protocol.TypeCutoverReady)
			}
			if tt.phase == "cutover-apply" {
				sj.Send(protocol.JobFrame{Type: protocol.TypeSourceStoppedOutput, Payload: json.RawMessage(`{"last":9}`)})
				tj.Expect(protocol.TypeCutoverApply)
			}
			breaker, other := sj, tj
			if !tt.source {
				breaker, other = tj, sj
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := breaker.Conn().Write(ctx, websocket.MessageText, big); err != nil {
				t.Logf("write: %v", err) // the close code tells
			}
			if code, _ := breaker.Closed(10 * time.Second); code != protocol.CloseFrameTooLarge {
				t.Fatalf("the socket of the side that sent 1 MiB closed with %d, want 4413", code)
			}
			done := s.WaitMigration(t, m.ID, 30*time.Second)
			if done.Phase != tt.phase {
				t.Fatalf("ended in phase %q, want %q\n%s", done.Phase, tt.phase, normsimtest.Timeline(done))
			}
			if !strings.Contains(done.Reason, "4413") {
				t.Fatalf("reason %q does not name 4413\n%s", done.Reason, normsimtest.Timeline(done))
			}
			if !tt.aborted {
				normsimtest.RequireState(t, done, sim.MigrationFailed)
				return
			}
			normsimtest.RequireState(t, done, sim.MigrationAborted)
			if in := s.Instance(t, src.ID); in.State != sim.InstanceRunning {
				t.Fatalf("source %s after the rollback", in.State)
			}
			if other != nil {
				if f := other.Expect(protocol.TypeAbort); f.MigrationID != m.ID || f.Reason == "" {
					t.Fatalf("abort to the other side = %+v", f)
				}
			}
		})
	}
}
