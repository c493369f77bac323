package cli_test

import (
	"encoding/json"
	"image/png"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/normsim/normsim/internal/bench"
)

func TestBenchRefusesBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"bench", "--rounds", "0"},
		{"bench", "--curve", "100,0"},
		{"bench", "--plot", "x.png"},
		{"bench", "--curve", "10", "--jobs", "10"},
		{"bench", "--curve", "10", "--server", "http://127.0.0.1:1"},
		{"bench", "--server", "http://127.0.0.1:1", "--profile", "d"},
		{"bench", "--jobs", "0"},
		{"bench", "--keep-migrations", "-1"},
		{"up", "--keep-migrations", "-1"},
		{"up", "--memory-limit", "lots"},
		{"up", "--memory-limit", "0"},
		{"up", "--db", ""}, // attack round 10a: "lock store : open : no such file or directory", exit 1
		{"bench", "--sim", "child", "--memory-limit", "-5m"},
		{"bench", "--memory-limit", "600MiB"}, // in-process: it would limit the load generator too
		{"bench", "--server", "http://127.0.0.1:1", "--memory-limit", "600MiB"},
		{"bench", "--sim", "nowhere"},
		{"bench", "--sim", "bare", "--keep-migrations", "5"}, // the bare server keeps nothing
		{"bench", "--sim", "bare", "--template", "counter"},  // nor launches a template
		{"bench", "--sim", "bare", "--memory-limit", "600MiB"},
	} {
		code, _, errOut := run(t, args...)
		if code != 2 || errOut == "" {
			t.Errorf("%v: exit %d, stderr %q; want 2 with a message", args, code, errOut)
		}
	}
}

// TestBenchRounds runs a small long run in-process, its store capped at
// 25 finished migrations: every round must complete and say the sim at
// rest after it, the cap holding and counting what it dropped.
func TestBenchRounds(t *testing.T) {
	jsonPath := filepath.Join(t.TempDir(), "bench.json")
	code, out, errOut := run(t, "bench", "--jobs", "20", "--rounds", "3", "--keep-migrations", "25", "--templates", "../templates", "--json", jsonPath)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	for _, want := range []string{"rounds       3 of 20 handovers each", "flat?        goroutines", "store growth", "60 completed, 0 failed"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	var rep bench.Report
	b, err := os.ReadFile(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Rounds) != 3 || rep.Completed != 60 {
		t.Fatalf("report: %d rounds, %d completed; want 3 and 60", len(rep.Rounds), rep.Completed)
	}
	// The store caught up after the handovers (nothing pending is 0), and
	// the report says where it stood.
	if rep.StoreCaughtUp < 0 || !strings.Contains(out, "migrations at the handovers' end; ") {
		t.Errorf("store caught up %s after the handovers:\n%s", rep.StoreCaughtUp, out)
	}
	if runtime.GOOS == "linux" {
		// /proc says what the phases cost (the figures may be under its
		// 10 ms tick for 20 jobs, so only that they were read is checked).
		if rep.ConnectCPU.Cores == 0 || rep.HandoverCPU.Cores == 0 || !strings.Contains(out, "cpu          per job connected: ") {
			t.Errorf("no CPU cost measured: connect %+v, handover %+v\n%s", rep.ConnectCPU, rep.HandoverCPU, out)
		}
	}
	for _, rd := range rep.Rounds {
		done := 20 * rd.N
		kept, pruned := min(done, 25), max(0, done-25)
		if rd.Completed != 20 || rd.Stats == nil || rd.Stats.Store.Migrations != kept || rd.Stats.Store.MigrationsPruned != int64(pruned) {
			t.Errorf("round %d: %d completed, stats %+v; want 20, %d migrations stored and %d pruned", rd.N, rd.Completed, rd.Stats, kept, pruned)
		}
	}
}

// TestBenchCurvePlots draws a two-point curve (sims in-process, to keep
// the test quick) and checks the table, the JSON and the PNG.
func TestBenchCurvePlots(t *testing.T) {
	dir := t.TempDir()
	pngPath, jsonPath := filepath.Join(dir, "curve.png"), filepath.Join(dir, "curve.json")
	code, out, errOut := run(t, "bench", "--curve", "4,8", "--sim", "in-process", "--templates", "../templates", "--plot", pngPath, "--json", jsonPath)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	if !strings.Contains(out, "handovers/s") || !strings.Contains(out, "CPU/handover") || !strings.Contains(out, "8/8") || !strings.Contains(out, "plot: "+pngPath) {
		t.Errorf("curve output:\n%s", out)
	}
	var reps []bench.Report
	b, err := os.ReadFile(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &reps); err != nil || len(reps) != 2 || reps[0].Jobs != 4 || reps[1].Jobs != 8 {
		t.Fatalf("curve JSON: %v, %+v", err, reps)
	}
	f, err := os.Open(pngPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	if b := img.Bounds(); b.Dx() < 800 || b.Dy() < 600 {
		t.Errorf("plot is %v", b)
	}
}
