package process

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/normsim/normsim/sim"
)

const (
	defaultLogLines = 10000
	// defaultCloseGrace is how long Close gives processes between SIGTERM
	// and SIGKILL: shutting the simulator down should be quick.
	defaultCloseGrace = 2 * time.Second
	// tailInterval is how often new output is read from the log files
	// where nothing says they were written (inotify does on Linux). A
	// line's time is when it was read, so without inotify this is how far
	// it may lag the frames it sits beside on a migration's timeline.
	tailInterval = 20 * time.Millisecond
	// groupPoll is how often a stop looks whether a process group is gone.
	groupPoll = 20 * time.Millisecond
	// reapBound caps every wait that follows a SIGKILL, so a process stuck
	// in the kernel cannot hang a stop.
	reapBound = time.Second
	// maxStopped is how many stopped instances keep their logs.
	maxStopped = 100
	// maxLogFileBytes is where the read part of a log file is released, so a chatty
	// process cannot fill the disk.
	maxLogFileBytes = 64 << 20
)

// Config configures a Runtime. The zero value works.
type Config struct {
	// Observer receives the runtime's events; nil drops them.
	Observer sim.RuntimeObserver
	// Logger logs what the runtime does; nil discards.
	Logger *slog.Logger
	// Now stamps events; nil means time.Now.
	Now func() time.Time
	// LogLines is how many lines of output are kept per instance; 0 means
	// 10000.
	LogLines int
	// Logs receives every line each service prints, as it is read; nil
	// keeps them in the runtime's own buffer only.
	Logs sim.LogSink
}

// Runtime runs launch specs as host processes. It is safe for concurrent
// use.
type Runtime struct {
	observer   sim.RuntimeObserver
	logger     *slog.Logger
	now        func() time.Time
	logLines   int
	logs       sim.LogSink
	closeGrace time.Duration

	// closing ends when Close begins: it aborts Starts still waiting.
	closing    context.Context
	beginClose context.CancelFunc
	// detached ends when Close has finished with every instance: the exit
	// watchers of processes left running give up.
	detached context.Context
	detach   context.CancelFunc
	wg       sync.WaitGroup // tailers and exit watchers

	mu        sync.Mutex
	closed    bool
	instances map[string]*instance
	stopped   map[string]*logRing // logs of stopped instances
	order     []string            // stopped, oldest first
}

// instance is one prepared launch spec.
type instance struct {
	id       string
	services []*service // in spec order
	byName   map[string]*service
	logs     *logRing

	op sync.Mutex // serialises Start, Stop and Close on the instance
	// starting is set while Start starts the services: one not started
	// yet will run, and counts as live (othersLive).
	starting atomic.Bool
	// Guarded by op.
	state    instanceState
	dir      string        // log files of the current run
	tailQuit chan struct{} // ends the tailer of the current run
	tailDone chan struct{}

	// reporting counts exits noticed and not yet reported (ExitPending).
	reporting atomic.Int32
}

type instanceState int

const (
	prepared instanceState = iota
	running
	gone // stopped or left running by Close: the runtime is done with it
)

func (s instanceState) String() string {
	switch s {
	case prepared:
		return "prepared"
	case running:
		return "running"
	case gone:
		return "gone"
	}
	return fmt.Sprintf("instanceState(%d)", int(s))
}

// service is one service of an instance, resolved by Prepare.
type service struct {
	name   string
	path   string // resolved executable
	argv   []string
	dir    string
	env    map[string]string
	deps   []sim.Dependency
	prefix string
	p      atomic.Pointer[proc] // the current run's process; nil before it starts
}

// proc is one started process and the state of its log file.
type proc struct {
	svc     *service
	pid     int           // also its process group id
	started string        // startMark(pid), read while the pid is surely ours
	exited  chan struct{} // closed once the leader is reaped
	done    chan struct{} // closed once its group is gone and its output read

	mu       sync.Mutex
	decided  bool // the watcher has seen the exit and judged it
	stopping bool // a stop is under way: the exit is not reported
	natural  bool // it exited on its own
	exit     exitInfo
	inst     string      // the instance's id, for the log sink
	sink     sim.LogSink // nil: the ring only
	now      func() time.Time
	streams  []*stream // stdout and stderr; nil once read to the end
	buf      []byte
	batch    []string // drain's lines not yet handed on, reused
}

// stream is the read side of one of a process's output files.
type stream struct {
	name  string // sim.StreamStdout or sim.StreamStderr
	f     *os.File
	split sim.LineSplitter
	// released is the offset up to which the file's disk was released.
	released int64
	// mark is a copy of the last bytes read (at most markBytes, none of
	// them released): a file whose bytes there differ at the next drain,
	// or that is now shorter than what was read, was truncated by the job
	// (truncatedSince).
	mark    []byte
	markBuf [markBytes]byte
}

// markBytes is how many of the last bytes read a stream remembers to see
// whether the file under them was truncated and written again.
const markBytes = 64

