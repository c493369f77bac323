package app_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/normsim/normsim/sim"
)

// TestTemplatesReloadWhenTheyChange: a template broken on disk is listed
// and refused with its error; fixed while normsim runs, it launches
// without a restart; broken again, it is refused again, and a new template
// dropped in is found. What was launched keeps running.
func TestTemplatesReloadWhenTheyChange(t *testing.T) {
	dir := t.TempDir()
	tpl := filepath.Join(dir, "counter")
	if err := os.CopyFS(tpl, os.DirFS(filepath.Join("..", "templates", "counter"))); err != nil {
		t.Fatal(err)
	}
	manifest := filepath.Join(tpl, "manifest.json")
	good, err := os.ReadFile(manifest)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(manifest, []byte(`{"name": "counter",`), 0o644); err != nil {
		t.Fatal(err)
	}
	opts := testOptions(t)
	opts.Templates = []string{dir}
	opts.Runtime = sim.RuntimeExternal
	m := openApp(t, opts)
	ctx := context.Background()
	launch := func() error {
		_, err := m.Manager.Launch(ctx, sim.LaunchRequest{Template: "counter", Node: "a"})
		return err
	}
	until := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("no %s within 10 s of the change on disk", what)
			}
		}
	}
	valid := func() bool { tm, err := m.Catalog.Get("counter"); return err == nil && tm.Valid }
	if valid() {
		t.Fatal("a broken manifest loaded as valid")
	}
	if err := launch(); err == nil || sim.ErrorCode(err) != sim.ETemplateInvalid {
		t.Fatalf("launch of the broken template: %v, want %s", err, sim.ETemplateInvalid)
	}

	if err := os.WriteFile(manifest, good, 0o644); err != nil {
		t.Fatal(err)
	}
	until("reload of the fixed template", valid)
	if err := launch(); err != nil {
		t.Fatalf("launch of the fixed template: %v", err)
	}

	if err := os.WriteFile(manifest, []byte(`not json`), 0o644); err != nil {
		t.Fatal(err)
	}
	until("reload of the broken edit", func() bool { return !valid() })
	if err := launch(); err == nil || !strings.Contains(err.Error(), "counter") {
		t.Fatalf("launch after a broken edit: %v", err)
	}
	list, _ := m.Manager.Instances(ctx)
	if len(list) != 1 || list[0].State != sim.InstanceRunning {
		t.Fatalf("the instance launched before the edit: %+v", list)
	}

	if err := os.CopyFS(filepath.Join(dir, "plain"), os.DirFS(filepath.Join("..", "templates", "plain"))); err != nil {
		t.Fatal(err)
	}
	until("a template dropped in", func() bool { _, err := m.Catalog.Get("plain"); return err == nil })
}
