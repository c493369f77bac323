package manager

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/normsim/normsim/protocol"
	"github.com/normsim/normsim/sim"
)

// Node is a simulated worker node; Socket is nil without a listener.
type Node struct {
	sim.Node
	Socket sim.JobSocket
}

// Config configures a Manager.
type Config struct {
	Nodes   []Node
	Store   sim.Store
	Catalog sim.Catalog
	// Runtimes are the runtimes and the default one (a sim.RuntimeSet, or
	// start-up's registry that knows them later); whatever needs a runtime
	// waits for them. The external runtime is always among them; nil
	// leaves it the only one.
	Runtimes sim.RuntimeRegistry
	Bus      *sim.Bus
	Sink     sim.OutputSink
	// OutputEnv is added to every launch's env for each runtime (the sink's
	// address as a job of that runtime reaches it).
	OutputEnv func(runtime string) map[string]string
	// Media receives each job's media on a port of its own (nil: jobs get
	// no NORMSIM_MEDIA_URL); MediaHost is the host a job of each runtime
	// reaches it at; MediaJudge judges the media seam of a migration, and
	// Captures keeps the stream received around it.
	Media        sim.MediaReceiver
	MediaHost    func(runtime string) string
	MediaJudge   sim.MediaJudge
	Captures     sim.SeamCaptures
	StudioAccess string
	// Timeouts are the run's per-phase timeouts (normsim up --timeouts): a
	// migration request's zero fields take these, and these' zero fields
	// sim.DefaultTimeouts.
	Timeouts sim.Timeouts
	// Owner labels everything launched (sim.LabelOwner), so a restart adopts
	// only what this store's earlier runs started.
	Owner string
	// Run is this process's sim.LabelRun value, set on everything launched.
	Run string
	// StoreKind is sim.StoreMemory or sim.StoreFile, set on everything
	// launched (sim.LabelStore); "" sets nothing.
	StoreKind string
	// Logs keeps what instances print (sim/logcap); nil keeps nothing and
	// Logs answers EUnavailable.
	Logs sim.LogBook
	// FramesLost, when set, is how many of an instance's frame records
	// were lost before the store (it refused them): FrameCounts' Lost.
	FramesLost func(jobID, instance string) int64
	Logger     *slog.Logger
	Now        func() time.Time
}

// Manager is the simulated manager.
type Manager struct {
	cfg   Config
	log   *slog.Logger
	now   func() time.Time
	nodes map[string]*Node
	order []string

	// rts is set once, by rtsOnce; read it through runtimes.
	rts     sim.RuntimeSet
	rtsOnce sync.Once

	journal *journal
	// marks are the store's point-of-no-return marks (nil without them);
	// marksLost counts the marks that could not be written.
	marks     sim.NoReturnMarks
	marksLost atomic.Int64

	mu        sync.Mutex
	instances map[string]*instance
	drawn     map[string]bool // instance IDs drawn by launches not yet added
	// retiring are instances let go whose rows the journal has yet to
	// delete from the store: their names are still taken.
	retiring   map[string]bool
	migrations map[string]*run // running migrations by id
	byJob      map[string]*run // running migration per job
	byInstance map[string]*run // running migration per source/target instance
	// jobs counts the instances held per job.
	jobs map[string]int
	// ended is the migration each instance last took part in, once it has
	// ended: a frame that crossed that end on the wire is recorded on its
	// timeline. An instance's entry goes when it is removed or migrates
	// again.
	ended map[string]*run
	// pipes hold frames a delay-frame fault holds, and what is sent on
	// the same socket after them (pipe.go).
	pipes  pipes
	closed bool
	wg     sync.WaitGroup
	ctx    context.Context
	cancel context.CancelFunc
}

// instance is the manager's live record of an instance.
type instance struct {
	sim.Instance
	spec    *sim.LaunchSpec
	changed chan struct{}   // closed and replaced on every change
	stopped bool            // Stop was called: exits are expected
	healthy map[string]bool // services that reported healthy
	// movedBy is the migration that moved this instance's job elsewhere
	// and left it stopped (its source, once the migration completed).
	movedBy string
	// removing is closed when a removal under way ends (removed, or
	// failed): DELETEs sent at once have one winner, and the others
	// wait for it instead of stopping the instance again.
	removing chan struct{}
}

// New returns a manager; Start reconciles what the store remembers.
func New(cfg Config) *Manager {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Bus == nil {
		cfg.Bus = sim.NewBus()
	}
	ctx, cancel := context.WithCancel(context.Background())
	m := &Manager{cfg: cfg, log: cfg.Logger, now: cfg.Now, nodes: map[string]*Node{},
		instances: map[string]*instance{}, migrations: map[string]*run{}, byJob: map[string]*run{},
		byInstance: map[string]*run{}, ended: map[string]*run{}, jobs: map[string]int{}, drawn: map[string]bool{}, retiring: map[string]bool{}, ctx: ctx, cancel: cancel}
	for i := range cfg.Nodes {
		n := &cfg.Nodes[i]
		m.nodes[n.Name] = n
		m.order = append(m.order, n.Name)
	}
	m.journal = newJournal(cfg.Store, m.log)
	m.marks, _ = cfg.Store.(sim.NoReturnMarks)
	return m
}

// Bus is the live-update bus.
func (m *Manager) Bus() *sim.Bus { return m.cfg.Bus }

// Store is the manager's store.
func (m *Manager) Store() sim.Store { return m.cfg.Store }

// Catalog is the template catalog.
func (m *Manager) Catalog() sim.Catalog { return m.cfg.Catalog }

// runtimes is the manager's runtime set, external always among them,
// waiting until it is known.
func (m *Manager) runtimes() sim.RuntimeSet {
	m.rtsOnce.Do(func() {
		var set sim.RuntimeSet
		if m.cfg.Runtimes != nil {
			set = m.cfg.Runtimes.Wait()
		}
		rts := maps.Clone(set.Runtimes)
		if rts == nil {
			rts = map[string]sim.Runtime{}
		}
		if _, ok := rts[sim.RuntimeExternal]; !ok {
			rts[sim.RuntimeExternal] = External{}
		}
		if set.Default == "" {
			set.Default = sim.RuntimeExternal
		}
		m.rts = sim.RuntimeSet{Runtimes: rts, Default: set.Default}
	})
	return m.rts
}

