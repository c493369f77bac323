package manager

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/normsim/normsim/sim"
	"github.com/normsim/normsim/sim/memstore"
)

// forceDraws makes the next draws of instance-name digits come from draws,
// in order, for the rest of the test.
func forceDraws(t *testing.T, draws ...string) {
	real := randomHex
	randomHex = func(n int) string {
		if n == 3 && len(draws) > 0 {
			d := draws[0]
			draws = draws[1:]
			return d
		}
		return real(n)
	}
	t.Cleanup(func() { randomHex = real })
}

func idTestManager(t *testing.T, store sim.Store) *Manager {
	m := New(Config{Nodes: []Node{{Node: sim.Node{Name: "a"}}, {Node: sim.Node{Name: "b"}}}, Store: store, Catalog: RepoCatalog(t),
		Runtimes: sim.RuntimeSet{Runtimes: map[string]sim.Runtime{sim.RuntimeExternal: External{}}, Default: sim.RuntimeExternal}})
	t.Cleanup(func() { m.Close() })
	return m
}

func launchPlain(t *testing.T, m *Manager) string {
	t.Helper()
	in, err := m.Launch(context.Background(), sim.LaunchRequest{Template: "plain", Node: "a"})
	if err != nil {
		t.Fatal(err)
	}
	return in.ID
}

// TestInstanceIDsNeverCollide: a drawn name that an instance here, or one
// in the store's history (which Recover holds), already has is drawn
// again, so a new instance never replaces an older one.
func TestInstanceIDsNeverCollide(t *testing.T) {
	ctx := context.Background()
	store := NewMemStore(t)
	old := &sim.Instance{ID: "plain-000002", JobID: "job-old", Role: "plain-000002", State: sim.InstanceStopped,
		CreatedAt: time.Now(), UpdatedAt: time.Now()}
	if err := store.SaveInstance(ctx, old); err != nil {
		t.Fatal(err)
	}
	m := idTestManager(t, store)
	if err := m.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	forceDraws(t, "000001", "000001", "000002", "000003")
	ids := []string{launchPlain(t, m), launchPlain(t, m)}
	// The second launch drew 000001 (held here), then 000002 (in the
	// store's history), then 000003.
	if ids[0] != "plain-000001" || ids[1] != "plain-000003" {
		t.Fatalf("instance IDs = %v, want plain-000001 plain-000003", ids)
	}
	m.Flush()
	got, err := store.GetInstance(ctx, "plain-000002")
	if err != nil || got.JobID != "job-old" {
		t.Fatalf("the stored instance = %+v, %v", got, err)
	}
}

// slowDeleteStore is a store whose instance deletes wait for a gate.
type slowDeleteStore struct {
	*memstore.Store
	gate chan struct{}
}

func (s *slowDeleteStore) DeleteInstance(ctx context.Context, id string) error {
	<-s.gate
	return s.Store.DeleteInstance(ctx, id)
}

// TestARemovedInstancesNameIsTakenUntilItLeavesTheStore: a removed
// instance's row stays in the store until the journal deletes it, and
// its name is not drawn again before then.
func TestARemovedInstancesNameIsTakenUntilItLeavesTheStore(t *testing.T) {
	ctx := context.Background()
	store := &slowDeleteStore{Store: NewMemStore(t), gate: make(chan struct{})}
	m := idTestManager(t, store)
	forceDraws(t, "000001", "000001", "000002", "000001")
	first := launchPlain(t, m)
	if err := m.Stop(ctx, first); err != nil {
		t.Fatal(err)
	}
	// The delete waits in the journal: the name is still the store's.
	if second := launchPlain(t, m); second != "plain-000002" {
		t.Fatalf("drew %s while %s's row was still stored, want plain-000002", second, first)
	}
	close(store.gate)
	m.Flush()
	if third := launchPlain(t, m); third != "plain-000001" {
		t.Fatalf("drew %s once %s left the store, want plain-000001 again", third, first)
	}
}

