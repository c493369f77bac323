package manager_test

import (
	"net/http"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/normsim/normsim/normsimtest"
)

func itoa(n int) string { return strconv.Itoa(n) }

// buildNormsim builds the normsim binary for tests that run it as a process.
func buildNormsim(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "normsim")
	cmd := exec.Command("go", "build", "-o", bin, ".")
	cmd.Dir = filepath.Join("..", "..")
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

// normsimtestClient talks to a normsim running as a separate process.
func normsimtestClient(addr string) *normsimtest.Sim {
	return normsimtest.Connect("http://" + addr)
}
