package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/normsim/normsim/internal/testenv"
	"github.com/normsim/normsim/normsimtest/normsimdocker"
)

// composeCommand is `docker compose` when the plugin exists, else
// docker-compose.
func composeCommand(t *testing.T) []string {
	if exec.Command("docker", "compose", "version").Run() == nil {
		return []string{"docker", "compose"}
	}
	if _, err := exec.LookPath("docker-compose"); err == nil {
		return []string{"docker-compose"}
	}
	if os.Getenv(testenv.RequireDockerEnv) == "1" {
		t.Fatal("neither `docker compose` nor docker-compose is installed")
	}
	t.Skip("neither `docker compose` nor docker-compose is installed")
	return nil
}

// TestDevComposeServesDashboard brings docker-compose.dev.yml up on this
// machine's engine, checks the dashboard is ready with both nodes, and tears
// it down.
func TestDevComposeServesDashboard(t *testing.T) {
	if testing.Short() {
		t.Skip("builds an image and runs compose")
	}
	testenv.RequireDocker(t)
	compose := composeCommand(t)
	normsimdocker.BuildJobImage(t, "normsim/normsim:dev", ".")

	b := make([]byte, 4)
	rand.Read(b)
	project := "normsim-devtest-" + hex.EncodeToString(b)
	addr := "127.0.0.1:" + strconv.Itoa(testenv.FreePort(t))
	run := func(args ...string) error {
		cmd := exec.Command(compose[0], append(append(compose[1:], "-f", "docker-compose.dev.yml", "-p", project), args...)...)
		cmd.Env = append(os.Environ(), "NORMSIM_ADDR="+addr, "NORMSIM_SOCKET_PORT="+strconv.Itoa(testenv.FreePortPair(t)))
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Logf("%v: %s", cmd.Args, out)
		}
		return err
	}
	t.Cleanup(func() { run("down", "-v", "--timeout", "20") })
	if err := run("up", "-d"); err != nil {
		t.Fatalf("compose up: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for {
		resp, err := http.Get("http://" + addr + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		select {
		case <-ctx.Done():
			run("logs")
			t.Fatalf("normsim in compose never became ready at %s", addr)
		case <-time.After(200 * time.Millisecond):
		}
	}
	resp, err := http.Get("http://" + addr + "/api/v1/nodes")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var nodes []struct{ Name string }
	json.NewDecoder(resp.Body).Decode(&nodes)
	if len(nodes) != 2 {
		t.Fatalf("nodes = %+v", nodes)
	}
}
