package wired_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/normsim/normsim/sim"
	"github.com/normsim/normsim/sim/manager"
	"github.com/normsim/normsim/sim/process"
	"github.com/normsim/normsim/sim/template"
)

// TestRecoverStopsHostProcesses: after a kill, the restart stops a host
// process of a live instance even when its pid never reached the store (it
// finds it by instance ID), and leaves alone a pid an ended instance
// recorded (the pid may be someone else's by now).
func TestRecoverStopsHostProcesses(t *testing.T) {
	ctx := context.Background()
	store := newMemStore(t)
	sleep := func(env ...string) *exec.Cmd {
		cmd := exec.Command("sleep", "60")
		cmd.Env = append(os.Environ(), env...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
			t.Skip("no sleep(1) to stand in for a job:", err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		return cmd
	}
	suffix := strconv.Itoa(os.Getpid())
	starting, ended := "counter-s"+suffix, "counter-e"+suffix
	const owner = "0123456789abcdef"
	lost := sleep(sim.EnvInstance+"="+starting, sim.EnvOwner+"="+owner)
	// Another store's process whose instance ID happens to match.
	stranger := sleep(sim.EnvInstance+"="+starting, sim.EnvOwner+"=fedcba9876543210")
	reused := sleep() // holds the pid the ended instance recorded
	now := time.Now()
	for _, in := range []*sim.Instance{
		{ID: starting, JobID: "job-s", Role: starting, Node: "a", Template: "counter", Runtime: sim.RuntimeProcess,
			State: sim.InstanceStarting, CreatedAt: now, UpdatedAt: now},
		{ID: ended, JobID: "job-e", Role: ended, Node: "a", Template: "counter", Runtime: sim.RuntimeProcess,
			State: sim.InstanceStopped, RuntimeRef: map[string]string{"pid:counter": strconv.Itoa(reused.Process.Pid)},
			CreatedAt: now, UpdatedAt: now},
	} {
		if err := store.SaveInstance(ctx, in); err != nil {
			t.Fatal(err)
		}
	}
	procs := process.New(process.Config{})
	defer procs.Close(ctx, false)
	m := manager.New(manager.Config{Nodes: []manager.Node{{Node: sim.Node{Name: "a"}}}, Store: store, Catalog: template.NewCatalog(), Owner: owner,
		Runtimes: sim.RuntimeSet{Runtimes: map[string]sim.Runtime{sim.RuntimeProcess: procs}}})
	defer m.Close()
	if err := m.Recover(ctx); err != nil {
		t.Fatal(err)
	}

	exited := make(chan error, 1)
	go func() { exited <- lost.Wait() }()
	select {
	case err := <-exited:
		if ws, ok := lost.ProcessState.Sys().(syscall.WaitStatus); !ok || ws.Signal() != syscall.SIGKILL {
			t.Fatalf("the unrecorded process ended with %v, want SIGKILL", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the process whose pid never reached the store is still running")
	}
	if !runningPid(reused.Process.Pid) {
		t.Fatal("the pid an ended instance recorded was killed")
	}
	if !runningPid(stranger.Process.Pid) {
		t.Fatal("recovery killed another store's process whose instance ID matched")
	}
	in, err := store.GetInstance(ctx, starting)
	if err != nil || in.State != sim.InstanceFailed {
		t.Fatalf("the starting instance after recovery: %+v, %v", in, err)
	}
	// What recovery decided is visible, not only in the store: the failed
	// instance with its reason, the ended one as it was.
	got, err := m.Instance(ctx, starting)
	if err != nil || got.State != sim.InstanceFailed || !strings.Contains(got.Error, "host processes cannot be adopted") {
		t.Fatalf("the API's view of the instance recovery failed: %+v, %v", got, err)
	}
	list, _ := m.Instances(ctx)
	if len(list) != 2 {
		t.Fatalf("listed after recovery: %+v, want the failed and the stopped instance", list)
	}
}

// runningPid reports whether pid runs: killed, a child of the test would be
// a zombie (unreaped), which signal 0 still finds.
func runningPid(pid int) bool {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	i := bytes.LastIndexByte(stat, ')')
	return err == nil && i >= 0 && len(stat) >= i+3 && stat[i+2] != 'Z'
}
