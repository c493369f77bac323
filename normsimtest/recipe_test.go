package normsimtest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestJobAuthorRecipe runs examples/jobauthor/README.md's recipe for
// depending on an unpublished normsim, as written, in a fresh module outside
// this repository holding the example's job, template and test; the clone
// the recipe makes is this checkout.
func TestJobAuthorRecipe(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a module of its own")
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	example := filepath.Join(root, "examples", "jobauthor")
	recipe := recipeLines(t, filepath.Join(example, "README.md"), "## Depending on normsim")
	base := t.TempDir()
	theirs := filepath.Join(base, "theirs")
	if err := os.MkdirAll(theirs, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"handover_test.go", "job", "template"} {
		if out, err := exec.Command("cp", "-r", filepath.Join(example, name), theirs).CombinedOutput(); err != nil {
			t.Fatalf("copy %s: %v\n%s", name, err, out)
		}
	}
	run := func(args ...string) {
		t.Helper()
		cmd := exec.Command(args[0], args[1:]...)
		cmd.Dir = theirs
		out, err := cmd.CombinedOutput()
		t.Logf("$ %s\n%s", strings.Join(args, " "), out)
		if err != nil {
			t.Fatalf("%s: %v", strings.Join(args, " "), err)
		}
	}
	run("go", "mod", "init", "example.com/jobauthor")
	for _, line := range recipe {
		args := strings.Fields(line)
		if len(args) >= 4 && args[0] == "git" && args[1] == "clone" {
			// The clone is this checkout, where the recipe puts it.
			if err := os.Symlink(root, filepath.Join(theirs, args[3])); err != nil {
				t.Fatal(err)
			}
			continue
		}
		run(args...)
	}
	run("go", "vet", "./...")
	run("go", "test", "-count=1", "./...")
}

// recipeLines are the command lines of the first sh block after heading.
func recipeLines(t *testing.T, file, heading string) []string {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), heading)
	if !ok {
		t.Fatalf("%s: no %q section", file, heading)
	}
	_, rest, ok = strings.Cut(rest, "```sh\n")
	if !ok {
		t.Fatalf("%s: no sh block under %q", file, heading)
	}
	block, _, _ := strings.Cut(rest, "```")
	var lines []string
	for _, l := range strings.Split(block, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	return lines
}
