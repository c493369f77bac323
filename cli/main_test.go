package cli_test

import (
	"bufio"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/normsim/normsim/cli"
)

// mainArgsEnv makes this test binary run cli.Main with the arguments it
// holds (separated by newlines) instead of the tests, so a test can signal a real
// normsim process without signalling itself.
const mainArgsEnv = "NORMSIM_TEST_CLI_MAIN"

func TestMain(m *testing.M) {
	if args, ok := os.LookupEnv(mainArgsEnv); ok {
		os.Exit(cli.Main(strings.Split(args, "\n"), cli.Env{Stdout: os.Stdout, Stderr: os.Stderr}))
	}
	os.Exit(m.Run())
}

// startMain starts this test binary as normsim with args (TestMain), and
// returns its stdout to read and what it writes to stderr.
func startMain(t *testing.T, args []string) (*exec.Cmd, io.ReadCloser, *strings.Builder) {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), mainArgsEnv+"="+strings.Join(args, "\n"))
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr := &strings.Builder{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd, stdout, stderr
}

// TestOneInterruptExits130 (issue 34): a run cut short by one Ctrl-C
// exited 1, as if a scenario had failed, so a CI wrapper could not tell a
// cancelled run from a broken job. It now exits 130, as a shell reports
// SIGINT, and still writes its reports, which say the run was interrupted
// (not that the simulator did not answer, as a cut-short call had made a
// step say).
func TestOneInterruptExits130(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a simulator")
	}
	dir := t.TempDir()
	scen := filepath.Join(dir, "waits.yaml")
	if err := os.WriteFile(scen, []byte("name: waits long\ntemplate: counter\nruntime: process\nsteps:\n  - wait: 60s\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	junit := filepath.Join(dir, "out.xml")
	args := []string{"ci", scen, "--templates", "../templates", "--junit", junit}
	cmd, stdout, stderr := startMain(t, args)
	defer cmd.Process.Kill()
	started := make(chan struct{})
	var out strings.Builder
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			out.WriteString(sc.Text() + "\n")
			if strings.HasPrefix(sc.Text(), "normsim ci ") && !strings.Contains(sc.Text(), "default runtime process (no scenario runs on Docker)") {
				// Round 8: it said "(--runtime)", a flag not given.
				t.Errorf("the banner does not say why the runtime is process: %s", sc.Text())
			}
			if strings.HasPrefix(sc.Text(), "=== waits long") {
				close(started)
			}
		}
	}()
	select {
	case <-started:
	case <-time.After(60 * time.Second):
		t.Fatalf("the scenario did not start within 60 s; stderr:\n%s", stderr.String())
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("normsim ci did not end within 30 s of one Ctrl-C")
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 130 {
		t.Fatalf("exit %v after one Ctrl-C, want 130\nstdout:\n%s\nstderr:\n%s", err, out.String(), stderr.String())
	}
	if !strings.Contains(stderr.String(), "normsim: ci: interrupted") {
		t.Errorf("stderr does not say it was interrupted:\n%s", stderr.String())
	}
	b, err := os.ReadFile(junit)
	if err != nil || !strings.Contains(string(b), "interrupted") || strings.Contains(string(b), "did not answer") {
		t.Errorf("the JUnit report does not record the interrupt (%v):\n%s", err, b)
	}
}

// TestASignalDeliveredTwiceIsOneInterrupt (round 13, B13): `timeout 3
// normsim up` quit at once, "something may be left running", in 2 of 10
// runs: timeout(1) sends its SIGTERM to the child and then to its process
// group, and the second was taken for a second Ctrl-C. Two signals back to
// back are one: up stops cleanly and exits 0.
func TestASignalDeliveredTwiceIsOneInterrupt(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a simulator")
	}
	args := []string{"up", "--db", ":memory:", "--addr", "127.0.0.1:0", "--socket-port", "0", "--output-port", "0", "--runtime", "external", "--templates", "../templates"}
	for range 5 {
		cmd, stdout, stderr := startMain(t, args)
		ready := make(chan struct{})
		go func() {
			sc := bufio.NewScanner(stdout)
			once := false
			for sc.Scan() {
				if !once && strings.Contains(sc.Text(), "API ") {
					once = true
					close(ready)
				}
			}
		}()
		select {
		case <-ready:
		case <-time.After(60 * time.Second):
			cmd.Process.Kill()
			t.Fatalf("up did not start within 60 s; stderr:\n%s", stderr.String())
		}
		// Apart enough for the kernel to deliver both (it merges a
		// signal sent while the same one is pending).
		cmd.Process.Signal(syscall.SIGTERM)
		time.Sleep(5 * time.Millisecond)
		cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		var err error
		select {
		case err = <-done:
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
			t.Fatal("up did not end within 30 s of its SIGTERM")
		}
		if err != nil || strings.Contains(stderr.String(), "second interrupt") {
			t.Fatalf("up signalled twice back to back: %v; want a clean stop, exit 0\nstderr:\n%s", err, stderr.String())
		}
	}
}
