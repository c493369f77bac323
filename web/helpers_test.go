package web_test

import (
	"context"
	"encoding/json"
	"errors"
	"html"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/normsim/normsim/normsimtest"
	"github.com/normsim/normsim/normsimtest/normsimdocker"
	"github.com/normsim/normsim/sim"
	"github.com/normsim/normsim/web"
)

var templatesDir = filepath.Join("..", "templates")

// startSim runs a whole simulator with the repository's templates.
func startSim(t testing.TB, o normsimtest.Options) *normsimtest.Sim {
	t.Helper()
	if o.Templates == nil {
		o.Templates = []string{templatesDir}
	}
	if o.Runtime == sim.RuntimeDocker {
		return normsimdocker.Start(t, o)
	}
	return normsimtest.Start(t, o)
}

// host is the Host every request of the tests names unless a test says
// otherwise: the address a server made by newServer is bound to.
const host = "127.0.0.1:7788"

// newServer builds the handler over svc, bound (as far as the Host check
// knows) to host.
func newServer(t *testing.T, svc web.Service, logger *slog.Logger) *web.Server {
	t.Helper()
	return web.New(web.Config{Service: svc, Addr: host, Logger: logger, Version: "test"})
}

// response is a recorded answer.
type response struct {
	Status int
	Header http.Header
	Body   string
}

