package e2e_test

import (
	"bytes"
	"context"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"

	"github.com/normsim/normsim/internal/testenv"
	"github.com/normsim/normsim/normsimtest"
	"github.com/normsim/normsim/normsimtest/normsimdocker"
	"github.com/normsim/normsim/sim"
)

// dockerSim starts a sim on the Docker runtime with the counter image built.
func dockerSim(t *testing.T, o normsimtest.Options) *normsimtest.Sim {
	t.Helper()
	if testing.Short() {
		t.Skip("runs real containers")
	}
	normsimdocker.BuildSourceImage(t, "normsim/counter", filepath.Join("..", "examples", "jobs", "counter"))
	o.Runtime = sim.RuntimeDocker
	// Registered first so it runs after the sim has shut down: nothing this
	// sim (its store's owner label) launched may be left.
	var owner string
	t.Cleanup(func() {
		if owner != "" {
			requireNoContainers(t, "", "io.normsim.owner="+owner)
		}
	})
	s := startSim(t, o)
	owner = s.Main.Store.Owner()
	return s
}

// requireNoContainers fails when containers with normsim's labels remain
// (for one instance, or any).
func requireNoContainers(t *testing.T, instance string, labels ...string) {
	t.Helper()
	cli := testenv.RequireDocker(t)
	f := filters.NewArgs(filters.Arg("label", "io.normsim.managed=true"))
	for _, l := range labels {
		f.Add("label", l)
	}
	if instance != "" {
		f.Add("label", "io.normsim.instance="+instance)
	}
	list, err := cli.ContainerList(context.Background(), container.ListOptions{All: true, Filters: f})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range list {
		t.Errorf("container %s (%s) left behind", c.Names, c.Labels["io.normsim.instance"])
	}
}

func TestDockerCounterConnectsLogsAndStops(t *testing.T) {
	s := dockerSim(t, normsimtest.Options{})
	in := s.Launch(t, sim.LaunchRequest{Template: "counter", Node: "a"})
	if in.Runtime != sim.RuntimeDocker || in.Env != nil {
		t.Fatalf("instance %+v: want docker, env hidden", in)
	}
	// Connected means the container resolved host.docker.internal and its
	// job said hello to node a's listener with the right token.
	s.WaitConnected(t, in.ID)
	requireComposeProject(t, in.ID)
	deadline := time.Now().Add(10 * time.Second)
	var logs string
	for time.Now().Before(deadline) {
		resp, err := http.Get(s.URL + "/api/v1/instances/" + in.ID + "/logs")
		if err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		b.ReadFrom(resp.Body)
		resp.Body.Close()
		logs = b.String()
		if strings.Contains(logs, "counter starting") && strings.Contains(logs, "output started") {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if !strings.Contains(logs, "counter | ") || !strings.Contains(logs, "output started") {
		t.Fatalf("logs do not show the counter running:\n%s", logs)
	}
	if err := s.Do(http.MethodDelete, "/api/v1/instances/"+in.ID, nil, nil); err != nil {
		t.Fatal(err)
	}
	requireNoContainers(t, in.ID)
}

func TestDockerCounterMigratesWithEachStrategy(t *testing.T) {
	for _, tc := range []struct {
		template string
		strategy sim.Strategy
		verdict  string
	}{
		{"counter", sim.Handover, sim.VerdictSeamless},
		{"counter", sim.StopThenStart, sim.VerdictGap},
		{"relay-overlap", sim.Overlap, sim.VerdictOverlap},
	} {
		t.Run(string(tc.strategy), func(t *testing.T) {
			s := dockerSim(t, normsimtest.Options{})
			in := s.Launch(t, sim.LaunchRequest{Template: tc.template, Node: "a", Params: map[string]string{"RATE": "100"}})
			s.WaitConnected(t, in.ID)
			time.Sleep(300 * time.Millisecond)
			id := in.ID
			for _, to := range []string{"b", "a"} {
				m := s.MigrateAndWait(t, id, sim.MigrateRequest{To: to, Strategy: string(tc.strategy)})
				normsimtest.RequireCompleted(t, m)
				if m.Output == nil || m.Output.Verdict != tc.verdict {
					t.Fatalf("%s to %s: output %+v, want %s\n%s", tc.strategy, to, m.Output, tc.verdict, normsimtest.Timeline(m))
				}
				t.Logf("%s to %s in %.0f ms: %s (%s)", tc.strategy, to, *m.Durations.TotalMs, m.Output.Verdict, m.Output.Detail)
				requireNoContainers(t, id) // the source's containers are gone
				id = m.Target.Instance
				s.WaitConnected(t, id)
				time.Sleep(300 * time.Millisecond)
			}
		})
	}
}

// TestDockerRestartAdoptsOrCleansUp kills a real normsim process and starts
// another over the same store: a running container is adopted (and still
// connected), one whose instance was not running is removed.
func TestDockerRestartAdoptsOrCleansUp(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real containers")
	}
	normsimdocker.BuildSourceImage(t, "normsim/counter", filepath.Join("..", "examples", "jobs", "counter"))
	// The same socket ports after the restart, so the adopted job's
	// NORSK_WORKER_WS_URL still points at its node.
	up, addr := restartableUp(t, "docker")
	first := up()
	api := normsimtestClient(addr)
	in := api.Launch(t, sim.LaunchRequest{Template: "counter", Node: "a"})
	api.WaitConnected(t, in.ID)

	first.Process.Kill() // SIGKILL: no cleanup
	first.Wait()

	up()
	got := api.WaitInstance(t, in.ID, 30*time.Second, "adopted, running and reconnected", func(i sim.Instance) bool {
		return i.State == sim.InstanceRunning && i.Connected
	})
	if got.Error != "" {
		t.Fatalf("adopted instance carries an error: %q", got.Error)
	}
	// The adopted instance is fully managed: stopping it removes its
	// containers.
	if err := api.Do(http.MethodDelete, "/api/v1/instances/"+in.ID, nil, nil); err != nil {
		t.Fatal(err)
	}
	requireNoContainers(t, in.ID)
}

// requireComposeProject fails unless the instance's containers were made by
// the Compose SDK: compose's project label names the instance's project.
func requireComposeProject(t *testing.T, instance string) {
	t.Helper()
	cli := testenv.RequireDocker(t)
	list, err := cli.ContainerList(context.Background(), container.ListOptions{All: true, Filters: filters.NewArgs(
		filters.Arg("label", "io.normsim.managed=true"), filters.Arg("label", "io.normsim.instance="+instance))})
	if err != nil {
		t.Fatal(err)
	}
	if len(list) == 0 {
		t.Fatalf("instance %s has no containers", instance)
	}
	for _, c := range list {
		if got, want := c.Labels["com.docker.compose.project"], c.Labels["io.normsim.project"]; got == "" || got != want {
			t.Errorf("container %s: compose project label %q, want %q (made by the Compose SDK)", c.Names, got, want)
		}
	}
}
