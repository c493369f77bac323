package bench

import (
	"context"
	"fmt"
	"net/http"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// Build compiles the main package pkg (a path go build accepts, run from
// dir) into a binary in out and returns its path.
func Build(ctx context.Context, dir, pkg, out string) (string, error) {
	bin := filepath.Join(out, filepath.Base(pkg))
	if filepath.Base(pkg) == "." {
		bin = filepath.Join(out, "normsim")
	}
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, pkg)
	cmd.Dir = dir
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build %s: %v\n%s", pkg, err, b)
	}
	return bin, nil
}

// StartStop is one start of a server process: how long from exec to the
// first 200 from its ready URL, and from SIGINT to the process's exit.
type StartStop struct {
	Ready, Exit time.Duration
}

// TimeStartStop starts cmd, polls readyURL until it answers 200, sends
// SIGINT and waits for the exit. The poll is a tight loop (a refused
// connection costs microseconds), so the figure is the server's, not the
// poller's.
func TimeStartStop(ctx context.Context, cmd *exec.Cmd, readyURL string) (StartStop, error) {
	var st StartStop
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true, Proxy: nil}, Timeout: time.Second}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return st, err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	kill := func() {
		cmd.Process.Kill()
		<-exited
	}
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, readyURL, nil)
		resp, err := client.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		select {
		case err := <-exited:
			return st, fmt.Errorf("%s exited before it was ready: %v", cmd.Path, err)
		case <-ctx.Done():
			kill()
			return st, ctx.Err()
		default:
		}
		if time.Since(start) > 30*time.Second {
			kill()
			return st, fmt.Errorf("%s not ready after 30s", readyURL)
		}
		time.Sleep(100 * time.Microsecond)
	}
	st.Ready = time.Since(start)
	stop := time.Now()
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		kill()
		return st, err
	}
	select {
	case <-exited:
		st.Exit = time.Since(stop)
	case <-time.After(30 * time.Second):
		kill()
		return st, fmt.Errorf("%s still running 30s after SIGINT", cmd.Path)
	}
	return st, nil
}