// DefaultRuntime is the runtime a launch without one uses.
func (m *Manager) DefaultRuntime() string { return m.runtimes().Default }

// Runtimes lists the runtimes available here, sorted.
func (m *Manager) Runtimes() []string {
	return slices.Sorted(maps.Keys(m.runtimes().Runtimes))
}

// Nodes lists the nodes in order.
func (m *Manager) Nodes() []sim.Node {
	var engine *sim.Engine
	if m.cfg.Runtimes != nil {
		engine = m.cfg.Runtimes.Engine()
	}
	out := make([]sim.Node, 0, len(m.order))
	for _, name := range m.order {
		n := m.nodes[name].Node
		n.Engine = engine
		out = append(out, n)
	}
	return out
}

// Node returns a node or ENotFound.
func (m *Manager) Node(name string) (sim.Node, error) {
	n, ok := m.nodes[name]
	if !ok {
		return sim.Node{}, sim.Errorf(sim.ENotFound, "node %q not found; nodes are %s", name, strings.Join(m.order, ", "))
	}
	return n.Node, nil
}

// Close stops every running migration's goroutine and flushes the journal;
// its error is what the store could not keep. Instances keep running: the
// app decides whether runtimes remove them.
func (m *Manager) Close() error {
	m.Interrupt()
	m.wg.Wait()
	return m.journal.Close()
}

// Interrupt ends every running migration now (as interrupted: rolled back
// before the point of no return), discards frames a fault holds, and
// refuses new migrations, without waiting. Reads and stops keep working,
// so a caller that was interrupted (normsim ci on SIGTERM) can still
// remove its instances before it calls Close.
func (m *Manager) Interrupt() {
	m.mu.Lock()
	m.closed = true
	m.mu.Unlock()
	m.cancel()
}

// Flush waits until everything recorded so far is in the store.
func (m *Manager) Flush() { m.journal.Flush() }

// drawInstanceID names a new instance <template>-<6 hex digits>, short
// enough to read and type, drawn again while the name is taken: by an
// instance held here, by a launch in progress, or by one let go whose row
// is not yet deleted from the store. (At 2,000 instances a run, as in
// normsim bench, a plain draw collided about one run in ten, and the
// newer instance replaced the older.) Every instance the store holds is
// one of those: Recover holds what an earlier run left, and an instance
// leaves the store only through the journal. So the store is not read
// here: at 10,000 handovers, 1,600 placements at once waited for its
// connection to look a name up.
//
// On a runtime other normsims see too (sim.IDChecker: a shared Docker
// engine) the name is also drawn again while the runtime has it: IDs are
// drawn by each normsim on its own, and two that drew the same one would
// share a compose project. A runtime that cannot say leaves the launch to
// fail on its own error.
func (m *Manager) drawInstanceID(ctx context.Context, template string, rt sim.Runtime) string {
	checker, _ := rt.(sim.IDChecker)
	for {
		id := template + "-" + randomHex(3)
		m.mu.Lock()
		_, held := m.instances[id]
		taken := held || m.drawn[id] || m.retiring[id]
		if !taken {
			m.drawn[id] = true
		}
		m.mu.Unlock()
		if taken {
			continue
		}
		if checker != nil {
			if elsewhere, err := checker.InstanceIDTaken(ctx, id); err == nil && elsewhere {
				m.log.Info("instance ID in use on the runtime, drawn again", "instance", id, "runtime", rt.Name())
				m.mu.Lock()
				delete(m.drawn, id)
				m.mu.Unlock()
				continue
			}
		}
		return id
	}
}

