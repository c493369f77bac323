package cli_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/normsim/normsim/internal/testjob"
	"github.com/normsim/normsim/normsimtest"
	"github.com/normsim/normsim/protocol"
	"github.com/normsim/normsim/sim"
)

// TestClientCommandsTeach: the commands that talk to a running sim say
// what to do next when there is nothing or the wrong thing, list the
// templates and nodes, and take --server without a scheme.
func TestClientCommandsTeach(t *testing.T) {
	s := normsimtest.Start(t, normsimtest.Options{Templates: []string{"../templates"}})
	server := strings.TrimPrefix(s.URL, "http://")
	cmd := func(want int, args ...string) (string, string) {
		t.Helper()
		code, out, errOut := run(t, append(args, "--server", server)...)
		if code != want {
			t.Fatalf("%v: exit %d, want %d\nstdout: %s\nstderr: %s", args, code, want, out, errOut)
		}
		return out, errOut
	}
	if out, _ := cmd(0, "ps"); out != "no instances; start one with: normsim launch TEMPLATE --node NODE\n" {
		t.Errorf("empty ps: %q", out)
	}
	if _, errOut := cmd(1, "launch", "nosuch", "--node", "a"); !strings.Contains(errOut, `template "nosuch" not found; loaded: counter, plain, relay-overlap`) {
		t.Errorf("launch of an unknown template: %q", errOut)
	}
	for _, args := range [][]string{{"stop", "nosuch"}, {"logs", "nosuch"}, {"migrate", "nosuch"}, {"frames", "nosuch"}, {"events", "nosuch"}} {
		// logs adds that no logs of it are kept either, before the hint.
		if _, errOut := cmd(1, args...); !strings.Contains(errOut, `instance "nosuch" not found`) || !strings.HasSuffix(strings.TrimSpace(errOut), "; normsim ps lists the instances (NOT_FOUND)") {
			t.Errorf("%v: %q", args, errOut)
		}
	}
	out, _ := cmd(0, "templates")
	for _, want := range []string{"counter        handover       RATE int=50 [1..1000]", "plain          stopThenStart", "relay-overlap  overlap"} {
		if !strings.Contains(out, want) {
			t.Errorf("templates lacks %q:\n%s", want, out)
		}
	}
	out, _ = cmd(0, "nodes")
	for _, n := range s.Main.Manager.Nodes() {
		if !strings.Contains(out, n.Name+"     "+n.Address) || !strings.Contains(out, n.SocketURL+"  "+protocol.Capability) {
			t.Errorf("nodes lacks node %s at %s with %s:\n%s", n.Name, n.Address, n.SocketURL, out)
		}
	}
}

// TestClientCommandsHaveHelp: each command that talks to a sim explains
// itself and shows examples.
func TestClientCommandsHaveHelp(t *testing.T) {
	for _, c := range []string{"launch", "ps", "logs", "events", "frames", "stop", "migrate", "abort", "templates", "nodes"} {
		code, out, _ := run(t, c, "--help")
		if code != 0 || !strings.Contains(out, "Examples:\n  normsim "+c) || !strings.Contains(out, "--server") || len(out) < 400 {
			t.Errorf("%s --help: exit %d\n%s", c, code, out)
		}
	}
}

// TestMigrateWaitExitsOnABrokenSeam: a handover that completes with a
// judgement of fail (wrong-position repeats 5 packets) exits 3 under
// --wait, and 0 with --ignore-seam.
func TestMigrateWaitExitsOnABrokenSeam(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes")
	}
	s := normsimtest.Start(t, normsimtest.Options{Templates: []string{"../examples/templates"}})
	in := s.Launch(t, sim.LaunchRequest{Template: "wrong-position", Node: "a", Params: map[string]string{"RATE": "100"}})
	s.WaitConnected(t, in.ID)
	code, out, errOut := run(t, "migrate", in.ID, "--wait", "--server", s.URL)
	if code != 3 || !strings.Contains(errOut, "completed, but its judgement is fail (at fault: source): numbers repeated at the seam: ") ||
		!strings.Contains(errOut, "(--ignore-seam accepts it)") || !strings.Contains(out, "\njudgement: fail (at fault: source): numbers repeated at the seam") {
		t.Fatalf("migrate --wait of wrong-position: exit %d\nstdout: %s\nstderr: %s", code, out, errOut)
	}
	// The broken seam comes with what each side printed: the evidence.
	if !strings.Contains(out, "log line(s) of the source, "+in.ID+":") || !strings.Contains(out, "log line(s) of the target, ") {
		t.Errorf("migrate --wait of a broken seam prints no log tails:\n%s", out)
	}
	var list []sim.Migration
	if err := s.Do("GET", "/api/v1/migrations", nil, &list); err != nil || len(list) != 1 {
		t.Fatalf("migrations: %v %d", err, len(list))
	}
	next := s.WaitConnected(t, list[0].Target.Instance)
	code, out, errOut = run(t, "migrate", next.ID, "--wait", "--ignore-seam", "--server", s.URL)
	if code != 0 || !strings.Contains(out, "output: duplicate") {
		t.Fatalf("--ignore-seam: exit %d\nstdout: %s\nstderr: %s", code, out, errOut)
	}
}

