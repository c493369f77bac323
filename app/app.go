// Package app wires normsim together: the store, the nodes' job-socket
// listeners, the template catalog, the runtimes, the manager and the web
// server. `normsim up`, `normsim ci` and the normsimtest helper all run the
// simulator through Main, so tests run exactly what users run.
//
// Start-up's late binding stays here: the runtimes open beside the store,
// and with an in-memory store whether a Docker engine answers is settled
// only after ready; the manager finds them through a runtime registry
// (sim.RuntimeRegistry) that answers once they are known. Main.Close
// returns every error of the shutdown, joined.
package app

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"math"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/normsim/normsim/conform"
	"github.com/normsim/normsim/internal/connlimit"
	"github.com/normsim/normsim/internal/memlimit"
	"github.com/normsim/normsim/internal/procstat"
	"github.com/normsim/normsim/protocol"
	"github.com/normsim/normsim/sim"
	"github.com/normsim/normsim/sim/jobsocket"
	"github.com/normsim/normsim/sim/logcap"
	"github.com/normsim/normsim/sim/manager"
	mediajudge "github.com/normsim/normsim/sim/media"
	"github.com/normsim/normsim/sim/process"
	"github.com/normsim/normsim/sim/sink"
	"github.com/normsim/normsim/sim/template"
	"github.com/normsim/normsim/web"
)

// Options configure a simulator. The zero value is not useful; start from
// DefaultOptions.
type Options struct {
	Nodes []string
	// SocketPort is node a's job-socket port; the next nodes take the
	// following ports. 0 picks free ports.
	SocketPort int
	// SocketHost is the address the job sockets and the output sink bind.
	// Containers reach them through host.docker.internal (the bridge
	// gateway), so the default binds every interface.
	SocketHost  string
	NoJobSocket []string
	// Addr is the dashboard/API address.
	Addr string
	// DB is the store's path, or Memory.
	DB        string
	Templates []string
	// DefaultTemplates are unpacked and loaded when Templates is empty and
	// there is no ./templates (a fresh machine running the bare binary).
	DefaultTemplates fs.FS
	Runtime          string // auto | docker | process | external
	StudioAccess     string
	// Timeouts are the run's per-phase migration timeouts; zero fields
	// take sim.DefaultTimeouts, and a request's own fields win.
	Timeouts sim.Timeouts
	Keep     bool
	// OutputPort is the UDP output sink's port; 0 picks a free one.
	OutputPort int
	Version    string
	Logger     *slog.Logger
	// Runtimes adds runtime factories by name (docker, process); the app
	// tries them in this order for --runtime auto.
	Runtimes []RuntimeFactory
	Now      func() time.Time
	// BindAddress checks whether a node's address (127.0.1.1, …) can be
	// bound on this host; nil binds it. A node whose address does not bind
	// publishes on 127.0.0.1 instead (see nodeAddresses).
	BindAddress func(ip string) error
	// Profiling serves runtime profiles under /debug/pprof/ on the API's
	// address.
	Profiling bool
	// KeepMigrations caps the finished migrations the store keeps, oldest
	// dropped first and counted (0 keeps all).
	KeepMigrations int
	// HTTPConns bounds the API's and dashboard's open connections, and
	// HTTPConnsPerHost those from one address; 0 derives them from the
	// open-file limit (connlimit.DefaultHTTPLimits).
	HTTPConns, HTTPConnsPerHost int
	// OpenStore opens the store at DB; nil keeps the records in memory
	// (DB must be Memory). The normsim binary opens SQLite
	// (app/withsqlite.Open).
	OpenStore StoreOpener
	// NoMedia runs no media receiver: jobs get no NORMSIM_MEDIA_URL and a
	// seam is judged from the output sink alone. Each job's receiver is a
	// UDP port, an open file beside its job socket: without them 10,000
	// jobs fit in 20,000 open files.
	NoMedia bool
}

// Stats reads the sim's figures (GET /api/v1/stats).
func (m *Main) Stats(ctx context.Context) (sim.Stats, error) {
	st := sim.Stats{Goroutines: runtime.NumGoroutine()}
	if ps, err := procstat.Read(0); err == nil {
		st.RSSBytes, st.PeakRSSBytes = ps.VmRSS, ps.VmHWM
	}
	st.HeapLiveBytes, st.Memory = memoryStats(st.RSSBytes)
	if m.Manager != nil {
		st.Instances, st.Connected = m.Manager.CountInstances()
		st.Events = m.Manager.Bus().Stats()
		st.Store.Pending = m.Manager.StorePending()
		st.Store.MarksLost = m.Manager.MarksLost()
	}
	if m.recorder != nil {
		st.Records = sim.RecordStats{FramesWaited: m.recorder.Throttled(), FramesLost: m.recorder.Dropped()}
	}
	if m.httpConns != nil {
		st.HTTP = sim.HTTPStats{Connections: m.httpConns.Open(), ConnectionsEvicted: m.httpConns.Evicted(), ConnectionsRefused: m.httpConns.Refused()}
	}
	for _, l := range m.Listeners {
		st.Records.ConnectionsRefused += l.Refused()
		st.Records.ConnectionsEvicted += l.Evicted()
	}
	if m.Store != nil {
		var err error
		if st.Store.Bytes, st.Store.Migrations, err = m.Store.Size(ctx); err != nil {
			return st, err
		}
		st.Store.MigrationsCap, st.Store.MigrationsPruned = m.Store.MigrationCap(), m.Store.MigrationsPruned()
		st.Store.PrunedWritesDropped = m.Store.PrunedWritesDropped()
		st.Store.EventsTrimmed = m.Store.EventsTrimmed()
		if st.Store.Frames, err = m.Store.FrameCounts(ctx, "", ""); err != nil {
			return st, err
		}
	}
	return st, nil
}

