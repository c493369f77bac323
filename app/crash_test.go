package app_test

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/normsim/normsim/internal/bench"
	"github.com/normsim/normsim/internal/testenv"
	"github.com/normsim/normsim/sim"
	"github.com/normsim/normsim/sim/sqlite"
)

// storeRecords is everything the store holds that must survive a kill.
type storeRecords struct {
	Migrations map[string]*sim.Migration // with events
	Events     []sim.Event
	Frames     int
}

// readStore opens the store file as it is (a killed normsim leaves it for
// the next start exactly like this; the next one may be running on it
// already) and reads everything.
func readStore(t *testing.T, path string) storeRecords {
	t.Helper()
	ctx := context.Background()
	st, err := sqlite.OpenToRead(ctx, path)
	if err != nil {
		t.Fatalf("the store does not open after the kill: %v", err)
	}
	defer st.Close()
	recs := storeRecords{Migrations: map[string]*sim.Migration{}}
	list, err := st.ListMigrations(ctx, sim.MigrationFilter{})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range list {
		full, err := st.GetMigration(ctx, m.ID)
		if err != nil {
			t.Fatal(err)
		}
		recs.Migrations[m.ID] = full
	}
	if recs.Events, err = st.ListEvents(ctx, sim.EventFilter{}); err != nil {
		t.Fatal(err)
	}
	frames, err := st.ListFrames(ctx, sim.FrameFilter{})
	if err != nil {
		t.Fatal(err)
	}
	recs.Frames = len(frames)
	return recs
}

// processesOf lists the live (not zombie) processes whose environment says
// they run an instance of one of jobs (NORMSIM_JOB, which every launch
// sets): what a killed normsim could have orphaned.
func processesOf(jobs map[string]bool) []string {
	var out []string
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err != nil {
			continue
		}
		for _, kv := range bytes.Split(env, []byte{0}) {
			job, ok := strings.CutPrefix(string(kv), "NORMSIM_JOB=")
			if !ok || !jobs[job] {
				continue
			}
			stat, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
			if i := bytes.LastIndexByte(stat, ')'); i > 0 && len(stat) > i+2 && stat[i+2] == 'Z' {
				break // a zombie holds nothing
			}
			cmd, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
			out = append(out, fmt.Sprintf("%d %s (%s)", pid, bytes.ReplaceAll(cmd, []byte{0}, []byte{' '}), job))
			break
		}
	}
	return out
}

