package cli_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/normsim/normsim/cli"
	"github.com/normsim/normsim/normsimtest"
	"github.com/normsim/normsim/sim"
)

func run(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := cli.Main(args, cli.Env{Stdout: &out, Stderr: &errb})
	return code, out.String(), errb.String()
}

func TestVersion(t *testing.T) {
	code, out, _ := run(t, "version")
	if code != 0 || !strings.HasPrefix(out, "normsim ") {
		t.Fatalf("version: %d %q", code, out)
	}
}

func TestUsageErrorsExit2(t *testing.T) {
	for _, args := range [][]string{
		{"up", "--no-such-flag"},
		{"validate"},
		{"launch"},
		{"migrate", "a", "b"},
		{"migrate", "x", "--timeout", "bogus=1s"},
		{"up", "--log-format", "xml"},
		{"up", "--timeouts", "state=10s,bogus=1s"},
		{"up", "--timeouts", "state=-1s"},
		{"ci", "--timeouts", "targetReady=soon", "x.yaml"},
		{"templates", "extra-arg"},
		// Options the sim cannot run with are usage errors too.
		{"up", "--db", ":memory:", "--addr", "127.0.0.1:0", "--socket-port", "0", "--runtime", "foo"},
		{"up", "--db", ":memory:", "--addr", "127.0.0.1:0", "--socket-port", "0", "--nodes", "a,a"},
		{"up", "--db", ":memory:", "--addr", "127.0.0.1:0", "--socket-port", "0", "--no-job-socket", "z"},
		// issue 34, round three, F7: two nodes from 65535 take 65536.
		{"up", "--db", ":memory:", "--addr", "127.0.0.1:0", "--socket-port", "65535"},
		// issue 34, round four: a port past 65535 failed at listen, exit 1.
		{"up", "--db", ":memory:", "--addr", "127.0.0.1:0", "--socket-port", "0", "--output-port", "65536"},
		// Attack round 11: an empty --nodes ran the default nodes, a wait
		// of no time was tried against the server, and a --since the
		// server refuses exited 1.
		{"up", "--db", ":memory:", "--addr", "127.0.0.1:0", "--socket-port", "0", "--nodes", ""},
		{"launch", "counter", "--node", "a", "--until", "running", "--timeout", "-5s", "--server", "127.0.0.1:1"},
		{"logs", "x", "--since", "garbage", "--server", "127.0.0.1:1"},
		// Round 12: a command cobra does not know, a --server naming no
		// host, and a parameter given twice exited 1 (or ran).
		{"bogus"},
		{"ps", "--server", ""},
		{"ps", "--server", "http://[::1"},
		{"launch", "counter", "--node", "a", "--param", "V=5", "--param", "V=6", "--server", "127.0.0.1:1"},
		// Round 12: a shell cobra's completion does not know, and a help
		// topic that is no command, printed help and exited 0.
		{"completion", "bogus"},
		{"help", "bogus"},
	} {
		code, _, errOut := run(t, args...)
		if code != 2 || errOut == "" {
			t.Errorf("%v: exit %d, stderr %q; want 2 with a message", args, code, errOut)
		}
	}
	// A value Go cannot parse gets what to write as well as what is wrong.
	for args, fix := range map[[3]string]string{
		{"launch", "--timeout", "5x"}: "write a duration such as 500ms, 30s or 2m",
		{"frames", "--tail", "abc"}:   "write a whole number, such as 10",
	} {
		code, _, errOut := run(t, append(args[:], "x")...)
		if code != 2 || !strings.Contains(errOut, fix) {
			t.Errorf("%v: exit %d, stderr %q; want 2 with %q", args, code, errOut, fix)
		}
	}
	// A list in one --templates value: the flag is repeatable, and the
	// error says how to write it.
	dirs := t.TempDir() + "," + t.TempDir()
	for _, cmd := range []string{"conform", "ci"} {
		code, _, errOut := run(t, cmd, "counter", "--templates", dirs)
		if code != 2 || !strings.Contains(errOut, "give --templates once for each directory") {
			t.Errorf("%s --templates %s: exit %d, stderr %q; want 2 saying to repeat the flag", cmd, dirs, code, errOut)
		}
	}
}

