package process

import (
	"context"
	"maps"
	"os"
	"slices"
	"strconv"
	"testing"

	"github.com/normsim/normsim/sim"
)

// TestRuntimeRefRoundTrip: what RuntimeRef records of a running instance
// is what recovery reads back as its processes, and an instance not
// running records nothing.
func TestRuntimeRefRoundTrip(t *testing.T) {
	r, _ := MustRuntime(t)
	MustLaunch(t, r, "i1", helper("app", "graceful"))
	waitLog(t, r, "i1", "app | ready")
	ref := r.RuntimeRef("i1")
	pid := r.Pids("i1")["app"]
	if ref["pid:app"] != strconv.Itoa(pid) {
		t.Fatalf("RuntimeRef = %v, want pid:app %d", ref, pid)
	}
	got := recordedProcesses(ref)
	if len(got) != 1 || got[0].Pid != pid || got[0].Started != ref["started:app"] {
		t.Fatalf("read back %+v from %v", got, ref)
	}
	if ref := r.RuntimeRef("unknown"); len(ref) != 0 {
		t.Fatalf("RuntimeRef of an unknown instance = %v", ref)
	}
}

// TestRecoverFailsWhatHadNotEnded: host processes cannot be adopted, so
// every stored instance that had not ended fails, saying why; ended ones
// get no answer.
func TestRecoverFailsWhatHadNotEnded(t *testing.T) {
	r, _ := MustRuntime(t)
	stored := []sim.Instance{
		{ID: "running-1", State: sim.InstanceRunning},
		{ID: "starting-1", State: sim.InstanceStarting},
		{ID: "stopped-1", State: sim.InstanceStopped},
	}
	got, err := r.Recover(context.Background(), "0123456789abcdef", stored)
	if err != nil {
		t.Fatal(err)
	}
	if ids := slices.Sorted(maps.Keys(got)); !slices.Equal(ids, []string{"running-1", "starting-1"}) {
		t.Fatalf("recovered %v, want the two that had not ended", ids)
	}
	for id, rec := range got {
		if rec.Adopted || rec.Reason != cannotAdopt {
			t.Errorf("%s: %+v, want failed with %q", id, rec, cannotAdopt)
		}
	}
}

// TestRecoverRemovesTheLogDirectoriesACrashLeft (issue 34, round four,
// F7): a restart stopped what a crashed run left but kept its log
// directories, one per instance, for ever. The directory a run recorded
// (RuntimeRef) goes with its processes; a path that is not such a
// directory is never removed, whatever a store says.
func TestRecoverRemovesTheLogDirectoriesACrashLeft(t *testing.T) {
	r, _ := MustRuntime(t)
	MustLaunch(t, r, "i1", helper("app", "graceful"))
	waitLog(t, r, "i1", "app | ready")
	ref := r.RuntimeRef("i1")
	dir := ref[refLogs]
	if !isLogDir(dir, "i1") {
		t.Fatalf("RuntimeRef records the log directory as %q, want the run's normsim-i1-… directory", dir)
	}
	// Another runtime stands for the restart: the first one's process and
	// directory are what a crash left.
	r2, _ := MustRuntime(t)
	other := t.TempDir() // named by a store, but not a log directory
	stored := []sim.Instance{
		{ID: "i1", State: sim.InstanceRunning, RuntimeRef: ref},
		{ID: "i2", State: sim.InstanceRunning, RuntimeRef: map[string]string{refLogs: other}},
	}
	if _, err := r2.Recover(context.Background(), "", stored); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("the crashed run's log directory %s is still there (%v)", dir, err)
	}
	if _, err := os.Stat(other); err != nil {
		t.Errorf("a directory that is no log directory was removed: %v", err)
	}
}
