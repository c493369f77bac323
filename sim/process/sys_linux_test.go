package process

import (
	"context"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/normsim/normsim/sim"
)

// startHelper starts this test binary in a helper mode, as the runtime does.
func startHelper(tb testing.TB, mode string) (pid, pidfd int) {
	tb.Helper()
	out, err := os.Create(tb.TempDir() + "/out")
	if err != nil {
		tb.Fatal(err)
	}
	defer out.Close()
	pid, pidfd, err = startProcess(os.Args[0], []string{os.Args[0]}, "", append(os.Environ(), helperEnv+"="+mode), out, out)
	if err != nil {
		tb.Fatal(err)
	}
	if pidfd < 0 {
		tb.Skip("the kernel gave no pidfd; the runtime polls instead")
	}
	return pid, pidfd
}

func TestWaitExit(t *testing.T) {
	for _, usePidfd := range []bool{true, false} {
		name := map[bool]string{true: "pidfd", false: "polling"}[usePidfd]
		t.Run(name, func(t *testing.T) {
			pid, pidfd := startHelper(t, "sleep")
			if pgid, err := syscall.Getpgid(pid); err != nil || pgid != pid {
				t.Fatalf("process group of %d = %d (%v), want its own", pid, pgid, err)
			}
			if !usePidfd {
				syscall.Close(pidfd)
				pidfd = -1
			}
			unreaped := false
			done := make(chan exitInfo, 1)
			go func() {
				info, ok := waitExit(context.Background(), pid, pidfd, func() {
					unreaped = hasExited(pid) && syscall.Kill(pid, 0) == nil
				})
				if !ok {
					t.Error("waitExit gave up")
				}
				done <- info
			}()
			if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			select {
			case info := <-done:
				if info != (exitInfo{code: 137, signal: 9, detail: "killed by signal 9"}) {
					t.Fatalf("exit = %+v", info)
				}
			case <-time.After(waitLimit):
				t.Fatal("waitExit did not notice the exit")
			}
			// With a pidfd, beforeReap runs while the exited process still
			// holds its pid; polling can only see the exit by reaping.
			if unreaped != usePidfd {
				t.Fatalf("beforeReap saw the process unreaped: %v, want %v", unreaped, usePidfd)
			}
			if syscall.Kill(pid, 0) != syscall.ESRCH {
				t.Fatal("process not reaped")
			}
		})
	}
}