// truncatedSince reports whether the job truncated the file since it was
// last read: it is shorter than where the reading stands, or the bytes
// last read are no longer there. A job that writes the same bytes back at
// the same place is not seen, but then nothing read changes either.
func (st *stream) truncatedSince() bool {
	off, err := st.f.Seek(0, io.SeekCurrent)
	fi, serr := st.f.Stat()
	if err != nil || serr != nil {
		return false
	}
	if fi.Size() < off {
		return true
	}
	var now [markBytes]byte
	n, _ := st.f.ReadAt(now[:len(st.mark)], off-int64(len(st.mark)))
	return !bytes.Equal(now[:n], st.mark)
}

// remember notes the last bytes read (those not released) for
// truncatedSince.
func (st *stream) remember() {
	st.mark = st.mark[:0]
	off, err := st.f.Seek(0, io.SeekCurrent)
	if err != nil {
		return
	}
	k := min(markBytes, off-st.released)
	if k <= 0 {
		return
	}
	n, _ := st.f.ReadAt(st.markBuf[:k], off-k)
	st.mark = st.markBuf[:n]
}

// restart reads the file again from its start once the job truncated it:
// the line under way ends where it was, and a marker says that what the
// job printed between the last read and the truncation is lost; how much
// cannot be known.
func (st *stream) restart(emit, note func(string)) {
	st.split.Flush(emit)
	note("normsim | the job truncated its output file here: what it printed after normsim last read it, up to the truncation, is lost, and how much cannot be known; reading on from the file's new start")
	st.f.Seek(0, io.SeekStart)
	st.released = 0
	st.mark = st.mark[:0]
}

// exitInfo is how a process ended.
type exitInfo struct {
	code   int
	signal int // the signal that killed it, 0 when it exited
	detail string
}

func unknownExit(err error) exitInfo {
	return exitInfo{code: -1, detail: fmt.Sprintf("exited; its exit status is unknown: %v", err)}
}

var errClosed = sim.Errorf(sim.EUnavailable, "the process runtime is closed")

// New returns a Runtime. It starts nothing.
func New(cfg Config) *Runtime {
	r := &Runtime{
		observer:   cfg.Observer,
		logger:     cfg.Logger,
		now:        cfg.Now,
		logLines:   cfg.LogLines,
		logs:       cfg.Logs,
		closeGrace: defaultCloseGrace,
		instances:  map[string]*instance{},
		stopped:    map[string]*logRing{},
	}
	if r.logger == nil {
		r.logger = slog.New(slog.DiscardHandler)
	}
	if r.now == nil {
		r.now = time.Now
	}
	if r.logLines <= 0 {
		r.logLines = defaultLogLines
	}
	r.closing, r.beginClose = context.WithCancel(context.Background())
	r.detached, r.detach = context.WithCancel(context.Background())
	return r
}

// Name returns sim.RuntimeProcess.
func (r *Runtime) Name() string { return sim.RuntimeProcess }

// Prepare checks that every service of spec can run as a host process and
// resolves its executable; it starts nothing.
func (r *Runtime) Prepare(ctx context.Context, spec *sim.LaunchSpec) error {
	if spec == nil || spec.InstanceID == "" {
		return sim.Errorf(sim.EInvalid, "launch spec has no instance id")
	}
	if !supported {
		return sim.Errorf(sim.EUnprocessable, "the process runtime does not run on %s (it needs Linux, macOS or a BSD); use --runtime docker", runtime.GOOS)
	}
	services, err := resolveServices(spec.Services)
	if err != nil {
		return err
	}
	inst := &instance{
		id:       spec.InstanceID,
		services: services,
		byName:   map[string]*service{},
		logs:     newLogRing(r.logLines),
	}
	for _, s := range services {
		inst.byName[s.name] = s
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return errClosed
	}
	if _, ok := r.instances[inst.id]; ok {
		return sim.Errorf(sim.EConflict, "instance %q is already prepared in the process runtime", inst.id)
	}
	r.instances[inst.id] = inst
	return nil
}

// resolveServices checks the specs and resolves their executables.
func resolveServices(specs []sim.ServiceSpec) ([]*service, error) {
	var services []*service
	names := map[string]bool{}
	for _, ss := range specs {
		if names[ss.Name] {
			return nil, sim.Errorf(sim.EUnprocessable, "service %q appears twice in the launch spec", ss.Name)
		}
		names[ss.Name] = true
		if ss.Process == nil || len(ss.Process.Command) == 0 || ss.Process.Command[0] == "" {
			return nil, sim.Errorf(sim.EUnprocessable, "service %q has no x-normsim command, so it cannot run as a host process; add x-normsim: {command: [...]} to it or use --runtime docker", ss.Name)
		}
		dir := ss.Process.Dir
		if dir != "" {
			abs, err := filepath.Abs(dir)
			if err != nil {
				return nil, sim.Errorf(sim.EUnprocessable, "service %q: x-normsim dir %q: %v", ss.Name, dir, err)
			}
			dir = abs
			fi, err := os.Stat(dir)
			if err != nil {
				return nil, sim.Errorf(sim.EUnprocessable, "service %q: x-normsim dir %s does not exist; it is read relative to the template "+
					"(an archive's, as if unpacked beside itself): create it, unpack the archive there, or point x-normsim.dir at the job's directory", ss.Name, dir)
			}
			if !fi.IsDir() {
				return nil, sim.Errorf(sim.EUnprocessable, "service %q: x-normsim dir %s is not a directory", ss.Name, dir)
			}
		}
		path, err := resolveExecutable(ss.Process.Command[0], dir)
		if err != nil {
			return nil, sim.Errorf(sim.EUnprocessable, "service %q: x-normsim command %q: %v", ss.Name, ss.Process.Command[0], err)
		}
		services = append(services, &service{
			name:   ss.Name,
			path:   path,
			argv:   slices.Clone(ss.Process.Command),
			dir:    dir,
			env:    maps.Clone(ss.Env),
			deps:   slices.Clone(ss.DependsOn),
			prefix: ss.Name + " | ",
		})
	}
	for _, s := range services {
		for _, d := range s.deps {
			if !names[d.Service] {
				return nil, sim.Errorf(sim.EUnprocessable, "service %q depends on %q, which is not in the launch spec", s.name, d.Service)
			}
		}
	}
	if cycle := findCycle(services); cycle != nil {
		return nil, sim.Errorf(sim.EUnprocessable, "depends_on has a cycle: %s", strings.Join(cycle, " → "))
	}
	return services, nil
}