// TestMigrateWaitPrintsWhatTheTargetCouldNotApply: apply-fails hands over
// seamlessly but reports its overlay failed; migrate --wait prints the
// result whole and the judgement, tolerated, and exits 0.
func TestMigrateWaitPrintsWhatTheTargetCouldNotApply(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes")
	}
	s := normsimtest.Start(t, normsimtest.Options{Templates: []string{"../examples/templates"}})
	in := s.Launch(t, sim.LaunchRequest{Template: "apply-fails", Node: "a", Params: map[string]string{"RATE": "100"}})
	s.WaitConnected(t, in.ID)
	code, out, errOut := run(t, "migrate", in.ID, "--wait", "--server", s.URL)
	if code != 0 {
		t.Fatalf("migrate --wait of apply-fails: exit %d, want 0\nstdout: %s\nstderr: %s", code, out, errOut)
	}
	for _, want := range []string{
		"\noutput: seamless (",
		"\ntarget-applied: applied counter; failed overlay (font /fonts/lower-third.ttf is missing on this node); skewMs 4\n",
		"\njudgement: tolerated (at fault: none): the target could not apply 1 participant: overlay (font /fonts/lower-third.ttf is missing on this node)\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("migrate --wait does not print %q:\n%s", want, out)
		}
	}
}

// TestFramesShowsTheJobsSocket: normsim frames shows what a job and its
// node said, both ways, hello's token redacted; --json gives the records.
func TestFramesShowsTheJobsSocket(t *testing.T) {
	s := normsimtest.Start(t, normsimtest.Options{Templates: []string{"../templates"}, Runtime: sim.RuntimeExternal})
	server := strings.TrimPrefix(s.URL, "http://")
	in := s.Launch(t, sim.LaunchRequest{Template: "counter", Node: "a"})
	env := in.Env["counter"]
	testjob.Dial(t, env)
	s.WaitConnected(t, in.ID)
	var out string
	for deadline := time.Now().Add(10 * time.Second); ; {
		code, o, errOut := run(t, "frames", in.ID, "--server", server)
		if code != 0 {
			t.Fatalf("frames: exit %d: %s", code, errOut)
		}
		if out = o; strings.Contains(out, "hello-ack") || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond) // the recorder writes a few ms after the frame
	}
	t.Logf("normsim frames:\n%s", out)
	for _, want := range []string{"  in   hello ", "  out  hello-ack "} {
		if !strings.Contains(out, want) {
			t.Errorf("frames lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, env[protocol.EnvToken]) {
		t.Errorf("frames shows hello's token:\n%s", out)
	}
	code, js, _ := run(t, "frames", in.ID, "--tail", "1", "--json", "--server", server)
	var frs []sim.FrameRecord
	if code != 0 || json.Unmarshal([]byte(js), &frs) != nil || len(frs) != 1 || frs[0].Role != in.ID {
		t.Errorf("frames --tail 1 --json: exit %d\n%s", code, js)
	}
	// A job's ID names its running instance.
	if code, byJob, errOut := run(t, "frames", in.JobID, "--server", server); code != 0 || !strings.Contains(byJob, "  out  hello-ack ") {
		t.Errorf("frames JOB-ID: exit %d\n%s%s", code, byJob, errOut)
	}
	if code, _, errOut := run(t, "frames", in.ID, "--tail", "0", "--server", server); code != 2 || !strings.Contains(errOut, "--tail: want a number of frames from 1 to 10000; got 0") {
		t.Errorf("--tail 0: exit %d: %s", code, errOut)
	}
}

// TestEventsTellAnInstancesHistory: normsim events says what happened to
// an instance, in words, after it is gone too.
func TestEventsTellAnInstancesHistory(t *testing.T) {
	s := normsimtest.Start(t, normsimtest.Options{Templates: []string{"../templates"}, Runtime: sim.RuntimeExternal})
	server := strings.TrimPrefix(s.URL, "http://")
	in := s.Launch(t, sim.LaunchRequest{Template: "counter", Node: "a"})
	j := testjob.Dial(t, in.Env["counter"])
	s.WaitConnected(t, in.ID)
	j.Conn().Close(4000, "bye from the job")
	s.WaitInstance(t, in.ID, 10*time.Second, "disconnected", func(in sim.Instance) bool { return !in.Connected })
	if err := s.Do("DELETE", "/api/v1/instances/"+in.ID, nil, nil); err != nil {
		t.Fatal(err)
	}
	s.Main.Manager.Flush()
	code, out, errOut := run(t, "events", in.ID, "--server", server)
	if code != 0 {
		t.Fatalf("events: exit %d: %s", code, errOut)
	}
	t.Logf("normsim events:\n%s", out)
	for _, want := range []string{
		"instance.state      placed on node a: starting",
		"instance.state      starting → running",
		"instance.connected  its job connected to the job socket",
		"instance.connected  its job closed its socket (4000: bye from the job)",
		"instance.removed    removed",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("events lacks %q:\n%s", want, out)
		}
	}
	code, js, _ := run(t, "events", in.ID, "--tail", "1", "--json", "--server", server)
	var evs []sim.DescribedEvent
	if code != 0 || json.Unmarshal([]byte(js), &evs) != nil || len(evs) != 1 || evs[0].Kind != sim.EventInstanceRemoved || evs[0].Text != "removed" {
		t.Errorf("events --tail 1 --json: exit %d\n%s", code, js)
	}
}