// randomHex is n random bytes in hex (a variable so a test can make names
// collide).
var randomHex = func(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// newToken returns a 256-bit job-socket token.
func newToken() string {
	b := make([]byte, 32)
	rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// publish records an event in the store (through the journal) and on the
// bus. Callers that hold m.mu publish under it, which keeps events in the
// order of the changes they describe.
func (m *Manager) publish(kind sim.EventKind, instanceID, migrationID string, data any) {
	var raw json.RawMessage
	if data != nil {
		raw, _ = json.Marshal(data)
	}
	ev := sim.Event{At: m.now(), Kind: kind, Instance: instanceID, Migration: migrationID, Data: raw}
	m.journal.event(ev)
	m.cfg.Bus.Publish(ev)
}

// changedLocked saves and announces an instance change. Caller holds m.mu.
func (m *Manager) changedLocked(in *instance) {
	in.UpdatedAt = m.now()
	close(in.changed)
	in.changed = make(chan struct{})
	snap := in.Instance
	m.journal.instance(&snap)
}

// setStateLocked moves an instance to a new state if the table allows it.
func (m *Manager) setStateLocked(in *instance, to sim.InstanceState, errText string) bool {
	if in.State == to || !sim.CanTransition(in.State, to) {
		return false
	}
	from := in.State
	in.State = to
	if to.Terminal() {
		// Healthy speaks for a running instance: one that ended, or that
		// normsim gave up on, is not (Recover says the same).
		in.Healthy = false
	}
	if to == sim.InstanceStopped {
		// Its containers are gone: it holds no host port any more. (A
		// failed instance may still run; it keeps its list.) Nothing
		// starts a stopped instance again, so its launch spec goes too:
		// every handed-over source stays listed, stopped.
		in.Published = nil
		in.spec = nil
	}
	if errText != "" {
		in.Error = errText
	}
	m.changedLocked(in)
	m.publish(sim.EventInstanceState, in.ID, "", map[string]any{"from": from, "to": to, "error": errText, "node": in.Node})
	return true
}

// CountInstances counts the instances under management and those whose
// job is connected, without copying them.
func (m *Manager) CountInstances() (instances, connected int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, in := range m.instances {
		if in.Connected {
			connected++
		}
	}
	return len(m.instances), connected
}

// Instances lists the instances under management (including sources a
// migration stopped), oldest first. Removed instances live on only in the
// store's event history.
func (m *Manager) Instances(ctx context.Context) ([]sim.Instance, error) {
	m.mu.Lock()
	out := make([]sim.Instance, 0, len(m.instances))
	for _, in := range m.instances {
		out = append(out, in.Instance)
	}
	m.mu.Unlock()
	sort.Slice(out, func(i, j int) bool {
		if !out[i].CreatedAt.Equal(out[j].CreatedAt) {
			return out[i].CreatedAt.Before(out[j].CreatedAt)
		}
		return out[i].ID < out[j].ID
	})
	return out, nil
}

// Instance returns one instance or ENotFound.
func (m *Manager) Instance(ctx context.Context, id string) (sim.Instance, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	in, ok := m.instances[id]
	if !ok {
		return sim.Instance{}, sim.Errorf(sim.ENotFound, "instance %q not found", id)
	}
	return in.Instance, nil
}

// LaunchRequest is sim.LaunchRequest.
type LaunchRequest = sim.LaunchRequest

// launchOpts are the extras a migration target gets.
type launchOpts struct {
	jobID        string
	migrationID  string
	initialState json.RawMessage
	hasInitial   bool
	prepareOnly  bool
	ports        map[string]int
	// handoverTarget: the job is told in its hello-ack that it is a
	// migration target. Overlap and stopThenStart targets are fresh starts.
	handoverTarget bool
}

// Launch places a template on a node and starts it. It returns once the
// runtime has prepared the instance (a missing image is an error here); the
// instance then goes starting → running in the background.
func (m *Manager) Launch(ctx context.Context, req LaunchRequest) (sim.Instance, error) {
	if err := m.refuseWhileStoreFails("launch"); err != nil {
		return sim.Instance{}, err
	}
	in, err := m.launch(ctx, req, launchOpts{})
	if err != nil {
		return sim.Instance{}, err
	}
	return in, nil
}

// StoreError is why the store cannot write right now, or nil: the records
// made meanwhile are held and written once it can (StoreHeld).
func (m *Manager) StoreError() error {
	if err := m.journal.Failing(); err != nil {
		return err
	}
	// A store file found damaged at open is treated as one that cannot
	// write: what would be written to it may be lost.
	if d, ok := m.cfg.Store.(interface{ Damaged() error }); ok {
		if err := d.Damaged(); err != nil {
			return err
		}
	}
	// So is one that refuses the instances' output: the journal may not
	// have written since its disk filled.
	if l, ok := m.cfg.Logs.(interface {
		Failing(context.Context) error
	}); ok {
		ctx, cancel := context.WithTimeout(m.ctx, 2*time.Second)
		defer cancel()
		if err := l.Failing(ctx); err != nil {
			return fmt.Errorf("writing instances' output: %w", err)
		}
	}
	return nil
}

// StorePending counts the writes not yet in the store: how far it is
// behind the sim (a migration's document and its new events are one).
func (m *Manager) StorePending() int { return m.journal.Pending() }

// StoreHeld counts the records waiting for the store to write again, and
// those given up while it could not.
func (m *Manager) StoreHeld() (held int, lost int64) { return m.journal.Held() }

// refuseWhileStoreFails turns new work away while the store cannot write:
// what it would record could not be kept.
func (m *Manager) refuseWhileStoreFails(what string) error {
	err := m.StoreError()
	if err == nil {
		return nil
	}
	held, lost := m.StoreHeld()
	return sim.Errorf(sim.EUnavailable, "the store cannot write (%v); normsim takes no %s until it can: %d records are held to be written then, %d given up",
		err, what, held, lost)
}

func (m *Manager) runtime(name string) (sim.Runtime, error) {
	rt, ok := m.runtimes().Runtimes[name]
	if !ok {
		return nil, sim.Errorf(sim.EUnprocessable, "runtime %q is not available; available: %s", name, strings.Join(m.Runtimes(), ", "))
	}
	return rt, nil
}

func (m *Manager) launch(ctx context.Context, req LaunchRequest, o launchOpts) (sim.Instance, error) {
	if req.Template == "" {
		return sim.Instance{}, sim.Errorf(sim.EInvalid, "template: required")
	}
	if req.Node == "" {
		return sim.Instance{}, sim.Errorf(sim.EInvalid, "node: required")
	}
	node, ok := m.nodes[req.Node]
	if !ok {
		return sim.Instance{}, sim.Errorf(sim.ENotFound, "node %q not found; nodes are %s", req.Node, strings.Join(m.order, ", "))
	}
	tmpl, err := m.cfg.Catalog.Get(req.Template)
	if err != nil {
		return sim.Instance{}, err
	}
	if !tmpl.Valid {
		return sim.Instance{}, sim.Errorf(sim.ETemplateInvalid, "template %q is invalid: %s", tmpl.Name, tmpl.Error.Message)
	}
	if req.Runtime == "" {
		req.Runtime = m.DefaultRuntime()
	}
	rt, err := m.runtime(req.Runtime)
	if err != nil {
		return sim.Instance{}, err
	}
	now := m.now()
	id := m.drawInstanceID(ctx, tmpl.Name, rt)
	defer func() {
		m.mu.Lock()
		delete(m.drawn, id)
		m.mu.Unlock()
	}()
	jobID := o.jobID
	if jobID == "" {
		// 48 bits: two jobs sharing an ID would share their migrations
		// (byJob); unlike instances, a job ID is not drawn again.
		jobID = "job-" + randomHex(6)
	}
	inst := sim.Instance{ID: id, JobID: jobID, Role: id, Node: node.Name, Template: tmpl.Name, Runtime: rt.Name(),
		Params: req.Params, Token: newToken(), MigrationID: o.migrationID, Ports: o.ports, CreatedAt: now, UpdatedAt: now}
	var env map[string]string
	if m.cfg.OutputEnv != nil {
		env = m.cfg.OutputEnv(rt.Name())
	}
	env = mergeEnv(env, map[string]string{sim.EnvInstance: id, sim.EnvJob: jobID})
	if m.cfg.Owner != "" {
		env[sim.EnvOwner] = m.cfg.Owner
	}
	if node.Address != "" {
		env[sim.EnvNodeAddr] = node.Address
	}
	mediaURL, err := m.openMedia(jobID, rt.Name(), 0)
	if err != nil {
		return sim.Instance{}, err
	}
	if mediaURL != "" {
		env[sim.EnvMediaURL] = mediaURL
	}
	spec, err := m.cfg.Catalog.Launch(tmpl.Name, sim.LaunchInput{Instance: &inst, Node: node.Node, Runtime: rt.Name(),
		StudioAccess: m.cfg.StudioAccess, Env: env})
	if err != nil {
		m.closeMediaIfUnused(jobID)
		return sim.Instance{}, err
	}
	for i := range spec.Services {
		if spec.Services[i].Labels == nil {
			spec.Services[i].Labels = map[string]string{}
		}
		if m.cfg.Owner != "" {
			spec.Services[i].Labels[sim.LabelOwner] = m.cfg.Owner
		}
		if m.cfg.Run != "" {
			spec.Services[i].Labels[sim.LabelRun] = m.cfg.Run
		}
		if m.cfg.StoreKind != "" {
			spec.Services[i].Labels[sim.LabelStore] = m.cfg.StoreKind
		}
	}
	inst.Adjustments = spec.Adjustments
	inst.Env = map[string]map[string]string{}
	for _, s := range spec.Services {
		inst.Env[s.Name] = s.Env
	}
	inst.Published = publishedBy(rt.Name(), spec)
	if len(spec.AllocatedPorts) > 0 {
		inst.Ports = map[string]int{}
		for p, ap := range spec.AllocatedPorts {
			inst.Ports[p] = ap.Port
		}
	}
	if o.prepareOnly {
		inst.State = sim.InstanceCreated
	} else {
		inst.State = sim.InstanceStarting
	}
	in := &instance{Instance: inst, spec: spec, changed: make(chan struct{}), healthy: map[string]bool{}}
	m.registerLogs(inst)

	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return sim.Instance{}, sim.Errorf(sim.EUnavailable, "normsim is shutting down")
	}
	m.addLocked(in)
	m.changedLocked(in)
	m.publish(sim.EventInstanceState, id, o.migrationID, map[string]any{"from": "", "to": inst.State, "node": inst.Node})
	m.mu.Unlock()

	if node.Socket != nil {
		reg := sim.SocketRegistration{JobID: jobID, Role: id, Token: inst.Token}
		if o.handoverTarget {
			reg.Migration = &protocol.MigrationRef{ID: o.migrationID, Side: "target"}
		}
		if o.hasInitial {
			reg.InitialState = &protocol.WorkerFrame{Type: protocol.TypeInitialState, MigrationID: o.migrationID, Payload: o.initialState}
		}
		node.Socket.Register(reg)
	}

	if err := rt.Prepare(ctx, spec); err != nil {
		m.forget(in)
		return sim.Instance{}, err
	}
	if o.prepareOnly {
		return m.snapshot(id), nil
	}
	m.startAsync(in, rt)
	return m.snapshot(id), nil
}

// publishedBy is what an instance of the runtime publishes on the host:
// only containers publish ports; a host process binds what it binds itself.
func publishedBy(runtime string, spec *sim.LaunchSpec) []sim.PublishedPort {
	if runtime != sim.RuntimeDocker || spec == nil {
		return nil
	}
	return spec.PublishedPorts()
}

// boundPorts asks a runtime that can tell which host ports a started
// instance really bound, when the launch left some to the engine (host
// port 0); nil keeps what the launch spec says.
func boundPorts(ctx context.Context, rt sim.Runtime, id string, published []sim.PublishedPort) []sim.PublishedPort {
	pr, ok := rt.(sim.PortReporter)
	if !ok || !slices.ContainsFunc(published, func(p sim.PublishedPort) bool { return p.HostPort == 0 }) {
		return nil
	}
	bound, err := pr.PublishedPorts(ctx, id)
	if err != nil || len(bound) == 0 {
		return nil
	}
	return bound
}

// explainPortInUse adds to an engine's bare "port is already allocated" (or
// a bind's "address already in use") why and what to do: migrations whose
// source holds the port are refused before they start, so what holds it is
// something else on this host.
func explainPortInUse(err error, published []sim.PublishedPort) error {
	if err == nil || len(published) == 0 {
		return err
	}
	msg := err.Error()
	if !strings.Contains(msg, "port is already allocated") && !strings.Contains(msg, "address already in use") {
		return err
	}
	var ports []string
	for _, p := range published {
		if p.HostPort != 0 {
			ports = append(ports, p.String())
		}
	}
	// The message keeps the runtime's code; a bare engine error has none.
	code := sim.ErrorCode(err)
	if code == sim.EInternal {
		code = sim.EConflict
	}
	return sim.Errorf(code, "%s: one of the host ports it publishes (%s) is held by something else on this host "+
		"(another instance: normsim ps lists what each publishes; or a program outside normsim: ss -ltnup or lsof -i shows it); "+
		"free it, or change the port in the template", describe(err), strings.Join(ports, ", "))
}

// forget drops an instance that never got going.
func (m *Manager) forget(in *instance) {
	if n := m.nodes[in.Node]; n != nil && n.Socket != nil {
		n.Socket.Unregister(in.JobID, in.ID)
	}
	m.mu.Lock()
	m.removeLocked(in.ID)
	m.mu.Unlock()
	m.deleteStored(in.ID)
	m.publish(sim.EventInstanceRemoved, in.ID, "", nil)
}

// addLocked holds an instance, and counts it for its job (KnowsJob).
func (m *Manager) addLocked(in *instance) {
	if old, ok := m.instances[in.ID]; ok {
		m.jobs[old.JobID]--
	}
	m.instances[in.ID] = in
	m.jobs[in.JobID]++
}

// deleteStored deletes a removed instance from the store; its name is
// free again once the delete is written.
func (m *Manager) deleteStored(id string) {
	m.journal.deleteInstanceThen(id, func() {
		m.mu.Lock()
		delete(m.retiring, id)
		m.mu.Unlock()
	})
}

// removeLocked lets an instance go (deleteStored deletes it from the
// store). When it was its job's last, the job's output is forgotten:
// nothing will judge it any more.
func (m *Manager) removeLocked(id string) {
	in, ok := m.instances[id]
	if !ok {
		return
	}
	delete(m.instances, id)
	delete(m.ended, id)
	close(in.changed) // whoever waits on it learns it is gone
	in.changed = make(chan struct{})
	if m.cfg.Store != nil {
		m.retiring[id] = true // until deleteStored's delete is written
	}
	if m.jobs[in.JobID]--; m.jobs[in.JobID] <= 0 {
		delete(m.jobs, in.JobID)
		if m.cfg.Sink != nil {
			m.cfg.Sink.Forget(in.JobID)
		}
		if m.cfg.Media != nil {
			// Closing waits for the port's reader, which never takes m.mu.
			m.cfg.Media.Close(in.JobID)
		}
	}
}

// KnowsJob reports whether an instance of the job is held: the output
// sink keeps packets of such jobs only.
func (m *Manager) KnowsJob(jobID string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.jobs[jobID] > 0
}

func (m *Manager) snapshot(id string) sim.Instance {
	m.mu.Lock()
	defer m.mu.Unlock()
	if in, ok := m.instances[id]; ok {
		return in.Instance
	}
	return sim.Instance{ID: id}
}

// startAsync starts a prepared instance in the background.
func (m *Manager) startAsync(in *instance, rt sim.Runtime) {
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		m.start(m.ctx, in, rt)
	}()
}

