package e2e_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/client"

	"github.com/normsim/normsim/apiclient"
	"github.com/normsim/normsim/internal/testenv"
	"github.com/normsim/normsim/normsimtest/normsimdocker"
	"github.com/normsim/normsim/sim"
)

// TestWhatAKilledMemoryRunLeftIsRemovedByTheNext (issue 34 item 4): a
// SIGKILLed `normsim up --db :memory:` leaves its containers running with
// an owner no store remembers; the next normsim on this machine proves
// the run gone (its run label: machine, boot, PID namespace, pid and start
// time) and removes them, and says so.
func TestWhatAKilledMemoryRunLeftIsRemovedByTheNext(t *testing.T) {
	if testing.Short() {
		t.Skip("runs two normsims and a real container")
	}
	cli := testenv.RequireDocker(t)
	normsimdocker.BuildSourceImage(t, "normsim/counter", filepath.Join("..", "examples", "jobs", "counter"))
	bin := buildNormsim(t)
	ctx := context.Background()
	var firstLog testenv.SyncBuffer
	first, api := upMemoryDocker(t, bin, &firstLog)
	in, byInstance := launchCounter(t, cli, api, &firstLog)
	// Its containers' reaper would remove them at once
	// (TestAKilledMemoryRunsContainersGoWithIt); killed first, as by a
	// kill of every process or a reboot, it leaves them to the sweep.
	for _, pid := range reapersOf(t, bin) {
		syscall.Kill(pid, syscall.SIGKILL)
	}
	first.Process.Kill()
	first.Wait()
	list, err := cli.ContainerList(ctx, container.ListOptions{Filters: byInstance})
	if err != nil || len(list) != 1 {
		t.Fatalf("after the kill, %d running containers of %s (%v): the test needs the one the kill left", len(list), in.ID, err)
	}

	var secondLog testenv.SyncBuffer
	upMemoryDocker(t, bin, &secondLog)
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(200 * time.Millisecond) {
		list, err := cli.ContainerList(ctx, container.ListOptions{All: true, Filters: byInstance})
		if err == nil && len(list) == 0 && strings.Contains(secondLog.String(), "removed instances a normsim that is gone left running") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the next normsim left %d containers of the killed run's %s; its log:\n%s", len(list), in.ID, secondLog.String())
		}
	}
	if !strings.Contains(secondLog.String(), in.ID) {
		t.Errorf("the log does not name the removed instance %s:\n%s", in.ID, secondLog.String())
	}
}

// TestAKilledMemoryRunsContainersGoWithIt: a SIGKILLed `normsim up --db
// :memory:` leaves nothing running: its containers' reaper removes them
// (no later normsim is needed).
func TestAKilledMemoryRunsContainersGoWithIt(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a normsim and a real container")
	}
	cli := testenv.RequireDocker(t)
	normsimdocker.BuildSourceImage(t, "normsim/counter", filepath.Join("..", "examples", "jobs", "counter"))
	bin := buildNormsim(t)
	var log testenv.SyncBuffer
	cmd, api := upMemoryDocker(t, bin, &log)
	ctx := context.Background()
	in, byInstance := launchCounter(t, cli, api, &log)
	cmd.Process.Kill()
	cmd.Wait()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		list, err := cli.ContainerList(ctx, container.ListOptions{All: true, Filters: byInstance})
		if err == nil && len(list) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d containers of %s still exist 30 s after its normsim was killed", len(list), in.ID)
		}
	}
}

// reapersOf are the pids of the container reapers that bin started (a
// reaper is bin again, with its environment variable set).
func reapersOf(t *testing.T, bin string) []int {
	t.Helper()
	var pids []int
	dirs, _ := os.ReadDir("/proc")
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		exe, _ := os.Readlink(filepath.Join("/proc", d.Name(), "exe"))
		env, _ := os.ReadFile(filepath.Join("/proc", d.Name(), "environ"))
		if exe == bin && bytes.Contains(env, []byte("NORMSIM_INTERNAL_DOCKER_REAPER=1")) {
			pids = append(pids, pid)
		}
	}
	if len(pids) == 0 {
		t.Fatalf("no container reaper of %s runs", bin)
	}
	return pids
}

// upMemoryDocker starts `normsim up --db :memory:` on the Docker runtime,
// its output in log, and stops it (Ctrl-C) when the test ends unless the
// test killed it first.
func upMemoryDocker(t *testing.T, bin string, log *testenv.SyncBuffer) (*exec.Cmd, *apiclient.Client) {
	t.Helper()
	addr := "127.0.0.1:" + itoa(testenv.FreePort(t))
	cmd := exec.Command(bin, "up", "--db", ":memory:", "--addr", addr, "--socket-port", "0",
		"--runtime", sim.RuntimeDocker, "--templates", templatesDir)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Signal(syscall.SIGINT); cmd.Wait() })
	waitReady(t, "http://"+addr)
	return cmd, apiclient.New("http://"+addr, nil)
}

// launchCounter launches the counter on node a and waits until it runs;
// whatever the test's outcome, nothing of the instance is left after it.
func launchCounter(t *testing.T, cli *client.Client, api *apiclient.Client, log *testenv.SyncBuffer) (sim.Instance, filters.Args) {
	t.Helper()
	ctx := context.Background()
	in, err := api.Launch(ctx, sim.LaunchRequest{Template: "counter", Node: "a"})
	if err != nil {
		t.Fatal(err)
	}
	byInstance := filters.NewArgs(filters.Arg("label", sim.LabelInstance+"="+in.ID))
	t.Cleanup(func() {
		list, _ := cli.ContainerList(context.Background(), container.ListOptions{All: true, Filters: byInstance})
		for _, c := range list {
			cli.ContainerRemove(context.Background(), c.ID, container.RemoveOptions{Force: true})
		}
	})
	if _, err := api.AwaitInstance(ctx, in.ID, sim.UntilRunning, time.Minute); err != nil {
		t.Fatalf("counter never ran: %v\n%s", err, log.String())
	}
	return *in, byInstance
}
