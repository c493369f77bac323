package jobauthor

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/normsim/normsim/jobclient"
	"github.com/normsim/normsim/normsimtest"
	"github.com/normsim/normsim/protocol"
	"github.com/normsim/normsim/sim"
)

// templates holds this repository's product template, loaded by name
// ("template", the directory's name).
var templates = []string{"."}

func TestOurJobHandsOverSeamlessly(t *testing.T) {
	s := normsimtest.Start(t, normsimtest.Options{Templates: templates, Runtime: sim.RuntimeProcess})
	in := s.Launch(t, sim.LaunchRequest{Template: "template", Node: "a"})
	s.WaitConnected(t, in.ID)
	time.Sleep(200 * time.Millisecond)

	m := s.MigrateAndWait(t, in.ID, sim.MigrateRequest{To: "b"})
	normsimtest.RequireCompleted(t, m)
	normsimtest.RequireSeamless(t, m)
	if len(m.Result.Applied) != 1 || m.Result.Applied[0] != "counter" {
		t.Fatalf("applied = %v", m.Result.Applied)
	}
}

// TestHandoverWithAJobStartedByHand plays both sides with jobclient on the
// external runtime, as a job started under a debugger would.
func TestHandoverWithAJobStartedByHand(t *testing.T) {
	s := normsimtest.Start(t, normsimtest.Options{Templates: templates, Runtime: sim.RuntimeExternal})
	in := s.Launch(t, sim.LaunchRequest{Template: "template", Node: "a"})
	env := in.Env["job"]
	ctx := context.Background()
	src := jobclient.Connect(ctx, jobclient.Handler{
		GetState: func(context.Context, string) (json.RawMessage, error) { return json.RawMessage(`{"at":7}`), nil },
		CutoverReady: func(context.Context, string, json.RawMessage) (json.RawMessage, error) {
			return json.RawMessage(`7`), nil
		},
	}, jobclient.Options{URL: env[protocol.EnvURL], Token: env[protocol.EnvToken]})
	defer src.Close()
	s.WaitConnected(t, in.ID)

	m, err := s.Migrate(in.ID, sim.MigrateRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var targetEnv map[string]string
	for deadline := time.Now().Add(10 * time.Second); targetEnv == nil && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if got := s.Migration(t, m.ID); got.Target.Env != nil {
			targetEnv = got.Target.Env["job"]
		}
	}
	var applied json.RawMessage
	tgt := jobclient.Connect(ctx, jobclient.Handler{
		InitialState: func(_ context.Context, _ string, state json.RawMessage) (json.RawMessage, error) {
			if string(state) != `{"at":7}` {
				t.Errorf("initial state %s", state)
			}
			return nil, nil
		},
		CutoverApply: func(_ context.Context, _ string, at json.RawMessage) (jobclient.Applied, error) {
			applied = at
			return jobclient.Applied{Applied: []string{"counter"}}, nil
		},
	}, jobclient.Options{URL: targetEnv[protocol.EnvURL], Token: targetEnv[protocol.EnvToken]})
	defer tgt.Close()

	done := s.WaitMigration(t, m.ID, 30*time.Second)
	normsimtest.RequireCompleted(t, done)
	if string(applied) != "7" {
		t.Fatalf("target applied at %s, want 7", applied)
	}
}