// heapLiveMetric is the heap the last collection found live.
const heapLiveMetric = "/gc/heap/live:bytes"

// stackScanMetric is the stack the last collection scanned: what the
// goroutines used of their stacks.
const stackScanMetric = "/gc/scan/stack:bytes"

// memoryClasses are the runtime/metrics classes memoryStats sorts. They
// leave out heap/released (mapped, not resident), so their sum is what the
// runtime holds resident.
var memoryClasses = []string{
	"/memory/classes/heap/objects:bytes",
	"/memory/classes/heap/free:bytes",
	"/memory/classes/heap/unused:bytes",
	"/memory/classes/heap/stacks:bytes",
	"/memory/classes/os-stacks:bytes",
	"/memory/classes/metadata/mcache/free:bytes",
	"/memory/classes/metadata/mcache/inuse:bytes",
	"/memory/classes/metadata/mspan/free:bytes",
	"/memory/classes/metadata/mspan/inuse:bytes",
	"/memory/classes/metadata/other:bytes",
	"/memory/classes/other:bytes",
	"/memory/classes/profiling/buckets:bytes",
}

// memoryStats reads the live heap and splits the resident set rss (0:
// unknown) by what holds it, in one read of the runtime's metrics.
func memoryStats(rss int64) (heapLive uint64, ms sim.MemoryStats) {
	samples := make([]metrics.Sample, 0, 2+len(memoryClasses))
	samples = append(samples, metrics.Sample{Name: heapLiveMetric}, metrics.Sample{Name: stackScanMetric})
	for _, name := range memoryClasses {
		samples = append(samples, metrics.Sample{Name: name})
	}
	metrics.Read(samples)
	var goResident uint64
	for _, s := range samples {
		if s.Value.Kind() != metrics.KindUint64 {
			continue // a metric this Go does not have
		}
		v := s.Value.Uint64()
		switch s.Name {
		case heapLiveMetric:
			heapLive = v
			continue // a part of heap/objects, not a class of its own
		case stackScanMetric:
			ms.StacksUsedBytes = v
			continue // a part of heap/stacks
		case "/memory/classes/heap/objects:bytes":
			ms.HeapObjectsBytes += v
		case "/memory/classes/heap/free:bytes", "/memory/classes/heap/unused:bytes":
			ms.HeapFreeBytes += v
		case "/memory/classes/heap/stacks:bytes", "/memory/classes/os-stacks:bytes":
			ms.StacksBytes += v
		default:
			ms.RuntimeBytes += v
		}
		goResident += v
	}
	if rss > 0 && uint64(rss) > goResident {
		ms.OutsideGoBytes = uint64(rss) - goResident
	}
	// The user's limit: the runtime's is a backstop while the binary
	// starts (internal/initgc), which no one set.
	if limit := memlimit.Get(); limit != math.MaxInt64 { // none set
		ms.LimitBytes = limit
	}
	return heapLive, ms
}

// RuntimeFactory makes a runtime, or says it is not available here.
type RuntimeFactory struct {
	Name string
	// New gets the observer of the runtime's events and the sink of
	// what its instances print.
	New func(ctx context.Context, obs sim.RuntimeObserver, logs sim.LogSink, log *slog.Logger) (sim.Runtime, error)
}

// DefaultOptions are the options of a plain `normsim up`.
func DefaultOptions() Options {
	return Options{
		Nodes:      []string{"a", "b"},
		SocketPort: protocol.DefaultPort,
		SocketHost: "0.0.0.0",
		Addr:       "127.0.0.1:7788",
		DB:         DefaultDBPath(),
		Runtime:    "auto",
		Version:    "dev",
	}
}

// DefaultDBPath is $XDG_STATE_HOME/normsim/normsim.db (~/.local/state when
// XDG_STATE_HOME is unset).
func DefaultDBPath() string {
	dir := os.Getenv("XDG_STATE_HOME")
	if dir == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			home = os.TempDir()
		}
		dir = filepath.Join(home, ".local", "state")
	}
	return filepath.Join(dir, "normsim", "normsim.db")
}

// httpIdleTimeout is how long the API keeps a keep-alive connection that
// sends no request: longer than Go's HTTP client keeps one (90 s) and
// Firefox (115 s), so that they close it first and never send a request
// on a connection being closed; browsers that keep theirs longer (Chrome,
// 300 s) retry such a request on a new one.
const httpIdleTimeout = 120 * time.Second