// resolveExecutable finds argv[0] the way a shell in dir would: a name with
// a slash is a path (relative to dir), a bare name is looked up in $PATH.
func resolveExecutable(name, dir string) (string, error) {
	if !strings.Contains(name, "/") {
		path, err := exec.LookPath(name)
		if err != nil {
			return "", fmt.Errorf("no executable named %s in $PATH", name)
		}
		return path, nil
	}
	path := name
	if !filepath.IsAbs(path) {
		if dir != "" {
			path = filepath.Join(dir, path)
		} else if abs, err := filepath.Abs(path); err == nil {
			path = abs
		}
	}
	if _, err := exec.LookPath(path); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return "", fmt.Errorf("%s does not exist", path)
		}
		return "", fmt.Errorf("%s is not an executable file", path)
	}
	return path, nil
}

// findCycle returns a depends_on cycle as a path of service names, or nil.
func findCycle(services []*service) []string {
	byName := map[string]*service{}
	for _, s := range services {
		byName[s.name] = s
	}
	const (
		unseen = iota
		onPath
		done
	)
	mark := map[string]int{}
	var path []string
	var visit func(s *service) []string
	visit = func(s *service) []string {
		switch mark[s.name] {
		case onPath:
			i := slices.Index(path, s.name)
			return append(slices.Clone(path[i:]), s.name)
		case done:
			return nil
		}
		mark[s.name] = onPath
		path = append(path, s.name)
		for _, d := range s.deps {
			if c := visit(byName[d.Service]); c != nil {
				return c
			}
		}
		path = path[:len(path)-1]
		mark[s.name] = done
		return nil
	}
	for _, s := range services {
		if c := visit(s); c != nil {
			return c
		}
	}
	return nil
}

// Start starts a prepared instance's processes, each once the services it
// depends on have started (in parallel where they do not depend on each
// other), and returns once all have started. A service_healthy dependency
// counts as started: processes have no health checks. If a service cannot
// start, whatever did start is killed and the instance stays prepared.
func (r *Runtime) Start(ctx context.Context, instanceID string) error {
	inst, err := r.lookup(instanceID)
	if err != nil {
		return err
	}
	inst.op.Lock()
	defer inst.op.Unlock()
	switch inst.state {
	case running:
		return sim.Errorf(sim.EConflict, "instance %q is already running in the process runtime", instanceID)
	case gone:
		return sim.Errorf(sim.ENotFound, "instance %q is not prepared in the process runtime", instanceID)
	}

	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stopAbort := context.AfterFunc(r.closing, func() { cancel(errClosed) })
	defer stopAbort()

	dir, err := os.MkdirTemp("", "normsim-"+safeName(instanceID)+"-")
	if err != nil {
		return fmt.Errorf("start instance %s: create log directory: %w", instanceID, err)
	}
	inst.dir = dir
	for _, s := range inst.services {
		s.p.Store(nil)
	}
	inst.tailQuit, inst.tailDone = make(chan struct{}), make(chan struct{})
	r.wg.Add(1)
	go r.tail(inst, inst.tailQuit, inst.tailDone)

	env := os.Environ()
	started := map[string]chan struct{}{}
	for _, s := range inst.services {
		started[s.name] = make(chan struct{})
	}
	var n atomic.Int32
	var wg sync.WaitGroup
	inst.starting.Store(true)
	defer inst.starting.Store(false)
	for i, s := range inst.services {
		wg.Go(func() {
			if err := r.awaitDeps(ctx, inst, s, started); err != nil {
				cancel(err)
				return
			}
			if ctx.Err() != nil {
				return
			}
			if err := r.startService(inst, s, i, env); err != nil {
				cancel(err)
				return
			}
			n.Add(1)
			close(started[s.name])
		})
	}
	wg.Wait()
	if int(n.Load()) == len(inst.services) {
		inst.state = running
		return nil
	}
	err = context.Cause(ctx)
	r.logger.Debug("start failed; killing what started", "instance", instanceID, "err", err)
	r.halt(context.Background(), inst, 0)
	r.endRun(inst)
	if sim.ErrorCode(err) == sim.EInternal {
		err = fmt.Errorf("start instance %s: %w", instanceID, err)
	}
	return err
}

