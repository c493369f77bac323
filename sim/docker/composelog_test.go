package docker_test

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/normsim/normsim/sim"
	"github.com/normsim/normsim/sim/docker"
	"github.com/normsim/normsim/sim/template"
)

// lockedBuffer is a bytes.Buffer that logs from several goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// compose-go's "The "X" variable is not set" lines of an env or label
// file's unset variables named no instance or template in normsim's log
// (component=compose), and the label file's came twice: at launch, and
// when Prepare read the file again. Through a launch and a Prepare, as
// normsim up does them, each comes once, naming both.
func TestUnsetVariableLinesNameTheInstance(t *testing.T) {
	img, cli := mustJobImage(t)
	var buf lockedBuffer
	docker.RouteComposeLogs(slog.New(slog.NewJSONHandler(&buf, nil)))
	t.Cleanup(func() { docker.RouteComposeLogs(slog.New(slog.DiscardHandler)) })
	r, _ := newRuntime(t)

	dir := filepath.Join(t.TempDir(), "unsetvars")
	manifest := `{"productTemplateSchemaVersion":1,"productName":"unsetvars","productVersion":"0.1.0","generatedAt":"2025-01-01T00:00:00Z","target":"docker-compose","migration":{"strategy":"handover"}}`
	files := map[string]string{
		"manifest.json": manifest,
		"compose.yml":   "services:\n  app:\n    image: " + img + "\n    env_file: [app.env]\n    label_file: app.lbl\n",
		"app.env":       "A=${NORMSIM_TEST_UNSET_A}/x\n",
		"app.lbl":       "com.example.b=${NORMSIM_TEST_UNSET_B}\n",
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	l := template.Load(dir)
	if !l.Valid() {
		t.Fatalf("template invalid: %+v", l.Problems)
	}
	id := "t" + randomID()
	t.Cleanup(func() { removeInstance(t, cli, id) })
	spec, err := l.Launch(sim.LaunchInput{
		Instance: &sim.Instance{ID: id, JobID: "job-" + id, Role: "role-a"},
		Node:     sim.Node{Name: "node-1"},
		Runtime:  sim.RuntimeDocker,
		PortFree: func(int, string) bool { return true },
	})
	if err != nil {
		t.Fatal(err)
	}
	prepareStart(t, r, spec)
	got := map[string]int{}
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var e map[string]any
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		msg, _ := e["msg"].(string)
		if !strings.Contains(msg, "NORMSIM_TEST_UNSET_") {
			continue
		}
		if e["instance"] != id || e["template"] != "unsetvars" || e["component"] != "compose" {
			t.Errorf("line %s names no instance %s and template unsetvars", line, id)
		}
		got[msg]++
	}
	for _, v := range []string{"A", "B"} {
		if n := got[`The "NORMSIM_TEST_UNSET_`+v+`" variable is not set. Defaulting to a blank string.`]; n != 1 {
			t.Errorf("NORMSIM_TEST_UNSET_%s said %d times, want once: %v", v, n, got)
		}
	}
	c, err := cli.ContainerInspect(t.Context(), spec.Project+"-app-1")
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := c.Config.Labels["com.example.b"]; !ok || v != "" {
		t.Errorf("the label file's label is %q (%v), want it empty, as the launch read it", v, ok)
	}
	stopGone(t, r, cli, id, 0)
}