// do serves one request in memory.
func do(t *testing.T, h http.Handler, req *http.Request) response {
	t.Helper()
	if req.Host == "" || req.Host == "example.com" {
		req.Host = host
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return response{Status: rec.Code, Header: rec.Header(), Body: rec.Body.String()}
}

func get(t *testing.T, h http.Handler, path string) response {
	t.Helper()
	return do(t, h, httptest.NewRequest(http.MethodGet, path, nil))
}

// post sends a form the way a browser on the dashboard does: same-origin
// Origin, form encoding.
func post(t *testing.T, h http.Handler, path string, form url.Values) response {
	t.Helper()
	req := httptest.NewRequest(http.MethodPost, path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", "http://"+host)
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	return do(t, h, req)
}

var csrfRE = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// csrfToken fetches a page and returns the token of its forms.
func csrfToken(t *testing.T, h http.Handler, path string) string {
	t.Helper()
	r := get(t, h, path)
	m := csrfRE.FindStringSubmatch(r.Body)
	if m == nil {
		t.Fatalf("GET %s (%d) has no CSRF field:\n%s", path, r.Status, r.Body)
	}
	return html.UnescapeString(m[1])
}

// text is a page's body with the HTML escapes undone, for matching
// messages.
func (r response) text() string { return html.UnescapeString(r.Body) }

func mustContain(t *testing.T, r response, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(r.Body, w) && !strings.Contains(r.text(), w) {
			t.Errorf("page (status %d) does not contain %q", r.Status, w)
		}
	}
	if t.Failed() {
		t.Logf("body:\n%s", r.Body)
	}
}

func mustNotContain(t *testing.T, r response, bad ...string) {
	t.Helper()
	for _, b := range bad {
		if strings.Contains(r.Body, b) || strings.Contains(r.text(), b) {
			t.Errorf("page (status %d) contains %q", r.Status, b)
		}
	}
}

// fakeService is a Service whose answers a test sets, recording what the
// handlers asked of it.
type fakeService struct {
	mu         sync.Mutex
	nodes      []sim.Node
	templates  []*sim.Template
	instances  []sim.Instance
	migrations []*sim.Migration
	bus        *sim.Bus

	frames                         map[string][]sim.FrameRecord
	events                         map[string][]sim.Event
	launchErr, migrateErr, stopErr error
	storeErr                       error
	launched                       []sim.LaunchRequest
	migrated                       []sim.MigrateRequest
	stopped                        []string
	removedStopped                 []string
	frameCounts                    sim.FrameCounts
	filters                        []sim.MigrationFilter
	// timeouts are the run's (normsim up --timeouts).
	timeouts sim.Timeouts
	// captures are the seam captures by migration.
	captures map[string]*sim.SeamCapture
	// packets are what the jobs sent to the output sink.
	packets []sim.Packet
	// units are what the runtimes have running (Census).
	units []sim.RunningUnit
}

func newFake() *fakeService {
	rate := "50"
	min, max := 1.0, 1000.0
	secretDefault := "hunter2-default"
	return &fakeService{
		bus: sim.NewBus(),
		nodes: []sim.Node{
			{Name: "a", SocketPort: 6797, SocketURL: "ws://127.0.0.1:6797"},
			{Name: "b", SocketPort: 6798, SocketURL: "ws://127.0.0.1:6798"},
			{Name: "c"},
		},
		templates: []*sim.Template{
			{Name: "counter", Path: "/t/counter", Valid: true, Strategy: sim.Handover, ProductName: "Counter", ProductVersion: "0.1.0",
				Parameters: []sim.Parameter{
					{Name: "RATE", Purpose: "Packets per second.", Type: "int", Default: &rate, Min: &min, Max: &max},
					{Name: "MODE", Type: "enum", Values: []string{"fast", "slow"}, Required: true},
					{Name: "API_KEY", Type: "string", Secret: true, Default: &secretDefault},
				},
				AllocatedPorts: []sim.AllocatedPortDecl{{Param: "SRT_PORT", Protocol: "udp", Preferred: 5000, Service: "counter"}}},
			{Name: "plain", Path: "/t/plain", Valid: true, Strategy: sim.StopThenStart},
			{Name: "broken", Path: "/t/broken", Error: &sim.TemplateError{Code: sim.EManifestInvalid, Message: "manifest.json: target: must be \"docker-compose\""}},
		},
	}
}

func (f *fakeService) Nodes() []sim.Node      { return f.nodes }
func (f *fakeService) Catalog() sim.Catalog   { return fakeCatalog{f} }
func (f *fakeService) DefaultRuntime() string { return sim.RuntimeProcess }

func (f *fakeService) Runtimes() []string {
	return []string{sim.RuntimeExternal, sim.RuntimeProcess}
}
func (f *fakeService) Bus() *sim.Bus { return f.bus }
func (f *fakeService) Timeouts() sim.Timeouts {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.timeouts.WithDefaults()
}

func (f *fakeService) StoreError() error { return f.storeErr }
func (f *fakeService) add(in sim.Instance) {
	f.mu.Lock()
	f.instances = append(f.instances, in)
	f.mu.Unlock()
}
func (f *fakeService) addMig(m *sim.Migration) {
	f.mu.Lock()
	f.migrations = append(f.migrations, m)
	f.mu.Unlock()
}

func (f *fakeService) InstancePage(ctx context.Context, flt sim.InstanceFilter) (sim.Page[sim.Instance], error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []sim.Instance
	for _, in := range f.instances {
		if flt.Node == "" || in.Node == flt.Node {
			out = append(out, in)
		}
	}
	return sim.PageOf(out, flt.Offset, flt.Limit), nil
}

func (f *fakeService) InstanceCounts(ctx context.Context) (map[string]int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[string]int{}
	for _, in := range f.instances {
		out[in.Node]++
	}
	return out, nil
}

func (f *fakeService) Instance(ctx context.Context, id string) (sim.Instance, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, in := range f.instances {
		if in.ID == id {
			return in, nil
		}
	}
	return sim.Instance{}, sim.Errorf(sim.ENotFound, "instance %q not found", id)
}

func (f *fakeService) Frames(ctx context.Context, id string, tail int) ([]sim.FrameRecord, error) {
	if _, err := f.Instance(ctx, id); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	frs := f.frames[id]
	return append([]sim.FrameRecord{}, frs[max(0, len(frs)-tail):]...), nil
}

func (f *fakeService) InstanceEvents(ctx context.Context, id string, tail int) ([]sim.Event, error) {
	if _, err := f.Instance(ctx, id); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	evs := f.events[id]
	return append([]sim.Event{}, evs[max(0, len(evs)-tail):]...), nil
}

func (f *fakeService) AwaitInstance(ctx context.Context, id string, until sim.Until) (sim.Instance, error) {
	for {
		in, err := f.Instance(ctx, id)
		if err != nil || until.Holds(in) || in.State.Terminal() {
			return in, err
		}
		select {
		case <-time.After(5 * time.Millisecond):
		case <-ctx.Done():
			return in, ctx.Err()
		}
	}
}

// setInstance replaces the instance with in's ID.
func (f *fakeService) setInstance(in sim.Instance) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := range f.instances {
		if f.instances[i].ID == in.ID {
			f.instances[i] = in
		}
	}
}