// TestAbortRollsBack: normsim abort --wait rolls a running handover back
// and exits 0 once it ended aborted; a second abort says there is nothing
// to abort.
func TestAbortRollsBack(t *testing.T) {
	s := normsimtest.Start(t, normsimtest.Options{Templates: []string{"../templates"}, Runtime: sim.RuntimeExternal})
	server := strings.TrimPrefix(s.URL, "http://")
	in := s.Launch(t, sim.LaunchRequest{Template: "counter", Node: "a"})
	j := testjob.Dial(t, in.Env["counter"])
	s.WaitConnected(t, in.ID)
	m, err := s.Migrate(in.ID, sim.MigrateRequest{})
	if err != nil {
		t.Fatal(err)
	}
	j.Expect(protocol.TypeGetState) // the source holds the migration in get-state
	code, out, errOut := run(t, "abort", m.ID, "--reason", "wrong node", "--wait", "--server", server)
	if code != 0 || !strings.Contains(out, "abort requested in phase get-state") || !strings.Contains(out, m.ID+" aborted: aborted by the user: wrong node") {
		t.Fatalf("abort --wait: exit %d\nstdout: %s\nstderr: %s", code, out, errOut)
	}
	if f := j.Expect(protocol.TypeAbort); f.MigrationID != m.ID {
		t.Errorf("the source was told %+v", f)
	}
	code, _, errOut = run(t, "abort", m.ID, "--server", server)
	if code != 1 || !strings.Contains(errOut, "already ended aborted; there is nothing to abort") {
		t.Errorf("a second abort: exit %d: %s", code, errOut)
	}
	if code, _, errOut := run(t, "abort", "mig-nosuch", "--server", server); code != 1 || !strings.Contains(errOut, "not found") {
		t.Errorf("abort of an unknown migration: exit %d: %s", code, errOut)
	}
}

// TestLaunchUntilReportsAJobThatDies: launch --until running exits 1 with
// the instance's error and its last lines when the job dies at once, and
// ps says why in its REASON column.
func TestLaunchUntilReportsAJobThatDies(t *testing.T) {
	s := normsimtest.Start(t, normsimtest.Options{Templates: []string{"testdata/templates"}})
	server := strings.TrimPrefix(s.URL, "http://")
	code, out, errOut := run(t, "launch", "dies-at-once", "--node", "a", "--until", "running", "--timeout", "20s", "--server", server)
	if code != 1 || !strings.Contains(out, "config.yaml: no such file") || !strings.Contains(errOut, "dies-at-once") {
		t.Fatalf("launch --until of a job that dies: exit %d\nstdout: %s\nstderr: %s", code, out, errOut)
	}
	code, out, _ = run(t, "ps", "--server", server)
	if code != 0 || !strings.Contains(out, "REASON") || !strings.Contains(out, "exit") {
		t.Errorf("ps after it died: exit %d\n%s", code, out)
	}
	if code, _, errOut := run(t, "launch", "dies-at-once", "--node", "a", "--until", "soon", "--server", server); code != 2 || !strings.Contains(errOut, "--until: must be running or connected") {
		t.Errorf("--until soon: exit %d: %s", code, errOut)
	}
}

// TestFramesSaysWhatWasDropped (issue 34 item 6): when normsim let go of
// an instance's oldest frame records to stay within its bound, normsim
// frames says so above the list.
func TestFramesSaysWhatWasDropped(t *testing.T) {
	s := normsimtest.Start(t, normsimtest.Options{Templates: []string{"../templates"}, Runtime: sim.RuntimeExternal})
	server := strings.TrimPrefix(s.URL, "http://")
	in := s.Launch(t, sim.LaunchRequest{Template: "counter", Node: "a"})
	big := `{"type":"state","payload":"` + strings.Repeat("x", 60<<10) + `"}`
	for range 80 { // 80 × 60 KiB: past the 4 MiB an instance keeps
		j := testjob.Dial(t, in.Env["counter"])
		j.SendText(big) // out of phase: closed with 4400, and recorded
		j.Closed(5 * time.Second)
	}
	var out string
	for deadline := time.Now().Add(10 * time.Second); ; {
		code, o, errOut := run(t, "frames", in.ID, "--tail", "3", "--server", server)
		if code != 0 {
			t.Fatalf("frames: exit %d: %s", code, errOut)
		}
		if out = o; strings.Contains(out, "were dropped") || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if !strings.HasPrefix(out, "normsim | ") || !strings.Contains(out, "earlier frame record(s)") || !strings.Contains(out, "the last 2000 frames or 4 MiB of an instance") {
		t.Fatalf("frames does not say what was dropped:\n%s", out)
	}
}
