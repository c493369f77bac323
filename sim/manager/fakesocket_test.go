package manager_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/normsim/normsim/protocol"
	"github.com/normsim/normsim/sim"
	"github.com/normsim/normsim/sim/manager"
)

// fakeSocket is a node's job socket in memory (sim.JobSocket): the test
// plays each job through it. What the manager sends a job lands in that
// job's inbox; what the job sends, and its connects and closes, reach the
// manager as the real listener reports them, in order and synchronously.
// It polices nothing: which frames are in phase is the listener's to test.
type fakeSocket struct {
	t    *testing.T
	node string
	mgr  *manager.Manager // set once the manager exists

	mu    sync.Mutex
	regs  map[fakeKey]sim.SocketRegistration
	conns map[fakeKey]*fakeConn
	// registered gets each instance registered, as the manager places it.
	registered chan sim.SocketRegistration
	dropped    map[fakeKey]int // drops and disconnects the manager made
	// serials numbers the connections (SocketEvent.Conn).
	serials uint64
	arms    map[fakeKey][]string
	// writing, when set, is called as each frame is written, before it
	// lands: a test blocks in it to play a job that does not read.
	writing func(typ string)
	// awake, when set, is closed while an instance's job may act: the fake
	// runtime holds it open while the job is paused (SIGSTOP).
	awake func(role string) <-chan struct{}
	// readAtDrop, when set, runs as the worker drops a connection, before
	// the close is reported, on the goroutine that reports it: what a
	// test sends in it plays frames the listener had read just before the
	// drop, which its reader hands on before the close.
	readAtDrop func(role string)
}

type fakeKey struct{ job, role string }

// fakeConn is one job's connection: its inbox and whether it is open.
type fakeConn struct {
	inbox  chan protocol.WorkerFrame
	open   bool
	serial uint64
}

func newFakeSocket(t *testing.T, node string) *fakeSocket {
	return &fakeSocket{t: t, node: node, regs: map[fakeKey]sim.SocketRegistration{}, conns: map[fakeKey]*fakeConn{},
		registered: make(chan sim.SocketRegistration, 16), dropped: map[fakeKey]int{}}
}

var _ sim.JobSocket = (*fakeSocket)(nil)

func (f *fakeSocket) Register(reg sim.SocketRegistration) {
	f.mu.Lock()
	f.regs[fakeKey{reg.JobID, reg.Role}] = reg
	f.mu.Unlock()
	f.registered <- reg
}

// CatchUp has nothing to wait for: what a job sends here is reported as
// it is sent.
func (f *fakeSocket) CatchUp(string, string) {}

// Unregister forgets the instance and closes its connection; like the
// listener, it reports no disconnect for an instance it no longer knows.
func (f *fakeSocket) Unregister(jobID, role string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	k := fakeKey{jobID, role}
	delete(f.regs, k)
	if c := f.conns[k]; c != nil {
		c.open = false
	}
}

// Expect and Expire are noted, in order, for tests of what the manager
// arms (armed); the fake polices nothing.
func (f *fakeSocket) Expect(jobID, role string, types ...string) {
	f.note(jobID, role, strings.Join(types, ","))
}

func (f *fakeSocket) Expire(jobID, role string) { f.note(jobID, role, "expire") }

func (f *fakeSocket) Owe(string, string, ...string) {}

func (f *fakeSocket) note(jobID, role, what string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.arms == nil {
		f.arms = map[fakeKey][]string{}
	}
	k := fakeKey{jobID, role}
	f.arms[k] = append(f.arms[k], what)
}

// armed is what the manager armed the job's instance with, and when it
// expired it, in order.
func (f *fakeSocket) armed(j *job) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.arms[fakeKey{j.id, j.role}])
}

func (f *fakeSocket) Settle(jobID, role string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if reg, ok := f.regs[fakeKey{jobID, role}]; ok {
		reg.Migration, reg.InitialState = nil, nil
		f.regs[fakeKey{jobID, role}] = reg
	}
}

func (f *fakeSocket) Disconnect(jobID, role string, code int, reason string) {
	f.close(jobID, role, sim.SocketEvent{Code: code, Reason: reason, ClosedBy: sim.ClosedByWorker})
}