// start starts a prepared instance and waits for the runtime to say so.
func (m *Manager) start(ctx context.Context, in *instance, rt sim.Runtime) error {
	m.mu.Lock()
	m.setStateLocked(in, sim.InstanceStarting, "")
	// What it was placed to publish, read under the lock: a Stop while it
	// starts clears in.Published.
	published := in.Published
	m.mu.Unlock()
	if _, ok := rt.(sim.RefRecorder); ok {
		// Its services outlive a killed normsim (host processes): the
		// instance is in the store before they exist, so a restart can
		// find them by its ID.
		m.journal.Flush()
	}
	err := rt.Start(ctx, in.ID)
	var bound []sim.PublishedPort
	if err == nil {
		bound = boundPorts(ctx, rt, in.ID, published)
	}
	err = explainPortInUse(err, published)
	refs := false
	defer func() {
		// What the runtime recorded (host processes' pids) is in the
		// store before Start returns, so a restart can stop them.
		if refs {
			m.journal.Flush()
		}
	}()
	m.mu.Lock()
	defer m.mu.Unlock()
	if err != nil {
		m.setStateLocked(in, sim.InstanceFailed, "start: "+describe(err))
		return err
	}
	if bound != nil {
		in.Published = bound
	}
	if rr, ok := rt.(sim.RefRecorder); ok {
		if ref := rr.RuntimeRef(in.ID); len(ref) > 0 {
			if in.RuntimeRef == nil {
				in.RuntimeRef = map[string]string{}
			}
			maps.Copy(in.RuntimeRef, ref)
			refs = true
		}
	}
	journaled := false
	if in.State == sim.InstanceStarting {
		journaled = m.setStateLocked(in, sim.InstanceRunning, "")
		if !hasHealthcheck(in.spec) && !in.Healthy {
			in.Healthy = true
			m.changedLocked(in)
		}
	}
	if refs && !journaled {
		m.changedLocked(in) // the RuntimeRef, whatever the state
	}
	if in.State != sim.InstanceRunning {
		return fmt.Errorf("instance %s is %s: %s", in.ID, in.State, in.Error)
	}
	return nil
}

