package e2e_test

import (
	"context"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/normsim/normsim/normsimtest"
	"github.com/normsim/normsim/sim"
)

// TestCensusSeesWhatRunsOnTheHost checks GET /api/v1/census against the
// host: a launched job shows as known, a process that carries the sim's
// owner label but no instance the manager holds shows as unknown, and a
// stopped job is gone.
func TestCensusSeesWhatRunsOnTheHost(t *testing.T) {
	if testing.Short() || runtime.GOOS != "linux" {
		t.Skip("runs real processes and reads /proc (Linux)")
	}
	s := startSim(t, normsimtest.Options{Runtime: sim.RuntimeProcess})
	ctx := context.Background()
	in := s.Launch(t, sim.LaunchRequest{Template: "counter", Node: "a"})
	s.WaitConnected(t, in.ID)

	// A stray: what a runtime that lost track of a process would leave.
	stray := exec.Command("sleep", "60")
	stray.Env = append(os.Environ(), sim.EnvInstance+"=counter-stray", sim.EnvOwner+"="+s.Main.Store.Owner())
	stray.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := stray.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stray.Process.Kill(); stray.Wait() })

	c, err := s.Client.Census(ctx)
	if err != nil {
		t.Fatal(err)
	}
	known := slices.IndexFunc(c.Units, func(u sim.RunningUnit) bool { return u.Instance == in.ID && u.Known })
	unknown := slices.IndexFunc(c.Units, func(u sim.RunningUnit) bool {
		return u.Instance == "counter-stray" && !u.Known && u.Ref == strconv.Itoa(stray.Process.Pid)
	})
	if known < 0 || unknown < 0 || c.Unknown != 1 {
		t.Fatalf("census %+v: want %s known and counter-stray (pgid %d) the one unknown", c, in.ID, stray.Process.Pid)
	}

	if err := s.Client.Stop(ctx, in.ID); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err = s.Client.Census(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.ContainsFunc(c.Units, func(u sim.RunningUnit) bool { return u.Instance == in.ID }) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("census still lists the stopped %s: %+v", in.ID, c.Units)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
