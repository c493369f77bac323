package app_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/normsim/normsim/internal/bench"
	"github.com/normsim/normsim/internal/testenv"
	"github.com/normsim/normsim/normsimtest"
	"github.com/normsim/normsim/normsimtest/normsimdocker"
	"github.com/normsim/normsim/sim"
)

// mustBuild builds normsim and the bare HTTP server into a temporary
// directory; repoRoot is where normsim then runs from.
func mustBuild(tb testing.TB) (normsim, bare, repoRoot string) {
	tb.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		tb.Fatal(err)
	}
	dir := tb.TempDir()
	ctx := context.Background()
	if normsim, err = bench.Build(ctx, root, ".", dir); err != nil {
		tb.Fatal(err)
	}
	if bare, err = bench.Build(ctx, root, "./internal/bench/barehttp", dir); err != nil {
		tb.Fatal(err)
	}
	return normsim, bare, root
}

// BenchmarkStartup starts `normsim up --db :memory:` and a bare Go HTTP
// server (internal/bench/barehttp) alternately, each on a free port, and
// times exec → first 200 from /readyz, then SIGINT → exit. normsim runs
// from the repository root, so it loads ./templates as a user's would; the
// default runtime is auto (a Docker engine is asked whether it answers).
// A third variant pins --runtime external to show what that costs.
//
//	go test -run '^$' -bench BenchmarkStartup -benchtime 60x ./app/
func BenchmarkStartup(b *testing.B) {
	normsim, bare, root := mustBuild(b)
	ctx := context.Background()
	up := func(extra ...string) (*exec.Cmd, string) {
		addr := "127.0.0.1:" + strconv.Itoa(testenv.FreePort(b))
		args := append([]string{"up", "--db", ":memory:", "--addr", addr, "--socket-port", "0", "--log-level", "error"}, extra...)
		cmd := exec.Command(normsim, args...)
		cmd.Dir = root
		return cmd, "http://" + addr + "/readyz"
	}
	// What any normsim command pays before main (exec, runtime and package
	// init): the floor under normsim's start-up that no ordering of its own
	// work can lower.
	execOnly := func(name string, args ...string) time.Duration {
		t0 := time.Now()
		if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
			b.Fatalf("%s %v: %v\n%s", name, args, err, out)
		}
		return time.Since(t0)
	}
	var nsReady, nsExit, extReady, bareReady, bareExit, nsVersion, bareHelp []time.Duration
	for b.Loop() {
		nsVersion = append(nsVersion, execOnly(normsim, "version"))
		bareHelp = append(bareHelp, execOnly(bare, "-version"))
		cmd, url := up()
		st, err := bench.TimeStartStop(ctx, cmd, url)
		if err != nil {
			b.Fatal(err)
		}
		nsReady, nsExit = append(nsReady, st.Ready), append(nsExit, st.Exit)

		cmd, url = up("--runtime", "external")
		if st, err = bench.TimeStartStop(ctx, cmd, url); err != nil {
			b.Fatal(err)
		}
		extReady = append(extReady, st.Ready)

		addr := "127.0.0.1:" + strconv.Itoa(testenv.FreePort(b))
		if st, err = bench.TimeStartStop(ctx, exec.Command(bare, "-addr", addr), "http://"+addr+"/readyz"); err != nil {
			b.Fatal(err)
		}
		bareReady, bareExit = append(bareReady, st.Ready), append(bareExit, st.Exit)
	}
	ns, ext, bh := bench.Summarize(nsReady), bench.Summarize(extReady), bench.Summarize(bareReady)
	nx, bx := bench.Summarize(nsExit), bench.Summarize(bareExit)
	nv, bv := bench.Summarize(nsVersion), bench.Summarize(bareHelp)
	b.ReportMetric(bench.Ms(ns.P50), "normsim-ready-p50-ms")
	b.ReportMetric(bench.Ms(ext.P50), "external-ready-p50-ms")
	b.ReportMetric(bench.Ms(bh.P50), "bare-ready-p50-ms")
	b.ReportMetric(bench.Ratio(ns.P50, bh.P50), "ready-ratio")
	b.ReportMetric(bench.Ms(nx.Max), "normsim-exit-max-ms")
	b.ReportMetric(bench.Ms(nv.P50), "normsim-version-p50-ms")
	b.Logf("normsim up (auto runtime)      ready %s\nnormsim up --runtime external  ready %s\nbare net/http                  ready %s\nnormsim exit after SIGINT      %s\nbare exit after SIGINT         %s\nnormsim version (exec to exit) %s\nbare -version (exec to exit)   %s",
		ns, ext, bh, nx, bx, nv, bv)
}

