package e2e_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/normsim/normsim/internal/testjob"
	"github.com/normsim/normsim/normsimtest"
	"github.com/normsim/normsim/normsimtest/normsimdocker"
	"github.com/normsim/normsim/protocol"
	"github.com/normsim/normsim/sim"
)

var templatesDir = filepath.Join("..", "templates")

func startSim(t *testing.T, o normsimtest.Options) *normsimtest.Sim {
	t.Helper()
	if o.Templates == nil {
		o.Templates = []string{templatesDir}
	}
	if o.Runtime == sim.RuntimeDocker {
		return normsimdocker.Start(t, o)
	}
	return normsimtest.Start(t, o)
}

// launchExternal launches the counter template as an external instance on
// node a and connects a raw job to it.
func launchExternal(t *testing.T, s *normsimtest.Sim, node string) (sim.Instance, *testjob.Job) {
	t.Helper()
	in := s.Launch(t, sim.LaunchRequest{Template: "counter", Node: node, Runtime: sim.RuntimeExternal})
	if in.Env == nil || in.Env["counter"][protocol.EnvToken] == "" {
		t.Fatalf("external instance shows no env: %+v", in)
	}
	j := testjob.Dial(t, in.Env["counter"])
	s.WaitConnected(t, in.ID)
	return in, j
}

