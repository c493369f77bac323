package app_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/normsim/normsim/sim"
)

// Issue 34 round 5c: a one-shot service another depends on with
// service_completed_successfully (a migration, a setup step) exits 0 as
// it should; `docker compose up` runs on, and so must the instance. The
// manager took the exit for the job's failure.
func TestAOneShotThatCompletesIsNoFailure(t *testing.T) {
	dir := t.TempDir()
	tpl := filepath.Join(dir, "oneshot")
	if err := os.MkdirAll(tpl, 0o755); err != nil {
		t.Fatal(err)
	}
	manifest := `{"productTemplateSchemaVersion": 1, "productName": "One-shot", "productVersion": "0.1.0",
  "generatedAt": "2025-01-01T00:00:00Z", "target": "docker-compose", "migration": {"strategy": "stopThenStart"}}`
	compose := `services:
  init:
    image: normsim-test/none:1
    x-normsim:
      command: ["sh", "-c", "echo set up; exit 0"]
  app:
    image: normsim-test/none:1
    depends_on:
      init: {condition: service_completed_successfully}
    x-normsim:
      command: ["sleep", "100"]
`
	for name, body := range map[string]string{"manifest.json": manifest, "compose.yml": compose} {
		if err := os.WriteFile(filepath.Join(tpl, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	opts := testOptions(t)
	opts.Templates = []string{dir}
	m := openApp(t, opts)
	ctx := context.Background()
	in, err := m.Manager.Launch(ctx, sim.LaunchRequest{Template: "oneshot", Node: "a", Runtime: sim.RuntimeProcess})
	if err != nil {
		t.Fatal(err)
	}
	// The one-shot has long exited once app runs; give its exit time to
	// be reported.
	deadline := time.Now().Add(10 * time.Second)
	for {
		got, err := m.Manager.Instance(ctx, in.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.State == sim.InstanceFailed {
			t.Fatalf("the instance failed: %s", got.Error)
		}
		if time.Now().After(deadline) {
			if got.State != sim.InstanceRunning {
				t.Fatalf("the instance is %s, want running", got.State)
			}
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}