// TestCrashLoop SIGKILLs a real `normsim up` at random moments while it
// hands an external job over between the nodes in a loop and moves a host
// process (the counter, process runtime) with stopThenStart, 20 times over
// the same store. After each kill the store opens; every migration, timeline
// event, event and frame recorded up to the kill is still there, unchanged;
// the restart leaves no migration running (those cut short are rolled
// back, "interrupted", if short of their point of no return, never past it,
// and failed otherwise); and no process of the killed normsim is left running (the
// restart stops them through the pids it recorded).
func TestCrashLoop(t *testing.T) {
	if testing.Short() {
		t.Skip("builds normsim and kills it 20 times")
	}
	root, _ := filepath.Abs("..")
	bin, err := bench.Build(context.Background(), root, ".", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(t.TempDir(), "normsim.db")
	seed := uint64(time.Now().UnixNano())
	rng := rand.New(rand.NewPCG(seed, 0))
	t.Logf("seed %d", seed)

	// up starts normsim over the store on fresh free ports (node b takes
	// the socket port after node a's, which another process may hold: then
	// it tries other ports) and returns it with a client of its API.
	type proc struct {
		cmd    *exec.Cmd
		exited chan struct{}
	}
	var running *proc
	up := func() (*proc, *bench.API) {
		t.Helper()
		for attempt := 0; ; attempt++ {
			addr := "127.0.0.1:" + strconv.Itoa(testenv.FreePort(t))
			cmd := exec.Command(bin, "up", "--db", db, "--addr", addr, "--socket-port", strconv.Itoa(testenv.FreePortPair(t)),
				"--socket-host", "127.0.0.1", "--runtime", sim.RuntimeExternal, "--templates", filepath.Join(root, "templates"),
				"--log-level", "error")
			cmd.Dir = root
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			exited := make(chan struct{})
			go func() { cmd.Wait(); close(exited) }()
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			go func() {
				select {
				case <-exited:
					cancel()
				case <-ctx.Done():
				}
			}()
			err := bench.WaitReady(ctx, "http://"+addr+"/readyz")
			cancel()
			if err == nil {
				running = &proc{cmd, exited}
				return running, bench.NewAPI("http://"+addr, 8)
			}
			cmd.Process.Kill()
			<-exited
			if strings.Contains(stderr.String(), "already in use") && attempt < 5 {
				t.Logf("attempt %d: %s", attempt+1, strings.TrimSpace(stderr.String()))
				continue
			}
			t.Fatalf("normsim did not come back over the store (attempt %d): %v\n%s", attempt+1, err, stderr.String())
		}
	}
	t.Cleanup(func() {
		if running != nil {
			running.cmd.Process.Signal(syscall.SIGINT)
			<-running.exited
		}
	})

	processJobs := map[string]bool{}
	var recorded storeRecords
	killedWithProcesses := 0
	for iter := range 20 {
		cmd, api := up()
		ctx, cancel := context.WithCancel(context.Background())
		if iter > 0 {
			checkRecovered(t, ctx, api, db, recorded, processJobs)
		}

		// Work for the kill to land in: a handover loop of an external
		// job, and a host process moved with stopThenStart.
		var wg sync.WaitGroup
		wg.Add(2)
		go func() {
			defer wg.Done()
			in, job, err := bench.LaunchConnected(ctx, api, "counter", "a")
			if err != nil {
				return // killed under us
			}
			defer func() { job.Close() }()
			id, node := in.ID, "a"
			for ctx.Err() == nil {
				to := map[string]string{"a": "b", "b": "a"}[node]
				h, err := bench.PlayHandover(ctx, api, id, job, bench.HandoverOptions{To: to})
				if err != nil {
					return
				}
				job.Close()
				id, node, job = h.TargetID, to, h.TargetJob
				// A few dozen handovers per run are plenty to land kills
				// in every phase, and keep the store small enough to
				// compare in full after every restart.
				time.Sleep(10 * time.Millisecond)
			}
		}()
		launched := make(chan string, 1)
		go func() {
			defer wg.Done()
			in, err := api.Launch(ctx, sim.LaunchRequest{Template: "counter", Node: "a", Runtime: sim.RuntimeProcess,
				Params: map[string]string{"RATE": "100"}})
			if err != nil {
				launched <- ""
				return
			}
			launched <- in.JobID
			for ctx.Err() == nil {
				var got sim.Instance
				if api.Do(ctx, http.MethodGet, "/api/v1/instances/"+in.ID, nil, &got) != nil || got.State == sim.InstanceRunning {
					break
				}
				time.Sleep(5 * time.Millisecond)
			}
			api.Migrate(ctx, in.ID, sim.MigrateRequest{Strategy: string(sim.StopThenStart)})
		}()
		if job := <-launched; job != "" {
			processJobs[job] = true
		}

		time.Sleep(time.Duration(rng.IntN(1500)) * time.Millisecond)
		alive := len(processesOf(processJobs))
		if alive > 0 {
			killedWithProcesses++
		}
		cmd.cmd.Process.Kill() // SIGKILL: no shutdown, no flush
		<-cmd.exited
		cancel()
		wg.Wait()
		api.Close()

		// What was recorded up to the kill is what the file holds now.
		recorded = readStore(t, db)
		t.Logf("kill %d: %d migrations, %d events, %d frames recorded; %d host processes running", iter+1,
			len(recorded.Migrations), len(recorded.Events), recorded.Frames, alive)
	}
	_, api := up()
	defer api.Close()
	checkRecovered(t, context.Background(), api, db, recorded, processJobs)
	completed := 0
	for _, m := range recorded.Migrations {
		if m.State == sim.MigrationCompleted {
			completed++
		}
	}
	if completed == 0 {
		t.Fatal("no migration completed in 20 runs: the kills all landed too early to test anything")
	}
	if killedWithProcesses == 0 {
		t.Fatal("no kill landed while a host process ran: the orphan check tested nothing")
	}
}

// checkRecovered checks a restart over the store of a killed normsim.
func checkRecovered(t *testing.T, ctx context.Context, api *bench.API, db string, before storeRecords, processJobs map[string]bool) {
	t.Helper()
	// No migration is left running, in the API or in the store.
	var running []*sim.Migration
	if err := api.Do(ctx, http.MethodGet, "/api/v1/migrations?state=running", nil, &running); err != nil {
		t.Fatal(err)
	}
	if len(running) != 0 {
		t.Fatalf("%d migrations still running after the restart: %s", len(running), running[0].ID)
	}
	// Every migration and its timeline as recorded up to the kill; the ones
	// cut short are failed "interrupted" with one more event saying so.
	after := readStore(t, db)
	for id, was := range before.Migrations {
		now := after.Migrations[id]
		if now == nil {
			t.Fatalf("migration %s recorded before the kill is gone", id)
		}
		if len(now.Events) < len(was.Events) {
			t.Fatalf("migration %s had %d events before the kill, %d after", id, len(was.Events), len(now.Events))
		}
		for i, ev := range was.Events {
			got := now.Events[i]
			if got.Seq != ev.Seq || got.Detail != ev.Detail || got.Phase != ev.Phase || got.Side != ev.Side || !got.At.Equal(ev.At) {
				t.Fatalf("migration %s event %d changed:\n%+v\n%+v", id, i, ev, got)
			}
		}
		switch {
		case was.State == sim.MigrationRunning && now.State == sim.MigrationAborted:
			// Rolled back at the restart: only ever short of its point of
			// no return, which the store may not show yet, never past it.
			if now.Reason != sim.ReasonInterrupted || now.Rollback == nil || !now.Rollback.AtRestart || len(now.Events) < len(was.Events)+2 {
				t.Fatalf("migration %s cut short by the kill is aborted (%s) with rollback %+v and %d events, want it rolled back at the restart",
					id, now.Reason, now.Rollback, len(now.Events))
			}
			for _, ev := range was.Events {
				if ev.Kind == sim.TimelinePointOfNoReturn || ev.Kind == sim.TimelineSourceStopped {
					t.Fatalf("migration %s was rolled back at the restart past its point of no return (%s: %s)", id, ev.Kind, ev.Detail)
				}
			}
		case was.State == sim.MigrationRunning:
			if now.State != sim.MigrationFailed || now.Reason != sim.ReasonInterrupted || len(now.Events) != len(was.Events)+1 {
				t.Fatalf("migration %s cut short by the kill is %s (%s) with %d events, want failed (interrupted) with %d, or rolled back",
					id, now.State, now.Reason, len(now.Events), len(was.Events)+1)
			}
		case now.State != was.State || now.Reason != was.Reason || len(now.Events) != len(was.Events):
			t.Fatalf("migration %s was %s with %d events, is %s with %d", id, was.State, len(was.Events), now.State, len(now.Events))
		}
	}
	// The API serves the store it recovered (spot-check the newest).
	var newest []*sim.Migration
	if err := api.Do(ctx, http.MethodGet, "/api/v1/migrations?limit=5", nil, &newest); err != nil {
		t.Fatal(err)
	}
	for _, m := range newest {
		if rec := after.Migrations[m.ID]; rec == nil || rec.State != m.State {
			t.Fatalf("the API shows migration %s %s, the store %+v", m.ID, m.State, rec)
		}
	}
	// Every event and frame recorded up to the kill.
	if len(after.Events) < len(before.Events) || !reflect.DeepEqual(after.Events[:len(before.Events)], before.Events) {
		t.Fatalf("events recorded before the kill changed or went missing (%d before, %d after)", len(before.Events), len(after.Events))
	}
	if after.Frames < before.Frames {
		t.Fatalf("%d frames recorded before the kill, %d after", before.Frames, after.Frames)
	}
	// No host process of the killed normsim runs on.
	deadline := time.Now().Add(10 * time.Second)
	for {
		left := processesOf(processJobs)
		if len(left) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("processes orphaned by the kill:\n%s", strings.Join(left, "\n"))
		}
		time.Sleep(50 * time.Millisecond)
	}
}
