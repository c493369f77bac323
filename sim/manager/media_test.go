package manager

import (
	"context"
	"net/url"
	"testing"
	"time"

	"github.com/normsim/normsim/sim"
	"github.com/normsim/normsim/sim/sink"
)

// TestEveryInstanceOfAJobGetsItsMediaURL: a job's instances share one
// media address, another job has its own, and the port closes with the
// job's last instance.
func TestEveryInstanceOfAJobGetsItsMediaURL(t *testing.T) {
	media := sink.NewMedia("127.0.0.1", nil)
	defer media.CloseAll()
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
	if p := media.Ports()[first.JobID]; parsed.Port() == "" || p == 0 {
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
	for _, d := range src {
		if d.From != "src:1" {
			t.Fatalf("source side holds %s", d.From)
		}
	}
}
