package testenv

import (
	"fmt"
	"net"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// fakeTB records a skip or a failure instead of ending the real test.
type fakeTB struct {
	testing.TB
	skipped, failed string
}

// The only methods the helpers call; the embedded nil TB panics on others.
func (f *fakeTB) Helper()        {}
func (f *fakeTB) Cleanup(func()) {}
func (f *fakeTB) Skipf(format string, args ...any) {
	f.skipped = fmt.Sprintf(format, args...)
	runtime.Goexit()
}
func (f *fakeTB) Fatalf(format string, args ...any) {
	f.failed = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func run(fn func(tb testing.TB)) *fakeTB {
	f := &fakeTB{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn(f)
	}()
	<-done
	return f
}

func TestRequireDockerWithoutEngine(t *testing.T) {
	t.Setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
	if testing.Short() {
		// Real containers are not for the edit loop: skipped either way.
		t.Setenv(RequireDockerEnv, "1")
		if f := run(func(tb testing.TB) { RequireDocker(tb) }); f.failed != "" || !strings.Contains(f.skipped, "without -short") {
			t.Errorf("under -short: skipped %q, failed %q", f.skipped, f.failed)
		}
		return
	}

	t.Setenv(RequireDockerEnv, "")
	f := run(func(tb testing.TB) { RequireDocker(tb) })
	if f.skipped == "" || f.failed != "" || !strings.Contains(f.skipped, "no Docker engine answers") {
		t.Errorf("without %s: skipped %q, failed %q", RequireDockerEnv, f.skipped, f.failed)
	}

	t.Setenv(RequireDockerEnv, "1")
	f = run(func(tb testing.TB) { RequireDocker(tb) })
	if f.failed == "" || f.skipped != "" {
		t.Errorf("with %s=1: skipped %q, failed %q", RequireDockerEnv, f.skipped, f.failed)
	}
}

func TestRequireBrowserWithoutBrowser(t *testing.T) {
	t.Setenv("PATH", t.TempDir())

	t.Setenv(RequireBrowserEnv, "")
	if f := run(func(tb testing.TB) { RequireBrowser(tb) }); f.skipped == "" || f.failed != "" {
		t.Errorf("without %s: skipped %q, failed %q", RequireBrowserEnv, f.skipped, f.failed)
	}
	t.Setenv(RequireBrowserEnv, "1")
	if f := run(func(tb testing.TB) { RequireBrowser(tb) }); f.failed == "" {
		t.Errorf("with %s=1: skipped %q, failed %q", RequireBrowserEnv, f.skipped, f.failed)
	}
}

func TestFreePort(t *testing.T) {
	p := FreePort(t)
	l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
	if err != nil {
		t.Fatalf("port %d is not free: %v", p, err)
	}
	l.Close()
}
