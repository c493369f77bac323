package e2e_test

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"

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
	up := func(log *testenv.SyncBuffer) (*exec.Cmd, *apiclient.Client) {
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
	ctx := context.Background()
	var firstLog testenv.SyncBuffer
	first, api := up(&firstLog)
	in, err := api.Launch(ctx, sim.LaunchRequest{Template: "counter", Node: "a"})
	if err != nil {
		t.Fatal(err)
	}
	byInstance := filters.NewArgs(filters.Arg("label", sim.LabelInstance+"="+in.ID))
	t.Cleanup(func() { // whatever the outcome, nothing of this test is left
		list, _ := cli.ContainerList(context.Background(), container.ListOptions{All: true, Filters: byInstance})
		for _, c := range list {
			cli.ContainerRemove(context.Background(), c.ID, container.RemoveOptions{Force: true})
		}
	})
	if _, err := api.AwaitInstance(ctx, in.ID, sim.UntilRunning, time.Minute); err != nil {
		t.Fatalf("counter never ran: %v\n%s", err, firstLog.String())
	}
	first.Process.Kill()
	first.Wait()
	list, err := cli.ContainerList(ctx, container.ListOptions{Filters: byInstance})
	if err != nil || len(list) != 1 {
		t.Fatalf("after the kill, %d running containers of %s (%v): the test needs the one the kill left", len(list), in.ID, err)
	}

	var secondLog testenv.SyncBuffer
	up(&secondLog)
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
