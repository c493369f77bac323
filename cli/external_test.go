package cli_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/normsim/normsim/cli"
	"github.com/normsim/normsim/internal/testenv"
	"github.com/normsim/normsim/internal/testjob"
	"github.com/normsim/normsim/normsimtest"
	"github.com/normsim/normsim/protocol"
	"github.com/normsim/normsim/sim"
)

// The debugger loop: migrate --wait of an external instance prints the
// target's env in the three forms launch shows, how long normsim waits, a
// countdown until the target's job connects, and, once the external source
// is stopped, that its process is the developer's to end.
func TestMigrateWaitGuidesAnExternalHandover(t *testing.T) {
	s, src, sj := externalSource(t, sim.Timeouts{TargetStart: sim.Duration(90 * time.Second)})
	var out testenv.SyncBuffer
	code := migrateExternal(t, s, src, sj, &out, "--wait")

	// The developer reads the env off the command's output, as they would.
	var env map[string]string
	waitFor(t, &out, "waiting for your target job to connect: 1m30s left")
	_, target, _ := strings.Cut(out.String(), "The target ")
	env = map[string]string{}
	for _, line := range strings.Split(target, "\n") {
		if k, v, ok := strings.Cut(strings.TrimPrefix(line, "export "), "="); ok && strings.HasPrefix(line, "export ") {
			env[k] = strings.Trim(v, "'")
		}
	}
	if env[protocol.EnvToken] == "" || env["NORMSIM_INSTANCE"] == src.ID {
		t.Fatalf("no target env in the output:\n%s", out.String())
	}
	for _, want := range []string{
		"runs on the external runtime: start its job yourself with this env",
		`"NORSK_WORKER_TOKEN": "` + env[protocol.EnvToken] + `"`,
		"GoLand, Run/Debug Configuration > Environment variables",
		"normsim waits up to 1m30s (targetStart) for it to connect, then 30s (targetReady) for its target-ready",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}

	tj := testjob.Dial(t, env)
	tj.Expect(protocol.TypeInitialState)
	tj.Send(protocol.JobFrame{Type: protocol.TypeTargetReady, Payload: json.RawMessage(`null`)})
	sj.Expect(protocol.TypeCutoverReady)
	sj.Send(protocol.JobFrame{Type: protocol.TypeSourceStoppedOutput, Payload: json.RawMessage(`{"last":3}`)})
	tj.Expect(protocol.TypeCutoverApply)
	tj.Send(protocol.JobFrame{Type: protocol.TypeTargetApplied, Payload: json.RawMessage(`null`)})
	select {
	case <-code:
	case <-time.After(30 * time.Second):
		t.Fatalf("migrate --wait did not end:\n%s", out.String())
	}
	for _, want := range []string{
		"source stopped: it runs on the external runtime, so normsim only closed its socket",
		"Your source job (instance " + src.ID + " on node a) was stopped",
		"End its process now.",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "target started") {
		t.Errorf("the timeline says the external target was started, which normsim cannot do:\n%s", out.String())
	}
}

// migrate without --wait of an external instance returns once the target
// is placed, with its env, so the developer can start it.
func TestMigrateShowsAnExternalTargetsEnv(t *testing.T) {
	s, src, sj := externalSource(t, sim.Timeouts{})
	var out testenv.SyncBuffer
	code := migrateExternal(t, s, src, sj, &out)
	select {
	case c := <-code:
		if c != 0 {
			t.Fatalf("exit %d\n%s", c, out.String())
		}
	case <-time.After(15 * time.Second):
		t.Fatalf("migrate did not return once the target was placed:\n%s", out.String())
	}
	for _, want := range []string{"export NORSK_WORKER_TOKEN=", "normsim waits up to 1m (targetStart)", "Follow it on the dashboard: " + s.URL + "/migrations/mig-"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

// externalSource starts a sim whose instances run on the external runtime,
// launches the counter on node a and connects a scripted job as it.
func externalSource(t *testing.T, timeouts sim.Timeouts) (*normsimtest.Sim, sim.Instance, *testjob.Job) {
	t.Helper()
	s := normsimtest.Start(t, normsimtest.Options{Templates: []string{"../templates"}, Runtime: sim.RuntimeExternal, Timeouts: timeouts})
	src := s.Launch(t, sim.LaunchRequest{Template: "counter", Node: "a"})
	sj := testjob.Dial(t, src.Env["counter"])
	s.WaitConnected(t, src.ID)
	return s, src, sj
}

// migrateExternal runs normsim migrate of src (stdout and stderr to out)
// and answers the get-state, so the target is placed; it returns the exit
// code's channel.
func migrateExternal(t *testing.T, s *normsimtest.Sim, src sim.Instance, sj *testjob.Job, out *testenv.SyncBuffer, flags ...string) <-chan int {
	t.Helper()
	code := make(chan int, 1)
	go func() {
		code <- cli.Main(append([]string{"migrate", src.ID, "--server=" + s.URL}, flags...), cli.Env{Stdout: out, Stderr: out})
	}()
	sj.Expect(protocol.TypeGetState)
	sj.Send(protocol.JobFrame{Type: protocol.TypeState, Payload: json.RawMessage(`{"n":1}`)})
	return code
}

func waitFor(t *testing.T, out *testenv.SyncBuffer, text string) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !strings.Contains(out.String(), text) {
		if time.Now().After(deadline) {
			t.Fatalf("no %q in:\n%s", text, out.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}