// dockerSim starts an in-process sim on the Docker runtime with the counter
// image built, or skips without a Docker engine.
func dockerSim(b *testing.B, templates ...string) *normsimtest.Sim {
	b.Helper()
	testenv.RequireDocker(b)
	normsimdocker.BuildSourceImage(b, "normsim/counter", filepath.Join("..", "examples", "jobs", "counter"))
	return normsimdocker.Start(b, normsimtest.Options{Runtime: sim.RuntimeDocker,
		Templates: append([]string{filepath.Join("..", "templates")}, templates...)})
}

// BenchmarkDockerMigration moves the counter job (a real container sending
// numbered packets to normsim's output sink) back and forth between the
// nodes with each strategy, and reports the sim's migration time and the
// seam it measured in the output: the gap stopThenStart leaves, the overlap
// (both writing) of overlap, and the seamless handover for comparison.
//
//	go test -run '^$' -bench BenchmarkDockerMigration -benchtime 10x ./app/
func BenchmarkDockerMigration(b *testing.B) {
	for _, tc := range []struct {
		strategy sim.Strategy
		template string
		params   map[string]string
	}{
		{sim.Overlap, "relay-overlap", map[string]string{"RATE": "100"}},
		{sim.StopThenStart, "counter", map[string]string{"RATE": "100"}},
		{sim.Handover, "counter", map[string]string{"RATE": "100"}},
	} {
		b.Run(string(tc.strategy), func(b *testing.B) {
			s := dockerSim(b)
			in := s.Launch(b, sim.LaunchRequest{Template: tc.template, Node: "a", Params: tc.params})
			s.WaitConnected(b, in.ID)
			time.Sleep(300 * time.Millisecond) // output flowing
			id, node := in.ID, "a"
			var total, gap, overlap []time.Duration
			var lost, dup int64
			verdicts := map[string]int{}
			for b.Loop() {
				to := map[string]string{"a": "b", "b": "a"}[node]
				m := s.MigrateAndWait(b, id, sim.MigrateRequest{To: to, Strategy: string(tc.strategy)})
				normsimtest.RequireCompleted(b, m)
				b.StopTimer()
				total = append(total, msDuration(m.Durations.TotalMs))
				if o := m.Output; o != nil {
					verdicts[o.Verdict]++
					gap = append(gap, msDuration(o.GapMs))
					overlap = append(overlap, msDuration(o.OverlapMs))
					lost += o.Lost
					dup += o.Duplicated
				}
				id, node = m.Target.Instance, to
				s.WaitConnected(b, id)
				time.Sleep(300 * time.Millisecond) // the target's output settles
				b.StartTimer()
			}
			t, g, o := bench.Summarize(total), bench.Summarize(gap), bench.Summarize(overlap)
			b.ReportMetric(bench.Ms(t.P50), "total-p50-ms")
			b.ReportMetric(bench.Ms(g.P50), "gap-p50-ms")
			b.ReportMetric(bench.Ms(o.P50), "overlap-p50-ms")
			b.Logf("%s: total %s\n  gap %s\n  overlap %s\n  lost %d, duplicated %d packets over %d migrations; verdicts %v",
				tc.strategy, t, g, o, lost, dup, len(total), verdicts)
		})
	}
}

