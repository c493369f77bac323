package manager_test

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/normsim/normsim/protocol"
	"github.com/normsim/normsim/sim"
	"github.com/normsim/normsim/sim/manager"
	"github.com/normsim/normsim/sim/template"
)

// fakeRuntimeName is the fake runtime's name. Only the external runtime
// is treated apart (no exits awaited, nothing started), so any other name
// gets what the process and docker runtimes get.
const fakeRuntimeName = "fake"

// fakeRuntime is a runtime in memory (sim.Runtime and sim.Signaler) whose
// processes are the jobs the test plays over fakeSockets, so the kill,
// stop and pause faults run without processes. A signal acts on the job
// as the kernel would on its process, and an exit is reported as the
// process runtime reports it (sim/process):
//   - SIGKILL ends it at once: its connection is lost (1006) and it exits
//     killed by signal 9;
//   - SIGTERM ends it cleanly: it closes its socket normally (1000), as a
//     job on jobclient does, and exits with code 0;
//   - SIGSTOP freezes it until SIGCONT: what it is sent meanwhile it reads
//     and answers once resumed, and a SIGTERM waits for the resume, as a
//     stopped process's does.
//
// An exit that Stop caused is not reported (the stop asked for it).
type fakeRuntime struct {
	sockets map[string]*fakeSocket // by node
	mgr     *manager.Manager       // the observer (OnRuntimeEvent); set once the manager exists

	mu      sync.Mutex
	procs   map[string]*fakeProc     // by instance, from Prepare on
	started map[string]chan struct{} // by instance, closed by Start
	reports sync.WaitGroup           // ends being reported
	// preparing and starting, when set, are called as an instance is
	// prepared, and once its process has started, before the start call
	// returns: a test blocks in them to hold a migration while its target
	// is placed, or to have the job dial before its start returns, as a
	// container's job can (set with hook).
	preparing, starting func(id string)
	// reportDelay is how long the end of a job takes to reach the manager
	// (its socket's close and its exit), as on a loaded host.
	reportDelay time.Duration
	// exitDelay holds an exit's report that much longer than its socket's
	// close, as the Docker runtime's capture of the last output does; the
	// exit is pending meanwhile (ExitPending).
	exitDelay time.Duration
	pending   map[string]int // exits learned and not reported, by instance
	// signals are the signals delivered, by instance, in order.
	signals map[string][]syscall.Signal
}

// hook sets what the test changes in the runtime, under its lock: the
// runtime reads it on the manager's goroutines.
func (r *fakeRuntime) hook(set func(r *fakeRuntime)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	set(r)
}

// fakeProc is one instance's fake process.
type fakeProc struct {
	jobID, node, service string
	running              bool
	paused               bool
	thawed               chan struct{} // closed unless paused
	termPending          bool          // a SIGTERM it got while paused
}

// thawedAlready is the thawed channel of a process never paused.
var thawedAlready = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

var (
	_ sim.Runtime      = (*fakeRuntime)(nil)
	_ sim.Signaler     = (*fakeRuntime)(nil)
	_ sim.ExitReporter = (*fakeRuntime)(nil)
)

// newFakeRuntime runs instances on the nodes of sockets; a paused job on
// them acts only once resumed.
func newFakeRuntime(t *testing.T, sockets ...*fakeSocket) *fakeRuntime {
	r := &fakeRuntime{sockets: map[string]*fakeSocket{}, procs: map[string]*fakeProc{}, started: map[string]chan struct{}{}}
	for _, s := range sockets {
		r.sockets[s.node] = s
		s.awake = r.awake
	}
	t.Cleanup(r.reports.Wait)
	return r
}

func (r *fakeRuntime) Name() string { return fakeRuntimeName }

