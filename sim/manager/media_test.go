package manager

import (
	"context"
	"maps"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/normsim/normsim/sim"
)

// fakeMedia is a media receiver in memory (sim.MediaReceiver): the test
// hands it datagrams as if they arrived on a job's port. The real one,
// on UDP, is sim/sink's, tested there.
type fakeMedia struct {
	mu    sync.Mutex
	last  int
	ports map[string]int
	got   map[string][]sim.MediaDatagram
}

var _ sim.MediaReceiver = (*fakeMedia)(nil)

func newFakeMedia() *fakeMedia {
	return &fakeMedia{last: 40000, ports: map[string]int{}, got: map[string][]sim.MediaDatagram{}}
}

func (f *fakeMedia) Open(jobID string, port int) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if p, ok := f.ports[jobID]; ok {
		return p, nil
	}
	if port == 0 {
		f.last++
		port = f.last
	}
	f.ports[jobID] = port
	return port, nil
}

func (f *fakeMedia) Media(jobID string, since time.Time) sim.MediaWindow {
	f.mu.Lock()
	defer f.mu.Unlock()
	var w sim.MediaWindow
	for _, d := range f.got[jobID] {
		if !d.At.Before(since) {
			w.Datagrams = append(w.Datagrams, d)
		}
	}
	return w
}

func (f *fakeMedia) Watch(string) (<-chan struct{}, func()) { return make(chan struct{}), func() {} }

func (f *fakeMedia) Close(jobID string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.ports, jobID)
	delete(f.got, jobID)
}

// Ports are the jobs whose media is received now, and their ports.
func (f *fakeMedia) Ports() map[string]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return maps.Clone(f.ports)
}

// arrive is a datagram arriving on port, for the job it is open for; it
// is lost, as on UDP, when none is.
func (f *fakeMedia) arrive(port int, data []byte) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for job, p := range f.ports {
		if p == port {
			f.got[job] = append(f.got[job], sim.MediaDatagram{At: time.Now(), From: "127.0.0.1:5000", Data: data})
		}
	}
}