func TestWaitExitGivesUp(t *testing.T) {
	pid, pidfd := startHelper(t, "sleep")
	t.Cleanup(func() {
		syscall.Kill(pid, syscall.SIGKILL)
		var ws syscall.WaitStatus
		syscall.Wait4(pid, &ws, 0, nil)
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan bool, 1)
	go func() {
		_, ok := waitExit(ctx, pid, pidfd, func() { t.Error("beforeReap ran for a live process") })
		done <- ok
	}()
	cancel()
	select {
	case ok := <-done:
		if ok {
			t.Fatal("waitExit reported an exit")
		}
	case <-time.After(waitLimit):
		t.Fatal("waitExit did not give up when its context ended")
	}
	if !alive(pid) {
		t.Fatal("giving up killed the process")
	}
}

// TestStopLeftovers: a restart stops what a killed normsim started, by
// recorded pid and, for a process whose pid never reached the store, by the
// instance ID in its environment; another instance's process, normsim's
// own group, and a recorded pid now held by a later process are left alone.
func TestStopLeftovers(t *testing.T) {
	start := func(env ...string) (pid, pidfd int) {
		t.Helper()
		out, err := os.Create(t.TempDir() + "/out")
		if err != nil {
			t.Fatal(err)
		}
		defer out.Close()
		pid, pidfd, err = startProcess(os.Args[0], []string{os.Args[0]}, "", append(os.Environ(), append(env, helperEnv+"=sleep")...), out, out)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { killGroup(pid); reap(pid); syscall.Close(pidfd) })
		return pid, pidfd
	}
	suffix := strconv.Itoa(os.Getpid())
	const owner = "0123456789abcdef"
	mine := sim.EnvOwner + "=" + owner
	unrecorded, unrecordedFD := start(sim.EnvInstance+"=lost-"+suffix, mine)
	recorded, recordedFD := start()
	other, _ := start(sim.EnvInstance+"=other-"+suffix, mine)
	// Another store's process with the same instance ID is not ours.
	stranger, _ := start(sim.EnvInstance+"=lost-"+suffix, sim.EnvOwner+"=fedcba9876543210")

	// A recorded pid that is now normsim's own group (reused) is spared:
	// a helper's group stands in for normsim's.
	own, _ := start()
	real := ownGroup
	ownGroup = func() int { return own }
	defer func() { ownGroup = real }()
	// A recorded pid whose process started at another time than recorded
	// was given to someone else: spared too.
	reused, _ := start()
	// A recorded pid without its start time, where the system records
	// one (a damaged or foreign record, attack round 10a, M2), proves
	// nothing: spared.
	unproven, _ := start()
	if startMark(recorded) == "" {
		t.Fatalf("no start mark for pid %d", recorded)
	}
	n := StopLeftovers(owner, map[string][]Recorded{"lost-" + suffix: nil, "kept-" + suffix: {
		{Pid: recorded, Started: startMark(recorded)}, {Pid: own, Started: startMark(own)}, {Pid: reused, Started: startMark(reused) + "0"}, {Pid: unproven},
	}})
	if n != 2 {
		t.Errorf("StopLeftovers signalled %d groups, want 2", n)
	}
	for _, p := range []struct {
		name    string
		pid, fd int
	}{{"the process found by its instance ID", unrecorded, unrecordedFD}, {"the recorded pid", recorded, recordedFD}} {
		ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
		info, ok := waitExit(ctx, p.pid, p.fd, func() {})
		cancel()
		if !ok || info.code != 137 {
			t.Errorf("%s: exit %+v (exited: %v), want killed by SIGKILL", p.name, info, ok)
		}
	}
	if !alive(other) {
		t.Error("another instance's process was killed")
	}
	if !alive(stranger) {
		t.Error("another store's process with a matching instance ID was killed")
	}
	if !alive(own) {
		t.Error("normsim's own process group was killed")
	}
	if !alive(reused) {
		t.Error("a pid recorded with another start time was killed")
	}
	if !alive(unproven) {
		t.Error("a pid recorded without a start time, on a system that records them, was killed")
	}
}

// TestStopEndsChildrenThatLeftTheGroup (issue 34, round three, F2): a
// job's child that left its process group (setsid) outlived the stop,
// normsim's exit and a restart, still carrying the instance's tags. A stop
// ends the processes that carry the instance's and owner's tags too,
// SIGTERM first and SIGKILL after the grace; another owner's are left.
func TestStopEndsChildrenThatLeftTheGroup(t *testing.T) {
	for _, tc := range []struct {
		name  string
		child string // the stray's command, after it wrote its pid
		grace time.Duration
	}{
		{"a child that ends on SIGTERM", "exec sleep 4321", waitLimit},
		{"a child that ignores SIGTERM", `trap "" TERM; while :; do sleep 0.05; done`, 200 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, _ := MustRuntime(t)
			dir := t.TempDir()
			owner := "0123456789abcdef"
			spawn := func(id, owner, pidFile string) {
				script := `setsid sh -c 'echo $$ > ` + pidFile + `; ` + tc.child + `' & exec sleep 100000`
				MustLaunch(t, r, id, sim.ServiceSpec{Name: "app",
					Env:     map[string]string{sim.EnvInstance: id, sim.EnvOwner: owner},
					Process: &sim.ProcessSpec{Command: []string{"sh", "-c", script}}})
			}
			spawn("i1", owner, dir+"/i1.pid")
			spawn("i2", "fedcba9876543210", dir+"/i2.pid") // another normsim's, with its own owner
			mine, theirs := strayPid(t, dir+"/i1.pid"), strayPid(t, dir+"/i2.pid")
			t.Cleanup(func() { syscall.Kill(theirs, syscall.SIGKILL); syscall.Kill(mine, syscall.SIGKILL) })
			if _, err := r.Stop(context.Background(), "i1", tc.grace); err != nil {
				t.Fatal(err)
			}
			requireStrayEnded(t, mine, theirs, "stop")
		})
	}
}