// describe is an error's text for a person: a coded error's message, or
// the whole chain of anything else (a runtime's engine error).
func describe(err error) string {
	if sim.ErrorCode(err) != sim.EInternal {
		return sim.ErrorMessage(err)
	}
	return err.Error()
}

func hasHealthcheck(spec *sim.LaunchSpec) bool {
	if spec == nil {
		return false
	}
	for _, s := range spec.Services {
		if s.Healthcheck != nil {
			return true
		}
	}
	return false
}

func mergeEnv(a, b map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		out[k] = v
	}
	return out
}

// Stop stops an instance and removes it (DELETE /instances/{id}).
func (m *Manager) Stop(ctx context.Context, id string) error { return m.remove(ctx, id, false) }

// RemoveStopped removes an instance that is not running, as the stopped
// record it is (DELETE /instances/{id}?stopped=true): a migration's
// stopped source among them, while its job runs on elsewhere.
func (m *Manager) RemoveStopped(ctx context.Context, id string) error { return m.remove(ctx, id, true) }

func (m *Manager) remove(ctx context.Context, id string, onlyStopped bool) error {
	m.mu.Lock()
	in, ok := m.instances[id]
	for ok && in.removing != nil {
		done := in.removing
		m.mu.Unlock()
		select {
		case <-done:
		case <-ctx.Done():
			return ctx.Err()
		}
		// Gone now (404), or still here if that removal failed.
		m.mu.Lock()
		in, ok = m.instances[id]
	}
	if ok {
		if r := m.byInstance[id]; r != nil {
			m.mu.Unlock()
			return sim.Errorf(sim.EConflict, "instance %q is part of running migration %s; wait for it to end", id, r.id)
		}
		if onlyStopped && !in.State.Terminal() {
			m.mu.Unlock()
			return sim.Errorf(sim.EConflict, "instance %s is %s, not stopped; delete it without stopped=true to stop it", id, in.State)
		}
		// A plain DELETE that comes after the migration it raced moved the
		// job must not answer "removed" while the job runs on: one of the
		// two wins, and here the migration did. Removing the stopped
		// record is asked for as such (stopped=true).
		if in.movedBy != "" && !onlyStopped {
			if next := m.runningInstanceOfLocked(in.JobID); next != "" {
				m.mu.Unlock()
				return sim.Errorf(sim.EConflict, "instance %s is stopped: migration %s moved its job, which now runs as %s; stop %s to stop the job (normsim stop %s), or remove %s's stopped record (normsim stop --stopped %s; DELETE with ?stopped=true)", id, in.movedBy, next, next, next, id, id)
			}
		}
		// Marked in the same critical section as the check above, so a
		// migrate racing this stop is refused rather than run on an
		// instance the user removed.
		in.stopped = true
		in.removing = make(chan struct{})
	}
	m.mu.Unlock()
	if !ok {
		return sim.Errorf(sim.ENotFound, "instance %q not found", id)
	}
	_, err := m.stopInstance(ctx, in, m.Timeouts().StopGrace.D())
	m.mu.Lock()
	if err == nil {
		m.removeLocked(id)
	}
	close(in.removing)
	in.removing = nil
	m.mu.Unlock()
	if err != nil {
		return err
	}
	m.deleteStored(id)
	m.publish(sim.EventInstanceRemoved, id, "", nil)
	return nil
}