// awaitDeps waits until the services s depends on allow it to start.
func (r *Runtime) awaitDeps(ctx context.Context, inst *instance, s *service, started map[string]chan struct{}) error {
	for _, d := range s.deps {
		select {
		case <-started[d.Service]:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
		if d.Condition != sim.ConditionCompleted {
			continue
		}
		p := inst.byName[d.Service].p.Load()
		select {
		case <-p.exited:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
		p.mu.Lock()
		exit := p.exit
		p.mu.Unlock()
		if exit.code != 0 {
			return sim.Errorf(sim.EUnprocessable, "service %q depends on %q completing successfully, but %s %s", s.name, d.Service, d.Service, exit.detail)
		}
	}
	return nil
}

// startService starts s's process with its output going to a log file, and
// its exit watcher.
func (r *Runtime) startService(inst *instance, s *service, i int, environ []string) error {
	var ws []*os.File
	var streams []*stream
	closeAll := func() {
		for _, w := range ws {
			w.Close()
		}
	}
	defer closeAll()
	for _, name := range []string{sim.StreamStdout, sim.StreamStderr} {
		logPath := filepath.Join(inst.dir, fmt.Sprintf("%02d-%s.%s.log", i, safeName(s.name), name))
		w, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND|os.O_TRUNC, 0o600)
		if err != nil {
			return fmt.Errorf("start service %s: create log file: %w", s.name, err)
		}
		ws = append(ws, w)
		rd, err := os.OpenFile(logPath, os.O_RDWR, 0)
		if err != nil {
			closeStreams(streams)
			return fmt.Errorf("start service %s: open log file: %w", s.name, err)
		}
		streams = append(streams, &stream{name: name, f: rd})
	}
	pid, pidfd, err := startProcess(s.path, s.argv, s.dir, buildEnv(environ, s.env), ws[0], ws[1])
	if err != nil {
		closeStreams(streams)
		return sim.Errorf(sim.EUnprocessable, "service %q: start %s: %v", s.name, s.path, err)
	}
	// Unreaped (the watcher reaps it), the pid cannot be reused yet; the
	// watcher takes it off the reaper's list before it reaps it.
	if err := reapOnDeath(pid); err != nil {
		r.logger.Warn("jobs will outlive normsim if it dies without stopping them", "err", err)
	}
	p := &proc{svc: s, inst: inst.id, sink: r.logs, now: r.now, pid: pid, started: startMark(pid), streams: streams, exited: make(chan struct{}), done: make(chan struct{})}
	s.p.Store(p)
	r.logger.Debug("process started", "instance", inst.id, "service", s.name, "pid", pid, "logs", inst.dir)
	// Started before the watcher exists, so an exit is never reported
	// ahead of the start.
	r.emit(sim.RuntimeEvent{Instance: inst.id, Service: s.name, Kind: sim.ServiceStarted})
	r.wg.Add(1)
	go r.watch(inst, p, pidfd)
	return nil
}

func closeStreams(streams []*stream) {
	for _, st := range streams {
		st.f.Close()
	}
}

// buildEnv is the inherited environment without the NORSK_* and NORMSIM_*
// variables (they would point the job at the wrong manager, or leak
// normsim's own settings into it), followed by the spec's env, sorted.
func buildEnv(environ []string, spec map[string]string) []string {
	env := make([]string, 0, len(environ)+len(spec))
	for _, kv := range environ {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "NORSK_") || strings.HasPrefix(k, "NORMSIM_") {
			continue
		}
		if _, ok := spec[k]; ok {
			continue
		}
		env = append(env, kv)
	}
	for _, k := range slices.Sorted(maps.Keys(spec)) {
		env = append(env, k+"="+spec[k])
	}
	return env
}

// watch waits for p to exit. An exit that no stop asked for is reported as
// ServiceExited once the rest of its group is killed (a container's
// processes end with its main process) and its last output is read.
func (r *Runtime) watch(inst *instance, p *proc, pidfd int) {
	defer r.wg.Done()
	natural, othersRun := false, false
	exit, ok := waitExit(r.detached, p.pid, pidfd, func() {
		// Before the pid can be reused: the reaper must never signal a
		// group that is no longer the job's.
		defer forgetOnDeath(p.pid)
		p.mu.Lock()
		p.decided = true
		natural = !p.stopping
		p.natural = natural
		p.mu.Unlock()
		if natural {
			inst.reporting.Add(1)
			if err := killGroup(p.pid); err != nil {
				r.logger.Warn("kill the rest of an exited process's group", "instance", inst.id, "service", p.svc.name, "err", err)
			}
			// A container's processes all die with its main one; so do
			// those the job started in groups of their own, once no
			// service of it runs that could own them.
			if othersRun = othersLive(inst, p); !othersRun {
				for _, g := range r.strays(inst, nil) {
					killGroup(g)
				}
			}
		}
	})
	if !ok {
		return // the runtime closed and left the process running
	}
	p.mu.Lock()
	p.exit = exit
	p.mu.Unlock()
	close(p.exited)
	if !natural {
		return // the stop finishes the job
	}
	r.logger.Debug("process exited", "instance", inst.id, "service", p.svc.name, "pid", p.pid, "detail", exit.detail)
	waitGone(context.Background(), []*proc{p}, reapBound)
	p.drain(inst.logs, true)
	r.emit(sim.RuntimeEvent{Instance: inst.id, Service: p.svc.name, Kind: sim.ServiceExited, ExitCode: exit.code, Signal: exit.signal, Detail: exit.detail, OthersRun: othersRun})
	inst.reporting.Add(-1)
	close(p.done)
}

