package e2e_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/normsim/normsim/normsimtest"
	"github.com/normsim/normsim/protocol"
	"github.com/normsim/normsim/sim"
)

// TestHeldFrameNeverHoldsShutdown: a delay-frame fault holding
// cutover-ready for 9 s does not keep the simulator from closing: Close
// returns long before the delay would end, and the held frame is never
// delivered.
func TestHeldFrameNeverHoldsShutdown(t *testing.T) {
	const delay = 9 * time.Second
	h := startHandover(t, sim.MigrateRequest{Faults: []sim.Fault{{Kind: "delay-frame", Frame: "cutover-ready", Delay: sim.Duration(delay)}}})
	h.state()
	h.ready()
	waitTimeline(t, h.s, h.m.ID, "fault: cutover-ready to the source held for 9s")
	start := time.Now()
	h.s.Main.Close()
	if took := time.Since(start); took >= delay/2 {
		t.Fatalf("Close took %s with a %s delay armed: it waited for the held frame", took, delay)
	}
	// The source's next read is the end of its socket, not the frame.
	for {
		_, data, err := h.sj.Conn().Read(t.Context())
		if err != nil {
			break
		}
		if f, _ := protocol.ParseWorkerFrame(data); f.Type == protocol.TypeCutoverReady {
			t.Fatalf("the held cutover-ready was delivered during shutdown: %s", data)
		}
	}
}

// TestDelayIsBoundedByItsPhaseTimeout: a delay longer than twice the
// timeout of the phase its frame belongs to is refused when the migration
// is asked for, naming the bound; one within it is accepted.
func TestDelayIsBoundedByItsPhaseTimeout(t *testing.T) {
	s := startSim(t, normsimtest.Options{})
	src, sj := launchExternal(t, s, "a")
	for _, tt := range []struct {
		fault sim.Fault
		to    sim.Timeouts
		want  string
	}{
		{sim.Fault{Kind: "delay-frame", Frame: "cutover-ready", Delay: sim.Duration(21 * time.Second)}, sim.Timeouts{},
			"faults[0].delay: 21s is longer than twice the stop timeout (10s) of the phase cutover-ready belongs to"},
		{sim.Fault{Kind: "delay-frame", Frame: "state", Delay: sim.Duration(3 * time.Second)}, sim.Timeouts{State: sim.Duration(time.Second)},
			"faults[0].delay: 3s is longer than twice the state timeout (1s) of the phase state belongs to"},
		{sim.Fault{Kind: "delay-frame", Frame: "target-ready", Delay: sim.Duration(61 * time.Second)}, sim.Timeouts{},
			"faults[0].delay: 1m1s is longer than twice the targetReady timeout (30s)"},
		// A pause by the same rule, of the frame it is armed on.
		{sim.Fault{Kind: "pause", Side: "source", On: "get-state", Delay: sim.Duration(1000 * time.Hour)}, sim.Timeouts{State: sim.Duration(2 * time.Second)},
			"faults[0].delay: 1000h0m0s is longer than twice the state timeout (2s) of the phase get-state belongs to"},
		// The listener's frames pass no relay: a frame fault on them would
		// never fire, so it is refused.
		{sim.Fault{Kind: "corrupt-frame", Frame: "initial-state"}, sim.Timeouts{},
			"faults[0].frame: initial-state is exchanged by the node's listener as a job connects"},
		{sim.Fault{Kind: "drop-frame", Frame: "hello"}, sim.Timeouts{},
			"faults[0].frame: hello is exchanged by the node's listener"},
	} {
		_, err := s.Migrate(src.ID, sim.MigrateRequest{Timeouts: tt.to, Faults: []sim.Fault{tt.fault}})
		var e *normsimtest.APIError
		if !errors.As(err, &e) || e.Status != 422 || !strings.Contains(e.Message, tt.want) {
			t.Fatalf("%+v: got %v, want 422 saying %q", tt.fault, err, tt.want)
		}
	}
	// At the bound it is accepted (and refusing the state ends it).
	m, err := s.Migrate(src.ID, sim.MigrateRequest{Faults: []sim.Fault{{Kind: "delay-frame", Frame: "cutover-ready", Delay: sim.Duration(20 * time.Second)}}})
	if err != nil {
		t.Fatalf("a delay of twice its phase timeout was refused: %v", err)
	}
	sj.Expect(protocol.TypeGetState)
	sj.Send(protocol.JobFrame{Type: protocol.TypeStateRefused, Reason: "done"})
	normsimtest.RequireState(t, s.WaitMigration(t, m.ID, 10*time.Second), sim.MigrationRefused)
}

// TestRunTimeoutsAreUnderTheRequests: the run's timeouts (normsim up
// --timeouts) are what a migration that sets none gets, a request's own
// fields win, and the rest are the defaults. They bound for real: a delay
// longer than the run's state timeout is refused naming it.
func TestRunTimeoutsAreUnderTheRequests(t *testing.T) {
	s := startSim(t, normsimtest.Options{Timeouts: sim.Timeouts{State: sim.Duration(time.Second), TargetReady: sim.Duration(7 * time.Minute)}})
	src, _ := launchExternal(t, s, "a")
	_, err := s.Migrate(src.ID, sim.MigrateRequest{Faults: []sim.Fault{{Kind: "delay-frame", Frame: "state", Delay: sim.Duration(3 * time.Second)}}})
	if err == nil || !strings.Contains(err.Error(), "longer than twice the state timeout (1s)") {
		t.Fatalf("a 3s delay of state under the run's 1s state timeout: err = %v", err)
	}
	m, err := s.Migrate(src.ID, sim.MigrateRequest{Timeouts: sim.Timeouts{State: sim.Duration(3 * time.Second)}})
	if err != nil {
		t.Fatal(err)
	}
	want := sim.DefaultTimeouts
	want.State, want.TargetReady = sim.Duration(3*time.Second), sim.Duration(7*time.Minute)
	if m.Timeouts != want {
		t.Errorf("migration's timeouts = %+v, want %+v", m.Timeouts, want)
	}
}