func (r *fakeRuntime) Prepare(_ context.Context, spec *sim.LaunchSpec) error {
	r.mu.Lock()
	preparing := r.preparing
	r.mu.Unlock()
	if preparing != nil {
		preparing(spec.InstanceID)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.procs[spec.InstanceID] = &fakeProc{jobID: spec.JobID, node: spec.Node, service: spec.Services[0].Name, thawed: thawedAlready}
	return nil
}

// Start starts the instance's process: from now on its job may dial.
func (r *fakeRuntime) Start(_ context.Context, id string) error {
	r.mu.Lock()
	p := r.procs[id]
	if p == nil {
		r.mu.Unlock()
		return sim.Errorf(sim.ENotFound, "instance %q is not prepared in the fake runtime", id)
	}
	if !p.running {
		p.running = true
		close(r.startedLocked(id))
	}
	starting := r.starting
	r.mu.Unlock()
	if starting != nil {
		starting(id)
	}
	return nil
}

// Stop ends a running instance as SIGTERM does. A paused one acts on it
// only once resumed, and is killed if that takes longer than grace.
func (r *fakeRuntime) Stop(ctx context.Context, id string, grace time.Duration) (sim.StopReport, error) {
	r.mu.Lock()
	p := r.procs[id]
	if p == nil || !p.running {
		r.mu.Unlock()
		return sim.StopReport{}, nil
	}
	thawed := p.thawed
	r.mu.Unlock()
	var rep sim.StopReport
	how := exitsOnSIGTERM
	timer := time.NewTimer(grace)
	defer timer.Stop()
	select {
	case <-thawed:
	case <-timer.C:
		rep.Killed, how = []string{p.service}, killedBySIGKILL
	case <-ctx.Done():
		rep.Killed, how = []string{p.service}, killedBySIGKILL
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.endLocked(id, p, how, false)
	return rep, nil
}

func (r *fakeRuntime) Logs(_ context.Context, id string, _ bool, w io.Writer) error {
	_, err := fmt.Fprintf(w, "%s runs on the fake runtime, which keeps no logs\n", id)
	return err
}

func (r *fakeRuntime) Close(_ context.Context, keep bool) error {
	if keep {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for id, p := range r.procs {
		r.endLocked(id, p, killedBySIGKILL, false)
	}
	return nil
}

// Signal delivers sig to the instance's job; like the process runtime, it
// refuses an instance that has no running process.
func (r *fakeRuntime) Signal(_ context.Context, id string, sig syscall.Signal) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	p := r.procs[id]
	if p == nil || !p.running {
		return sim.Errorf(sim.ENotFound, "instance %q has no running process", id)
	}
	if r.signals == nil {
		r.signals = map[string][]syscall.Signal{}
	}
	r.signals[id] = append(r.signals[id], sig)
	switch sig {
	case syscall.SIGKILL:
		r.endLocked(id, p, killedBySIGKILL, true)
	case syscall.SIGTERM:
		if p.paused {
			p.termPending = true
			return nil
		}
		r.endLocked(id, p, exitsOnSIGTERM, true)
	case syscall.SIGSTOP:
		if !p.paused {
			p.paused, p.thawed = true, make(chan struct{})
		}
	case syscall.SIGCONT:
		if p.paused {
			p.paused = false
			close(p.thawed)
			if p.termPending {
				r.endLocked(id, p, exitsOnSIGTERM, true)
			}
		}
	default:
		return fmt.Errorf("the fake runtime cannot deliver %s", sig)
	}
	return nil
}

// fakeEnd is how a fake process ends: what becomes of its connection,
// and the exit the process runtime would report.
type fakeEnd struct {
	closeCode int
	closedBy  sim.Closer
	exitCode  int
	signal    int
	detail    string
}

var (
	killedBySIGKILL = fakeEnd{closeCode: 1006, closedBy: sim.ConnectionLost, exitCode: 128 + 9, signal: 9, detail: "killed by signal 9"}
	exitsOnSIGTERM  = fakeEnd{closeCode: 1000, closedBy: sim.ClosedByJob, exitCode: 0, detail: "exited with code 0"}
)

// endLocked ends a running process: its connection closes now, and the
// close (and, with report, its exit) reaches the manager on a goroutine
// of its own, as the listener's and the process runtime's watcher's
// reports do: Signal runs under the migration's lock, which the manager
// takes to handle them.
func (r *fakeRuntime) endLocked(id string, p *fakeProc, how fakeEnd, report bool) {
	if !p.running {
		return
	}
	p.running = false
	if p.paused {
		// A job that ended acts no more: released, it finds its
		// connection closed.
		p.paused = false
		close(p.thawed)
	}
	closed := r.sockets[p.node].cut(p.jobID, id, how.closeCode, how.closedBy)
	exit := sim.RuntimeEvent{Instance: id, Service: p.service, Kind: sim.ServiceExited,
		ExitCode: how.exitCode, Signal: how.signal, Detail: how.detail, At: time.Now()}
	delay, exitDelay := r.reportDelay, r.exitDelay
	if report {
		if r.pending == nil {
			r.pending = map[string]int{}
		}
		r.pending[id]++
	}
	r.reports.Add(1)
	go func() {
		defer r.reports.Done()
		time.Sleep(delay)
		closed()
		if report {
			time.Sleep(exitDelay)
			r.mgr.OnRuntimeEvent(exit)
			r.mu.Lock()
			r.pending[id]--
			r.mu.Unlock()
		}
	}()
}

func (r *fakeRuntime) ExitPending(id string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.pending[id] > 0
}

// signalled is how many times sig was delivered to the instance's job.
func (r *fakeRuntime) signalled(id string, sig syscall.Signal) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, s := range r.signals[id] {
		if s == sig {
			n++
		}
	}
	return n
}

// paused says the instance's job is frozen now (SIGSTOP, no SIGCONT yet).
func (r *fakeRuntime) paused(id string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	p := r.procs[id]
	return p != nil && p.paused
}

// awake is closed while the instance's job may act (fakeSocket.awake).
func (r *fakeRuntime) awake(id string) <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	if p := r.procs[id]; p != nil {
		return p.thawed
	}
	return thawedAlready
}