// othersLive says whether a service of inst other than p has a process
// whose exit is not decided.
func othersLive(inst *instance, p *proc) bool {
	for _, s := range inst.services {
		q := s.p.Load()
		if q == nil && inst.starting.Load() {
			// Not started yet, and about to be: a service that exits at
			// once (its work done) must not have the stray sweep take
			// one being started for a stray.
			return true
		}
		if q == nil || q == p {
			continue
		}
		q.mu.Lock()
		decided := q.decided
		q.mu.Unlock()
		if !decided {
			return true
		}
	}
	return false
}

// ExitPending says whether an exit of one of the instance's processes was
// noticed and is not reported yet (sim.ExitReporter): it waits for the
// rest of its group and its last output.
func (r *Runtime) ExitPending(instanceID string) bool {
	r.mu.Lock()
	inst := r.instances[instanceID]
	r.mu.Unlock()
	return inst != nil && inst.reporting.Load() > 0
}

// tail reads new output from the log files until quit closes.
func (r *Runtime) tail(inst *instance, quit <-chan struct{}, done chan<- struct{}) {
	defer r.wg.Done()
	defer close(done)
	t := time.NewTicker(tailInterval)
	defer t.Stop()
	written, stop := watchWrites(inst.dir)
	defer stop()
	for {
		more := false
		for _, s := range inst.services {
			if p := s.p.Load(); p != nil && p.drain(inst.logs, false) {
				more = true
			}
		}
		if more {
			// A backlog is left: read on at once, but let a stop in.
			select {
			case <-quit:
				return
			default:
				continue
			}
		}
		select {
		case <-quit:
			return
		case <-t.C:
		case <-written:
		}
	}
}

// drainBatchLines and drainBatchBytes bound the lines a drain holds before
// handing them to the ring: a job that prints faster than normsim reads must
// not grow normsim's memory with its backlog. The store's capture queue has
// bounds of its own (the sink counts what it cannot keep).
const (
	drainBatchLines = 512
	drainBatchBytes = 256 << 10
)

// drainBudget is the most one non-final drain reads of a stream: a job that
// never stops printing would otherwise keep the drain, and p.mu with it (a
// stop waits for it), forever.
const drainBudget = 4 << 20

// lineKeeper takes a drain's lines (logRing).
type lineKeeper interface {
	append(lines ...string)
}

// drain reads what is new in p's log files into keep, and hands each line
// to the runtime's log sink, stamped with the time it was read. Without
// final it reads at most drainBudget of each file and says whether more is
// left; with final it reads what the files hold now, takes an unfinished
// last line and closes the files.
func (p *proc) drain(keep lineKeeper, final bool) (more bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.streams == nil {
		return false
	}
	if p.buf == nil {
		p.buf = make([]byte, 32<<10)
	}
	lines, size := p.batch[:0], 0
	var at time.Time
	handOn := func() {
		keep.append(lines...)
		clear(lines) // let the ring alone hold the strings
		lines, size = lines[:0], 0
		at = time.Time{} // the next batch is stamped when it is read
	}
	for _, st := range p.streams {
		emit := func(text string) {
			line := p.svc.prefix + text
			lines, size = append(lines, line), size+len(line)
			if p.sink != nil {
				if at.IsZero() {
					at = p.now()
				}
				p.sink.CaptureLog(sim.LogLine{Instance: p.inst, Service: p.svc.name, Stream: st.name, At: at, Text: text})
			}
			if len(lines) >= drainBatchLines || size >= drainBatchBytes {
				handOn()
			}
		}
		if st.truncatedSince() {
			note := func(text string) { lines, size = append(lines, text), size+len(text) }
			st.restart(emit, note)
		}
		limit := int64(drainBudget)
		if final {
			limit = unread(st.f)
		}
		if backlog := unread(st.f); backlog > maxLogBacklog {
			note := func(text string) { lines, size = append(lines, text), size+len(text) }
			for {
				p.skipBacklog(st, backlog-keptOfBacklog, emit, note)
				// One skip is bounded; a final drain skips on to the end.
				if backlog = unread(st.f); backlog <= maxLogBacklog || !final {
					break
				}
			}
			switch {
			case final:
				limit = unread(st.f)
			case backlog > maxLogBacklog:
				// The skip stopped at its budget: the next drain goes on
				// skipping, and nothing of the middle is read meanwhile.
				limit, more = 0, true
			}
		}
		for read := int64(0); read < limit; {
			n, err := st.f.Read(p.buf)
			st.split.Write(p.buf[:n], emit)
			read += int64(n)
			if err != nil || n == 0 {
				break
			}
			more = more || !final && read >= limit
		}
		if final {
			st.split.Flush(emit)
			st.f.Close()
			continue
		}
		// drainBudget is under maxLogFileBytes: once per drain is enough.
		if off, err := st.f.Seek(0, io.SeekCurrent); err == nil && off-st.released > maxLogFileBytes {
			st.released = releaseRead(st.f, off)
		}
		st.remember()
	}
	handOn()
	p.batch = lines
	if final {
		p.streams = nil
		p.batch = nil
	}
	return more
}

