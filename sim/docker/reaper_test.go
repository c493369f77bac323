package docker_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"

	"github.com/normsim/normsim/sim"
	"github.com/normsim/normsim/sim/docker"
)

// A normsim stand-in: this test binary again, with these set (TestMain).
const (
	parentEnv      = "NORMSIM_TEST_DOCKER_PARENT" // memory-kill, memory-keep, file-kill
	parentImageEnv = "NORMSIM_TEST_DOCKER_IMAGE"
	parentIDEnv    = "NORMSIM_TEST_DOCKER_INSTANCE"
)

// parentMain starts one instance on a Docker runtime of its own, labelled
// as a --db :memory: normsim's or a store file's, prints "up", and waits
// to be killed; with keep it closes the runtime keeping the instance.
func parentMain(mode, img, id string) int {
	ctx := context.Background()
	r, err := docker.New(docker.Config{})
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	store := sim.StoreMemory
	if strings.HasPrefix(mode, "file") {
		store = "file"
	}
	spec := &sim.LaunchSpec{InstanceID: id, JobID: "job-" + id, Role: "r", Node: "a", Template: "t", Project: "normsim-" + id,
		Services: []sim.ServiceSpec{{Name: "job", Image: img, Labels: map[string]string{
			"io.normsim.instance": id, "io.normsim.service": "job", "io.normsim.project": "normsim-" + id, sim.LabelStore: store,
		}}}}
	if err := r.Prepare(ctx, spec); err != nil {
		fmt.Println("error", err)
		return 1
	}
	if err := r.Start(ctx, id); err != nil {
		fmt.Println("error", err)
		return 1
	}
	fmt.Println("up")
	if strings.HasSuffix(mode, "keep") {
		r.Close(ctx, true)
		return 0
	}
	time.Sleep(time.Hour)
	return 0
}

// TestAKilledMemoryNormsimsContainersAreRemoved (issue 34): the
// containers of a --db :memory: normsim (normsimtest, ci, conform) killed
// with SIGKILL, or a test binary's timeout, ran on until the next normsim
// swept them as orphans. Its reaper removes them at once; a store file's
// are left for the next normsim on that store to adopt, and kept ones
// are kept.
func TestAKilledMemoryNormsimsContainersAreRemoved(t *testing.T) {
	if testing.Short() {
		t.Skip("starts normsim stand-ins with containers")
	}
	img, cli := mustJobImage(t)
	for _, tc := range []struct {
		mode   string
		remain bool
	}{
		{"memory-kill", false},
		{"memory-keep", true},
		{"file-kill", true},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			id := "t" + randomID()
			t.Cleanup(func() { removeInstance(t, cli, id) })
			cmd := exec.Command(os.Args[0])
			cmd.Env = append(os.Environ(), parentEnv+"="+tc.mode, parentImageEnv+"="+img, parentIDEnv+"="+id, "GORACE=atexit_sleep_ms=0")
			out, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			line, _ := bufio.NewReader(out).ReadString('\n')
			if line != "up\n" {
				cmd.Process.Kill()
				cmd.Wait()
				t.Fatalf("the stand-in said %q", line)
			}
			if strings.HasSuffix(tc.mode, "kill") {
				cmd.Process.Kill()
			}
			cmd.Wait()
			running := func() int {
				cs, err := cli.ContainerList(context.Background(), container.ListOptions{All: true, Filters: instanceFilter(id)})
				if err != nil {
					t.Fatal(err)
				}
				return len(cs)
			}
			if tc.remain {
				time.Sleep(5 * time.Second) // more than the reaper takes
				if running() == 0 {
					t.Fatalf("the instance's containers were removed; a %s must leave them", tc.mode)
				}
				return
			}
			deadline := time.Now().Add(30 * time.Second)
			for running() > 0 {
				if time.Now().After(deadline) {
					t.Fatalf("the instance's containers still exist 30 s after its normsim was killed")
				}
				time.Sleep(200 * time.Millisecond)
			}
		})
	}
}
