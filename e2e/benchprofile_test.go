package e2e_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestBenchProfilesTheChildAndItself: normsim bench --sim child --profile
// DIR writes the sim's CPU and heap profiles and the load generator's own
// CPU profile (both share the machine's cores), and the report names all
// three.
func TestBenchProfilesTheChildAndItself(t *testing.T) {
	bin := buildNormsim(t)
	dir := t.TempDir()
	cmd := exec.Command(bin, "bench", "--sim", "child", "--jobs", "20", "--templates", templatesDir, "--profile", dir)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("normsim bench: %v\n%s", err, out.String())
	}
	for _, name := range []string{"cpu.pprof", "heap.pprof", "bench-cpu.pprof"} {
		path := filepath.Join(dir, name)
		b, err := os.ReadFile(path)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		// A profile is gzipped protobuf: an empty or truncated file is
		// what a profile that was never stopped leaves.
		if len(b) < 100 || b[0] != 0x1f || b[1] != 0x8b {
			t.Errorf("%s: %d bytes, not a gzipped profile", name, len(b))
		}
		if !strings.Contains(out.String(), "profile      "+path) {
			t.Errorf("the report does not name %s:\n%s", path, out.String())
		}
	}
	if !strings.Contains(out.String(), " used)") {
		t.Errorf("the report does not say how much of the stacks is used:\n%s", out.String())
	}
}
