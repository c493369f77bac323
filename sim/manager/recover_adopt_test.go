package manager

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/normsim/normsim/protocol"
	"github.com/normsim/normsim/sim"
)

// recoverer is a runtime of no kind the manager knows, with the recovery
// capability: it answers what it was told to and remembers what it got.
type recoverer struct {
	External
	name   string
	answer map[string]sim.Recovery
	err    error
	owner  string
	stored []string
}

func (r *recoverer) Name() string { return r.name }

func (r *recoverer) Recover(_ context.Context, owner string, stored []sim.Instance) (map[string]sim.Recovery, error) {
	r.owner = owner
	for _, in := range stored {
		r.stored = append(r.stored, in.ID)
	}
	slices.Sort(r.stored)
	return r.answer, r.err
}

// TestRecoverIsRuntimeAgnostic: the manager's recovery does what each
// runtime's recovery says, whatever the runtime: an adopted instance is
// back under management (starting becomes running), one it did not adopt
// fails with its reason, one it said nothing of fails saying so; the
// instances of a runtime whose recovery failed, or that is not there, fail
// as not available. Each runtime gets its own stored instances, ended ones
// too, and the store's owner.
func TestRecoverIsRuntimeAgnostic(t *testing.T) {
	ctx := context.Background()
	store := NewMemStore(t)
	now := time.Now()
	stored := map[string]struct {
		runtime string
		state   sim.InstanceState
	}{
		"kept-1": {"fake", sim.InstanceStarting}, "kept-2": {"fake", sim.InstanceRunning},
		"lost-1": {"fake", sim.InstanceRunning}, "silent-1": {"fake", sim.InstanceRunning},
		"ended-1": {"fake", sim.InstanceStopped}, "broken-1": {"broken", sim.InstanceRunning},
		"absent-1": {"absent", sim.InstanceRunning},
	}
	for id, s := range stored {
		// Each was healthy when normsim died (round 8: a recovery that
		// failed one kept healthy: true).
		in := &sim.Instance{ID: id, JobID: "job-" + id, Role: id, Node: "a", Template: "plain", Runtime: s.runtime,
			State: s.state, Healthy: s.state == sim.InstanceRunning, CreatedAt: now, UpdatedAt: now}
		if err := store.SaveInstance(ctx, in); err != nil {
			t.Fatal(err)
		}
	}
	fake := &recoverer{name: "fake", answer: map[string]sim.Recovery{
		"kept-1": {Adopted: true}, "kept-2": {Adopted: true}, "lost-1": {Reason: "its containers were gone"}}}
	broken := &recoverer{name: "broken", err: errors.New("the engine did not answer")}
	const owner = "0123456789abcdef"
	m := New(Config{Nodes: []Node{{Node: sim.Node{Name: "a"}}}, Store: store, Catalog: RepoCatalog(t), Owner: owner,
		Runtimes: sim.RuntimeSet{Runtimes: map[string]sim.Runtime{"fake": fake, "broken": broken}, Default: "fake"}})
	defer m.Close()
	if err := m.Recover(ctx); err != nil {
		t.Fatal(err)
	}

	if want := []string{"ended-1", "kept-1", "kept-2", "lost-1", "silent-1"}; !slices.Equal(fake.stored, want) || fake.owner != owner {
		t.Fatalf("the runtime recovered %v for owner %q, want %v for %q", fake.stored, fake.owner, want, owner)
	}
	for id, want := range map[string]struct {
		state  sim.InstanceState
		reason string
	}{
		"kept-1":   {sim.InstanceRunning, ""},
		"kept-2":   {sim.InstanceRunning, ""},
		"lost-1":   {sim.InstanceFailed, "its containers were gone"},
		"silent-1": {sim.InstanceFailed, "runtime fake did not say what became of the instance"},
		"ended-1":  {sim.InstanceStopped, ""},
		"broken-1": {sim.InstanceFailed, "runtime broken is not available"},
		"absent-1": {sim.InstanceFailed, "runtime absent is not available"},
	} {
		got, err := m.Instance(ctx, id)
		if err != nil || got.State != want.state || !strings.Contains(got.Error, want.reason) || (want.reason == "") != (got.Error == "") ||
			got.State.Terminal() && got.Healthy {
			t.Errorf("%s after recovery: %s %q healthy %v (%v), want %s %q", id, got.State, got.Error, got.Healthy, err, want.state, want.reason)
		}
		saved, err := store.GetInstance(ctx, id)
		if err != nil || saved.State != want.state {
			t.Errorf("%s in the store after recovery: %+v, %v; want %s", id, saved, err, want.state)
		}
	}
}

