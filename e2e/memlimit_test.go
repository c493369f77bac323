package e2e_test

import (
	"context"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/normsim/normsim/apiclient"
	"github.com/normsim/normsim/internal/initgc"
	"github.com/normsim/normsim/internal/testenv"
	"github.com/normsim/normsim/sim"
)

// TestUpMemoryLimitOutlastsTheStart: normsim up --memory-limit holds once
// the collector comes back after the start (internal/initgc), which sets
// the limit back to GOMEMLIMIT's; GET /api/v1/stats says what it is.
func TestUpMemoryLimitOutlastsTheStart(t *testing.T) {
	bin := buildNormsim(t)
	addr := "127.0.0.1:" + itoa(testenv.FreePort(t))
	cmd := exec.Command(bin, "up", "--db", ":memory:", "--addr", addr, "--socket-port", "0", "--runtime", sim.RuntimeExternal,
		"--templates", templatesDir, "--memory-limit", "300MiB")
	cmd.Env = append(os.Environ(), "GOMEMLIMIT=off")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	started := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Signal(syscall.SIGINT); cmd.Wait() })
	waitReady(t, "http://"+addr)
	// The collector comes back initgc.After from the start; read well
	// after it (too early, the test could only pass wrongly, never fail).
	time.Sleep(time.Until(started.Add(2*time.Second + initgc.After)))
	st, err := apiclient.New("http://"+addr, nil).Stats(context.Background(), false)
	if err != nil {
		t.Fatal(err)
	}
	if st.Memory.LimitBytes != 300<<20 {
		t.Fatalf("memory limit %d once the collector is back, want 300 MiB (314572800)", st.Memory.LimitBytes)
	}
}