// Main is a running simulator.
type Main struct {
	Opts Options
	// loadTemplate loads one template of the catalog; nil is
	// template.LoadContext (tests hold a load with it).
	loadTemplate func(context.Context, string) (*template.Loaded, error)
	Store        Store
	Manager      *manager.Manager
	Listeners    map[string]*jobsocket.Listener
	Sink         *sink.Sink
	// Media receives each job's media on a port of its own.
	Media   *sink.Media
	Catalog sim.Catalog
	Web     *web.Server
	// Conformance runs the dashboard's conformance runs against this
	// sim's own API.
	Conformance *conform.Service

	// runtimes knows the runtimes once openRuntimes is done (see Runtime).
	runtimes      *runtimeRegistry
	addressNote   string // why nodes share an address; "" when none do (AddressNote)
	sinkNote      string // why the sink is not on the last run's port; "" when it is or none was kept
	log           *slog.Logger
	tempDirs      []string
	templatesNote string
	recorder      *jobsocket.Recorder
	// Logs keeps what instances print; logSink hands the runtimes' lines
	// to it (the runtimes open before the store it writes to).
	Logs     *logcap.Capture
	logSink  logForward
	httpLn   net.Listener
	httpSrv  *http.Server
	ready    chan struct{}
	wg       sync.WaitGroup
	closeOne sync.Once
	closeErr error
	// hurry is the parent of the context Close gives the runtimes:
	// Hurry cancels it, and what they still wait for is killed at once.
	hurry       context.Context
	cancelHurry context.CancelFunc

	// httpConns keeps httpSrv's connections within their bounds.
	httpConns *connlimit.HTTPConns
}

// New returns a simulator with opts; Open starts it.
func New(opts Options) *Main {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if len(opts.Nodes) == 0 {
		opts.Nodes = []string{"a", "b"}
	}
	hurry, cancelHurry := context.WithCancel(context.Background())
	return &Main{Opts: opts, log: opts.Logger, Listeners: map[string]*jobsocket.Listener{}, ready: make(chan struct{}),
		hurry: hurry, cancelHurry: cancelHurry}
}

// Hurry makes a Close in progress (or the next one) stop waiting for jobs
// to end on their own: what is still running is killed and removed now
// (a second Ctrl-C).
func (m *Main) Hurry() { m.cancelHurry() }

// OptionError is an option normsim cannot run with, such as a node
// listed twice or an unknown runtime: a usage error, which the CLI exits
// 2 for.
type OptionError struct{ msg string }

func (e *OptionError) Error() string { return e.msg }

func optionErrorf(format string, args ...any) error {
	return &OptionError{fmt.Sprintf(format, args...)}
}

// PortInUseError names the port and the flag that chose it.
type PortInUseError struct {
	What string
	Addr string
	Flag string
	Err  error
}

func (e *PortInUseError) Error() string {
	return fmt.Sprintf("%s: %s is already in use; pick another with %s (0 picks a free port)", e.What, e.Addr, e.Flag)
}

func (e *PortInUseError) Unwrap() error { return e.Err }

func listenErr(what, addr, flag string, err error) error {
	if errors.Is(err, syscall.EADDRINUSE) {
		return &PortInUseError{What: what, Addr: addr, Flag: flag, Err: err}
	}
	return fmt.Errorf("%s: listen on %s: %w", what, addr, err)
}