// stopInstance stops an instance's services and its socket; the instance
// stays in the manager as stopped.
func (m *Manager) stopInstance(ctx context.Context, in *instance, grace time.Duration) (sim.StopReport, error) {
	m.mu.Lock()
	in.stopped = true
	m.setStateLocked(in, sim.InstanceStopping, "")
	m.mu.Unlock()
	rt, err := m.runtime(in.Runtime)
	if err != nil {
		return sim.StopReport{}, err
	}
	// A normal close first, so an external job sees a clean end.
	if n := m.nodes[in.Node]; n != nil && n.Socket != nil {
		n.Socket.Unregister(in.JobID, in.ID)
	}
	rep, stopErr := rt.Stop(ctx, in.ID, grace)
	m.mu.Lock()
	defer m.mu.Unlock()
	// A job that does not end on SIGTERM broke its duty to stop when
	// told; its instance's events say so, as a migration's timeline does.
	for _, svc := range rep.Killed {
		m.publish(sim.EventInstanceRuntime, in.ID, "", map[string]any{"service": svc, "kind": sim.ServiceKilled,
			"detail": fmt.Sprintf("did not exit within %s after its stop signal (SIGTERM, or the service's stop_signal); killed (SIGKILL)", rep.GraceOf(svc, grace))})
	}
	if in.Connected {
		// Unregister closed it (the listener's own news of that close
		// finds the instance already disconnected, and is not published
		// twice): the event says so, as every closing one does.
		in.Connected = false
		m.changedLocked(in)
		m.publish(sim.EventInstanceConnected, in.ID, "", map[string]any{"connected": false,
			"code": protocol.CloseStopped, "reason": protocol.ReasonStopped, "closedBy": sim.ClosedByWorker.String()})
	}
	if stopErr != nil {
		m.setStateLocked(in, sim.InstanceFailed, "stop: "+stopErr.Error())
		return rep, fmt.Errorf("stop instance %s: %w", in.ID, stopErr)
	}
	m.setStateLocked(in, sim.InstanceStopped, "")
	return rep, nil
}

// Timeouts are the run's per-phase timeouts with every field set: what a
// migration request that sets none gets.
func (m *Manager) Timeouts() sim.Timeouts { return m.cfg.Timeouts.WithDefaults() }

// OnRuntimeEvent is the runtimes' observer.
func (m *Manager) OnRuntimeEvent(ev sim.RuntimeEvent) {
	m.mu.Lock()
	in, ok := m.instances[ev.Instance]
	if !ok {
		m.mu.Unlock()
		return
	}
	completed := in.oneShotCompleted(ev)
	runsOn := false
	switch ev.Kind {
	case sim.ServiceExited:
		if ev.Restarting {
			break
		}
		runsOn = othersRunOn(ev)
		if !in.stopped && !completed && !runsOn {
			detail := ev.Detail
			if detail == "" {
				detail = fmt.Sprintf("exited with code %d", ev.ExitCode)
			}
			m.setStateLocked(in, sim.InstanceFailed, fmt.Sprintf("service %s %s", ev.Service, detail))
		}
		if runsOn && !completed {
			ev.Detail += "; the instance's other services run on, as under docker compose up"
		}
	case sim.ServiceHealthy:
		in.healthy[ev.Service] = true
		if !in.Healthy && in.allHealthy() {
			in.Healthy = true
			m.changedLocked(in)
		}
	case sim.ServiceUnhealthy:
		delete(in.healthy, ev.Service)
		if in.Healthy {
			in.Healthy = false
			m.changedLocked(in)
		}
	}
	r := m.byInstance[ev.Instance]
	m.mu.Unlock()
	m.publish(sim.EventInstanceRuntime, ev.Instance, "", map[string]any{"service": ev.Service, "kind": ev.Kind, "exitCode": ev.ExitCode, "detail": ev.Detail})
	if r != nil && !completed && !runsOn {
		// A service whose work is done ends nothing, in a migration too:
		// a job that exits while a sidecar runs drops its socket, which
		// the migration hears.
		r.onRuntime(ev)
	}
}

// oneShotCompleted says whether ev is a one-shot service's exit with code
// 0, one another service waits for (depends_on with
// service_completed_successfully): what `docker compose up` runs on
// after, not the job failing.
func (in *instance) oneShotCompleted(ev sim.RuntimeEvent) bool {
	if ev.Kind != sim.ServiceExited || ev.ExitCode != 0 || ev.Signal != 0 || in.spec == nil {
		return false
	}
	for _, s := range in.spec.Services {
		for _, d := range s.DependsOn {
			if d.Service == ev.Service && d.Condition == sim.ConditionCompleted {
				return true
			}
		}
	}
	return false
}

// othersRunOn says whether ev is a service's exit with code 0 while
// another service of the instance (or a replica) still runs: under
// `docker compose up` one service ending, its work done, ends nothing
// else, in a migration neither.
func othersRunOn(ev sim.RuntimeEvent) bool {
	return ev.Kind == sim.ServiceExited && ev.ExitCode == 0 && ev.Signal == 0 && ev.OthersRun
}

// allHealthy reports whether every service with a healthcheck has said
// it is healthy.
func (in *instance) allHealthy() bool {
	if in.spec == nil {
		return false
	}
	for _, s := range in.spec.Services {
		if s.Healthcheck != nil && !in.healthy[s.Name] {
			return false
		}
	}
	return true
}

