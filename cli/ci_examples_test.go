package cli_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/normsim/normsim/normsimtest"
)

// TestCIExampleScenarios runs the README's `normsim ci examples/scenarios/
// --junit … --json …` as written, from the repository root — the good
// scenarios, the misbehaving jobs and the faults — on the Docker runtime
// (the default where an engine answers) and on the process runtime.
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
						normsimtest.BuildJobImage(t, "normsim/"+j.Name()+":dev", filepath.Join("..", "examples", "jobs", j.Name()))
					}
				}
			}
			junit := filepath.Join(t.TempDir(), "out.xml")
			js := filepath.Join(t.TempDir(), "out.json")
			// From the repository root, as the README shows it: the
			// misbehaving scenarios name their own template directory.
			t.Chdir("..")
			args := []string{"ci", "examples/scenarios/", "--junit", junit, "--json", js}
			if runtime == "process" {
				args = append(args, "--runtime", "process")
			}
			code, out, errOut := run(t, args...)
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
