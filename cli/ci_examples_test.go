package cli_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/normsim/normsim/normsimtest"
)

// TestCIExampleScenarios runs `normsim ci examples/scenarios/` — the good
// scenarios, the misbehaving jobs and the faults — with each runtime, as CI
// does.
func TestCIExampleScenarios(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real jobs")
	}
	for _, runtime := range []string{"process", "docker"} {
		t.Run(runtime, func(t *testing.T) {
			if runtime == "docker" {
				jobs, _ := os.ReadDir("../examples/jobs")
				for _, j := range jobs {
					if _, err := os.Stat(filepath.Join("../examples/jobs", j.Name(), "main.go")); err == nil {
						normsimtest.BuildJobImage(t, "normsim/"+j.Name()+":dev", filepath.Join("../examples/jobs", j.Name()))
					}
				}
			}
			junit := filepath.Join(t.TempDir(), "out.xml")
			code, out, errOut := run(t, "ci", "--runtime", runtime, "--templates", "../templates", "--templates", "../examples/templates",
				"--junit", junit, "../examples/scenarios/")
			if code != 0 {
				t.Fatalf("normsim ci with %s: exit %d\n%s%s", runtime, code, out, errOut)
			}
			if !strings.Contains(out, "0 failed") {
				t.Fatalf("summary:\n%s", out)
			}
			if b, err := os.ReadFile(junit); err != nil || !strings.Contains(string(b), "<testsuites") {
				t.Fatalf("junit report: %v", err)
			}
		})
	}
}