func TestValidateExitCodes(t *testing.T) {
	code, out, _ := run(t, "validate", "../templates/counter", "../templates/plain")
	if code != 0 || !strings.Contains(out, "ok    counter") {
		t.Fatalf("valid templates: %d\n%s", code, out)
	}
	broken := t.TempDir()
	os.WriteFile(filepath.Join(broken, "manifest.json"), []byte(`{"productTemplateSchemaVersion":1,"productName":"x","productVersion":"1","generatedAt":"now","target":"docker-compose","migration":{"strategy":"live"}}`), 0o644)
	os.WriteFile(filepath.Join(broken, "compose.yml"), []byte("services:\n  a:\n    image: x\n"), 0o644)
	code, out, _ = run(t, "validate", broken)
	if code != 1 || !strings.Contains(out, "MANIFEST_INVALID") || !strings.Contains(out, `migration.strategy: must be one of overlap, stopThenStart, handover; got "live"`) {
		t.Fatalf("broken template: %d\n%s", code, out)
	}
	code, out, _ = run(t, "validate", "--json", broken)
	var res []struct {
		Valid    bool
		Problems []struct{ Code, Path string }
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil || code != 1 || len(res) != 1 || res[0].Valid || res[0].Problems[0].Path != "migration.strategy" {
		t.Fatalf("--json: %d %v\n%s", code, err, out)
	}
	if code, _, errOut := run(t, "validate", filepath.Join(broken, "missing")); code != 2 || !strings.Contains(errOut, "does not exist; give a template directory") {
		t.Fatalf("missing path: exit %d, stderr %q; want 2 naming what to give", code, errOut)
	}
	// What the shell makes of templates/* when a template is there twice,
	// as a directory and as an archive of the same name: one is a
	// CONFLICT, as it is for the sim that loads the directory. A path
	// named twice is judged once.
	code, out, _ = run(t, "validate", "../templates/counter", "../templates/counter/", "../templates/counter")
	if code != 0 || !strings.Contains(out, "1 template(s) checked, 0 invalid") {
		t.Fatalf("a path named twice: exit %d\n%s", code, out)
	}
	twice := t.TempDir()
	if err := os.CopyFS(filepath.Join(twice, "counter"), os.DirFS("../templates/counter")); err != nil {
		t.Fatal(err)
	}
	code, out, _ = run(t, "validate", "../templates/counter", filepath.Join(twice, "counter"))
	if code != 1 || !strings.Contains(out, "CONFLICT") || !strings.Contains(out, "2 template(s) checked, 1 invalid") {
		t.Fatalf("two templates of one name: exit %d\n%s", code, out)
	}
	// What the shell makes of templates/*: the README beside the
	// templates is skipped with a note, not judged as a manifest.
	readme := filepath.Join(t.TempDir(), "README.md")
	os.WriteFile(readme, []byte("# templates\n"), 0o644)
	code, out, errOut := run(t, "validate", "../templates/counter", readme)
	if code != 0 || !strings.Contains(out, "1 template(s) checked, 0 invalid") || !strings.Contains(errOut, "skip  "+readme+": not a template") {
		t.Fatalf("template and README: exit %d\nstdout: %s\nstderr: %s", code, out, errOut)
	}
	if code, _, errOut := run(t, "validate", readme); code != 2 || !strings.Contains(errOut, "none of the paths is a template") {
		t.Fatalf("only a README: exit %d, stderr %q; want 2", code, errOut)
	}
}

// TestValidateWarnsAdjustments: what a launch will adjust is printed as a
// warning; the template stays valid and the exit status 0.
func TestValidateWarnsAdjustments(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "manifest.json"), []byte(`{"productTemplateSchemaVersion":1,"productName":"x","productVersion":"1","generatedAt":"now","target":"docker-compose"}`), 0o644)
	os.WriteFile(filepath.Join(dir, "compose.yml"), []byte("services:\n  engine:\n    image: x\n    container_name: engine\n  sidecar:\n    image: x\n    network_mode: service:engine\n"), 0o644)
	code, out, _ := run(t, "validate", dir)
	if code != 0 || !strings.Contains(out, `warn  `+filepath.Base(dir)+`: services.engine.container_name: "engine" runs as "normsim-<instance>-engine"`) ||
		!strings.Contains(out, "services.sidecar: no extra_hosts") || !strings.Contains(out, "0 invalid") {
		t.Fatalf("exit %d\n%s", code, out)
	}
	code, out, _ = run(t, "validate", "--json", dir)
	var res []struct{ Warnings []string }
	if err := json.Unmarshal([]byte(out), &res); err != nil || code != 0 || len(res) != 1 || len(res[0].Warnings) != 2 {
		t.Fatalf("--json: %d %v\n%s", code, err, out)
	}
}