func (f *fakeSocket) Drop(jobID, role string) uint64 {
	f.mu.Lock()
	var conn uint64
	if c := f.conns[fakeKey{jobID, role}]; c != nil && c.open {
		conn = c.serial
	}
	f.mu.Unlock()
	f.closeAfter(jobID, role, sim.SocketEvent{Code: 1006, Reason: "connection dropped", ClosedBy: sim.ClosedByWorker}, f.readAtDrop)
	return conn
}

// close ends a job's open connection and reports it, as the listener does
// once the connection's reader has stopped: on a goroutine of its own.
func (f *fakeSocket) close(jobID, role string, ev sim.SocketEvent) {
	f.closeAfter(jobID, role, ev, nil)
}

// closeAfter is close, reporting what read plays first.
func (f *fakeSocket) closeAfter(jobID, role string, ev sim.SocketEvent, read func(role string)) {
	f.mu.Lock()
	k := fakeKey{jobID, role}
	c := f.conns[k]
	open := c != nil && c.open
	if open {
		c.open = false
		f.dropped[k]++
	}
	f.mu.Unlock()
	if open {
		ev.Kind, ev.Node, ev.JobID, ev.Role, ev.At = sim.SocketDisconnected, f.node, jobID, role, time.Now()
		go func() {
			if read != nil {
				read(role)
			}
			f.mgr.OnSocketEvent(ev)
		}()
	}
}

func (f *fakeSocket) Connected(jobID, role string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := f.conns[fakeKey{jobID, role}]
	return c != nil && c.open
}

var errFakeNotConnected = errors.New("job is not connected")