// OnSocketEvent is every listener's event callback. It runs on the
// connection's goroutine: the instance's record is kept here, and the
// event is handed to the migration it belongs to, whose owner relays and
// decides (routeSocket).
func (m *Manager) OnSocketEvent(ev sim.SocketEvent) {
	if ev.Kind == sim.SocketHello || ev.Kind == sim.SocketConnected {
		// The migration hears of the connection (and fires the faults
		// armed on its hello) before the instance shows connected: a move
		// that waits for it to be connected must not go on, or end,
		// without it.
		m.mu.Lock()
		in, ok := m.instances[ev.Role]
		m.mu.Unlock()
		if !ok || in.JobID != ev.JobID {
			return
		}
		m.routeSocket(ev, false)
		if ev.Kind == sim.SocketHello {
			return // the instance counts as connected from SocketConnected
		}
	}
	m.mu.Lock()
	in, ok := m.instances[ev.Role]
	if !ok || in.JobID != ev.JobID {
		m.mu.Unlock()
		return
	}
	switch ev.Kind {
	case sim.SocketConnected, sim.SocketDisconnected:
		c := ev.Kind == sim.SocketConnected
		if c && dialsElsewhere(in.Error) {
			// Its job reached this run's socket after all (Manager.unreachable).
			in.Error = ""
		}
		if in.Connected != c {
			in.Connected = c
			m.changedLocked(in)
			data := map[string]any{"connected": c, "code": ev.Code, "reason": ev.Reason}
			if !c && ev.ClosedBy != 0 {
				data["closedBy"] = ev.ClosedBy.String()
			}
			m.publish(sim.EventInstanceConnected, in.ID, "", data)
		}
	case sim.SocketReplaced:
		m.publish(sim.EventInstanceConnected, in.ID, "", map[string]any{"connected": true, "replaced": true, "code": ev.Code, "reason": ev.Reason})
	}
	m.mu.Unlock()
	// What a fault holds on its way to the job was written to a
	// connection that is gone: lost, and recorded after the news of it.
	// (Not on a connection's hello: the manager may hear of it after a
	// migration held a frame on its way to that very connection.)
	cut := func() { m.cut(pipeKey{ev.Role, dirOut}, lostWith(ev)) }
	switch ev.Kind {
	case sim.SocketConnected:
		return // routed above
	case sim.SocketReplaced:
		m.routeSocket(ev, false)
		cut()
		return
	case sim.SocketDisconnected:
		defer cut()
	}
	// What the job sent after a frame a fault holds waits behind it, as
	// on one TCP connection, and so does the news of its close.
	if !m.behindHeldIn(ev, func() { m.routeSocket(ev, true) }) {
		m.routeSocket(ev, false)
	}
}

// behindHeldIn puts a job's socket event behind a frame of the same socket
// that a fault holds on its way in, if one does, to go on with deliver
// after it; false when nothing is held there and the caller goes on.
func (m *Manager) behindHeldIn(ev sim.SocketEvent, deliver func()) bool {
	return m.behind(pipeKey{ev.Role, dirIn}, pipeItem{deliver: deliver, lost: func(why string) {
		m.log.Warn("a job's frame waiting behind a held one was lost", "instance", ev.Role, "kind", ev.Kind, "type", ev.Frame.Type, "why", why)
	}})
}

// lostWith says why frames held on their way to a job are lost on ev.
func lostWith(ev sim.SocketEvent) string {
	if ev.Kind == sim.SocketReplaced {
		return "a newer connection replaced the one it was written to (4409)"
	}
	return "the connection it was written to closed"
}

// routeSocket hands a socket event to the migration its instance is part
// of, or to the one it last took part in. piped says it waited behind a
// frame a fault held.
func (m *Manager) routeSocket(ev sim.SocketEvent, piped bool) {
	m.mu.Lock()
	r := m.byInstance[ev.Role]
	ended := m.ended[ev.Role]
	if ended != nil && ev.Kind == sim.SocketDisconnected {
		// No frame can cross the end on a socket that is gone: let the
		// ended run go, or every source a migration stopped (they stay
		// listed) would hold its whole timeline for the life of the sim.
		delete(m.ended, ev.Role)
	}
	m.mu.Unlock()
	switch {
	case r != nil:
		r.onSocket(ev, piped)
	case ended != nil && ev.Kind == sim.SocketFrame:
		ended.post(runEvent{kind: evCall, call: func() { ended.late(ev) }})
	case ended != nil && ev.Kind == sim.SocketDiscarded:
		ended.post(runEvent{kind: evCall, call: func() { ended.socketNote(ev) }})
	}
}

// waitInstance waits until cond holds for the instance, the instance fails,
// or the timeout passes.
func (m *Manager) waitInstance(ctx context.Context, id string, timeout time.Duration, cond func(sim.Instance) bool) (sim.Instance, error) {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		m.mu.Lock()
		in, ok := m.instances[id]
		if !ok {
			m.mu.Unlock()
			return sim.Instance{}, fmt.Errorf("instance %s is gone", id)
		}
		snap, ch := in.Instance, in.changed
		m.mu.Unlock()
		if cond(snap) {
			return snap, nil
		}
		if snap.State == sim.InstanceFailed || snap.State == sim.InstanceStopped {
			return snap, fmt.Errorf("instance %s is %s: %s", id, snap.State, snap.Error)
		}
		select {
		case <-ch:
		case <-deadline.C:
			return snap, errTimeout
		case <-ctx.Done():
			return snap, ctx.Err()
		}
	}
}

var errTimeout = errors.New("timed out")

// AwaitInstance waits until until holds for the instance, or it has ended
// (stopped or failed: it will not hold any more), and returns it; when ctx
// ends first it returns the instance as it is with ctx's error. An
// instance removed meanwhile is ENotFound.
func (m *Manager) AwaitInstance(ctx context.Context, id string, until sim.Until) (sim.Instance, error) {
	for {
		m.mu.Lock()
		in, ok := m.instances[id]
		if !ok {
			m.mu.Unlock()
			return sim.Instance{}, sim.Errorf(sim.ENotFound, "instance %q not found (removed while it was waited on, or never there)", id)
		}
		snap, ch := in.Instance, in.changed
		m.mu.Unlock()
		if until.Holds(snap) || snap.State.Terminal() {
			return snap, nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return snap, ctx.Err()
		}
	}
}