// Open starts everything /readyz stands for: the dashboard listener, the
// store and the runtimes, the job-socket listeners and the output sink, the
// manager and the web server. What nothing waits for yet (an in-memory
// store's schema, whether Docker answers under --runtime auto or external,
// then from ready on the template catalog and the dashboard's page
// templates) goes on one lane, one piece at a time.
// A port in use is an error from Open; on error everything already started
// is closed.
func (m *Main) Open(ctx context.Context) (err error) {
	defer func() {
		if err != nil {
			m.Close()
		}
	}()
	if err := m.validateNodes(); err != nil {
		return err
	}
	// The HTTP listener first: a busy dashboard port is the commonest clash.
	ln, err := net.Listen("tcp", m.Opts.Addr)
	if err != nil {
		return listenErr("dashboard", m.Opts.Addr, "--addr", err)
	}
	m.httpLn = ln

	// Templates load once ready, or when first needed (see loadCatalogDirs).
	catalog, err := m.loadCatalogDirs()
	if err != nil {
		return err
	}
	m.Catalog = catalog

	// Work that nothing waits for until after ready goes on one lane, one
	// piece at a time (see lane).
	later := startLane(&m.wg)
	defer later.close()

	// The store and the runtimes (is a Docker engine answering?) take a few
	// ms each and need nothing from each other. A --runtime that is missing
	// must fail the start, and a store file's recovery needs every runtime:
	// then both open side by side before ready. Otherwise (an in-memory
	// store, --runtime auto or external) nothing can fail: the schema is
	// built and whether Docker answers is settled on the lane, and a query
	// or a launch waits for them.
	runtimesLater := m.Opts.DB == Memory &&
		(m.Opts.Runtime == "" || m.Opts.Runtime == "auto" || m.Opts.Runtime == sim.RuntimeExternal)
	var mgr atomic.Pointer[manager.Manager]
	obs := func(ev sim.RuntimeEvent) {
		if mg := mgr.Load(); mg != nil {
			mg.OnRuntimeEvent(ev)
		}
	}
	m.runtimes = newRuntimeRegistry()
	if runtimesLater {
		later.Go(func() { m.openRuntimes(ctx, obs) })
	} else {
		go m.openRuntimes(ctx, obs)
	}
	m.Store, err = m.openStore(ctx, later.Go)
	if !runtimesLater {
		m.runtimes.Wait()
		err = errors.Join(err, m.runtimes.err)
	}
	if err != nil {
		return err
	}
	// The store file is checked in the background; it ends at the latest
	// when the store closes.
	go func(store Store) {
		<-store.Checked()
		if err := store.Damaged(); err != nil {
			m.log.Error("the store file is damaged: launches and migrations are refused", "err", err)
		}
	}(m.Store)
	if err := m.claimStore(ctx); err != nil {
		return err
	}
	// A second normsim started on this store names this one.
	m.Store.SetHolder(fmt.Sprintf("pid %d, dashboard %s", os.Getpid(), m.URL()))
	m.Store.SetMigrationCap(m.Opts.KeepMigrations)
	m.recorder = jobsocket.NewRecorder(m.Store, jobsocket.DefaultRecorderLimits, m.log)
	m.Logs = logcap.New(logcap.Config{Store: m.Store, Logger: m.log})
	m.logSink.set(m.Logs)

	noSocket := map[string]bool{}
	for _, n := range m.Opts.NoJobSocket {
		noSocket[n] = true
	}
	onEvent := func(ev sim.SocketEvent) {
		if mg := mgr.Load(); mg != nil {
			mg.OnSocketEvent(ev)
		}
	}
	bind := m.Opts.BindAddress
	if bind == nil {
		bind = bindAddress
	}
	addrs, shared, warning := nodeAddresses(m.Opts.Nodes, bind, runtime.GOOS)
	if warning != "" {
		m.addressNote = warning
		m.log.Warn(warning)
	}
	// Jobs of an earlier run reconnect as soon as the sockets listen; their
	// hellos wait until recovery has registered them again.
	registered := make(chan struct{})
	defer closeOnce(registered)
	// One budget for every node's socket: connections that are not jobs
	// yet are bounded in total, so more nodes do not take more of the fds.
	budget := jobsocket.NewBudget(jobsocket.Limits{})
	m.log.Debug("job sockets: connections that are not jobs yet are bounded, all nodes together", "limits", budget.Limits())
	var nodes []manager.Node
	port := m.Opts.SocketPort
	for i, name := range m.Opts.Nodes {
		n := manager.Node{Node: sim.Node{Name: name, Address: addrs[i], SharedAddress: shared[i]}}
		if !noSocket[name] {
			l := jobsocket.New(jobsocket.Config{Node: name, Logger: m.log, Now: m.Opts.Now,
				OnEvent: onEvent, Recorder: m.recorder, Registered: registered, Budget: budget})
			addr := net.JoinHostPort(m.Opts.SocketHost, strconv.Itoa(port))
			if err := l.Open(addr); err != nil {
				return listenErr("job socket of node "+name, addr, "--socket-port", err)
			}
			m.Listeners[name] = l
			n.SocketPort = l.Port()
			n.SocketURL = fmt.Sprintf("ws://127.0.0.1:%d", l.Port())
			n.Socket = l
		}
		nodes = append(nodes, n)
		if port != 0 {
			port++
		}
	}

	m.Sink = sink.New(m.Opts.Now, 0)
	m.Sink.SetLogger(m.log)
	if err := m.openSink(ctx); err != nil {
		return err
	}

	var media sim.MediaReceiver // nil, not a nil *sink.Media: the manager tests it
	if !m.Opts.NoMedia {
		m.Media = sink.NewMedia(m.Opts.SocketHost, m.Opts.Now)
		m.Media.SetLogger(m.log.With("component", "media"))
		media = m.Media
	}

	owner := m.Store.Owner()
	sinkPort := m.Sink.Port()
	cfg := manager.Config{
		Nodes: nodes, Store: m.Store, Catalog: m.Catalog, Runtimes: m.runtimes, Logs: m.Logs,
		Sink: m.Sink, StudioAccess: m.Opts.StudioAccess, Timeouts: m.Opts.Timeouts, Owner: owner, Run: process.RunLabel(), StoreKind: storeKind(m.Opts.DB), Logger: m.log, Now: m.Opts.Now,
		OutputEnv: func(runtime string) map[string]string {
			host := "127.0.0.1"
			if runtime == sim.RuntimeDocker {
				host = protocol.ContainerHost
			}
			return map[string]string{sink.EnvAddr: net.JoinHostPort(host, strconv.Itoa(sinkPort))}
		},
		Media: media, MediaJudge: mediajudge.Judge{}, Captures: m.Store, FramesLost: m.recorder.LostOf,
		MediaHost: func(runtime string) string {
			if runtime == sim.RuntimeDocker {
				return protocol.ContainerHost
			}
			return "127.0.0.1"
		},
	}
	m.Manager = manager.New(cfg)
	// The sink keeps the output of jobs normsim runs, not of every job id
	// a datagram to its open port names.
	m.Sink.Accept(m.Manager.KnowsJob)
	mgr.Store(m.Manager)
	// An in-memory store starts empty under a new owner label: no earlier
	// run can have left anything for it to recover.
	if m.Opts.DB != Memory {
		// A record it cannot read says so itself (the store names the
		// file, the record and the fix).
		if err := m.Manager.Recover(ctx); err != nil {
			return err
		}
	}
	closeOnce(registered)

	// The runs drive the sim through its API as `normsim conform` does
	// from outside, so the service is made once the API's URL is known.
	m.Conformance = conform.NewService(conform.ServiceConfig{URL: m.URL(), Sim: m.Manager, Version: m.Opts.Version, Logger: m.log.With("component", "conformance"), Now: m.Opts.Now})
	// Idle keep-alive connections close after httpIdleTimeout, and
	// httpConns bounds those open at once: otherwise idle clients hold
	// every fd, and the API, the store and the job sockets get none.
	m.httpConns = connlimit.NewHTTPConns(connlimit.HTTPLimits{Total: m.Opts.HTTPConns, PerHost: m.Opts.HTTPConnsPerHost}, m.log)
	m.log.Debug("API: open connections are bounded", "limits", m.httpConns.Limits())
	m.Web = web.New(web.Config{Service: m.Manager, Addr: ln.Addr().String(), Logger: m.log, Version: m.Opts.Version, Conformance: m.Conformance,
		Stats: m, Profiling: m.Opts.Profiling, Streaming: m.httpConns.Streaming,
		Ready: func() bool {
			select {
			case <-m.ready:
				return true
			default:
				return false
			}
		}})
	m.httpSrv = &http.Server{Handler: m.Web, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: httpIdleTimeout,
		ConnState: m.httpConns.ConnState, ConnContext: m.httpConns.ConnContext}
	// Requests waiting on a migration (?wait) answer at shutdown instead of
	// holding it up.
	m.httpSrv.RegisterOnShutdown(m.Web.EndWaits)
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		if err := m.httpSrv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			m.log.Error("dashboard server stopped", "err", err)
		}
	}()
	close(m.ready)
	// Work nobody waits for yet, now that nothing else wants the CPU.
	// What a killed normsim left that no store remembers (a --db :memory:
	// run's containers) is removed once the runtimes are known.
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		m.removeOrphans(owner)
	}()
	// The catalog and then the page templates, behind the schema and the
	// runtimes: with all of them at once, on two cores, the first requests
	// (the /readyz poll that just succeeded) waited for a core.
	later.Go(func() {
		catalog.List()
		m.Web.Warm()
	})
	return nil
}