// strayPid is the pid a stray wrote to pidFile, once it has.
func strayPid(t *testing.T, pidFile string) int {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for {
		b, err := os.ReadFile(pidFile)
		if pid, perr := strconv.Atoi(string(bytesTrim(b))); err == nil && perr == nil && pid > 0 {
			return pid
		}
		if time.Now().After(deadline) {
			t.Fatalf("the stray never wrote its pid to %s", pidFile)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func bytesTrim(b []byte) []byte {
	for len(b) > 0 && (b[len(b)-1] == '\n' || b[len(b)-1] == ' ') {
		b = b[:len(b)-1]
	}
	return b
}

// Issue 34 round 5, F8: when a job's last service exits on its own, what
// it started in groups of their own goes with it, as a container's
// processes die with its main one; they ran on while the instance said
// failed. Another instance's stray is left alone.
func TestAnExitEndsChildrenThatLeftTheGroup(t *testing.T) {
	r, _ := MustRuntime(t)
	dir := t.TempDir()
	owner := "0123456789abcdef"
	spawn := func(id, pidFile, then string) {
		script := `setsid sh -c 'echo $$ > ` + pidFile + `; exec sleep 4321' & while [ ! -s ` + pidFile + ` ]; do sleep 0.01; done; ` + then
		MustLaunch(t, r, id, sim.ServiceSpec{Name: "app",
			Env:     map[string]string{sim.EnvInstance: id, sim.EnvOwner: owner},
			Process: &sim.ProcessSpec{Command: []string{"sh", "-c", script}}})
	}
	spawn("i2", dir+"/i2.pid", "exec sleep 100000") // runs on
	theirs := strayPid(t, dir+"/i2.pid")
	spawn("i1", dir+"/i1.pid", "exit 3")
	mine := strayPid(t, dir+"/i1.pid")
	t.Cleanup(func() { syscall.Kill(theirs, syscall.SIGKILL); syscall.Kill(mine, syscall.SIGKILL) })
	requireStrayEnded(t, mine, theirs, "exit")
}

// requireStrayEnded checks that i1's stray (mine) goes, within waitLimit
// of i1's stop or exit (what), and that another instance's (theirs) runs on.
func requireStrayEnded(t *testing.T, mine, theirs int, what string) {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for alive(mine) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if alive(mine) {
		t.Errorf("the child that left the job's process group (pid %d) outlived i1's %s", mine, what)
	}
	if !alive(theirs) {
		t.Errorf("another instance's stray (pid %d) was ended by i1's %s", theirs, what)
	}
}

// Issue 34 round 5c: a container's processes carry the owner's label too
// (the Docker runtime sets it), and /proc shows them from the host: the
// census listed every container twice, once as a process group. A process
// in another PID namespace is not the process runtime's.
func TestProcessesOfAnotherPIDNamespaceAreNotOurs(t *testing.T) {
	owner := "fedcba9876543210"
	// Only the process inside the namespace carries the tags.
	cmd := exec.Command("unshare", "--pid", "--fork", "env", sim.EnvInstance+"=in-a-container", sim.EnvOwner+"="+owner, "sleep", "100")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Skipf("cannot make a PID namespace here: %v", err)
	}
	t.Cleanup(func() { syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); cmd.Wait() })
	// The sleep in the new namespace is unshare's child; wait for it.
	deadline := time.Now().Add(waitLimit)
	for {
		out, _ := exec.Command("pgrep", "-g", strconv.Itoa(cmd.Process.Pid), "-x", "sleep").Output()
		if len(bytesTrim(out)) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Skip("unshare --pid --fork started no sleep here (not allowed to unshare?)")
		}
		time.Sleep(10 * time.Millisecond)
	}
	groups, ok := ownedProcesses(sim.EnvInstance, sim.EnvOwner+"="+owner)
	if !ok {
		t.Skip("no /proc")
	}
	if len(groups) > 0 {
		t.Errorf("processes of another PID namespace counted as the owner's: %v", groups)
	}
	if gs := taggedGroups(sim.EnvInstance, []string{"in-a-container"}, sim.EnvOwner+"="+owner); len(gs) > 0 {
		t.Errorf("processes of another PID namespace found by their tags: %v", gs)
	}
}