// InstanceEvents are the last tail changes of an instance (its states,
// its job's connections, what its runtime noticed), oldest first, as
// stored; an event reaches the store a moment after it happened (Flush
// waits for it). An instance removed since keeps them until its records
// are pruned; one the manager never knew, with none, is ENotFound.
func (m *Manager) InstanceEvents(ctx context.Context, id string, tail int) ([]sim.Event, error) {
	return instanceRecords(ctx, m, id, "events", func(st sim.Store) ([]sim.Event, error) {
		return st.ListEvents(ctx, sim.EventFilter{Instance: id, Limit: tail, Tail: true})
	})
}

// RunningInstanceOf is the ID of the job's running instance, "" when it
// has none: where a job went after a migration stopped the instance a
// user still names.
func (m *Manager) RunningInstanceOf(jobID string) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.runningInstanceOfLocked(jobID)
}

func (m *Manager) runningInstanceOfLocked(jobID string) string {
	for id, in := range m.instances {
		if in.JobID == jobID && in.State == sim.InstanceRunning {
			return id
		}
	}
	return ""
}

// Frames are the last tail frames between an instance's job and its node
// (both directions, oldest first), as recorded; a frame reaches the store
// a few milliseconds after it crossed the socket. Removed and unknown
// instances are as for InstanceEvents.
func (m *Manager) Frames(ctx context.Context, id string, tail int) ([]sim.FrameRecord, error) {
	f := sim.FrameFilter{Role: id, Limit: tail, Tail: true}
	if in, err := m.Instance(ctx, id); err == nil {
		// The frames are indexed by job and instance: a known instance's
		// are found without reading the others' (an instance page asks on
		// every refresh); only a removed one's take a scan.
		f.JobID = in.JobID
	}
	return instanceRecords(ctx, m, id, "frames", func(st sim.Store) ([]sim.FrameRecord, error) {
		return st.ListFrames(ctx, f)
	})
}

// FrameCounts says how many of an instance's frame records the store
// keeps and how many it let go of to stay within its bounds; a store that
// does not count them reports none.
func (m *Manager) FrameCounts(ctx context.Context, id string) (sim.FrameCounts, error) {
	in, err := m.Instance(ctx, id)
	if err != nil {
		// A removed instance keeps its frames, and so its counts: its
		// job is named by its records (a rolled-back target's are read
		// after the fact, and would otherwise lose what was dropped).
		if sim.ErrorCode(err) != sim.ENotFound || m.cfg.Store == nil {
			return sim.FrameCounts{}, err
		}
		last, lerr := m.cfg.Store.ListFrames(ctx, sim.FrameFilter{Role: id, Limit: 1, Tail: true})
		if lerr != nil || len(last) == 0 {
			return sim.FrameCounts{}, err
		}
		in.JobID = last[0].JobID
	}
	var c sim.FrameCounts
	if fc, ok := m.cfg.Store.(interface {
		FrameCounts(ctx context.Context, jobID, role string) (sim.FrameCounts, error)
	}); ok {
		if c, err = fc.FrameCounts(ctx, in.JobID, id); err != nil {
			return c, err
		}
	}
	if m.cfg.FramesLost != nil {
		c.Lost = m.cfg.FramesLost(in.JobID, id)
	}
	return c, nil
}

// instanceRecords reads an instance's stored records of one kind: none is
// an empty list for an instance the manager knows, ENotFound for one it
// never knew.
func instanceRecords[T any](ctx context.Context, m *Manager, id, what string, list func(sim.Store) ([]T, error)) ([]T, error) {
	if m.cfg.Store == nil {
		return nil, sim.Errorf(sim.EUnavailable, "this normsim keeps no %s (no store configured)", what)
	}
	recs, err := list(m.cfg.Store)
	unreadable, partial := errors.AsType[*sim.UnreadableRecords](err)
	if err != nil && !partial {
		return nil, err
	}
	if partial {
		// Damaged records cost themselves: the rest are served, with the
		// error that counts what was left out.
		m.log.Warn(what+" records the store could not read were left out of a list", "instance", id, "count", unreadable.Count, "first", unreadable.First)
	}
	if len(recs) == 0 && !partial {
		if _, err := m.Instance(ctx, id); err != nil {
			return nil, err
		}
	}
	if recs == nil {
		recs = []T{}
	}
	return recs, unreadable.Err()
}

// Output is what an instance sent to the output sink since a moment; an
// instance the manager does not know is ENotFound, and a run without a
// sink reports no packets.
func (m *Manager) Output(ctx context.Context, id string, since time.Time) (sim.OutputSummary, error) {
	in, err := m.Instance(ctx, id)
	if err != nil {
		return sim.OutputSummary{}, err
	}
	sum := sim.OutputSummary{Instance: id, Since: since}
	if m.cfg.Sink != nil {
		sum = sim.SummarizeOutput(id, since, m.cfg.Sink.Packets(in.JobID, since))
	}
	if m.cfg.Media != nil {
		sum.JobMediaDatagrams = len(m.cfg.Media.Media(in.JobID, since).Datagrams)
	}
	return sum, nil
}

// Census is what the runtimes have running now, as the host sees it, each
// unit marked with whether the manager knows its instance as not ended.
// Runtimes that cannot tell are named in unsupported.
func (m *Manager) Census(ctx context.Context) (units []sim.RunningUnit, unsupported []string, err error) {
	set := m.runtimes()
	names := make([]string, 0, len(set.Runtimes))
	for name := range set.Runtimes {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		c, ok := set.Runtimes[name].(sim.Census)
		if !ok {
			unsupported = append(unsupported, name)
			continue
		}
		got, err := c.Running(ctx, m.cfg.Owner)
		if err != nil {
			return nil, nil, fmt.Errorf("%s runtime: %w", name, err)
		}
		units = append(units, got...)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for i := range units {
		if in, ok := m.instances[units[i].Instance]; ok {
			units[i].State = in.State
			units[i].Known = !in.State.Terminal()
		}
	}
	return units, unsupported, nil
}
