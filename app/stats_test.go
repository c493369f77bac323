package app_test

import (
	"context"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/normsim/normsim/app"
	"github.com/normsim/normsim/internal/bench"
	"github.com/normsim/normsim/sim"
)

// TestStatsSayWhatTheSimHolds checks GET /api/v1/stats against what was
// done to the sim: one job launched, connected and handed over.
func TestStatsSayWhatTheSimHolds(t *testing.T) {
	_, _, api := handedOver(t, testOptions(t), 1)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	// The journal writes behind: wait until nothing is pending, when the
	// migration must be in the store.
	var st *sim.Stats
	var err error
	for deadline := time.Now().Add(10 * time.Second); ; {
		if st, err = api.Stats(ctx, false); err != nil {
			t.Fatal(err)
		}
		if st.Store.Pending == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if st.Store.Pending != 0 || st.Store.Migrations != 1 {
		t.Errorf("store holds %d migrations with %d records pending, want 1 and none pending", st.Store.Migrations, st.Store.Pending)
	}
	if st.Store.Bytes <= 0 {
		t.Errorf("store bytes %d, want > 0", st.Store.Bytes)
	}
	if st.Instances < 1 || st.Connected != 1 {
		t.Errorf("instances %d, connected %d; want the target connected", st.Instances, st.Connected)
	}
	if st.Goroutines <= 0 || st.HeapLiveBytes == 0 || st.RSSBytes <= 0 || st.PeakRSSBytes < st.RSSBytes {
		t.Errorf("runtime figures %+v", st)
	}
	// Where the memory is: every class holds some, every goroutine has at
	// least the smallest stack (2 KiB), and on Linux the binary's code read
	// so far is resident outside the Go runtime.
	mem := st.Memory
	if mem.HeapObjectsBytes == 0 || mem.HeapFreeBytes == 0 || mem.RuntimeBytes == 0 ||
		mem.StacksBytes < uint64(st.Goroutines)*2048 {
		t.Errorf("memory %+v with %d goroutines", mem, st.Goroutines)
	}
	// The collector has run (the start pauses it, then runs it): it
	// found the goroutines' stacks in use, and in use is never more than
	// the stacks hold.
	if mem.StacksUsedBytes == 0 || mem.StacksUsedBytes > mem.StacksBytes {
		t.Errorf("stacks %d bytes, %d of them used", mem.StacksBytes, mem.StacksUsedBytes)
	}
	if runtime.GOOS == "linux" && mem.OutsideGoBytes == 0 {
		t.Errorf("memory %+v: nothing resident outside the Go runtime, with an RSS of %d", mem, st.RSSBytes)
	}
	collected, err := api.Stats(ctx, true)
	if err != nil || collected.HeapLiveBytes == 0 {
		t.Errorf("stats after a collection: %+v, %v", collected, err)
	}
	if st.Records.FramesLost != 0 {
		t.Errorf("%d frame records lost with an idle store", st.Records.FramesLost)
	}
	// A launch, a connection and a handover publish a few dozen events;
	// nobody listens, so nobody was dropped.
	if st.Events.Published < 10 || st.Events.DroppedSubscribers != 0 {
		t.Errorf("events %+v, want a handover's worth published and none dropped", st.Events)
	}
}

func TestProfilesOnlyWhenAskedFor(t *testing.T) {
	plain := openApp(t, testOptions(t))
	if code, _ := getText(t, plain.URL()+"/debug/pprof/heap"); code != http.StatusNotFound {
		t.Errorf("without --pprof: heap profile answered %d, want 404", code)
	}

	opts := testOptions(t)
	opts.Profiling = true
	m := openApp(t, opts)
	gzipMagic := "\x1f\x8b"
	for _, path := range []string{"/debug/pprof/heap?gc=1", "/debug/pprof/goroutine", "/debug/pprof/profile?seconds=1"} {
		code, b := getText(t, m.URL()+path)
		if code != http.StatusOK || !strings.HasPrefix(b, gzipMagic) {
			t.Errorf("%s: %d, %d bytes starting %x; want 200 and a gzipped profile", path, code, len(b), b[:min(len(b), 2)])
		}
	}
	for path, want := range map[string]int{
		"/debug/pprof/profile?seconds=0": http.StatusBadRequest,
		"/debug/pprof/profile?seconds=x": http.StatusBadRequest,
		"/debug/pprof/nosuchprofile":     http.StatusNotFound,
	} {
		if code, b := getText(t, m.URL()+path); code != want {
			t.Errorf("%s: %d %s, want %d", path, code, b, want)
		}
	}
}

// handedOver opens a sim on the external runtime with opts, launches a
// counter on node a, connects its job and hands it over n times, back and
// forth: what the sim then holds is what n handovers leave.
func handedOver(t *testing.T, opts app.Options, n int) (*app.Main, []*bench.Handover, *bench.API) {
	t.Helper()
	opts.Runtime = sim.RuntimeExternal
	m := openApp(t, opts)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	api := bench.NewAPI(m.URL(), 4)
	t.Cleanup(api.Close)
	in, job, err := bench.LaunchConnected(ctx, api, "counter", "a")
	if err != nil {
		t.Fatal(err)
	}
	id, nodes := in.ID, []string{"b", "a"}
	var hs []*bench.Handover
	for i := range n {
		h, err := bench.PlayHandover(ctx, api, id, job, bench.HandoverOptions{To: nodes[i%2]})
		job.Close() // the worker closed the source's socket
		if err != nil {
			t.Fatal(err)
		}
		hs = append(hs, h)
		id, job = h.TargetID, h.TargetJob
	}
	t.Cleanup(func() { job.Close() })
	return m, hs, api
}