// maxLogBacklog is the most unread output of one stream a drain reads
// line by line; past it, all but the last keptOfBacklog is skipped, its
// lines counted, not read (skipBacklog). The drain reads a few MB/s of
// short lines: a job printing faster (`yes` writes 2.9 GB in 5 s) would
// otherwise be read for minutes after it ends, and a stop would wait for
// that, while the store keeps only an instance's last 4 MiB anyway.
//
// One skip reads at most skipBudget of the file (p.mu is held, and a stop
// waits for it); the next drain goes on where it stopped. A hole in the
// file (a job that seeked its stdout far ahead) is never read: it holds no
// line end, so it is skipped as part of the line it lies in.
const (
	maxLogBacklog  = 16 << 20
	keptOfBacklog  = 4 << 20
	skipBufferSize = 1 << 20
	skipBudget     = 256 << 20
)

// skipBacklog reads past n bytes of st, and on to the end of the line they
// end in, counting the lines it passes: they are counted as lines not kept
// (sim.LogSkipper) and noted among the lines (note). The line being read when it begins
// is read to its end as usual, and so is what follows the skip, through
// emit. p.mu is held.
func (p *proc) skipBacklog(st *stream, n int64, emit, note func(string)) {
	buf := make([]byte, skipBufferSize)
	var lines, sinceLineEnd int64
	at := p.now()
	lineStart := false
	off, err := st.f.Seek(0, io.SeekCurrent)
	if err != nil {
		return
	}
	for read, budget := int64(0), int64(skipBudget); ; {
		if next, end := dataFrom(st.f, off); next > off || end {
			if end {
				next, _ = st.f.Seek(0, io.SeekEnd)
			}
			hole := max(next-off, 0)
			off, read = next, read+hole
			if !lineStart {
				st.split.Skip(hole)
			} else {
				sinceLineEnd += hole
			}
		}
		if budget <= 0 {
			// Held long enough: the next drain goes on from here.
			if lineStart {
				st.split.Skip(sinceLineEnd)
				p.noteSkipped(st, note, lines, at)
			}
			return
		}
		m, err := st.f.Read(buf)
		chunk := buf[:m]
		read += int64(m)
		off += int64(m)
		budget -= int64(m)
		if !lineStart {
			i := bytes.IndexByte(chunk, '\n')
			if i < 0 {
				st.split.Write(chunk, emit) // kept up to the line bound, the rest counted
				if err != nil || m == 0 {
					return
				}
				continue
			}
			st.split.Write(chunk[:i+1], emit)
			chunk, lineStart = chunk[i+1:], true
		}
		if past := read - n; past > 0 {
			// The skip ends at the first line end past n.
			from := max(0, len(chunk)-int(past))
			if i := bytes.IndexByte(chunk[from:], '\n'); i >= 0 {
				end := from + i + 1
				lines += int64(bytes.Count(chunk[:end], []byte{'\n'}))
				p.noteSkipped(st, note, lines, at)
				st.split.Write(chunk[end:], emit)
				return
			}
		}
		if k := int64(bytes.Count(chunk, []byte{'\n'})); k > 0 {
			lines += k
			sinceLineEnd = int64(len(chunk) - bytes.LastIndexByte(chunk, '\n') - 1)
		} else {
			sinceLineEnd += int64(len(chunk))
		}
		if err != nil || m == 0 {
			// The file ends in the middle of a line, which goes on being
			// read: what of it lay in the skip is counted as cut.
			st.split.Skip(sinceLineEnd)
			p.noteSkipped(st, note, lines, at)
			return
		}
	}
}

// noteSkipped counts lines a drain skipped and notes them where they were.
func (p *proc) noteSkipped(st *stream, note func(string), lines int64, at time.Time) {
	if lines == 0 {
		return
	}
	note(fmt.Sprintf("normsim | %d lines were skipped here, unread: the job printed faster than normsim reads its output", lines))
	if s, ok := p.sink.(sim.LogSkipper); ok {
		s.SkipLogs(sim.LogLine{Instance: p.inst, Service: p.svc.name, Stream: st.name, At: at}, lines)
	}
}

// unread is how much of f lies past where it was read up to: a final
// drain reads that far and no further, as a job left running (--keep) may
// go on printing into a file that outlives normsim.
func unread(f *os.File) int64 {
	fi, err := f.Stat()
	off, serr := f.Seek(0, io.SeekCurrent)
	if err != nil || serr != nil {
		return math.MaxInt64 // to the end, as before
	}
	return max(fi.Size()-off, 0)
}

// Stop sends SIGTERM to the process group of every service, SIGKILL to the
// groups still there after grace (or once ctx ends), and waits until the
// groups are gone. It then forgets the instance; its logs stay readable.
// Stopping an unknown instance is not an error; stopping a prepared one
// only forgets it.
func (r *Runtime) Stop(ctx context.Context, instanceID string, grace time.Duration) (sim.StopReport, error) {
	r.mu.Lock()
	inst := r.instances[instanceID]
	r.mu.Unlock()
	if inst == nil {
		return sim.StopReport{}, nil
	}
	return sim.StopReport{Killed: r.stop(ctx, inst, grace)}, nil
}