func (f *fakeService) Census(ctx context.Context) ([]sim.RunningUnit, []string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.units, []string{sim.RuntimeExternal}, nil
}

func (f *fakeService) Output(ctx context.Context, id string, since time.Time) (sim.OutputSummary, error) {
	if _, err := f.Instance(ctx, id); err != nil {
		return sim.OutputSummary{}, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	var pkts []sim.Packet
	for _, p := range f.packets {
		if !p.At.Before(since) {
			pkts = append(pkts, p)
		}
	}
	return sim.SummarizeOutput(id, since, pkts), nil
}

func (f *fakeService) Launch(ctx context.Context, req sim.LaunchRequest) (sim.Instance, error) {
	f.mu.Lock()
	f.launched = append(f.launched, req)
	err := f.launchErr
	f.mu.Unlock()
	if err != nil {
		return sim.Instance{}, err
	}
	in := sim.Instance{ID: req.Template + "-new", JobID: "job-new", Node: req.Node, Template: req.Template, Runtime: sim.RuntimeProcess, State: sim.InstanceStarting}
	f.add(in)
	return in, nil
}

func (f *fakeService) Stop(ctx context.Context, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.stopped = append(f.stopped, id)
	return f.stopErr
}

func (f *fakeService) FrameCounts(ctx context.Context, id string) (sim.FrameCounts, error) {
	if _, err := f.Instance(ctx, id); err != nil {
		return sim.FrameCounts{}, err
	}
	return f.frameCounts, nil
}

func (f *fakeService) RemoveStopped(ctx context.Context, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.removedStopped = append(f.removedStopped, id)
	return f.stopErr
}

func (f *fakeService) Logs(ctx context.Context, id string, q sim.LogQuery, follow bool, each func(*sim.LogPage) error) error {
	if _, err := f.Instance(ctx, id); err != nil {
		return err
	}
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	return each(&sim.LogPage{Known: true, Lines: []sim.LogLine{
		{Seq: 1, Instance: id, Service: "app", Stream: sim.StreamStdout, At: at, Text: "line one"},
		{Seq: 2, Instance: id, Service: "app", Stream: sim.StreamStderr, At: at.Add(time.Millisecond), Text: "line two"},
	}})
}

func (f *fakeService) MigrationLogs(ctx context.Context, m *sim.Migration, tail int) error {
	return nil
}

func (f *fakeService) Migrate(ctx context.Context, id string, req sim.MigrateRequest) (*sim.Migration, error) {
	f.mu.Lock()
	f.migrated = append(f.migrated, req)
	err := f.migrateErr
	f.mu.Unlock()
	if err != nil {
		return nil, err
	}
	if _, err := f.Instance(ctx, id); err != nil {
		return nil, err
	}
	return &sim.Migration{ID: "mig-new", State: sim.MigrationRunning}, nil
}

// AbortMigration: a running migration without a point of no return on
// its timeline notes the request (the fake's migrations end no other way).
func (f *fakeService) AbortMigration(ctx context.Context, id, reason string) (*sim.Migration, error) {
	m, err := f.Migration(ctx, id)
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, e := range m.Events {
		if e.Kind == sim.TimelinePointOfNoReturn {
			return nil, sim.Errorf(sim.EConflict, "migration %s is past the point of no return", id)
		}
	}
	if m.State.Ended() {
		return nil, sim.Errorf(sim.EConflict, "migration %s already ended %s; there is nothing to abort", id, m.State)
	}
	m.Events = append(m.Events, sim.MigrationEvent{Seq: len(m.Events) + 1, At: time.Now(), Kind: sim.TimelineAbortRequested, Side: "manager", Detail: "the user asked to abort: " + reason})
	return m, nil
}

func (f *fakeService) Migration(ctx context.Context, id string) (*sim.Migration, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, m := range f.migrations {
		if m.ID == id {
			return m, nil
		}
	}
	return nil, sim.Errorf(sim.ENotFound, "migration %q not found", id)
}

// AwaitMigration: the fake's migrations do not change, so it answers at
// once when the condition holds and otherwise when ctx ends.
func (f *fakeService) AwaitMigration(ctx context.Context, id string, after int) (*sim.Migration, error) {
	m, err := f.Migration(ctx, id)
	if err != nil || m.State.Ended() || (after >= 0 && len(m.Events) > after) {
		return m, err
	}
	<-ctx.Done()
	return m, ctx.Err()
}

func (f *fakeService) MigrationSummary(ctx context.Context, id string) (*sim.Migration, error) {
	return summary(f.Migration(ctx, id))
}

func (f *fakeService) SeamCapture(ctx context.Context, id string) (*sim.SeamCapture, error) {
	if _, err := f.Migration(ctx, id); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if c := f.captures[id]; c != nil {
		return c, nil
	}
	return nil, sim.Errorf(sim.ENotFound, "migration %q has no seam capture", id)
}

func (f *fakeService) AwaitMigrationSummary(ctx context.Context, id string, after int) (*sim.Migration, error) {
	return summary(f.AwaitMigration(ctx, id, after))
}

// summary is a copy of m without its timeline.
func summary(m *sim.Migration, err error) (*sim.Migration, error) {
	if m == nil {
		return nil, err
	}
	c := *m
	c.Events = nil
	return &c, err
}

func (f *fakeService) MigrationPage(ctx context.Context, flt sim.MigrationFilter) (sim.Page[*sim.Migration], error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.filters = append(f.filters, flt)
	var out []*sim.Migration
	for _, m := range f.migrations {
		if (flt.JobID == "" || m.JobID == flt.JobID) && (flt.State == "" || m.State == flt.State) {
			out = append(out, m)
		}
	}
	return sim.PageOf(out, flt.Offset, flt.Limit), nil
}

type fakeCatalog struct{ f *fakeService }

func (c fakeCatalog) List() []*sim.Template { return c.f.templates }

func (c fakeCatalog) Get(name string) (*sim.Template, error) {
	for _, t := range c.f.templates {
		if t.Name == name {
			return t, nil
		}
	}
	return nil, sim.Errorf(sim.ENotFound, "template %q not found", name)
}

func (c fakeCatalog) CheckParams(name string, params map[string]string) error {
	return errors.New("not in the fake")
}

func (c fakeCatalog) Launch(name string, in sim.LaunchInput) (*sim.LaunchSpec, error) {
	return nil, errors.New("not in the fake")
}

// apiError decodes the API's JSON error.
func apiError(t *testing.T, r response) (code, msg string) {
	t.Helper()
	var b struct {
		Error struct{ Code, Message string } `json:"error"`
	}
	if err := json.Unmarshal([]byte(r.Body), &b); err != nil {
		t.Fatalf("not a JSON error (%d): %v\n%s", r.Status, err, r.Body)
	}
	return b.Error.Code, b.Error.Message
}

// waitFor polls cond for up to d.
func waitFor(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
