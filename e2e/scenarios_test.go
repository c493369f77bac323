package e2e_test

import (
	"bytes"
	"path/filepath"
	"testing"

	"github.com/normsim/normsim/cli"
)

// TestMisbehavingScenariosHold runs every misbehaving example scenario as
// a user would, `normsim ci examples/scenarios/misbehaving-*.yaml --runtime
// process`, and requires each expectation to hold: each one is the proof
// that normsim catches one job's bug (restarts-at-zero: a target that went
// back to numbers its source sent more than 2 s before the migration is a
// duplicate, not a gap).
func TestMisbehavingScenariosHold(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes")
	}
	files, err := filepath.Glob(filepath.Join("..", "examples", "scenarios", "misbehaving-*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no misbehaving scenarios: %v", err)
	}
	var out, errOut bytes.Buffer
	args := append(append([]string{"ci"}, files...), "--runtime", "process", "--templates", templatesDir)
	if code := cli.Main(args, cli.Env{Stdout: &out, Stderr: &errOut}); code != 0 {
		t.Fatalf("normsim ci of %d misbehaving scenarios: exit %d\n%s\n%s", len(files), code, out.String(), errOut.String())
	}
	t.Logf("%s", out.String())
}
