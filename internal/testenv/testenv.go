package testenv

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types"
	"github.com/docker/docker/client"
)

// The variables that turn a missing dependency from a skip into a failure.
const (
	RequireDockerEnv  = "NORMSIM_REQUIRE_DOCKER"
	RequireBrowserEnv = "NORMSIM_REQUIRE_BROWSER"
	// RequireLanguagesEnv is for the example jobs in other languages
	// (Python with websockets, Node with a built-in WebSocket).
	RequireLanguagesEnv = "NORMSIM_REQUIRE_LANGUAGES"
	// RequireMediaEnv is for ffmpeg, ffprobe and GStreamer, the media
	// tests' referees.
	RequireMediaEnv = "NORMSIM_REQUIRE_MEDIA"
)

// RequireDocker returns a client of the engine the environment names
// (DOCKER_HOST, ...), closed when the test ends. Under -short it skips
// the test (real containers are not for the edit loop). When no engine
// answers within a few seconds it skips the test, or fails it when
// NORMSIM_REQUIRE_DOCKER=1.
func RequireDocker(tb testing.TB) *client.Client {
	tb.Helper()
	if testing.Short() {
		// Real containers take seconds each: -short is for editing.
		tb.Skipf("runs real containers; run without -short")
	}
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		var ping types.Ping
		ping, err = cli.Ping(ctx)
		cancel()
		if err != nil {
			cli.Close()
		} else {
			// Settle the API version now: the client's lazy negotiation
			// races with concurrent first requests.
			cli.NegotiateAPIVersionPing(ping)
		}
	}
	if err != nil {
		missing(tb, RequireDockerEnv, "no Docker engine answers (%v); start one or set DOCKER_HOST", err)
		return nil
	}
	tb.Cleanup(func() { cli.Close() })
	return cli
}

// browsers are the executables RequireBrowser looks for, in order.
var browsers = []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"}

// RequireBrowser returns the path of a Chromium-family browser on PATH. When
// there is none it skips the test, or fails it when
// NORMSIM_REQUIRE_BROWSER=1.
func RequireBrowser(tb testing.TB) string {
	tb.Helper()
	for _, name := range browsers {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	missing(tb, RequireBrowserEnv, "no browser on PATH (looked for %v)", browsers)
	return ""
}

// RequireFFmpeg returns the paths of ffmpeg and ffprobe, the media tests'
// referee. When either is absent it skips the test, or fails it when
// NORMSIM_REQUIRE_MEDIA=1 (scripts/install-media-referees installs them).
func RequireFFmpeg(tb testing.TB) (ffmpeg, ffprobe string) {
	tb.Helper()
	ffmpeg, err1 := exec.LookPath("ffmpeg")
	ffprobe, err2 := exec.LookPath("ffprobe")
	if err1 != nil || err2 != nil {
		missing(tb, RequireMediaEnv, "ffmpeg and ffprobe are not both on PATH; run scripts/install-media-referees (apt-get install -y ffmpeg)")
	}
	return ffmpeg, ffprobe
}

// RequireGStreamer returns the path of gst-launch-1.0, once it knows
// GStreamer's MPEG-TS demuxer and H.264 parser are there: the media tests'
// second referee, a receiver that shows nothing until it has the PAT, the
// PMT and a keyframe. When they are absent it skips the test, or fails it
// under NORMSIM_REQUIRE_MEDIA=1.
func RequireGStreamer(tb testing.TB) string {
	tb.Helper()
	launch, err := exec.LookPath("gst-launch-1.0")
	if err == nil {
		for _, element := range []string{"tsdemux", "h264parse", "multifilesink"} {
			if out, ierr := exec.Command("gst-inspect-1.0", element).CombinedOutput(); ierr != nil {
				err = fmt.Errorf("gst-inspect-1.0 %s: %v: %s", element, ierr, strings.TrimSpace(string(out)))
				break
			}
		}
	}
	if err != nil {
		missing(tb, RequireMediaEnv, "GStreamer with its MPEG-TS demuxer is not here (%v); run scripts/install-media-referees (apt-get install -y gstreamer1.0-tools gstreamer1.0-plugins-bad)", err)
	}
	return launch
}

// RequireJobLanguage checks that the interpreter an example job in another
// language needs is here, by asking the script the job's template runs it
// with (scripts/run-python-job or scripts/run-node-job, under root, the
// repository's root) with --check. When it is absent it skips the test, or
// fails it when NORMSIM_REQUIRE_LANGUAGES=1; either way with the script's
// reason and how to install it.
func RequireJobLanguage(tb testing.TB, root, script string) {
	tb.Helper()
	out, err := exec.Command(filepath.Join(root, "scripts", script), "--check").CombinedOutput()
	if err != nil {
		missing(tb, RequireLanguagesEnv, "scripts/%s --check: %v: %s; run scripts/install-job-languages", script, err, strings.TrimSpace(string(out)))
	}
}

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func FreePort(tb testing.TB) int {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("find a free port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// FreePortPair returns a port p such that p and p+1 were both free a moment
// ago (on every interface), for `normsim up --socket-port p`: node b
// listens on p+1. FreePort alone is not enough: Linux gives bind(0) a port
// of one parity and outgoing connections the other, so the port after a
// free one is often some connection's.
func FreePortPair(tb testing.TB) int {
	tb.Helper()
	for range 100 {
		a, err := net.Listen("tcp", "0.0.0.0:0")
		if err != nil {
			tb.Fatalf("find a free port: %v", err)
		}
		p := a.Addr().(*net.TCPAddr).Port
		b, err := net.Listen("tcp", "0.0.0.0:"+strconv.Itoa(p+1))
		a.Close()
		if err == nil {
			b.Close()
			return p
		}
	}
	tb.Fatal("no two consecutive free ports")
	return 0
}

// missing skips tb, or fails it when env is "1".
func missing(tb testing.TB, env, format string, args ...any) {
	tb.Helper()
	if os.Getenv(env) == "1" {
		tb.Fatalf(format+" (and %s=1)", append(args, env)...)
	}
	tb.Skipf(format+" (set %s=1 to fail instead)", append(args, env)...)
}