func (f *fakeSocket) SendRaw(_ context.Context, jobID, role, typ string, data []byte) error {
	if f.writing != nil {
		f.writing(typ)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	c := f.conns[fakeKey{jobID, role}]
	if c == nil || !c.open {
		return errFakeNotConnected
	}
	wf, err := protocol.ParseWorkerFrame(data)
	if err != nil {
		// A corrupted frame: the job gets what it could not read.
		wf = protocol.WorkerFrame{Type: "corrupt:" + typ}
	}
	select {
	case c.inbox <- wf:
	default:
		f.t.Errorf("%s/%s: inbox full, %s lost", jobID, role, typ)
	}
	return nil
}

// job is the test's side of one instance's connection.
type job struct {
	f        *fakeSocket
	id, role string
}

// connect opens the instance's connection: like the listener, it tells
// the manager of the hello, then that the job is connected, before the
// test's job can act on its answer (hello-ack, and a migration target's
// initial state).
func (f *fakeSocket) connect(jobID, role string) *job {
	f.t.Helper()
	j, ok := f.tryConnect(jobID, role)
	if !ok {
		f.t.Fatalf("node %s: %s/%s is not registered", f.node, jobID, role)
	}
	return j
}

// tryConnect is connect for a job played on a goroutine of its own, which
// may not fail the test: ok is false when the instance is not (or no
// longer) registered.
func (f *fakeSocket) tryConnect(jobID, role string) (_ *job, ok bool) {
	j, ok, tell := f.open(jobID, role)
	if ok {
		tell()
	}
	return j, ok
}

// open is tryConnect up to the news that the job is connected, which
// tell gives.
func (f *fakeSocket) open(jobID, role string) (_ *job, ok bool, tell func()) {
	f.mu.Lock()
	k := fakeKey{jobID, role}
	reg, ok := f.regs[k]
	if !ok {
		f.mu.Unlock()
		return nil, false, nil
	}
	f.serials++
	c := &fakeConn{inbox: make(chan protocol.WorkerFrame, 64), open: true, serial: f.serials}
	f.conns[k] = c
	f.mu.Unlock()
	// The hello is heard before its answer is written; a fault armed on
	// it may drop the connection, which then gets no answer.
	f.mgr.OnSocketEvent(sim.SocketEvent{Kind: sim.SocketHello, Node: f.node, JobID: jobID, Role: role, Conn: c.serial, At: time.Now()})
	f.mu.Lock()
	if !c.open {
		f.mu.Unlock()
		return &job{f: f, id: jobID, role: role}, true, func() {}
	}
	if reg.InitialState != nil {
		c.inbox <- *reg.InitialState
	}
	f.mu.Unlock()
	return &job{f: f, id: jobID, role: role}, true, func() {
		f.mgr.OnSocketEvent(sim.SocketEvent{Kind: sim.SocketConnected, Node: f.node, JobID: jobID, Role: role, At: time.Now()})
	}
}

// send is a frame from the job, on its latest connection. Sent after
// the worker dropped that connection, it plays a frame the listener read
// just before the drop and handed on after it.
func (j *job) send(fr protocol.JobFrame) {
	j.f.t.Helper()
	j.wake() // a paused job sends nothing
	b, err := fr.Marshal()
	if err != nil {
		j.f.t.Fatal(err)
	}
	j.f.mu.Lock()
	var serial uint64
	if c := j.f.conns[fakeKey{j.id, j.role}]; c != nil {
		serial = c.serial
	}
	j.f.mu.Unlock()
	j.f.mgr.OnSocketEvent(sim.SocketEvent{Kind: sim.SocketFrame, Node: j.f.node, JobID: j.id, Role: j.role, Conn: serial, At: time.Now(), Frame: fr, Size: len(b)})
}

// close is the job closing its connection (or its process ending, with
// code 1006).
func (j *job) close(code int) {
	by := sim.ClosedByJob
	if code == 1006 {
		by = sim.ConnectionLost
	}
	j.f.mu.Lock()
	c := j.f.conns[fakeKey{j.id, j.role}]
	open := c != nil && c.open
	if open {
		c.open = false
	}
	j.f.mu.Unlock()
	if open {
		j.f.mgr.OnSocketEvent(sim.SocketEvent{Kind: sim.SocketDisconnected, Node: j.f.node, JobID: j.id, Role: j.role, At: time.Now(), Code: code, ClosedBy: by})
	}
}

// next is the next frame the manager sent the job, or ok false when none
// came within d.
func (j *job) next(d time.Duration) (protocol.WorkerFrame, bool) {
	j.f.mu.Lock()
	c := j.f.conns[fakeKey{j.id, j.role}]
	j.f.mu.Unlock()
	select {
	case wf := <-c.inbox:
		j.wake() // what reaches a paused job waits to be read until it is resumed
		return wf, true
	case <-time.After(d):
		return protocol.WorkerFrame{}, false
	}
}

// wake returns once the job may act: at once, or, while its process is
// paused, once it is resumed or has ended.
func (j *job) wake() {
	if j.f.awake != nil {
		<-j.f.awake(j.role)
	}
}

// expect is the next frame, which must be of type typ.
func (j *job) expect(typ string) protocol.WorkerFrame {
	j.f.t.Helper()
	wf, ok := j.next(5 * time.Second)
	if !ok {
		j.f.t.Fatalf("%s: no %s came", j.role, typ)
	}
	if wf.Type != typ {
		j.f.t.Fatalf("%s: got %s, want %s", j.role, wf.Type, typ)
	}
	return wf
}

// quiet says the job gets nothing more within d.
func (j *job) quiet(d time.Duration) {
	j.f.t.Helper()
	if wf, ok := j.next(d); ok {
		j.f.t.Fatalf("%s: got %s, want nothing", j.role, wf.Type)
	}
}

// registeredTarget is the next instance the manager placed on this node.
func (f *fakeSocket) registeredTarget() sim.SocketRegistration {
	f.t.Helper()
	select {
	case reg := <-f.registered:
		return reg
	case <-time.After(5 * time.Second):
		f.t.Fatalf("node %s: no instance was placed", f.node)
		return sim.SocketRegistration{}
	}
}

// fakeSim is a manager of nodes a and b on fake sockets, an in-memory
// store and the external runtime (which starts nothing: the test is the
// job), with a counter launched and connected on a.
type fakeSim struct {
	mgr  *manager.Manager
	a, b *fakeSocket
	src  *job
	in   sim.Instance
	rt   *fakeRuntime // the jobs' runtime, when not the external one
}

func newFakeSim(t *testing.T) *fakeSim { return newFakeSimWith(t, nil) }

// newFakeSimWith is newFakeSim with an output sink the test feeds.
func newFakeSimWith(t *testing.T, out sim.OutputSink) *fakeSim {
	return buildFakeSim(t, out, false)
}

// newFakeSimRuntime is newFakeSim with the jobs on the fake runtime
// (fakeruntime_test.go), which can deliver the kill, stop and pause
// faults' signals.
func newFakeSimRuntime(t *testing.T) *fakeSim { return buildFakeSim(t, nil, true) }

func buildFakeSim(t *testing.T, out sim.OutputSink, onFakeRuntime bool) *fakeSim {
	t.Helper()
	return buildFakeSimOf(t, "counter", out, onFakeRuntime)
}

// buildFakeSimOf is buildFakeSim with the job launched from template
// (the strategy a migration may use is the template's).
func buildFakeSimOf(t *testing.T, template string, out sim.OutputSink, onFakeRuntime bool) *fakeSim {
	t.Helper()
	return buildFakeSimConfig(t, template, out, onFakeRuntime, nil)
}

// buildFakeSimConfig is buildFakeSimOf with the manager's config changed
// by configure (when not nil) before it starts.
func buildFakeSimConfig(t *testing.T, template string, out sim.OutputSink, onFakeRuntime bool, configure func(*manager.Config)) *fakeSim {
	t.Helper()
	a, b := newFakeSocket(t, "a"), newFakeSocket(t, "b")
	runtimes := sim.RuntimeSet{Runtimes: map[string]sim.Runtime{sim.RuntimeExternal: manager.External{}}, Default: sim.RuntimeExternal}
	var catalog sim.Catalog
	var rt *fakeRuntime
	if onFakeRuntime {
		rt = newFakeRuntime(t, a, b)
		runtimes = sim.RuntimeSet{Runtimes: map[string]sim.Runtime{fakeRuntimeName: rt}, Default: fakeRuntimeName}
		catalog = sharedCatalog(t)
	} else {
		catalog = manager.RepoCatalog(t)
	}
	cfg := manager.Config{Nodes: []manager.Node{
		{Node: sim.Node{Name: "a", SocketPort: 1}, Socket: a}, // the port only says the node has a job socket
		{Node: sim.Node{Name: "b", SocketPort: 2}, Socket: b}},
		Store: manager.NewMemStore(t), Catalog: catalog, Sink: out, Runtimes: runtimes}
	if configure != nil {
		configure(&cfg)
	}
	mgr := manager.New(cfg)
	t.Cleanup(func() { mgr.Close() })
	a.mgr, b.mgr = mgr, mgr
	if rt != nil {
		rt.mgr = mgr
	}
	in, err := mgr.Launch(context.Background(), sim.LaunchRequest{Template: template, Node: "a"})
	if err != nil {
		t.Fatal(err)
	}
	a.registeredTarget() // the source's own registration
	if rt != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if !rt.awaitStart(ctx, in.ID) {
			t.Fatal("the source did not start within 5s")
		}
	}
	return &fakeSim{mgr: mgr, a: a, b: b, src: a.connect(in.JobID, in.ID), in: in, rt: rt}
}