// stop ends inst and returns the services it had to kill after grace.
func (r *Runtime) stop(ctx context.Context, inst *instance, grace time.Duration) (killed []string) {
	inst.op.Lock()
	defer inst.op.Unlock()
	switch inst.state {
	case gone:
		return nil
	case running:
		killed = r.halt(ctx, inst, grace)
		r.endRun(inst)
	}
	inst.state = gone
	r.forget(inst)
	return killed
}

// halt ends every process of inst's current run: SIGTERM to each group,
// SIGKILL to what is left after grace, then waits (boundedly) for the groups
// to go and reads their last output. It returns the services it killed.
func (r *Runtime) halt(ctx context.Context, inst *instance, grace time.Duration) (killed []string) {
	var live, exited []*proc
	for _, s := range inst.services {
		p := s.p.Load()
		if p == nil {
			continue
		}
		p.mu.Lock()
		if p.decided && p.natural {
			exited = append(exited, p)
		} else {
			p.stopping = true
			live = append(live, p)
		}
		p.mu.Unlock()
	}
	deadline := time.Now().Add(grace)
	strays := r.strays(inst, live)
	for _, p := range live {
		if err := terminateGroup(p.pid); err != nil {
			r.logger.Warn("terminate process group", "instance", inst.id, "service", p.svc.name, "err", err)
		}
	}
	for _, g := range strays {
		terminateGroup(g)
	}
	defer func() {
		r.endStrays(ctx, inst, strays, deadline)
		// One that was starting when they were looked for (mid-exec, its
		// environment not readable yet, or forked during the grace): the
		// services are gone now, so what still carries the instance's
		// tags is left over.
		for _, g := range r.strays(inst, nil) {
			killGroup(g)
		}
	}()
	if !waitGone(ctx, live, grace) {
		for _, p := range live {
			if groupAlive(p.pid) {
				killed = append(killed, p.svc.name)
				r.logger.Info("process group still running after grace; killing it", "instance", inst.id, "service", p.svc.name, "pid", p.pid, "grace", grace)
				if err := killGroup(p.pid); err != nil {
					r.logger.Warn("kill process group", "instance", inst.id, "service", p.svc.name, "err", err)
				}
			}
		}
		if !waitGone(context.Background(), live, reapBound) {
			r.logger.Warn("killed processes did not go away", "instance", inst.id)
		}
	}
	for _, p := range live {
		p.drain(inst.logs, true)
		close(p.done)
	}
	for _, p := range exited {
		<-p.done
	}
	return killed
}

// strays are the process groups, other than its services' own and
// normsim's, of the live processes that carry the instance's environment
// tags (sim.EnvInstance with the owner's sim.EnvOwner, which children
// inherit): a child that left its service's group (setsid) is stopped with
// the instance rather than outliving it and normsim. Where /proc cannot be
// read there are none to find.
func (r *Runtime) strays(inst *instance, live []*proc) []int {
	owner := ""
	for _, s := range inst.services {
		if owner = s.env[sim.EnvOwner]; owner != "" {
			break
		}
	}
	if owner == "" {
		return nil
	}
	own := map[int]bool{ownGroup(): true}
	for _, p := range live {
		own[p.pid] = true
	}
	var out []int
	for _, g := range taggedGroups(sim.EnvInstance, []string{inst.id}, sim.EnvOwner+"="+owner) {
		if !own[g] && !slices.Contains(out, g) {
			out = append(out, g)
		}
	}
	return out
}

// endStrays waits for the stray groups halt sent SIGTERM until deadline
// (the services' grace) and SIGKILLs what is left of them.
func (r *Runtime) endStrays(ctx context.Context, inst *instance, strays []int, deadline time.Time) {
	if len(strays) == 0 {
		return
	}
	alive := func() []int {
		var left []int
		for _, g := range strays {
			if groupAlive(g) {
				left = append(left, g)
			}
		}
		return left
	}
	for left := alive(); len(left) > 0; left = alive() {
		if ctx.Err() != nil || !time.Now().Before(deadline) {
			r.logger.Info("processes that left their service's process group are still running after grace; killing them", "instance", inst.id, "groups", left)
			for _, g := range left {
				killGroup(g)
			}
			return
		}
		time.Sleep(strayPoll)
	}
}

// strayPoll is how often endStrays looks whether the strays are gone.
const strayPoll = 20 * time.Millisecond

// waitGone waits until every proc's leader is reaped and its group has no
// live member, for at most d or until ctx ends; it reports whether they all
// went.
func waitGone(ctx context.Context, procs []*proc, d time.Duration) bool {
	gone := func() bool {
		for _, p := range procs {
			select {
			case <-p.exited:
			default:
				return false
			}
			if groupAlive(p.pid) {
				return false
			}
		}
		return true
	}
	if gone() {
		return true
	}
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	tick := time.NewTicker(groupPoll)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return gone()
		case <-deadline.C:
			return gone()
		case <-tick.C:
			if gone() {
				return true
			}
		}
	}
}

// endRun stops the tailer of inst's current run and removes its log files.
func (r *Runtime) endRun(inst *instance) {
	close(inst.tailQuit)
	<-inst.tailDone
	if err := os.RemoveAll(inst.dir); err != nil {
		r.logger.Warn("remove log directory", "instance", inst.id, "dir", inst.dir, "err", err)
	}
}