// repoTemplates is the repository's templates, loaded once. The signal
// matrix builds some fifty sims a run, and loading the templates was most
// of what each cost; production shares one catalog among all launches
// too.
var repoTemplates = sync.OnceValues(func() (*template.Catalog, error) {
	return template.LoadDirs(context.Background(), filepath.Join("..", "..", "templates"))
})

// sharedCatalog is repoTemplates, failing the test if they do not load.
func sharedCatalog(t *testing.T) *template.Catalog {
	t.Helper()
	c, err := repoTemplates()
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// awaitStart waits until the instance's process has started, when its job
// can first dial; false if ctx ends first.
func (r *fakeRuntime) awaitStart(ctx context.Context, id string) bool {
	r.mu.Lock()
	started := r.startedLocked(id)
	r.mu.Unlock()
	select {
	case <-started:
		return true
	case <-ctx.Done():
		return false
	}
}

func (r *fakeRuntime) startedLocked(id string) chan struct{} {
	c, ok := r.started[id]
	if !ok {
		c = make(chan struct{})
		r.started[id] = c
	}
	return c
}

// cut ends a job's open connection now, as its process dies, and returns
// what reports that to the manager (nothing when it was not open).
func (f *fakeSocket) cut(jobID, role string, code int, by sim.Closer) (report func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := f.conns[fakeKey{jobID, role}]
	if c == nil || !c.open {
		return func() {}
	}
	c.open = false
	ev := sim.SocketEvent{Kind: sim.SocketDisconnected, Node: f.node, JobID: jobID, Role: role, At: time.Now(), Code: code, ClosedBy: by}
	return func() { f.mgr.OnSocketEvent(ev) }
}

// TestFakeRuntimeSignalsEndTheJob: SIGKILL and SIGTERM end a job on the
// fake runtime as the manager would see a process end (its connection
// closed, its exit reported, the instance failed with it), a SIGTERM to a
// paused job only once it is resumed, and an ended job takes no signal.
func TestFakeRuntimeSignalsEndTheJob(t *testing.T) {
	for _, tc := range []struct {
		name string
		sigs []syscall.Signal
		want string // the instance's error
	}{
		{"SIGKILL", []syscall.Signal{syscall.SIGKILL}, "service counter killed by signal 9"},
		{"SIGTERM", []syscall.Signal{syscall.SIGTERM}, "service counter exited with code 0"},
		{"SIGTERM while paused", []syscall.Signal{syscall.SIGSTOP, syscall.SIGTERM, syscall.SIGCONT}, "service counter exited with code 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := newFakeSimRuntime(t)
			ctx := context.Background()
			for _, sig := range tc.sigs {
				if sig == syscall.SIGCONT {
					// Paused, the job has not acted on its SIGTERM yet.
					time.Sleep(30 * time.Millisecond)
					if in, _ := s.mgr.Instance(ctx, s.in.ID); in.State != sim.InstanceRunning || !s.src.open() {
						t.Fatalf("a paused job ended on SIGTERM before it was resumed: %s (%s)", in.State, in.Error)
					}
				}
				if err := s.rt.Signal(ctx, s.in.ID, sig); err != nil {
					t.Fatalf("%s: %v", sig, err)
				}
			}
			in := awaitInstance(t, s, s.in.ID, func(in sim.Instance) bool { return in.State != sim.InstanceRunning })
			if in.State != sim.InstanceFailed || in.Error != tc.want {
				t.Errorf("the instance is %s (%s), want failed (%s)", in.State, in.Error, tc.want)
			}
			if s.src.open() {
				t.Error("the ended job's connection is still open")
			}
			if err := s.rt.Signal(ctx, s.in.ID, syscall.SIGKILL); sim.ErrorCode(err) != sim.ENotFound {
				t.Errorf("a signal to the ended job: %v, want not found", err)
			}
			if rep, err := s.rt.Stop(ctx, s.in.ID, time.Second); err != nil || len(rep.Killed) > 0 {
				t.Errorf("Stop of the ended job: %+v, %v; want nothing to do", rep, err)
			}
		})
	}
}