// TestConcurrentDeletesRemoveOnce: DELETEs of one instance sent at once
// have one winner, as a DELETE and a migrate do: one stops and removes it,
// the others wait for that and find it gone (404). Each used to stop it
// again, and the event stream said it was removed once per request.
func TestConcurrentDeletesRemoveOnce(t *testing.T) {
	ctx := context.Background()
	var stops atomic.Int32
	// A stop that takes a while, as a real one does: the DELETEs overlap.
	rt := slowStopRuntime{stops: &stops}
	m := New(Config{Nodes: []Node{{Node: sim.Node{Name: "a"}}}, Store: NewMemStore(t), Catalog: RepoCatalog(t),
		Runtimes: sim.RuntimeSet{Runtimes: map[string]sim.Runtime{sim.RuntimeExternal: rt}, Default: sim.RuntimeExternal}})
	t.Cleanup(func() { m.Close() })
	id := launchPlain(t, m)
	sub := m.Bus().Subscribe(1024)
	defer sub.Close()
	const n = 20
	errs := make(chan error, n)
	start := make(chan struct{})
	for range n {
		go func() {
			<-start
			errs <- m.Stop(ctx, id)
		}()
	}
	close(start)
	removed, missing := 0, 0
	for range n {
		err := <-errs
		switch {
		case err == nil:
			removed++
		case sim.ErrorCode(err) == sim.ENotFound:
			missing++
		default:
			t.Errorf("Stop: %v; want removed or not found", err)
		}
	}
	if got := stops.Load(); got != 1 {
		t.Errorf("the runtime was asked to stop the instance %d times, want once", got)
	}
	if removed != 1 || missing != n-1 {
		t.Errorf("%d of %d DELETEs removed the instance and %d found it gone; want one winner", removed, n, missing)
	}
	m.Flush()
	published := 0
	for {
		select {
		case ev := <-sub.C:
			if ev.Kind == sim.EventInstanceRemoved && ev.Instance == id {
				published++
			}
			continue
		default:
		}
		break
	}
	if published != 1 {
		t.Errorf("%q published %d times, want once", sim.EventInstanceRemoved, published)
	}
}

type slowStopRuntime struct {
	External
	stops *atomic.Int32
}

func (r slowStopRuntime) Stop(context.Context, string, time.Duration) (sim.StopReport, error) {
	r.stops.Add(1)
	time.Sleep(50 * time.Millisecond)
	return sim.StopReport{}, nil
}

// takenRuntime is an external runtime that says some instance IDs are in
// use where other normsims see them (sim.IDChecker).
type takenRuntime struct {
	External
	taken map[string]bool
}

func (r takenRuntime) InstanceIDTaken(_ context.Context, id string) (bool, error) {
	return r.taken[id], nil
}

// TestAnIDAnotherNormsimHasIsDrawnAgain: on a runtime other normsims see
// (a shared Docker engine), an ID another normsim's instance has is drawn
// again: the two would share the compose project normsim-<id>, and compose
// would recreate the other's containers as this one's.
func TestAnIDAnotherNormsimHasIsDrawnAgain(t *testing.T) {
	rt := takenRuntime{taken: map[string]bool{"plain-000001": true, "plain-000002": true}}
	m := New(Config{Nodes: []Node{{Node: sim.Node{Name: "a"}}}, Store: NewMemStore(t), Catalog: RepoCatalog(t),
		Runtimes: sim.RuntimeSet{Runtimes: map[string]sim.Runtime{sim.RuntimeExternal: rt}, Default: sim.RuntimeExternal}})
	t.Cleanup(func() { m.Close() })
	forceDraws(t, "000001", "000002", "000003")
	if id := launchPlain(t, m); id != "plain-000003" {
		t.Fatalf("drew %s, want plain-000003: the two before it are another normsim's", id)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.drawn["plain-000001"] || m.drawn["plain-000002"] {
		t.Errorf("the IDs found taken are still held as drawn: %v", m.drawn)
	}
}
