//go:build unix && !aix

package process

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/normsim/normsim/sim"
)

// parentMain starts a job on a process runtime of its own, prints its
// pid, and waits to be killed; with keep it closes the runtime keeping
// the job, and exits.
func parentMain(keep bool) int {
	ctx := context.Background()
	r := New(Config{})
	spec := &sim.LaunchSpec{InstanceID: "orphan", Services: []sim.ServiceSpec{helper("app", "sleep")}}
	if err := r.Prepare(ctx, spec); err != nil {
		fmt.Println("error", err)
		return 1
	}
	if err := r.Start(ctx, "orphan"); err != nil {
		fmt.Println("error", err)
		return 1
	}
	fmt.Println("job", r.Pids("orphan")["app"])
	if keep {
		r.Close(ctx, true)
		return 0
	}
	time.Sleep(time.Hour)
	return 0
}

// startParent runs a normsim stand-in (parentMain) and returns it and
// its job's pid.
func startParent(t *testing.T, mode string) (*exec.Cmd, int) {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), helperEnv+"="+mode, "GORACE=atexit_sleep_ms=0", "TMPDIR="+t.TempDir())
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "job ") {
		cmd.Process.Kill()
		t.Fatalf("the parent said %q, %v", line, err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(line, "job ")))
	t.Cleanup(func() { syscall.Kill(-pid, syscall.SIGKILL) })
	return cmd, pid
}

// A job outlives nothing of the normsim that started it: killed with
// SIGKILL (or a test binary's timeout), normsim runs no cleanup, and its
// reaper ends the job (issue 34 round 6, F3: normsimtest's jobs kept
// running after `go test -timeout`).
func TestAJobDiesWithTheNormsimThatStartedIt(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a normsim stand-in and kills it")
	}
	parent, job := startParent(t, "dying-normsim")
	if !alive(job) {
		t.Fatalf("job %d is not running", job)
	}
	parent.Process.Kill()
	parent.Wait()
	deadline := time.Now().Add(reaperGrace + 5*time.Second)
	for alive(job) {
		if time.Now().After(deadline) {
			t.Fatalf("job %d still runs %s after the normsim that started it was killed", job, reaperGrace+5*time.Second)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A job normsim let go of on purpose (Close with keep) outlives it.
func TestAJobKeptOnPurposeOutlivesItsNormsim(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a normsim stand-in")
	}
	parent, job := startParent(t, "keeping-normsim")
	if err := parent.Wait(); err != nil {
		t.Fatalf("the parent: %v", err)
	}
	time.Sleep(reaperGrace + time.Second)
	if !alive(job) {
		t.Fatalf("job %d died with its normsim, which kept it", job)
	}
}