// forget drops inst, keeping its logs (if it has any) among the stopped.
func (r *Runtime) forget(inst *instance) {
	inst.logs.close()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.instances[inst.id] == inst {
		delete(r.instances, inst.id)
	}
	if inst.logs.empty() {
		return
	}
	if _, ok := r.stopped[inst.id]; ok {
		r.order = slices.DeleteFunc(r.order, func(id string) bool { return id == inst.id })
	}
	r.stopped[inst.id] = inst.logs
	r.order = append(r.order, inst.id)
	for len(r.order) > maxStopped {
		delete(r.stopped, r.order[0])
		r.order = r.order[1:]
	}
}

// Logs writes the instance's buffered output to w, one line per line of
// output, each prefixed "<service> | ". With follow it keeps writing new
// lines until ctx ends (then it returns nil) or the instance stops. The
// logs of a stopped instance stay readable.
func (r *Runtime) Logs(ctx context.Context, instanceID string, follow bool, w io.Writer) error {
	r.mu.Lock()
	var ring *logRing
	if inst := r.instances[instanceID]; inst != nil {
		ring = inst.logs
	} else {
		ring = r.stopped[instanceID]
	}
	r.mu.Unlock()
	if ring == nil {
		return sim.Errorf(sim.ENotFound, "instance %q has no logs in the process runtime", instanceID)
	}
	bw := bufio.NewWriter(w)
	var seq uint64
	for {
		lines, next, missed, wake, closed := ring.since(seq)
		seq = next
		if missed > 0 {
			fmt.Fprintf(bw, "normsim | %d lines were dropped here: the log buffer keeps the last %d\n", missed, ring.max)
		}
		for _, l := range lines {
			bw.WriteString(l)
			bw.WriteByte('\n')
		}
		if err := bw.Flush(); err != nil {
			return fmt.Errorf("write logs of instance %s: %w", instanceID, err)
		}
		if !follow || closed {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-wake:
		}
	}
}

// Close releases the runtime. Unless keep, it stops every instance, giving
// processes 2s between SIGTERM and SIGKILL. With keep it leaves the
// processes running: each leads its own process group, so they outlive
// normsim, and their output keeps going to their log files (under
// os.TempDir, logged here); the runtime stops watching them and reports
// nothing more about them. Either way Close returns once every goroutine
// of the runtime has ended.
func (r *Runtime) Close(ctx context.Context, keep bool) error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil
	}
	r.closed = true
	insts := slices.Collect(maps.Values(r.instances))
	r.mu.Unlock()
	r.beginClose()

	var wg sync.WaitGroup
	for _, inst := range insts {
		if keep {
			r.abandon(inst)
		} else {
			wg.Go(func() { r.stop(ctx, inst, r.closeGrace) })
		}
	}
	wg.Wait()
	r.detach()
	r.wg.Wait()
	return nil
}

// abandon lets go of inst's processes without stopping them.
func (r *Runtime) abandon(inst *instance) {
	inst.op.Lock()
	defer inst.op.Unlock()
	if inst.state == running {
		close(inst.tailQuit)
		<-inst.tailDone
		for _, s := range inst.services {
			p := s.p.Load()
			if p == nil {
				continue
			}
			p.drain(inst.logs, true)
			select {
			case <-p.exited:
			default:
				forgetOnDeath(p.pid) // kept on purpose: the reaper lets it be
				r.logger.Info("left process running", "instance", inst.id, "service", s.name, "pid", p.pid, "logDir", inst.dir)
			}
		}
	}
	inst.state = gone
	r.forget(inst)
}

// Pids returns the pid of each running service of the instance (which is
// also its process group id); nil for an unknown instance.
func (r *Runtime) Pids(instanceID string) map[string]int {
	procs := r.running(instanceID)
	if procs == nil {
		return nil
	}
	pids := make(map[string]int, len(procs))
	for name, p := range procs {
		pids[name] = p.pid
	}
	return pids
}

// running is the instance's services whose process is running, or nil for
// an instance this runtime does not hold.
func (r *Runtime) running(instanceID string) map[string]*proc {
	r.mu.Lock()
	inst := r.instances[instanceID]
	r.mu.Unlock()
	if inst == nil {
		return nil
	}
	procs := map[string]*proc{}
	for _, s := range inst.services {
		p := s.p.Load()
		if p == nil {
			continue
		}
		select {
		case <-p.exited:
		default:
			procs[s.name] = p
		}
	}
	return procs
}

func (r *Runtime) lookup(id string) (*instance, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil, errClosed
	}
	inst := r.instances[id]
	if inst == nil {
		return nil, sim.Errorf(sim.ENotFound, "instance %q is not prepared in the process runtime", id)
	}
	return inst, nil
}

func (r *Runtime) emit(ev sim.RuntimeEvent) {
	if r.observer == nil {
		return
	}
	ev.At = r.now()
	r.observer(ev)
}

// safeName keeps a name usable in a file name.
func safeName(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.') {
			b[i] = '_'
		}
	}
	if len(b) > 40 {
		b = b[:40]
	}
	return string(b)
}