// CleanupCommand is the shell command that removes what a normsim's run
// left on the engine: its containers, then their networks and volumes.
func CleanupCommand(run string) string {
	f := "--filter label=" + sim.LabelRun + "=" + run
	return "docker ps -aq " + f + " | xargs -r docker rm -f; docker network ls -q " + f + " | xargs -r docker network rm; docker volume ls -q " + f + " | xargs -r docker volume rm"
}

// removeOrphans has each runtime that can remove what normsims that are
// gone left behind, and says what it removed.
func (m *Main) removeOrphans(owner string) {
	for _, rt := range m.runtimes.Wait().Runtimes {
		o, ok := rt.(sim.OrphanRemover)
		if !ok {
			continue
		}
		ctx, cancel := context.WithTimeout(m.hurry, 30*time.Second)
		sweep, err := o.RemoveOrphans(ctx, owner, process.JudgeRun)
		cancel()
		if err != nil {
			m.log.Warn("could not look for what a killed normsim left", "runtime", rt.Name(), "err", err)
		}
		if len(sweep.Removed) > 0 {
			m.log.Info("removed instances a normsim that is gone left running", "runtime", rt.Name(), "instances", sweep.Removed)
		}
		for _, run := range sweep.Unjudged {
			m.log.Info("left the instances of a normsim this one cannot see (another machine, container or PID namespace): once it is gone, remove them with: "+CleanupCommand(run),
				"runtime", rt.Name(), "run", run)
		}
	}
}

// Runtime is the named runtime, or nil, once the runtimes are known (nil
// before Open).
func (m *Main) Runtime(name string) sim.Runtime {
	if m.runtimes == nil {
		return nil
	}
	return m.runtimes.Wait().Runtimes[name]
}

// RuntimeNote says how the default runtime was chosen, for the banner. It
// waits until the runtimes are known (after ready, with an in-memory store).
func (m *Main) RuntimeNote() string {
	if m.runtimes == nil {
		return ""
	}
	m.runtimes.Wait()
	return m.runtimes.note
}

func (m *Main) validateNodes() error {
	seen := map[string]bool{}
	for _, n := range m.Opts.Nodes {
		if n == "" || strings.ContainsAny(n, "/ ") {
			return optionErrorf("--nodes: node name %q must be non-empty without spaces or slashes", n)
		}
		if seen[n] {
			return optionErrorf("--nodes: node %q is listed twice", n)
		}
		seen[n] = true
	}
	for _, n := range m.Opts.NoJobSocket {
		if !seen[n] {
			return optionErrorf("--no-job-socket: node %q is not one of --nodes %s", n, strings.Join(m.Opts.Nodes, ","))
		}
	}
	return nil
}

