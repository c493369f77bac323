package e2e_test

import (
	"context"
	"io"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/normsim/normsim/normsimtest"
	"github.com/normsim/normsim/sim"
)

// TestCounterMigratesWithEachStrategy runs the counter example as host
// processes and migrates it a→b→a with each strategy it may use, checking
// what the output sink saw at each seam.
func TestCounterMigratesWithEachStrategy(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes")
	}
	for _, tc := range []struct {
		template string
		strategy sim.Strategy
		check    func(t *testing.T, m *sim.Migration)
	}{
		{"counter", sim.Handover, func(t *testing.T, m *sim.Migration) {
			normsimtest.RequireSeamless(t, m)
		}},
		{"counter", sim.StopThenStart, func(t *testing.T, m *sim.Migration) {
			o := m.Output
			if o == nil || o.Verdict != sim.VerdictGap || o.GapMs == nil || *o.GapMs <= 0 || o.Lost <= 0 {
				t.Fatalf("stopThenStart output %+v, want a positive gap with lost packets\n%s", o, normsimtest.Timeline(m))
			}
		}},
		{"relay-overlap", sim.Overlap, func(t *testing.T, m *sim.Migration) {
			o := m.Output
			if o == nil || o.Verdict != sim.VerdictOverlap || o.OverlapMs == nil || *o.OverlapMs <= 0 {
				t.Fatalf("overlap output %+v, want overlap\n%s", o, normsimtest.Timeline(m))
			}
			// The counter numbers by the wall clock when it starts and by
			// its ticker after, which drops ticks when the machine is
			// busy: a starved source falls behind the target's live
			// edge, and then the two send no number in common. normsim
			// must count duplicates exactly when they share numbers.
			shared := o.LastSource != nil && o.FirstTarget != nil && *o.FirstTarget <= *o.LastSource
			if shared != (o.Duplicated > 0) {
				t.Fatalf("overlap output %+v: the source's last number and the target's first say duplicates %v, but %d counted\n%s",
					o, shared, o.Duplicated, normsimtest.Timeline(m))
			}
		}},
	} {
		t.Run(string(tc.strategy), func(t *testing.T) {
			s := startSim(t, normsimtest.Options{Runtime: sim.RuntimeProcess})
			in := s.Launch(t, sim.LaunchRequest{Template: tc.template, Node: "a", Params: map[string]string{"RATE": "100"}})
			if in.Runtime != sim.RuntimeProcess {
				t.Fatalf("runtime %s", in.Runtime)
			}
			s.WaitConnected(t, in.ID)
			time.Sleep(300 * time.Millisecond) // let it produce before moving it
			id := in.ID
			for _, to := range []string{"b", "a"} {
				m := s.MigrateAndWait(t, id, sim.MigrateRequest{To: to, Strategy: string(tc.strategy)})
				normsimtest.RequireCompleted(t, m)
				if m.Target.Node != to || m.JobID != in.JobID {
					t.Fatalf("migrated to %s (job %s), want %s (job %s)", m.Target.Node, m.JobID, to, in.JobID)
				}
				tc.check(t, m)
				t.Logf("%s to %s: %s (%s)", tc.strategy, to, m.Output.Verdict, m.Output.Detail)
				if src := s.Instance(t, id); src.State != sim.InstanceStopped {
					t.Fatalf("source %s is %s after the migration", id, src.State)
				}
				id = m.Target.Instance
				s.WaitConnected(t, id)
				time.Sleep(300 * time.Millisecond)
			}
		})
	}
}

// TestProcessCounterConnectsLogsAndStops: the counter as a host process
// dials node a's listener, its logs are retrievable, and DELETE ends its
// whole process group.
func TestProcessCounterConnectsLogsAndStops(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes")
	}
	s := startSim(t, normsimtest.Options{Runtime: sim.RuntimeProcess})
	in := s.Launch(t, sim.LaunchRequest{Template: "counter", Node: "a"})
	s.WaitConnected(t, in.ID)
	pids := s.Main.Runtime(sim.RuntimeProcess).(interface{ Pids(string) map[string]int }).Pids(in.ID)
	pid := pids["counter"]
	if pid == 0 {
		t.Fatalf("no pid for the counter: %v", pids)
	}
	// What a restart needs to stop it is in the store: the pid and, on
	// Linux, when the process started (a reused pid has another).
	stored, err := s.Main.Store.GetInstance(context.Background(), in.ID)
	if err != nil {
		t.Fatal(err)
	}
	if stored.RuntimeRef["pid:counter"] != strconv.Itoa(pid) || (runtime.GOOS == "linux" && stored.RuntimeRef["started:counter"] == "") {
		t.Fatalf("stored runtime ref %v, want pid %d and its start mark", stored.RuntimeRef, pid)
	}
	deadline := time.Now().Add(10 * time.Second)
	var logs string
	for time.Now().Before(deadline) && !strings.Contains(logs, "output started") {
		resp, err := http.Get(s.URL + "/api/v1/instances/" + in.ID + "/logs")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		logs = string(b)
		time.Sleep(50 * time.Millisecond)
	}
	if !strings.Contains(logs, "counter | ") || !strings.Contains(logs, "127.0.0.1") {
		t.Fatalf("logs do not show the counter with its 127.0.0.1 socket URL:\n%s", logs)
	}
	if err := s.Do(http.MethodDelete, "/api/v1/instances/"+in.ID, nil, nil); err != nil {
		t.Fatal(err)
	}
	if live := liveInGroup(pid); len(live) > 0 {
		t.Fatalf("processes %v of group %d still alive after stop", live, pid)
	}
}

// liveInGroup lists the processes of a process group that are not zombies
// (this sandbox's PID 1 does not reap orphans, so zombies linger).
func liveInGroup(pgid int) []int {
	entries, _ := os.ReadDir("/proc")
	var live []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid pgrp ...; comm may hold spaces.
		rest := string(b[strings.LastIndexByte(string(b), ')')+2:])
		f := strings.Fields(rest)
		if len(f) > 2 && f[2] == strconv.Itoa(pgid) && f[0] != "Z" {
			live = append(live, pid)
		}
	}
	return live
}
