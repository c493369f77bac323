package app_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
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
	writeStopThenStartTemplate(t, dir, "oneshot", compose)
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

// Issue 34 round 7: a service that exits 0 while another runs on (a
// sidecar whose work is done, nothing depending on it) ends nothing under
// `docker compose up`; the manager failed the instance, which then could
// not migrate though its job ran on. A failing exit, or the exit of the
// instance's last service, still fails it.
func TestAServiceThatEndsItsWorkLeavesTheInstanceRunning(t *testing.T) {
	service := func(name, cmd string) string {
		return fmt.Sprintf("  %s:\n    image: normsim-test/none:1\n    x-normsim:\n      command: [\"sh\", \"-c\", %q]\n", name, cmd)
	}
	dir := t.TempDir()
	for name, compose := range map[string]string{
		"side0": service("app", "sleep 100") + service("side", "sleep 0.3; exit 0"),
		"side3": service("app", "sleep 100") + service("side", "sleep 0.3; exit 3"),
		"solo0": service("app", "sleep 0.3; exit 0"),
	} {
		writeStopThenStartTemplate(t, dir, name, "services:\n"+compose)
	}
	opts := testOptions(t)
	opts.Templates = []string{dir}
	m := openApp(t, opts)
	ctx := context.Background()
	for _, tc := range []struct {
		template string
		want     sim.InstanceState
		detail   string // in the exit's event
	}{
		{"side0", sim.InstanceRunning, "exited with code 0; the instance's other services run on, as under docker compose up"},
		{"side3", sim.InstanceFailed, "exited with code 3"},
		{"solo0", sim.InstanceFailed, "exited with code 0"},
	} {
		in, err := m.Manager.Launch(ctx, sim.LaunchRequest{Template: tc.template, Node: "a", Runtime: sim.RuntimeProcess})
		if err != nil {
			t.Fatal(err)
		}
		var exit string
		for deadline := time.Now().Add(20 * time.Second); exit == "" && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			evs, err := m.Manager.InstanceEvents(ctx, in.ID, 0)
			if err != nil {
				t.Fatal(err)
			}
			for _, ev := range evs {
				if ev.Kind == sim.EventInstanceRuntime && strings.Contains(string(ev.Data), "exited") {
					exit = string(ev.Data)
				}
			}
		}
		got, err := m.Manager.Instance(ctx, in.ID)
		if err != nil {
			t.Fatal(err)
		}
		// A failed instance is no longer healthy (round 7: one without a
		// healthcheck stayed healthy: true after it failed).
		if got.State != tc.want || !strings.Contains(exit, tc.detail) || got.Healthy != (tc.want == sim.InstanceRunning) {
			t.Errorf("%s: instance %s (%s), healthy %v, exit event %q; want %s and %q", tc.template, got.State, got.Error, got.Healthy, exit, tc.want, tc.detail)
		}
	}
}

// Issue 34 round 8: a sidecar that exits 0 on a migration's target (its
// work done, the job running on) rolled every move of its template back
// and blamed the target; the launch had kept the same instance running.
func TestASidecarThatEndsItsWorkDoesNotBreakAMigration(t *testing.T) {
	compose := `services:
  app:
    image: normsim-test/none:1
    x-normsim:
      command: ["sleep", "100"]
  side:
    image: normsim-test/none:1
    x-normsim:
      command: ["true"]
`
	dir := t.TempDir()
	writeStopThenStartTemplate(t, dir, "sidemig", compose)
	opts := testOptions(t)
	opts.Templates = []string{dir}
	m := openApp(t, opts)
	ctx := context.Background()
	in, err := m.Manager.Launch(ctx, sim.LaunchRequest{Template: "sidemig", Node: "a", Runtime: sim.RuntimeProcess})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond) // the source's sidecar has ended
	// Each time, the target's sidecar ends while the move goes on.
	for range 3 {
		mig, err := m.Manager.Migrate(ctx, in.ID, sim.MigrateRequest{Strategy: string(sim.StopThenStart)})
		if err != nil {
			t.Fatal(err)
		}
		wctx, cancel := context.WithTimeout(ctx, time.Minute)
		mig, err = m.Manager.AwaitMigration(wctx, mig.ID, -1)
		cancel()
		if err != nil || mig.State != sim.MigrationCompleted {
			t.Fatalf("migration %v: %s (%s), err %v", mig.ID, mig.State, mig.Reason, err)
		}
		in.ID = mig.Target.Instance
	}
}

// writeStopThenStartTemplate writes a template named name into dir: a
// manifest that declares stopThenStart, and compose.
func writeStopThenStartTemplate(t *testing.T, dir, name, compose string) {
	t.Helper()
	manifest := `{"productTemplateSchemaVersion": 1, "productName": "` + name + `", "productVersion": "0.1.0",
  "generatedAt": "2025-01-01T00:00:00Z", "target": "docker-compose", "migration": {"strategy": "stopThenStart"}}`
	tpl := filepath.Join(dir, name)
	if err := os.MkdirAll(tpl, 0o755); err != nil {
		t.Fatal(err)
	}
	for file, body := range map[string]string{"manifest.json": manifest, "compose.yml": compose} {
		if err := os.WriteFile(filepath.Join(tpl, file), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
