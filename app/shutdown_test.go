package app_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/normsim/normsim/internal/bench"
	"github.com/normsim/normsim/internal/testenv"
	"github.com/normsim/normsim/sim"
)

// heldDelay is how long the fault in these tests holds cutover-ready:
// within the stop phase's 10 s timeout, and far longer than an exit that
// does not wait for it takes.
const heldDelay = 9 * time.Second

var heldFault = []sim.Fault{{Kind: "delay-frame", Frame: "cutover-ready", Delay: sim.Duration(heldDelay)}}

// mustGetJSON reads a 200 answer of the API into out.
func mustGetJSON(t *testing.T, url string, out any) {
	t.Helper()
	if code := getJSON(t, url, out); code != http.StatusOK {
		t.Fatalf("GET %s: %d", url, code)
	}
}

// waitHeld waits until a migration of the API at base holds a frame, and
// returns the job it moves.
func waitHeld(t *testing.T, base string) string {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for time.Now().Before(deadline) {
		var list []sim.Migration
		mustGetJSON(t, base+"/api/v1/migrations", &list)
		for _, m := range list {
			var full sim.Migration
			mustGetJSON(t, base+"/api/v1/migrations/"+m.ID, &full)
			for _, ev := range full.Events {
				if strings.Contains(ev.Detail, "held for") {
					return full.JobID
				}
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatal("no migration came to hold its frame")
	return ""
}

// signalAndTime signals the process and returns how long it took to exit.
func signalAndTime(t *testing.T, cmd *exec.Cmd, exited <-chan struct{}, sig syscall.Signal) time.Duration {
	t.Helper()
	start := time.Now()
	if err := cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	select {
	case <-exited:
		return time.Since(start)
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("normsim did not exit within 30 s of %v", sig)
		return 0
	}
}

// requireExitBeforeTheDelay fails when an exit waited for the held frame,
// and when a process of the job outlived normsim.
func requireExitBeforeTheDelay(t *testing.T, what string, took time.Duration, job string) {
	t.Helper()
	t.Logf("%s: exited %s after the signal, with a %s delay held", what, took.Round(time.Millisecond), heldDelay)
	if took >= heldDelay/2 {
		t.Errorf("%s took %s to exit: it waited for the held frame", what, took)
	}
	if left := processesOf(map[string]bool{job: true}); len(left) > 0 {
		t.Errorf("%s left processes of %s running: %v", what, job, left)
	}
}

// child is a normsim binary built for a test, run from the repository
// root.
type child struct {
	root, bin string
}

func buildChild(t *testing.T) child {
	t.Helper()
	if testing.Short() {
		t.Skip("builds normsim and runs host processes")
	}
	root, _ := filepath.Abs("..")
	bin, err := bench.Build(context.Background(), root, ".", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return child{root, bin}
}

// start runs the child with args; it is killed when the test ends.
func (c child) start(t *testing.T, args ...string) (*exec.Cmd, <-chan struct{}, *testenv.SyncBuffer) {
	t.Helper()
	cmd := exec.Command(c.bin, args...)
	cmd.Dir = c.root
	out := &testenv.SyncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() { cmd.Process.Kill(); <-exited })
	return cmd, exited, out
}

// TestSignalsDoNotWaitForAHeldFrame: with a delay-frame fault holding
// cutover-ready, SIGINT (Ctrl-C), SIGTERM and SIGHUP (a closed terminal;
// issue 34, round four, F4: it killed normsim at once, its jobs left
// running) of `normsim up`, and SIGTERM of `normsim ci`, end normsim
// without waiting for the delay, and leave no process of the job behind.
func TestSignalsDoNotWaitForAHeldFrame(t *testing.T) {
	c := buildChild(t)
	root, start := c.root, c.start
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP} {
		t.Run("up/"+sig.String(), func(t *testing.T) {
			addr := "127.0.0.1:" + strconv.Itoa(testenv.FreePort(t))
			cmd, exited, out := start(t, "up", "--db", ":memory:", "--addr", addr, "--socket-port", "0",
				"--runtime", sim.RuntimeProcess, "--templates", filepath.Join(root, "templates"))
			base := "http://" + addr
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			if err := bench.WaitReady(ctx, base+"/readyz"); err != nil {
				t.Fatalf("normsim up never became ready: %v\n%s", err, out)
			}
			var in sim.Instance
			mustPostJSON(t, base+"/api/v1/instances", sim.LaunchRequest{Template: "counter", Node: "a"}, &in)
			waitConnected(t, base, in.ID)
			mustPostJSON(t, base+"/api/v1/instances/"+in.ID+"/migrate", sim.MigrateRequest{Faults: heldFault}, nil)
			job := waitHeld(t, base)
			requireExitBeforeTheDelay(t, "normsim up", signalAndTime(t, cmd, exited, sig), job)
		})
	}
	t.Run("ci/SIGTERM", func(t *testing.T) {
		scenario := filepath.Join(t.TempDir(), "held.yaml")
		os.WriteFile(scenario, []byte(`
template: counter
steps:
  - launch: {node: a}
  - migrate:
      to: b
      faults: [{kind: delay-frame, frame: cutover-ready, delay: 9s}]
`), 0o644)
		cmd, exited, out := start(t, "ci", scenario, "--runtime", sim.RuntimeProcess, "--templates", filepath.Join(root, "templates"))
		base := waitLine(t, out, regexp.MustCompile(`API (http://\S+?)(/api/v1)?\s`))
		job := waitHeld(t, base)
		requireExitBeforeTheDelay(t, "normsim ci", signalAndTime(t, cmd, exited, syscall.SIGTERM), job)
	})
}

// mustPostJSON posts body and reads a 2xx answer into out.
func mustPostJSON(t *testing.T, url string, body, out any) {
	t.Helper()
	b, _ := json.Marshal(body)
	if code := postJSON(t, url, string(b), out); code/100 != 2 {
		t.Fatalf("POST %s: %d", url, code)
	}
}

func waitConnected(t *testing.T, base, id string) {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for time.Now().Before(deadline) {
		var in sim.Instance
		mustGetJSON(t, base+"/api/v1/instances/"+id, &in)
		if in.Connected {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("instance %s never connected", id)
}

// waitLine waits until the output has a line matching re and returns its
// first group.
func waitLine(t *testing.T, out *testenv.SyncBuffer, re *regexp.Regexp) string {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		sc := bufio.NewScanner(strings.NewReader(out.String()))
		for sc.Scan() {
			if m := re.FindStringSubmatch(sc.Text() + " "); m != nil {
				return m[1]
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("no line matching %s in:\n%s", re, out)
	return ""
}

// TestValidateStopsAtSIGTERM (issue 34 item 1): `normsim validate` over
// templates that take many seconds to judge together stops at SIGTERM,
// exit 130, instead of judging the rest first.
func TestValidateStopsAtSIGTERM(t *testing.T) {
	c := buildChild(t)
	dir := t.TempDir()
	// Each holds nearly the 10,000 YAML nodes a template may: a few
	// tenths of a second of compose-go's time, over ten seconds for all.
	compose := "x-many: [" + strings.TrimSuffix(strings.Repeat("1,", 9_900), ",") + "]\nservices:\n  app:\n    image: busybox\n"
	manifest := `{"productTemplateSchemaVersion": 1, "productName": "Big", "productVersion": "1", "generatedAt": "2025-01-01T00:00:00Z", "target": "docker-compose"}`
	for i := range 40 {
		tpl := filepath.Join(dir, "big"+strconv.Itoa(i))
		if err := os.MkdirAll(tpl, 0o755); err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(tpl, "manifest.json"), []byte(manifest), 0o644)
		os.WriteFile(filepath.Join(tpl, "compose.yml"), []byte(compose), 0o644)
	}
	cmd, exited, out := c.start(t, "validate", dir)
	time.Sleep(time.Second) // well into the templates, well before their end
	took := signalAndTime(t, cmd, exited, syscall.SIGTERM)
	t.Logf("exited %s after SIGTERM", took.Round(time.Millisecond))
	if code := cmd.ProcessState.ExitCode(); code != 130 || !strings.Contains(out.String(), "validate: interrupted") {
		t.Fatalf("exit %d after SIGTERM, want 130 saying it was interrupted:\n%s", code, out)
	}
	if took > 5*time.Second {
		t.Fatalf("validate took %s to stop after SIGTERM", took)
	}
}

// TestSecondInterruptQuitsAtOnce: the first Ctrl-C starts a graceful stop
// that waits for a job ignoring SIGTERM; the second one kills it and
// quits, saying so, and leaves none of the job's processes.
func TestSecondInterruptQuitsAtOnce(t *testing.T) {
	c := buildChild(t)
	addr := "127.0.0.1:" + strconv.Itoa(testenv.FreePort(t))
	cmd, exited, out := c.start(t, "up", "--db", ":memory:", "--addr", addr, "--socket-port", "0", "--runtime", sim.RuntimeProcess,
		"--templates", filepath.Join(c.root, "app", "testdata", "templates"))
	base := "http://" + addr
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := bench.WaitReady(ctx, base+"/readyz"); err != nil {
		t.Fatalf("not ready: %v\n%s", err, out)
	}
	var in sim.Instance
	mustPostJSON(t, base+"/api/v1/instances", sim.LaunchRequest{Template: "stubborn", Node: "a"}, &in)
	for deadline := time.Now().Add(30 * time.Second); in.State != sim.InstanceRunning; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("stubborn never ran: %+v", in)
		}
		mustGetJSON(t, base+"/api/v1/instances/"+in.ID, &in)
	}
	cmd.Process.Signal(syscall.SIGINT)
	first := time.Now()
	for !strings.Contains(out.String(), "Stopping normsim") {
		time.Sleep(10 * time.Millisecond)
	}
	// A person's second Ctrl-C: a signal within 50 ms of the first is
	// taken for the same one delivered twice (as timeout(1) does).
	time.Sleep(time.Until(first.Add(100 * time.Millisecond)))
	took := signalAndTime(t, cmd, exited, syscall.SIGINT)
	t.Logf("exited %s after the second Ctrl-C", took.Round(time.Millisecond))
	if !strings.Contains(out.String(), "second interrupt: killing what is still running and quitting") {
		t.Fatalf("the second Ctrl-C was not acted on:\n%s", out)
	}
	if code := cmd.ProcessState.ExitCode(); code != 130 {
		t.Errorf("exit code %d after a second Ctrl-C, want 130", code)
	}
	if left := processesOf(map[string]bool{in.JobID: true}); len(left) > 0 {
		t.Fatalf("processes of the job left running: %v", left)
	}
}