// openRuntimes opens the runtimes, picks the default one, and makes them
// known to the registry, with the Docker engine found and how the default
// was chosen; a --runtime that is not available is the registry's err.
func (m *Main) openRuntimes(ctx context.Context, obs sim.RuntimeObserver) {
	reg := m.runtimes
	defer close(reg.known)
	rts := map[string]sim.Runtime{sim.RuntimeExternal: manager.External{}}
	reg.set.Runtimes = rts
	var dockerErr error // why the Docker runtime is not there, for the banner
	for _, f := range m.Opts.Runtimes {
		rt, err := f.New(ctx, obs, &m.logSink, m.log.With("runtime", f.Name))
		if err != nil {
			if f.Name == sim.RuntimeDocker {
				dockerErr = err
			}
			m.log.Debug("runtime unavailable", "runtime", f.Name, "err", err)
			if m.Opts.Runtime == f.Name && reg.err == nil {
				reg.err = fmt.Errorf("--runtime %s: %w", f.Name, err)
			}
			continue
		}
		rts[f.Name] = rt
	}
	if reg.err != nil {
		return
	}
	switch m.Opts.Runtime {
	case "", "auto":
		for _, f := range m.Opts.Runtimes {
			if _, ok := rts[f.Name]; ok {
				if f.Name == sim.RuntimeDocker {
					reg.note = "docker (the Docker engine answered)" + m.engineNote(ctx)
				} else {
					reg.note = f.Name + " (no Docker engine answered" + whereDocker(dockerErr) + ")"
				}
				reg.set.Default = f.Name
				return
			}
		}
		reg.note = "external (no other runtime available)"
		reg.set.Default = sim.RuntimeExternal
	default:
		if _, ok := rts[m.Opts.Runtime]; !ok {
			reg.err = optionErrorf("--runtime: unknown runtime %q; use auto, docker, process or external", m.Opts.Runtime)
			return
		}
		reg.note = m.Opts.Runtime + " (--runtime)" + m.engineNote(ctx)
		reg.set.Default = m.Opts.Runtime
	}
}

// whereDocker says where the Docker runtime looked for an engine, from its
// error (which names the address), and how to point it elsewhere: "" when
// no Docker runtime was linked or tried.
func whereDocker(err error) string {
	if err == nil {
		return ""
	}
	first, _, _ := strings.Cut(err.Error(), "\n")
	return ": " + first + "; DOCKER_HOST or the docker context names another"
}

// engineNote asks the Docker runtime, when there is one, which engine it
// found (context, address, version), keeps it for the nodes API, and
// returns it for the banner. Only openRuntimes calls it.
func (m *Main) engineNote(ctx context.Context) string {
	d, ok := m.runtimes.set.Runtimes[sim.RuntimeDocker].(sim.EngineReporter)
	if !ok {
		return ""
	}
	e, err := d.Engine(ctx)
	if err != nil {
		m.log.Warn("the Docker engine answered but did not say which it is", "err", err)
		return ""
	}
	m.runtimes.engine = e
	return "; " + e.String()
}

// Ready is closed once every listener and the store are up.
func (m *Main) Ready() <-chan struct{} { return m.ready }

// URL is the dashboard's base URL.
func (m *Main) URL() string { return "http://" + m.httpLn.Addr().String() }

// Logger is the app's logger.
func (m *Main) Logger() *slog.Logger { return m.log }

// Close shuts everything down: the web server, the manager, the listeners,
// the runtimes (removing what they started unless Keep) and the store. Its
// error joins everything that failed; a second Close returns it again.
func (m *Main) Close() error {
	m.closeOne.Do(func() { m.closeErr = m.close() })
	return m.closeErr
}