// await is the migration once it has ended.
func (s *fakeSim) await(t *testing.T, id string) *sim.Migration {
	t.Helper()
	return s.awaitUntil(t, id, "the end", func(m *sim.Migration) bool { return m.State.Ended() })
}

// awaitUntil is the migration once done holds for it, following its
// timeline; the test fails after 10 s, or when it ends first.
func (s *fakeSim) awaitUntil(t *testing.T, id, what string, done func(*sim.Migration) bool) *sim.Migration {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for after := 0; ; {
		m, err := s.mgr.AwaitMigration(ctx, id, after)
		if err != nil {
			t.Fatalf("await %s on %s: %v:\n%s", what, id, err, timeline(m))
		}
		if done(m) {
			return m
		}
		if m.State.Ended() {
			t.Fatalf("%s ended before %s:\n%s", id, what, timeline(m))
		}
		after = len(m.Events)
	}
}

// invalidatedCatalog serves a template as the catalog does until broken
// is set, and then as invalid, as a template whose files were broken
// after its instance launched is.
type invalidatedCatalog struct {
	sim.Catalog
	broken atomic.Bool
}

func (c *invalidatedCatalog) Get(name string) (*sim.Template, error) {
	tm, err := c.Catalog.Get(name)
	if err != nil || !c.broken.Load() {
		return tm, err
	}
	cp := *tm
	cp.Valid, cp.Strategy, cp.Error = false, "", &sim.TemplateError{Code: sim.EManifestInvalid, Message: "manifest.json: not valid JSON"}
	return &cp, nil
}