// TestClientCommands drives launch, ps, logs, migrate and stop against a
// running sim, the way a developer does from a second terminal.
func TestClientCommands(t *testing.T) {
	s := normsimtest.Start(t, normsimtest.Options{Templates: []string{"../templates"}, Runtime: sim.RuntimeExternal})
	server := "--server=" + s.URL

	code, out, errOut := run(t, "launch", "counter", "--node", "a", "--param", "RATE=10", server)
	if code != 0 || !strings.Contains(out, "export NORSK_WORKER_TOKEN=") {
		t.Fatalf("launch: %d\n%s%s", code, out, errOut)
	}
	id := strings.Fields(out)[0]
	s.WaitInstance(t, id, 10*time.Second, "running", func(in sim.Instance) bool { return in.State == sim.InstanceRunning })

	code, out, _ = run(t, "ps", server)
	if code != 0 || !strings.Contains(out, id) || !strings.Contains(out, "external") || !strings.Contains(out, "PORTS") {
		t.Fatalf("ps: %d\n%s", code, out)
	}
	code, out, _ = run(t, "logs", id, server)
	if code != 0 || !strings.Contains(out, "external runtime") {
		t.Fatalf("logs: %d\n%s", code, out)
	}
	// Not connected: a handover is refused with the reason, exit 1.
	code, _, errOut = run(t, "migrate", id, "--wait", server)
	if code != 1 || !strings.Contains(errOut, "not connected") {
		t.Fatalf("migrate of an unconnected instance: %d %q", code, errOut)
	}
	code, _, errOut = run(t, "launch", "nope", "--node", "a", server)
	if code != 1 || !strings.Contains(errOut, "not found") {
		t.Fatalf("unknown template: %d %q", code, errOut)
	}
	code, out, _ = run(t, "stop", id, server)
	if code != 0 || !strings.Contains(out, "stopped "+id) {
		t.Fatalf("stop: %d %q", code, out)
	}
	code, _, errOut = run(t, "stop", id, server)
	if code != 1 || !strings.Contains(errOut, "not found") {
		t.Fatalf("stop again: %d %q", code, errOut)
	}
	code, _, errOut = run(t, "ps", "--server=http://127.0.0.1:1")
	if code != 1 || !strings.Contains(errOut, "cannot reach normsim") {
		t.Fatalf("ps without a sim: %d %q", code, errOut)
	}
}

// TestMigrateWaitPrintsPhases migrates a real counter process.
func TestMigrateWaitPrintsPhases(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes")
	}
	s := normsimtest.Start(t, normsimtest.Options{Templates: []string{"../templates"}})
	in := s.Launch(t, sim.LaunchRequest{Template: "counter", Node: "a"})
	s.WaitConnected(t, in.ID)
	code, out, errOut := run(t, "migrate", in.ID, "--wait", "--server="+s.URL)
	if code != 0 || !strings.Contains(out, "cutover-apply") || !strings.Contains(out, "completed") || !strings.Contains(out, "output: seamless") {
		t.Fatalf("migrate --wait: %d\n%s%s", code, out, errOut)
	}
}