func (m *Main) close() error {
	var errs []error
	fail := func(what string, err error) {
		if err != nil {
			errs = append(errs, fmt.Errorf("close %s: %w", what, err))
		}
	}
	// The conformance runs first, while the API they clean up through
	// still answers.
	if m.Conformance != nil {
		fail("the conformance runs", m.Conformance.Close())
	}
	// A template load in progress stops now, so that nothing below waits
	// for a launch that waits for it; close waits for it further down.
	if lc, ok := m.Catalog.(*lazyCatalog); ok {
		lc.cancel()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 800*time.Millisecond)
	defer cancel()
	if m.httpSrv != nil {
		// Past the bound, what is still open (a dashboard's live updates)
		// is cut by Close: that is the bound's purpose, not a failure; nor
		// is Close finding the listener Shutdown closed.
		if err := m.httpSrv.Shutdown(ctx); !errors.Is(err, context.DeadlineExceeded) {
			fail("the dashboard", err)
		}
		if err := m.httpSrv.Close(); !errors.Is(err, net.ErrClosed) {
			fail("the dashboard", err)
		}
	} else if m.httpLn != nil {
		fail("the dashboard listener", m.httpLn.Close())
	}
	if m.Manager != nil {
		fail("the manager", m.Manager.Close())
	}
	for name, l := range m.Listeners {
		fail("the job socket of node "+name, l.Close())
	}
	if m.Sink != nil {
		fail("the output sink", m.Sink.Close())
	}
	if m.Media != nil {
		m.Media.CloseAll()
	}
	if m.runtimes != nil {
		rts := m.runtimes.Wait().Runtimes
		var rtErrs []error
		var mu sync.Mutex
		var wg sync.WaitGroup
		for name, rt := range rts {
			wg.Go(func() {
				rctx, cancel := context.WithTimeout(m.hurry, 15*time.Second)
				defer cancel()
				if err := rt.Close(rctx, m.Opts.Keep); err != nil {
					mu.Lock()
					rtErrs = append(rtErrs, fmt.Errorf("close runtime %s: %w", name, err))
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		errs = append(errs, rtErrs...)
	}
	if m.Manager != nil && !m.Opts.Keep {
		errs = append(errs, m.Manager.MarkAllStopped())
	}
	if lc, ok := m.Catalog.(*lazyCatalog); ok {
		lc.close() // its loader is ours to wait for
	}
	if m.Manager != nil {
		// Each drop was logged as it happened; the sum is said at the end.
		if n := m.Manager.Bus().Stats().DroppedSubscribers; n > 0 {
			m.log.Warn("live-update subscribers (/api/v1/events) were dropped for falling behind", "dropped", n)
		}
	}
	if m.recorder != nil {
		m.recorder.Close()
		// What the frame records cost is said once, at the end: a lost
		// record is a frame missing from a job's history.
		if n := m.recorder.Dropped(); n > 0 {
			m.log.Error("frame records lost: the store refused them, or they came as the sim stopped", "lost", n)
		}
		if n := m.recorder.Throttled(); n > 0 {
			m.log.Info("connections with many frames waiting for the store were slowed", "times", n)
		}
	}
	if m.Logs != nil {
		m.logSink.set(nil)
		m.Logs.Close() // after the runtimes: their last lines are in
		if n := m.logSink.lost.Load(); n > 0 {
			m.log.Warn("log lines came while there was no store to keep them", "lines", n)
		}
	}
	if m.Store != nil {
		fail("the store", m.Store.Close())
	}
	m.wg.Wait()
	for _, d := range m.tempDirs {
		fail("a temporary directory", os.RemoveAll(d))
	}
	return errors.Join(errs...)
}

// Run opens the simulator, prints the banner, and serves until ctx ends.
func (m *Main) Run(ctx context.Context, banner io.Writer) error {
	if err := m.Open(ctx); err != nil {
		return err
	}
	if banner != nil {
		// The banner counts the templates, which may still be loading: a
		// Ctrl-C meanwhile is not kept waiting for a slow one, and what
		// was not printed by then is not printed after it.
		m.printBannerHead(banner)
		var rest bytes.Buffer
		printed := make(chan struct{})
		go func() {
			defer close(printed)
			m.printBannerTemplates(&rest)
		}()
		select {
		case <-printed:
			banner.Write(rest.Bytes())
		case <-ctx.Done():
			return nil
		}
	}
	<-ctx.Done()
	return nil
}

// AddressNote is the start-up warning that nodes share an address (logged
// once by Open), or "" when every node has an address of its own.
func (m *Main) AddressNote() string { return m.addressNote }

// PrintBanner writes what a developer needs to know: every URL, port, and
// where records are kept.
func (m *Main) PrintBanner(w io.Writer) {
	m.printBannerHead(w)
	m.printBannerTemplates(w)
}

// printBannerHead is the banner up to the templates: it waits for nothing.
func (m *Main) printBannerHead(w io.Writer) {
	fmt.Fprintf(w, "\n  normsim %s\n\n", m.Opts.Version)
	fmt.Fprintf(w, "  Dashboard   %s/\n", m.URL())
	fmt.Fprintf(w, "  API         %s/api/v1/nodes\n", m.URL())
	for _, n := range m.Manager.Nodes() {
		addr := ""
		if n.Address != "" {
			addr = "  publishes on " + n.Address
			if n.SharedAddress {
				addr += " (shared with other nodes: see the warning above)"
			}
		}
		if n.HasJobSocket() {
			fmt.Fprintf(w, "  Node %-6s  job socket %s  (containers: ws://%s:%d)%s\n", n.Name, n.SocketURL, protocol.ContainerHost, n.SocketPort, addr)
		} else {
			fmt.Fprintf(w, "  Node %-6s  no job socket (--no-job-socket)%s\n", n.Name, addr)
		}
	}

	fmt.Fprintf(w, "  Output sink udp://127.0.0.1:%d  (jobs get it as %s)\n", m.Sink.Port(), sink.EnvAddr)
	if m.sinkNote != "" {
		fmt.Fprintf(w, "              %s\n", m.sinkNote)
	}
	if m.Media != nil {
		fmt.Fprintf(w, "  Media       each job gets a udp port of its own as %s (MPEG-TS or RTP; docs/media.md)\n", sim.EnvMediaURL)
	} else {
		fmt.Fprintf(w, "  Media       none (--no-media): jobs get no %s, and seams are judged from the output sink alone\n", sim.EnvMediaURL)
	}
	if ip := net.ParseIP(m.Opts.SocketHost); ip != nil && ip.IsUnspecified() {
		// Containers reach the sockets through the bridge gateway, so by
		// default they listen on every interface: say so, and how not to.
		fmt.Fprintf(w, "  Exposure    the job sockets and the output sink listen on every interface (%s), so\n", m.Opts.SocketHost)
		fmt.Fprintf(w, "              others on your network can reach them (a socket needs its instance's token;\n")
		fmt.Fprintf(w, "              the sink only keeps packets of jobs running here). With host processes only,\n")
		fmt.Fprintf(w, "              pass --socket-host 127.0.0.1\n")
	}
	fmt.Fprintf(w, "  Runtime     %s\n", m.RuntimeNote())
	if m.Opts.DB == Memory {
		fmt.Fprintf(w, "  Store       in memory (records are lost on exit)\n")
	} else {
		fmt.Fprintf(w, "  Store       %s (kept across restarts)\n", m.Opts.DB)
	}
	if n := m.Opts.KeepMigrations; n > 0 {
		fmt.Fprintf(w, "              keeps the %d newest finished migrations; older ones are dropped and counted\n", n)
	}
}

// printBannerTemplates is the rest of the banner: the templates, once
// every one is loaded, and how to stop.
func (m *Main) printBannerTemplates(w io.Writer) {
	valid, invalid := 0, 0
	for _, t := range m.Catalog.List() {
		if t.Valid {
			valid++
		} else {
			invalid++
		}
	}
	fmt.Fprintf(w, "  Templates   %d valid, %d invalid  (%s)\n", valid, invalid, m.templatesNote)
	if set := TimeoutsNote(m.Opts.Timeouts); set != "" {
		fmt.Fprintf(w, "  Timeouts    %s (--timeouts; the rest are the defaults)\n", set)
	}
	for _, t := range m.Catalog.List() {
		if !t.Valid {
			fmt.Fprintf(w, "              ! %s: %s\n", t.Name, t.Error.Message)
		}
	}
	fmt.Fprintf(w, "\n  Press Ctrl-C to stop (twice to quit at once).\n\n")
}

// closeOnce closes c unless it is closed already.
func closeOnce(c chan struct{}) {
	select {
	case <-c:
	default:
		close(c)
	}
}

// TimeoutsNote lists the fields t sets, "state=10s, targetReady=5m0s", in
// the order a migration meets them; "" when it sets none.
func TimeoutsNote(t sim.Timeouts) string {
	var set []string
	for _, f := range t.Fields() {
		if *f.Value > 0 {
			set = append(set, f.Name+"="+f.Value.D().String())
		}
	}
	return strings.Join(set, ", ")
}

// storeKind is what the containers launched over the store db say of it
// (sim.LabelStore).
func storeKind(db string) string {
	if db == Memory {
		return sim.StoreMemory
	}
	return sim.StoreFile
}

// runSetting is where a store file keeps the run (sim.LabelRun) of the
// last normsim that opened it.
const runSetting = "run"

// claimStore refuses a store file whose last normsim still runs, and makes
// this one its last. The lock is on the file; a copy of a store in use
// (its -wal with it) is another file, with the same owner label: its
// recovery would adopt the first normsim's containers, or stop its jobs,
// while that normsim runs them (issue 34, fourth attack, 4). A run that
// cannot be judged (another machine's or PID namespace's) is not refused.
func (m *Main) claimStore(ctx context.Context) error {
	if m.Opts.DB == Memory {
		return nil
	}
	self := process.RunLabel()
	last, err := m.Store.Setting(ctx, runSetting)
	if err != nil {
		return fmt.Errorf("read the store's last run: %w", err)
	}
	if last != "" && last != self && process.JudgeRun(last) == sim.RunAlive {
		return sim.Errorf(sim.EConflict, "store %s was last opened by a normsim that is still running (run %s): this file is a copy of a store in use, whose instances that normsim runs; stop it, or give this one another --db", m.Opts.DB, last)
	}
	return m.Store.SetSetting(ctx, runSetting, self)
}

// sinkPortSetting is where a store keeps its last output sink port.
const sinkPortSetting = "output-port"

// openSink opens the output sink on --output-port, or, when that is 0 and
// the store is a file, on the port the last run on it used: jobs adopted
// from that run (--keep) send their output to the NORMSIM_OUTPUT_ADDR they
// were launched with. When that port is taken the sink takes a free one
// and says whose output cannot arrive.
func (m *Main) openSink(ctx context.Context) error {
	port := m.Opts.OutputPort
	keep := port == 0 && m.Opts.DB != Memory
	if keep {
		last, _ := m.Store.Setting(ctx, sinkPortSetting)
		if p, err := strconv.Atoi(last); err == nil && p > 0 && p <= 65535 {
			err := m.Sink.Open(net.JoinHostPort(m.Opts.SocketHost, last))
			if err == nil {
				return nil
			}
			m.sinkNote = fmt.Sprintf("the last run's output sink port %s is taken (%v): jobs kept from that run (--keep) "+
				"send their output there, so it does not reach this run; pass --output-port %s once it is free", last, err, last)
			m.log.Warn(m.sinkNote)
		}
	}
	addr := net.JoinHostPort(m.Opts.SocketHost, strconv.Itoa(port))
	if err := m.Sink.Open(addr); err != nil {
		return listenErr("output sink", addr, "--output-port", err)
	}
	if keep {
		if err := m.Store.SetSetting(ctx, sinkPortSetting, strconv.Itoa(m.Sink.Port())); err != nil {
			m.log.Warn("could not keep the output sink's port for the next run", "err", err)
		}
	}
	return nil
}