// TestEveryInstanceOfAJobGetsItsMediaURL: a job's instances share one
// media address, another job has its own, and the port closes with the
// job's last instance.
func TestEveryInstanceOfAJobGetsItsMediaURL(t *testing.T) {
	media := newFakeMedia()
	m := New(Config{Nodes: []Node{{Node: sim.Node{Name: "a"}}, {Node: sim.Node{Name: "b"}}}, Store: NewMemStore(t), Catalog: RepoCatalog(t),
		Runtimes: sim.RuntimeSet{Runtimes: map[string]sim.Runtime{sim.RuntimeExternal: External{}}, Default: sim.RuntimeExternal},
		Media:    media, MediaHost: func(string) string { return "media.host" }})
	defer m.Close()
	ctx := context.Background()
	first, err := m.launch(ctx, LaunchRequest{Template: "counter", Node: "a"}, launchOpts{})
	if err != nil {
		t.Fatal(err)
	}
	second, err := m.launch(ctx, LaunchRequest{Template: "counter", Node: "b"}, launchOpts{jobID: first.JobID})
	if err != nil {
		t.Fatal(err)
	}
	other, err := m.launch(ctx, LaunchRequest{Template: "counter", Node: "a"}, launchOpts{})
	if err != nil {
		t.Fatal(err)
	}
	u1, u2, u3 := mediaURLOf(&first), mediaURLOf(&second), mediaURLOf(&other)
	parsed, err := url.Parse(u1)
	if err != nil || parsed.Scheme != "udp" || parsed.Hostname() != "media.host" || u1 != u2 || u1 == u3 {
		t.Fatalf("media URLs: job's %q and %q, other job's %q", u1, u2, u3)
	}
	if p := media.Ports()[first.JobID]; parsed.Port() != strconv.Itoa(p) || p == 0 {
		t.Fatalf("the job's port is not open: %v", media.Ports())
	}
	for _, id := range []string{first.ID, second.ID} {
		if err := m.Stop(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for media.Ports()[first.JobID] != 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if _, open := media.Ports()[first.JobID]; open {
		t.Fatal("the job's media port is still open after its last instance went")
	}
	if _, open := media.Ports()[other.JobID]; !open {
		t.Fatal("the other job's media port closed with the first job")
	}
}

// TestSplitSendersTellsSourceFromTargetByAddress: a sender first heard
// before the target was placed is the source (when it sent during the
// migration), one first heard after it the target, whatever the payload.
func TestSplitSendersTellsSourceFromTargetByAddress(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	w := sim.MediaWindow{
		FirstHeard: map[string]time.Time{"old:1": at(-5000), "src:1": at(-2000), "tgt:1": at(600)},
		Datagrams: []sim.MediaDatagram{
			{At: at(-4000), From: "old:1"}, // an earlier instance, silent since the migration began
			{At: at(-100), From: "src:1"}, {At: at(100), From: "src:1"},
			{At: at(700), From: "tgt:1"}, {At: at(800), From: "src:1"}, {At: at(900), From: "tgt:1"},
		},
	}
	src, tgt := splitSenders(w, at(500), at(0))
	if len(src) != 3 || len(tgt) != 2 {
		t.Fatalf("%d source and %d target datagrams, want 3 and 2", len(src), len(tgt))
	}
	// A stopThenStart source stopped as the migration began: heard just
	// before it, it is still the source.
	stopped := sim.MediaWindow{
		FirstHeard: map[string]time.Time{"old:1": at(-5000), "src:1": at(-2000), "tgt:1": at(600)},
		Datagrams:  []sim.MediaDatagram{{At: at(-4000), From: "old:1"}, {At: at(-300), From: "src:1"}, {At: at(-40), From: "src:1"}, {At: at(700), From: "tgt:1"}},
	}
	if src, tgt := splitSenders(stopped, at(500), at(0)); len(src) != 2 || len(tgt) != 1 || src[0].From != "src:1" {
		t.Fatalf("a source stopped as the migration began: %d source datagrams (%v) and %d target", len(src), src, len(tgt))
	}
	for _, d := range src {
		if d.From != "src:1" {
			t.Fatalf("source side holds %s", d.From)
		}
	}
}

// TestOutputCountsTheJobsMedia: an instance's output summary counts the
// media its job's address received since, which is how normsim conform
// asks whether a video job produces; another job's media is not counted.
func TestOutputCountsTheJobsMedia(t *testing.T) {
	media := newFakeMedia()
	m := New(Config{Nodes: []Node{{Node: sim.Node{Name: "a"}}}, Store: NewMemStore(t), Catalog: RepoCatalog(t),
		Runtimes: sim.RuntimeSet{Runtimes: map[string]sim.Runtime{sim.RuntimeExternal: External{}}, Default: sim.RuntimeExternal},
		Media:    media, MediaHost: func(string) string { return "127.0.0.1" }})
	defer m.Close()
	ctx := context.Background()
	job, err := m.launch(ctx, LaunchRequest{Template: "counter", Node: "a"}, launchOpts{})
	if err != nil {
		t.Fatal(err)
	}
	other, err := m.launch(ctx, LaunchRequest{Template: "counter", Node: "a"}, launchOpts{})
	if err != nil {
		t.Fatal(err)
	}
	since := time.Now()
	u, err := url.Parse(mediaURLOf(&job))
	if err != nil {
		t.Fatal(err)
	}
	port, err := strconv.Atoi(u.Port())
	if err != nil {
		t.Fatal(err)
	}
	ts := make([]byte, 7*188) // seven null TS packets, as a muxer pads
	for i := 0; i < len(ts); i += 188 {
		ts[i], ts[i+1], ts[i+2], ts[i+3] = 0x47, 0x1f, 0xff, 0x10
	}
	for range 3 {
		media.arrive(port, ts)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		sum, err := m.Output(ctx, job.ID, since)
		if err != nil {
			t.Fatal(err)
		}
		if sum.JobMediaDatagrams == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the job's output summary counts %d media datagrams, want 3", sum.JobMediaDatagrams)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if sum, _ := m.Output(ctx, other.ID, since); sum.JobMediaDatagrams != 0 {
		t.Fatalf("another job's summary counts %d media datagrams", sum.JobMediaDatagrams)
	}
}

// TestReceiverLossesAreNotBlamedOnTheJob: a seam judged on a window of
// which normsim's receiver lost datagrams cannot be vouched for, and blames
// no one, neither as a whole nor defect by defect; a seamless one stays
// seamless, saying what was lost.
func TestReceiverLossesAreNotBlamedOnTheJob(t *testing.T) {
	rep := &sim.MediaReport{Verdict: sim.VerdictGlitch, AtFault: "target", Detail: "continuity counter on PID 256 went 3→9",
		Defects: []sim.MediaDefect{{Check: sim.MediaCheckCC, AtFault: "target"}}}
	noteReceiverLosses(rep, sim.MediaWindow{Lost: 4, Trimmed: 2})
	if rep.Verdict != sim.VerdictUnknown || rep.AtFault != "" || rep.Defects[0].AtFault != "" || rep.Lost != 4 || rep.Trimmed != 2 ||
		!strings.HasPrefix(rep.Detail, "the seam cannot be vouched for") || !strings.Contains(rep.Detail, "4 datagrams of this window never reached") {
		t.Fatalf("a glitch with datagrams lost: %+v", rep)
	}
	// Issue 34 round 6c (M3): datagrams the receiver let go of, under a
	// flood from more senders than it tells apart, left the target
	// unheard: "no output", the job blamed.
	for _, w := range []sim.MediaWindow{{Trimmed: 11363}, {Lost: 3}} {
		none := &sim.MediaReport{Verdict: sim.VerdictNoOutput, AtFault: "source and target", Detail: "the receiver got 0 datagrams from the target"}
		noteReceiverLosses(none, w)
		if none.Verdict != sim.VerdictUnknown || none.AtFault != "" {
			t.Fatalf("no output with %+v: %+v", w, none)
		}
	}
	ok := &sim.MediaReport{Verdict: sim.VerdictSeamless, Detail: "continued"}
	noteReceiverLosses(ok, sim.MediaWindow{Lost: 1})
	if ok.Verdict != sim.VerdictSeamless || !strings.Contains(ok.Detail, "1 datagram of this window never reached") {
		t.Fatalf("a seamless seam with a datagram lost: %+v", ok)
	}
}

// TestCaptureNoteSaysWhatSeamTSLeavesOut (attack round 11, C3): a target
// whose RTP made no whole NAL unit left seam.ts with the source's
// pictures alone, and the timeline said only that the capture was kept.
func TestCaptureNoteSaysWhatSeamTSLeavesOut(t *testing.T) {
	if n := captureNote(40, 2*time.Second, 0, 0); strings.Contains(n, "left out") {
		t.Errorf("a whole capture: %q", n)
	}
	n := captureNote(40, 2*time.Second, 25, 25)
	if !strings.HasPrefix(n, "seam capture kept: 40 datagrams, 2.0 s") || !strings.Contains(n, "25 of seam.ts, 25 of the target's alone") {
		t.Errorf("a capture without the target's packets: %q", n)
	}
}
