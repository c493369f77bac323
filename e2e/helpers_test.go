package e2e_test

import (
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/normsim/normsim/internal/bench"
	"github.com/normsim/normsim/internal/jobplay"
	"github.com/normsim/normsim/internal/testenv"
	"github.com/normsim/normsim/normsimtest"
	"github.com/normsim/normsim/sim"
)

func itoa(n int) string { return strconv.Itoa(n) }

// buildNormsim builds the normsim binary for tests that run it as a process.
func buildNormsim(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "normsim")
	cmd := exec.Command("go", "build", "-o", bin, ".")
	cmd.Dir = ".."
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build normsim: %v\n%s", err, out)
	}
	return bin
}

func waitReady(t *testing.T, base string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if resp, err := http.Get(base + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("%s never became ready", base)
}

// restartableUp returns a function that starts `normsim up` (a real
// process, built here) over one store file, with runtime as its default,
// on the same dashboard and socket ports every time: a test can SIGKILL it
// and start it again where its jobs will find it. Each start waits for
// /readyz; every process is interrupted when the test ends.
func restartableUp(t *testing.T, runtime string) (up func() *exec.Cmd, addr string) {
	t.Helper()
	bin := buildNormsim(t)
	db := filepath.Join(t.TempDir(), "normsim.db")
	addr = "127.0.0.1:" + itoa(testenv.FreePort(t))
	socketPort := testenv.FreePortPair(t) // node b listens on socketPort+1
	return func() *exec.Cmd {
		cmd := exec.Command(bin, "up", "--db", db, "--addr", addr, "--socket-port", itoa(socketPort),
			"--runtime", runtime, "--templates", templatesDir)
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Signal(syscall.SIGINT); cmd.Wait() })
		waitReady(t, "http://"+addr)
		return cmd
	}, addr
}

// externalCounter starts a sim whose runtime is external and launches a
// counter on node a, its job played by the test (connected): the sim, a
// client of its API, the instance and its job, closed when the test ends.
func externalCounter(tb testing.TB, ctx context.Context) (*normsimtest.Sim, *bench.API, sim.Instance, *jobplay.Job) {
	tb.Helper()
	s := normsimtest.Start(tb, normsimtest.Options{Templates: []string{templatesDir}, Runtime: sim.RuntimeExternal})
	api := bench.NewAPI(s.URL, 4)
	tb.Cleanup(api.Close)
	in, job, err := bench.LaunchConnected(ctx, api, "counter", "a")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(job.Close)
	return s, api, in, job
}

// normsimtestClient talks to a normsim running as a separate process.
func normsimtestClient(addr string) *normsimtest.Sim {
	return normsimtest.Connect("http://" + addr)
}