// targetEnv waits for the migration to place its target and returns its env.
func targetEnv(t *testing.T, s *normsimtest.Sim, id string) (string, map[string]string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		m := s.Migration(t, id)
		if m.Target.Env != nil {
			return m.Target.Instance, m.Target.Env["counter"]
		}
		if m.State.Ended() {
			t.Fatalf("migration ended %s (%s) before placing a target", m.State, m.Reason)
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("no target env")
	return "", nil
}

func TestHandoverExternalRelaysPayloadsUnchanged(t *testing.T) {
	s := startSim(t, normsimtest.Options{})
	src, sj := launchExternal(t, s, "a")
	m, err := s.Migrate(src.ID, sim.MigrateRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if m.Strategy != sim.Handover || m.Target.Node != "b" || m.State != sim.MigrationRunning {
		t.Fatalf("migration = %+v", m)
	}
	gs := sj.Expect(protocol.TypeGetState)
	if gs.MigrationID != m.ID {
		t.Fatalf("get-state migrationId %q, want %q", gs.MigrationID, m.ID)
	}
	state := `{"next":  41, "nested": {"k":[1.50, 2e3, "\u00e9"]}}`
	sj.Send(protocol.JobFrame{Type: protocol.TypeState, Payload: json.RawMessage(state)})

	tgtID, env := targetEnv(t, s, m.ID)
	if !strings.Contains(env[protocol.EnvURL], "/instances/"+src.JobID+"/") {
		t.Fatalf("target URL %s does not keep the job id %s", env[protocol.EnvURL], src.JobID)
	}
	tj := testjob.Dial(t, env)
	ack := tj.Ack
	if ack.Migration == nil || ack.Migration.ID != m.ID || ack.Migration.Side != "target" {
		t.Fatalf("target hello-ack = %+v", ack)
	}
	is := tj.Expect(protocol.TypeInitialState)
	if string(is.Payload) != state {
		t.Fatalf("initial-state payload %s, want %s unchanged", is.Payload, state)
	}
	tj.Send(protocol.JobFrame{Type: protocol.TypeTargetReady, Payload: json.RawMessage(`{"ready" : true}`)})
	cr := sj.Expect(protocol.TypeCutoverReady)
	if string(cr.Payload) != `{"ready" : true}` {
		t.Fatalf("cutover-ready payload %s", cr.Payload)
	}
	sj.Send(protocol.JobFrame{Type: protocol.TypeSourceStoppedOutput, Payload: json.RawMessage(`{"last":1234567890123}`)})
	ca := tj.Expect(protocol.TypeCutoverApply)
	if string(ca.Payload) != `{"last":1234567890123}` || ca.MigrationID != m.ID {
		t.Fatalf("cutover-apply = %+v payload %s", ca, ca.Payload)
	}
	skew := 1.5
	tj.Send(protocol.JobFrame{Type: protocol.TypeTargetApplied, Applied: []string{"counter"},
		Failed: []protocol.FailedApply{{ID: "overlay", Reason: "missing font"}}, SkewMs: &skew})

	done := s.WaitMigration(t, m.ID, 30*time.Second)
	normsimtest.RequireCompleted(t, done)
	if len(done.Result.Applied) != 1 || done.Result.Applied[0] != "counter" || len(done.Result.Failed) != 1 ||
		done.Result.Failed[0].ID != "overlay" || done.Result.SkewMs == nil || *done.Result.SkewMs != 1.5 {
		t.Fatalf("result = %+v", done.Result)
	}
	if done.Target.Instance != tgtID || done.JobID != src.JobID {
		t.Fatalf("target %s job %s", done.Target.Instance, done.JobID)
	}
	// The source is stopped with a normal close once the target applied.
	if code, _ := sj.Closed(10 * time.Second); code != websocket.StatusNormalClosure {
		t.Fatalf("source socket closed with %d, want 1000", code)
	}
	if in := s.Instance(t, src.ID); in.State != sim.InstanceStopped {
		t.Fatalf("source state %s, want stopped", in.State)
	}
	// Migrating the stopped source again says where its job runs now.
	var again *normsimtest.APIError
	if _, err := s.Migrate(src.ID, sim.MigrateRequest{}); !errors.As(err, &again) || again.Status != http.StatusUnprocessableEntity ||
		!strings.Contains(again.Message, "only a running instance can migrate: its job "+src.JobID+" now runs as "+tgtID) {
		t.Fatalf("migrate of the stopped source: %v", err)
	}
	if in := s.Instance(t, tgtID); in.State != sim.InstanceRunning || !in.Connected || in.JobID != src.JobID {
		t.Fatalf("target = %+v", in)
	}
	// The timeline holds every frame in order, with payloads.
	var types []string
	for _, ev := range done.Events {
		if ev.Frame != nil {
			types = append(types, ev.Frame.Direction+":"+ev.Frame.Type)
		}
	}
	want := []string{"out:get-state", "in:state", "out:initial-state", "in:target-ready", "out:cutover-ready",
		"in:source-stopped-output", "out:cutover-apply", "in:target-applied"}
	if strings.Join(types, ",") != strings.Join(want, ",") {
		t.Fatalf("timeline frames\n got %v\nwant %v\n%s", types, want, normsimtest.Timeline(done))
	}
	if done.Durations.TotalMs == nil || done.Durations.TargetReadyMs == nil {
		t.Fatalf("durations = %+v", done.Durations)
	}
}

func TestStateRefusedEndsRefusedWithNoTarget(t *testing.T) {
	s := startSim(t, normsimtest.Options{})
	src, sj := launchExternal(t, s, "a")
	m, err := s.Migrate(src.ID, sim.MigrateRequest{Strategy: "handover"})
	if err != nil {
		t.Fatal(err)
	}
	sj.Expect(protocol.TypeGetState)
	sj.Send(protocol.JobFrame{Type: protocol.TypeStateRefused, Reason: "busy recording"})
	done := s.WaitMigration(t, m.ID, 10*time.Second)
	normsimtest.RequireState(t, done, sim.MigrationRefused)
	if done.Reason != "busy recording" || done.Target.Instance != "" {
		t.Fatalf("reason %q target %q", done.Reason, done.Target.Instance)
	}
	var list []sim.Instance
	s.Do(http.MethodGet, "/api/v1/instances", nil, &list)
	if len(list) != 1 || list[0].ID != src.ID || list[0].State != sim.InstanceRunning {
		t.Fatalf("instances after refusal = %+v", list)
	}
}

// TestAbortsBeforeAndFailuresAfterThePointOfNoReturn drives a handover to
// each phase and breaks it there: an abort, a dropped socket, or a timeout.
func TestAbortsBeforeAndFailuresAfterThePointOfNoReturn(t *testing.T) {
	type phase int
	const (
		atGetState phase = iota
		atTargetReady
		atCutoverReady
		atApply
	)
	type breakage int
	const (
		abort breakage = iota
		drop
		timeout
		user // the user aborts through the API
	)
	for _, p := range []struct {
		name  string
		at    phase
		phase sim.Phase
	}{{"get-state", atGetState, "get-state"}, {"target-ready", atTargetReady, "target-ready"},
		{"cutover-ready", atCutoverReady, "cutover-ready"}, {"cutover-apply", atApply, "cutover-apply"}} {
		for _, b := range []struct {
			name string
			how  breakage
		}{{"abort", abort}, {"drop", drop}, {"timeout", timeout}, {"user", user}} {
			t.Run(p.name+"/"+b.name, func(t *testing.T) {
				s := startSim(t, normsimtest.Options{})
				src, sj := launchExternal(t, s, "a")
				req := sim.MigrateRequest{}
				if b.how == timeout {
					short := sim.Duration(300 * time.Millisecond)
					req.Timeouts = sim.Timeouts{State: short, TargetReady: short, Stop: short, Apply: short}
				}
				m, err := s.Migrate(src.ID, req)
				if err != nil {
					t.Fatal(err)
				}
				// breaker is the side that misbehaves in this phase.
				var refused error
				breakNow := func(j *testjob.Job) {
					switch b.how {
					case user:
						// The user acts once the migration shows the phase
						// (the page's Abort button reads it there).
						waitPhase(t, s, m.ID, p.phase)
						_, refused = s.Abort(m.ID, "test says no")
					case abort:
						j.Send(protocol.JobFrame{Type: protocol.TypeAbort, Reason: "test says no"})
					case drop:
						j.Conn().CloseNow()
					case timeout: // say nothing
					}
				}
				sj.Expect(protocol.TypeGetState)
				var tj *testjob.Job
				var tgtID string
				switch p.at {
				case atGetState:
					breakNow(sj)
				default:
					sj.Send(protocol.JobFrame{Type: protocol.TypeState, Payload: json.RawMessage(`{"n":1}`)})
					var env map[string]string
					tgtID, env = targetEnv(t, s, m.ID)
					tj = testjob.Dial(t, env)
					tj.Expect(protocol.TypeInitialState)
					if p.at == atTargetReady {
						breakNow(tj)
						break
					}
					tj.Send(protocol.JobFrame{Type: protocol.TypeTargetReady, Payload: json.RawMessage(`null`)})
					sj.Expect(protocol.TypeCutoverReady)
					if p.at == atCutoverReady {
						breakNow(sj)
						break
					}
					sj.Send(protocol.JobFrame{Type: protocol.TypeSourceStoppedOutput, Payload: json.RawMessage(`{"last":9}`)})
					tj.Expect(protocol.TypeCutoverApply)
					breakNow(tj)
				}
				if b.how == user && p.at == atApply {
					// Past the point of no return the user is told why not,
					// and the handover goes on to complete.
					var e *normsimtest.APIError
					if !errors.As(refused, &e) || e.Status != http.StatusConflict || !strings.Contains(e.Message, "past the point of no return") {
						t.Fatalf("abort after cutover-apply: %v, want 409 saying it is past the point of no return", refused)
					}
					tj.Send(protocol.JobFrame{Type: protocol.TypeTargetApplied, Payload: json.RawMessage(`{"applied":[]}`)})
					normsimtest.RequireState(t, s.WaitMigration(t, m.ID, 30*time.Second), sim.MigrationCompleted)
					return
				}
				if refused != nil {
					t.Fatalf("abort in %s: %v", p.name, refused)
				}
				done := s.WaitMigration(t, m.ID, 30*time.Second)
				if done.Phase != p.phase {
					t.Fatalf("ended in phase %q, want %q\n%s", done.Phase, p.phase, normsimtest.Timeline(done))
				}
				if p.at == atApply {
					normsimtest.RequireState(t, done, sim.MigrationFailed)
					return
				}
				normsimtest.RequireState(t, done, sim.MigrationAborted)
				if done.Reason == "" {
					t.Fatal("aborted without a reason")
				}
				// Rolled back: source still running, target removed, and a
				// source still connected was told.
				if in := s.Instance(t, src.ID); in.State != sim.InstanceRunning {
					t.Fatalf("source %s after rollback", in.State)
				}
				if tgtID != "" {
					var e *normsimtest.APIError
					if err := s.Do(http.MethodGet, "/api/v1/instances/"+tgtID, nil, nil); !errors.As(err, &e) || e.Status != 404 {
						t.Fatalf("target %s still there after rollback: %v", tgtID, err)
					}
				}
				// The source hears of the rollback unless it caused it by
				// aborting or leaving.
				sourceBroke := p.at == atGetState || p.at == atCutoverReady
				if b.how == user {
					t.Logf("%s", normsimtest.Timeline(done))
					if done.Reason != "aborted by the user: test says no" ||
						!slices.ContainsFunc(done.Events, func(e sim.MigrationEvent) bool { return e.Kind == sim.TimelineAbortRequested }) {
						t.Fatalf("a user's abort: reason %q\n%s", done.Reason, normsimtest.Timeline(done))
					}
					if j := done.Judged(); j.Grade != sim.GradePass {
						t.Fatalf("a user's abort judged %s (%s), want pass", j.Grade, j.Why)
					}
					if tj != nil {
						if f := tj.Expect(protocol.TypeAbort); f.MigrationID != m.ID {
							t.Fatalf("abort to target = %+v", f)
						}
					}
				}
				if !sourceBroke || b.how == timeout || b.how == user {
					f := sj.Expect(protocol.TypeAbort)
					if f.MigrationID != m.ID || f.Reason == "" {
						t.Fatalf("abort to source = %+v", f)
					}
				}
			})
		}
	}
}

func TestRefusalsAreErrorsNotMigrations(t *testing.T) {
	s := startSim(t, normsimtest.Options{NoJobSocket: []string{"c"}, Nodes: []string{"a", "b", "c"}})
	src, sj := launchExternal(t, s, "a")
	plain := s.Launch(t, sim.LaunchRequest{Template: "plain", Node: "a", Runtime: sim.RuntimeExternal})
	unconnected := s.Launch(t, sim.LaunchRequest{Template: "counter", Node: "a", Runtime: sim.RuntimeExternal})

	tests := []struct {
		name   string
		id     string
		req    sim.MigrateRequest
		status int
		says   string
	}{
		{"strategy not promised", plain.ID, sim.MigrateRequest{Strategy: "overlap"}, 422, `declares "stopThenStart"`},
		{"overlap is not safer than handover", src.ID, sim.MigrateRequest{Strategy: "overlap"}, 422, `declares "handover"`},
		{"unknown strategy", src.ID, sim.MigrateRequest{Strategy: "live"}, 422, "must be one of"},
		{"handover to a node without a job socket", src.ID, sim.MigrateRequest{To: "c"}, 422, "norsk.io/job-socket"},
		{"source not connected", unconnected.ID, sim.MigrateRequest{}, 422, "not connected"},
		{"unknown instance", "nope", sim.MigrateRequest{}, 404, "not found"},
		{"unknown node", src.ID, sim.MigrateRequest{To: "z"}, 404, "node \"z\""},
		{"same node", src.ID, sim.MigrateRequest{To: "a"}, 422, "already runs on node a"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := s.Migrate(tt.id, tt.req)
			var e *normsimtest.APIError
			if !errors.As(err, &e) || e.Status != tt.status || !strings.Contains(e.Message, tt.says) {
				t.Fatalf("err = %v, want %d mentioning %q", err, tt.status, tt.says)
			}
			// A client retries on the code, never on the message.
			if tt.id == unconnected.ID && e.Code != sim.ENotConnected {
				t.Errorf("code = %s, want %s", e.Code, sim.ENotConnected)
			}
		})
	}
	var list []*sim.Migration
	s.Do(http.MethodGet, "/api/v1/migrations", nil, &list)
	if len(list) != 0 {
		t.Fatalf("refusals created migrations: %+v", list)
	}

	// A second migration of the same job while one runs: 409.
	m, err := s.Migrate(src.ID, sim.MigrateRequest{})
	if err != nil {
		t.Fatal(err)
	}
	sj.Expect(protocol.TypeGetState)
	_, err = s.Migrate(src.ID, sim.MigrateRequest{})
	var e *normsimtest.APIError
	if !errors.As(err, &e) || e.Status != 409 {
		t.Fatalf("second migration: %v, want 409", err)
	}
	sj.Send(protocol.JobFrame{Type: protocol.TypeStateRefused, Reason: "done testing"})
	s.WaitMigration(t, m.ID, 10*time.Second)
}

// waitPhase waits until the migration's record shows phase (or it ended).
func waitPhase(t *testing.T, s *normsimtest.Sim, id string, phase sim.Phase) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(2 * time.Millisecond) {
		m := s.Migration(t, id)
		if m.Phase == phase || m.State.Ended() {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("migration %s still in phase %s after 10 s, want %s", id, m.Phase, phase)
		}
	}
}