// TestAMigrationOfAnInstanceWhoseTemplateBrokeSaysSo (round 13, B2): a
// template broken after its instance launched was answered as `strategy
// "" is not allowed: the template declares "stopThenStart"`, of a
// template that declares handover, a strategy the user never asked for.
// The answer names the template's problem and the fix.
func TestAMigrationOfAnInstanceWhoseTemplateBrokeSaysSo(t *testing.T) {
	var cat *invalidatedCatalog
	s := buildFakeSimConfig(t, "counter", nil, false, func(c *manager.Config) {
		cat = &invalidatedCatalog{Catalog: c.Catalog}
		c.Catalog = cat
	})
	cat.broken.Store(true)
	for _, strategy := range []string{"", string(sim.StopThenStart)} {
		_, err := s.mgr.Migrate(context.Background(), s.in.ID, manager.MigrateRequest{To: "b", Strategy: strategy})
		if sim.ErrorCode(err) != sim.ETemplateInvalid || !strings.Contains(sim.ErrorMessage(err), "not valid JSON") || !strings.Contains(sim.ErrorMessage(err), "fix the template") {
			t.Errorf("migrate with strategy %q of an instance whose template broke: %v; want %s naming the problem and the fix", strategy, err, sim.ETemplateInvalid)
		}
	}
}

// TestARemovedInstanceKeepsItsFrameCounts (round 13, A3): once an
// instance was removed (a rolled-back target, a stopped source), its
// frames were still served but their counts answered 404, so `normsim
// frames` printed a list missing its oldest records with no word of them.
// The counts are served as the frames are.
func TestARemovedInstanceKeepsItsFrameCounts(t *testing.T) {
	var store sim.Store
	s := buildFakeSimConfig(t, "counter", nil, false, func(c *manager.Config) { store = c.Store })
	ctx := context.Background()
	recs := []sim.FrameRecord{
		{At: time.Now(), Node: "a", JobID: s.in.JobID, Role: s.in.ID, Direction: "in", Type: "state", Data: `{"type":"state","payload":1}`},
		{At: time.Now(), Node: "a", JobID: s.in.JobID, Role: s.in.ID, Direction: "out", Type: "get-state", Data: `{"type":"get-state"}`},
	}
	if err := store.RecordFrames(ctx, recs); err != nil {
		t.Fatal(err)
	}
	before, err := s.mgr.FrameCounts(ctx, s.in.ID)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.mgr.Stop(ctx, s.in.ID); err != nil {
		t.Fatal(err)
	}
	after, err := s.mgr.FrameCounts(ctx, s.in.ID)
	if err != nil || after != before || after.Kept < 2 {
		t.Fatalf("frame counts of the removed instance: %+v, %v; want %+v as before its removal", after, err, before)
	}
	if _, err := s.mgr.FrameCounts(ctx, "never-was"); sim.ErrorCode(err) != sim.ENotFound {
		t.Errorf("frame counts of an instance that never was: %v; want %s", err, sim.ENotFound)
	}
}

// closeAt is close, the close having arrived at at: a read loop that got
// to it late (behind a burst of pings, say) reports it after the fact.
func (j *job) closeAt(code int, at time.Time) {
	j.f.mu.Lock()
	c := j.f.conns[fakeKey{j.id, j.role}]
	open := c != nil && c.open
	if open {
		c.open = false
	}
	j.f.mu.Unlock()
	if open {
		j.f.mgr.OnSocketEvent(sim.SocketEvent{Kind: sim.SocketDisconnected, Node: j.f.node, JobID: j.id, Role: j.role, At: at, Code: code, ClosedBy: sim.ClosedByJob})
	}
}
