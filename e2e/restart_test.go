package e2e_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/normsim/normsim/normsimtest"
	"github.com/normsim/normsim/normsimtest/normsimdocker"
	"github.com/normsim/normsim/sim"
)

// TestDockerRestartPolicyIsHonoured: a service whose restart policy has
// the engine start it again is not marked failed when it exits; once the
// engine gives up (on-failure:2, a third exit), it is.
func TestDockerRestartPolicyIsHonoured(t *testing.T) {
	s := dockerSim(t, normsimtest.Options{Templates: []string{filepath.Join("testdata", "restart")}})
	normsimdocker.BuildSourceImage(t, "normsim/compose-parity", filepath.Join("..", "sim", "docker", "testdata", "job"))
	in := s.Launch(t, sim.LaunchRequest{Template: "restarting", Node: "a"})
	got := s.WaitInstance(t, in.ID, time.Minute, "failed once the engine stops restarting it", func(i sim.Instance) bool {
		return i.State == sim.InstanceFailed
	})
	if !strings.Contains(got.Error, "exited with code 3") {
		t.Errorf("error %q", got.Error)
	}
	s.Main.Manager.Flush()
	evs, err := s.Main.Store.ListEvents(context.Background(), sim.EventFilter{})
	if err != nil {
		t.Fatal(err)
	}
	restarted, final := 0, 0
	for _, ev := range evs {
		if ev.Kind != "instance.runtime" || ev.Instance != in.ID {
			continue
		}
		var d struct{ Kind, Detail string }
		json.Unmarshal(ev.Data, &d)
		if d.Kind != string(sim.ServiceExited) {
			continue
		}
		if strings.Contains(d.Detail, "the engine restarts it (restart: on-failure)") {
			restarted++
		} else {
			final++
		}
	}
	if restarted != 2 || final != 1 {
		t.Fatalf("exits the engine restarted: %d, final ones: %d; want 2 and 1", restarted, final)
	}

	// The first run is read attached, the restarts from the engine's log:
	// each run's lines are kept once, none twice, none lost.
	var page *sim.LogPage
	count := map[string]int{}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if page, err = s.Client.LogPage(context.Background(), in.ID, 0); err != nil {
			t.Fatal(err)
		}
		clear(count)
		for _, l := range page.Lines {
			count[l.Stream+" "+l.Text]++
		}
		if count["stderr exiting with code 3"] >= 3 || time.Now().After(deadline) {
			break
		}
	}
	for _, line := range []string{"stderr exiting with code 3", "stdout GREETING="} {
		if count[line] != 3 {
			t.Errorf("%q kept %d times, want once per run (3):\n%v", line, count[line], page.Lines)
		}
	}
}