func msDuration(ms *float64) time.Duration {
	if ms == nil {
		return 0
	}
	return time.Duration(*ms * float64(time.Millisecond))
}

// threeServices is one compose file used both ways: as a normsim template
// and by `docker-compose up -d`. b starts after a; c on its own.
const threeServices = `services:
  a:
    image: normsim/counter:src-d30909f676cb
    environment:
      COUNTER_RATE: "10"
  b:
    image: normsim/counter:src-d30909f676cb
    depends_on: [a]
    environment:
      COUNTER_RATE: "10"
  c:
    image: normsim/counter:src-d30909f676cb
    environment:
      COUNTER_RATE: "10"
`

// BenchmarkDockerLaunch3Services times the launch of a three-service
// template (request → every container started, the instance running) on
// the Docker runtime against `docker-compose up -d` of the same compose
// file (compose v1, the only compose on the measured machine: it pays a
// Python start-up that Compose v2 would not). Teardown is not timed.
//
//	go test -run '^$' -bench BenchmarkDockerLaunch3Services -benchtime 10x ./app/
func BenchmarkDockerLaunch3Services(b *testing.B) {
	dir := b.TempDir()
	tmpl := filepath.Join(dir, "three")
	if err := os.MkdirAll(tmpl, 0o755); err != nil {
		b.Fatal(err)
	}
	manifest := `{"productTemplateSchemaVersion":1,"productName":"three","productVersion":"1","generatedAt":"2025-01-01T00:00:00Z","target":"docker-compose"}`
	if err := os.WriteFile(filepath.Join(tmpl, "manifest.json"), []byte(manifest), 0o644); err != nil {
		b.Fatal(err)
	}
	composeFile := filepath.Join(tmpl, "compose.yml")
	if err := os.WriteFile(composeFile, []byte(threeServices), 0o644); err != nil {
		b.Fatal(err)
	}
	s := dockerSim(b, dir)
	composeBin, err := exec.LookPath("docker-compose")
	var composeArgs []string
	if err != nil {
		if exec.Command("docker", "compose", "version").Run() != nil {
			b.Skip("neither docker-compose nor docker compose is installed")
		}
		composeBin, composeArgs = "docker", []string{"compose"}
	}
	compose := func(project string, args ...string) error {
		cmd := exec.Command(composeBin, append(append(append([]string(nil), composeArgs...), "-p", project, "-f", composeFile), args...)...)
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("%s %v: %v\n%s", composeBin, args, err, out)
		}
		return nil
	}
	var ns, dc []time.Duration
	for i := 0; b.Loop(); i++ {
		start := time.Now()
		in := s.Launch(b, sim.LaunchRequest{Template: "three", Node: "a"})
		s.WaitInstance(b, in.ID, time.Minute, "running", func(in sim.Instance) bool { return in.State == sim.InstanceRunning })
		ns = append(ns, time.Since(start))
		b.StopTimer()
		if err := s.Do(http.MethodDelete, "/api/v1/instances/"+in.ID, nil, nil); err != nil {
			b.Fatal(err)
		}
		project := fmt.Sprintf("normsim-bench-%d-%d", os.Getpid(), i)
		b.StartTimer()
		start = time.Now()
		if err := compose(project, "up", "-d"); err != nil {
			b.Fatal(err)
		}
		dc = append(dc, time.Since(start))
		b.StopTimer()
		if err := compose(project, "down", "-t", "0"); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	n, d := bench.Summarize(ns), bench.Summarize(dc)
	b.ReportMetric(bench.Ms(n.P50), "normsim-p50-ms")
	b.ReportMetric(bench.Ms(d.P50), "compose-p50-ms")
	b.ReportMetric(bench.Ratio(n.P50, d.P50), "ratio")
	b.Logf("normsim launch   %s\ndocker-compose   %s", n, d)
}