// Issue 34 round 13, B5: a normsim killed and started again with another
// --socket-port adopted its containers, whose env names the old port:
// they dialled it for ever, listed running and not connected, and
// nothing said why. An adopted instance whose job dials another port is
// listed with why and the fix, and the word goes once its job connects
// all the same (or a later start listens where it dials).
func TestAnAdoptedJobThatDialsAnotherPortIsToldOf(t *testing.T) {
	ctx := context.Background()
	store := NewMemStore(t)
	now := time.Now()
	env := func(port int) map[string]map[string]string {
		return map[string]map[string]string{"app": {protocol.EnvURL: fmt.Sprintf("ws://host.docker.internal:%d/instances/job-x/x-1", port)}}
	}
	node := map[string]string{"w-1": "c", "v-1": "a"}
	for id, port := range map[string]int{"x-1": 7790, "y-1": 7801, "z-1": 7801, "w-1": 7790, "v-1": 7790} {
		in := &sim.Instance{ID: id, JobID: "job-" + id, Role: id, Node: cmp.Or(node[id], "b"), Template: "plain", Runtime: "fake",
			State: sim.InstanceRunning, Env: env(port), CreatedAt: now, UpdatedAt: now}
		if id == "z-1" {
			// Stored by a run that listened elsewhere: this one listens
			// where it dials.
			in.Error = "its job dials the job socket at port 7790 (…)"
		}
		if err := store.SaveInstance(ctx, in); err != nil {
			t.Fatal(err)
		}
	}
	start := func() *Manager {
		sock := &registrar{}
		fake := &recoverer{name: "fake", answer: map[string]sim.Recovery{"x-1": {Adopted: true}, "y-1": {Adopted: true}, "z-1": {Adopted: true}, "w-1": {Adopted: true}, "v-1": {Adopted: true}}}
		m := New(Config{Nodes: []Node{{Node: sim.Node{Name: "a", SocketPort: 7800}}, {Node: sim.Node{Name: "b", SocketPort: 7801}, Socket: sock}},
			Store: store, Catalog: RepoCatalog(t), Runtimes: sim.RuntimeSet{Runtimes: map[string]sim.Runtime{"fake": fake}, Default: "fake"}})
		if err := m.Recover(ctx); err != nil {
			t.Fatal(err)
		}
		return m
	}
	m := start()
	got, _ := m.Instance(ctx, "x-1")
	if want := "its job dials the job socket at port 7790"; got.State != sim.InstanceRunning || !strings.Contains(got.Error, want) ||
		!strings.Contains(got.Error, "node b listens on 7801") || !strings.Contains(got.Error, "node b listens on 7790 again") {
		t.Fatalf("x-1 adopted as %s %q; want running, saying %q, node b's port and the fix", got.State, got.Error, want)
	}
	// B2 and B3 of round 14: a node this run does not have, or runs
	// without a job socket, is said as plainly; the fix names the node and
	// the port, whatever order this run gives the nodes.
	for id, want := range map[string]string{"w-1": "node c is not one of this run's nodes (a, b)", "v-1": "node a runs without a job socket"} {
		if got, _ := m.Instance(ctx, id); got.State != sim.InstanceRunning || !strings.Contains(got.Error, want) || !strings.Contains(got.Error, "listening on 7790") {
			t.Errorf("%s adopted as %s %q; want running, saying %q and the port its job dials", id, got.State, got.Error, want)
		}
	}
	for _, id := range []string{"y-1", "z-1"} {
		if got, _ := m.Instance(ctx, id); got.Error != "" {
			t.Fatalf("%s dials node b's port, and is listed with %q", id, got.Error)
		}
	}
	m.OnSocketEvent(sim.SocketEvent{Kind: sim.SocketConnected, Node: "b", JobID: "job-x-1", Role: "x-1", At: time.Now()})
	if got, _ := m.Instance(ctx, "x-1"); !got.Connected || got.Error != "" {
		t.Fatalf("x-1 connected all the same: connected %v, error %q", got.Connected, got.Error)
	}
	m.Close()
}

// registrar is a node's job socket that takes registrations; nothing else
// may be called.
type registrar struct{ sim.JobSocket }

func (registrar) Register(sim.SocketRegistration) {}
