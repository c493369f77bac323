package e2e_test

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/normsim/normsim/internal/bench"
)

// TestBenchProfilesTheChildAndItself: normsim bench --sim child --profile
// DIR writes the sim's CPU and heap profiles and the load generator's own
// CPU profile (both share the machine's cores), and the report names all
// three. Its peak RSS is the child's over the whole run, the jobs'
// removal included.
func TestBenchProfilesTheChildAndItself(t *testing.T) {
	bin := buildNormsim(t)
	dir := t.TempDir()
	jsonPath := filepath.Join(t.TempDir(), "bench.json")
	cmd := exec.Command(bin, "bench", "--sim", "child", "--jobs", "20", "--templates", templatesDir, "--profile", dir, "--json", jsonPath)
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
	var rep bench.Report
	if b, err := os.ReadFile(jsonPath); err != nil {
		t.Fatal(err)
	} else if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	if rep.HandoverPeakRSS <= 0 || rep.PeakRSS < rep.HandoverPeakRSS || rep.PeakRSS < rep.RSSAfter {
		t.Errorf("peak RSS %d over the run, %d by the handovers' end, %d after: the run's peak is the highest of them", rep.PeakRSS, rep.HandoverPeakRSS, rep.RSSAfter)
	}
}