// TestFakeRuntimePausedJobReadsOnlyOnceResumed: a frame that reaches a
// paused job waits until SIGCONT.
func TestFakeRuntimePausedJobReadsOnlyOnceResumed(t *testing.T) {
	t.Parallel()
	s := newFakeSimRuntime(t)
	ctx := context.Background()
	if err := s.rt.Signal(ctx, s.in.ID, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	b, err := protocol.WorkerFrame{Type: protocol.TypeGetState, MigrationID: "mig-0000000000"}.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.a.SendRaw(ctx, s.in.JobID, s.in.ID, protocol.TypeGetState, b); err != nil {
		t.Fatal(err)
	}
	read := make(chan string, 1)
	go func() {
		wf, _ := s.src.next(5 * time.Second)
		read <- wf.Type
	}()
	select {
	case typ := <-read:
		t.Fatalf("the paused job read %q", typ)
	case <-time.After(50 * time.Millisecond):
	}
	if err := s.rt.Signal(ctx, s.in.ID, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if typ := <-read; typ != protocol.TypeGetState {
		t.Fatalf("once resumed the job read %q, want get-state", typ)
	}
}

// TestFakeRuntimeStop: Stop ends a running job as SIGTERM does, kills a
// paused one that is not resumed within the grace, and has nothing to do
// for an instance it does not run.
func TestFakeRuntimeStop(t *testing.T) {
	ctx := context.Background()
	t.Run("running", func(t *testing.T) {
		t.Parallel()
		s := newFakeSimRuntime(t)
		rep, err := s.rt.Stop(ctx, s.in.ID, time.Second)
		if err != nil || len(rep.Killed) > 0 {
			t.Fatalf("Stop: %+v, %v; want it exited on SIGTERM", rep, err)
		}
		if s.src.open() {
			t.Error("the stopped job's connection is still open")
		}
	})
	t.Run("paused", func(t *testing.T) {
		t.Parallel()
		s := newFakeSimRuntime(t)
		if err := s.rt.Signal(ctx, s.in.ID, syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		rep, err := s.rt.Stop(ctx, s.in.ID, 20*time.Millisecond)
		if err != nil || !slices.Equal(rep.Killed, []string{"counter"}) {
			t.Fatalf("Stop: %+v, %v; want counter killed after the grace", rep, err)
		}
	})
	t.Run("unknown", func(t *testing.T) {
		t.Parallel()
		s := newFakeSimRuntime(t)
		if rep, err := s.rt.Stop(ctx, "nothing-here", time.Second); err != nil || len(rep.Killed) > 0 {
			t.Fatalf("Stop: %+v, %v; want nothing to do", rep, err)
		}
	})
}

// Issue 34 round 5, F6: a job that does not end on SIGTERM is killed
// after the stop grace, and its instance's events say so: they said only
// stopping, then stopped, and the duty to stop when told was invisible.
func TestAStopThatKillsSaysSoInTheInstancesEvents(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	bus := sim.NewBus()
	sub := bus.Subscribe(64)
	s := buildFakeSimConfig(t, "counter", nil, true, func(c *manager.Config) {
		c.Timeouts.StopGrace = sim.Duration(20 * time.Millisecond)
		c.Bus = bus
	})
	if err := s.rt.Signal(ctx, s.in.ID, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	if err := s.mgr.Stop(ctx, s.in.ID); err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for {
		select {
		case ev := <-sub.C:
			kinds = append(kinds, string(ev.Kind)+" "+string(ev.Data))
			if ev.Kind == sim.EventInstanceRuntime && ev.Instance == s.in.ID && strings.Contains(string(ev.Data), `"kind":"killed"`) &&
				strings.Contains(string(ev.Data), "did not exit within the 20ms stop grace after its stop signal (SIGTERM, or the service's stop_signal); killed (SIGKILL)") {
				return
			}
		default:
			t.Fatalf("no event says the counter was killed:\n%s", strings.Join(kinds, "\n"))
		}
	}
}

// awaitInstance is the instance once ok says so, within 5s.
func awaitInstance(t *testing.T, s *fakeSim, id string, ok func(sim.Instance) bool) sim.Instance {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); ; {
		in, err := s.mgr.Instance(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if ok(in) {
			return in
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s is still %s after 5s", id, in.State)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
