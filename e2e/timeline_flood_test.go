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

// TestATimelineFloodIsBounded (issue 34 round 11, A1): a source that
// reconnects during a handover and floods each replaced socket with
// 60 KiB frames put every one on the migration's timeline with its
// payload (1,200 frames: 72 MiB; 4,800 ran normsim out of memory when the
// record was read). The timeline keeps a bounded number of such notes,
// without their large payloads, and counts the rest.
func TestATimelineFloodIsBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("floods a job socket")
	}
	s := startSim(t, normsimtest.Options{})
	ctx := context.Background()
	in := s.Launch(t, sim.LaunchRequest{Template: "counter", Node: "a", Runtime: sim.RuntimeExternal})
	env := in.Env["counter"]
	job := testjob.Dial(t, env)
	mig, err := s.Client.Migrate(ctx, in.ID, map[string]any{"strategy": "handover"})
	if err != nil {
		t.Fatal(err)
	}
	job.Expect(protocol.TypeGetState)
	job.SendText(`{"type":"state","payload":1}`)
	big := []byte(`{"type":"state","payload":"` + strings.Repeat("S", 60<<10) + `"}`)
	sent := 0
	for range 3 {
		next := testjob.Dial(t, env) // takes over: the old socket is closed with 4409
		for range 150 {
			wctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			err := job.Conn().Write(wctx, websocket.MessageText, big)
			cancel()
			if err != nil {
				break
			}
			sent++
		}
		job = next
	}
	if sent < 200 {
		t.Fatalf("only %d frames went out on replaced sockets", sent)
	}
	if _, err := s.Client.AbortMigration(ctx, mig.ID, "the test is done"); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	end, err := s.Client.WaitMigration(wctx, mig.ID, nil)
	if err != nil {
		t.Fatal(err)
	}
	doc, _ := json.Marshal(end)
	discarded := 0
	for _, e := range end.Events {
		if strings.Contains(e.Detail, "discarded") {
			discarded++
		}
	}
	t.Logf("%d frames sent on replaced sockets: %d events, %d of them discarded frames, %d notes cut, %d bytes", sent, len(end.Events), discarded, end.NotesCut, len(doc))
	if discarded > 100 || end.NotesCut == 0 || int(end.NotesCut)+discarded < sent/2 || len(doc) > 2<<20 {
		t.Fatalf("the timeline holds %d discarded frames in %d bytes, %d cut, after %d were sent", discarded, len(doc), end.NotesCut, sent)
	}

	// A job that reconnects in a loop adds a note each time (3,000
	// reconnects during place-target made 6,010 events): the first
	// connection of each side is kept, and the timeline's bound holds.
	in = s.Launch(t, sim.LaunchRequest{Template: "counter", Node: "a", Runtime: sim.RuntimeExternal})
	env = in.Env["counter"]
	job = testjob.Dial(t, env)
	if mig, err = s.Client.Migrate(ctx, in.ID, map[string]any{"strategy": "handover"}); err != nil {
		t.Fatal(err)
	}
	job.Expect(protocol.TypeGetState)
	job.SendText(`{"type":"state","payload":1}`)
	for range 300 {
		job = testjob.Dial(t, env)
	}
	if _, err := s.Client.AbortMigration(ctx, mig.ID, "the test is done"); err != nil {
		t.Fatal(err)
	}
	if end, err = s.Client.WaitMigration(wctx, mig.ID, nil); err != nil {
		t.Fatal(err)
	}
	if len(end.Events) > 150 || end.NotesCut < 400 {
		t.Fatalf("after 300 reconnects the timeline holds %d events, %d cut", len(end.Events), end.NotesCut)
	}
}

// Attack round 16, A-F4: a handover target that reconnects in a loop was
// handed its initial state again each time, and each time the timeline
// kept a "hello-ack and initial-state sent" entry with the whole state
// (800 reconnects with a 60 KB state: a 48 MB record). That entry is one
// of the reconnect's notes now, bounded with them, without a large state.
func TestATargetReconnectingInALoopKeepsItsTimelineBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("reconnects a job in a loop")
	}
	s := startSim(t, normsimtest.Options{})
	ctx := context.Background()
	src, sj := launchExternal(t, s, "a")
	m, err := s.Migrate(src.ID, sim.MigrateRequest{})
	if err != nil {
		t.Fatal(err)
	}
	sj.Expect(protocol.TypeGetState)
	state := `{"blob":"` + strings.Repeat("S", 60<<10) + `"}`
	sj.SendText(`{"type":"state","payload":` + state + `}`)
	_, env := targetEnv(t, s, m.ID)
	if mm := s.Migration(t, m.ID); mm.State.Ended() {
		t.Fatalf("ended %s: %s\n%s", mm.State, mm.Reason, normsimtest.Timeline(mm))
	}
	for range 200 {
		// Each takes over from the one before (4409), which does not end
		// the migration; a target whose socket drops would.
		tj := testjob.Dial(t, env)
		tj.Expect(protocol.TypeInitialState)
	}
	if _, err := s.Client.AbortMigration(ctx, m.ID, "the test is done"); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	end, err := s.Client.WaitMigration(wctx, m.ID, nil)
	if err != nil {
		t.Fatal(err)
	}
	doc, _ := json.Marshal(end)
	handed, whole := 0, 0
	for _, e := range end.Events {
		if strings.Contains(e.Detail, "initial-state sent") {
			handed++
			if e.Frame != nil && len(e.Frame.Payload) > sim.MaxNotePayload {
				whole++
			}
		}
	}
	t.Logf("200 reconnects: %d events, %d initial states recorded (%d whole), %d notes cut, %d bytes", len(end.Events), handed, whole, end.NotesCut, len(doc))
	if whole != 1 || handed > sim.MaxTimelineNotes || end.NotesCut == 0 || len(doc) > 1<<20 {
		t.Fatalf("after 200 reconnects the timeline holds %d initial states (%d whole) in %d bytes, %d cut; want the first whole, the rest bounded notes", handed, whole, len(doc), end.NotesCut)
	}
}
