package app_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/normsim/normsim/app"
	"github.com/normsim/normsim/app/withdocker"
	"github.com/normsim/normsim/app/withsqlite"
	"github.com/normsim/normsim/internal/testenv"
	"github.com/normsim/normsim/sim"
)

func testOptions(t *testing.T) app.Options {
	opts := app.DefaultOptions()
	opts.OpenStore = withsqlite.Open
	opts.SocketPort = 0
	opts.SocketHost = "127.0.0.1"
	opts.Addr = "127.0.0.1:0"
	opts.DB = app.Memory
	opts.Templates = []string{filepath.Join("..", "templates")}
	opts.Runtimes = []app.RuntimeFactory{app.ProcessRuntime()}
	return opts
}

// openApp opens a simulator with opts, closed when the test ends.
func openApp(t *testing.T, opts app.Options) *app.Main {
	t.Helper()
	m := app.New(opts)
	if err := m.Open(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

func getJSON(t *testing.T, url string, v any) int {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if v != nil {
		json.NewDecoder(resp.Body).Decode(v)
	}
	return resp.StatusCode
}

// getText is a GET of url's status and body.
func getText(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// runUp runs a simulator as normsim up does, once it is ready; stop ends
// the run and returns how it ended. banner is what it printed: read it
// after stop (the banner is still being printed as Ready fires).
func runUp(t *testing.T, opts app.Options) (m *app.Main, banner *bytes.Buffer, stop func() error) {
	t.Helper()
	m = app.New(opts)
	ctx, cancel := context.WithCancel(context.Background())
	banner = &bytes.Buffer{}
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx, banner) }()
	select {
	case <-m.Ready():
	case err := <-done:
		cancel()
		t.Fatalf("up failed: %v", err)
	case <-time.After(10 * time.Second):
		cancel()
		t.Fatal("not ready")
	}
	return m, banner, func() error {
		cancel()
		return <-done
	}
}

func TestUpServesNodesAndStopsFast(t *testing.T) {
	opts := testOptions(t)
	opts.NoJobSocket = []string{"b"}
	m, banner, stop := runUp(t, opts)
	defer m.Close()
	if code := getJSON(t, m.URL()+"/readyz", nil); code != http.StatusOK {
		t.Fatalf("/readyz = %d", code)
	}
	var nodes []struct {
		Name    string `json:"name"`
		Address string `json:"address"`
		Socket  *struct {
			URL  string `json:"url"`
			Port int    `json:"port"`
		} `json:"socket"`
		Capabilities []string `json:"capabilities"`
	}
	if code := getJSON(t, m.URL()+"/api/v1/nodes", &nodes); code != http.StatusOK || len(nodes) != 2 {
		t.Fatalf("/api/v1/nodes = %d %+v", code, nodes)
	}
	a, b := nodes[0], nodes[1]
	if a.Name != "a" || a.Socket == nil || a.Socket.Port == 0 || a.Socket.URL != "ws://127.0.0.1:"+strconv.Itoa(a.Socket.Port) ||
		len(a.Capabilities) != 1 || a.Capabilities[0] != "norsk.io/job-socket" {
		t.Fatalf("node a = %+v", a)
	}
	if b.Name != "b" || b.Socket != nil || len(b.Capabilities) != 0 {
		t.Fatalf("node b without a job socket = %+v", b)
	}
	if a.Address != "127.0.1.1" || b.Address != "127.0.1.2" {
		t.Errorf("node addresses %q, %q; want 127.0.1.1, 127.0.1.2", a.Address, b.Address)
	}
	// The job socket really listens.
	if c, err := net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(a.Socket.Port)); err != nil {
		t.Fatalf("node a's socket: %v", err)
	} else {
		c.Close()
	}

	start := time.Now()
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	m.Close()
	if took := time.Since(start); took > time.Second {
		t.Fatalf("shutdown took %v, want under a second", took)
	}
	if !strings.Contains(banner.String(), m.URL()) || !strings.Contains(banner.String(), "in memory") ||
		!strings.Contains(banner.String(), "publishes on 127.0.1.2") {
		t.Fatalf("banner lacks the URL or persistence mode:\n%s", banner.String())
	}

	if _, err := http.Get(m.URL() + "/readyz"); err == nil {
		t.Fatal("dashboard still serving after shutdown")
	}
}

// TestNodesShareAnAddressWhereTheirsDoesNotBind: a host without the nodes'
// loopback addresses (macOS without aliases, simulated) still starts; the
// nodes share 127.0.0.1 and the start-up warning, logged once, says so and
// what to do.
func TestNodesShareAnAddressWhereTheirsDoesNotBind(t *testing.T) {
	opts := testOptions(t)
	opts.BindAddress = func(ip string) error {
		return errors.New("listen tcp4 " + ip + ":0: bind: can't assign requested address")
	}
	var logs bytes.Buffer
	opts.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	m := openApp(t, opts)
	var nodes []struct {
		Name          string `json:"name"`
		Address       string `json:"address"`
		SharedAddress bool   `json:"sharedAddress"`
	}
	getJSON(t, m.URL()+"/api/v1/nodes", &nodes)
	for _, n := range nodes {
		if n.Address != "127.0.0.1" || !n.SharedAddress {
			t.Errorf("node %+v: want the shared 127.0.0.1", n)
		}
	}
	note := m.AddressNote()
	if !strings.Contains(note, "nodes a, b share the address 127.0.0.1") || !strings.Contains(note, "127.0.1.2") {
		t.Errorf("address note %q", note)
	}
	if n := strings.Count(logs.String(), "share the address"); n != 1 {
		t.Errorf("warning logged %d times, want once:\n%s", n, logs.String())
	}
	var banner bytes.Buffer
	m.PrintBanner(&banner)
	if !strings.Contains(banner.String(), "publishes on 127.0.0.1 (shared") {
		t.Errorf("banner:\n%s", banner.String())
	}
}

func TestPortInUseNamesPortAndFlag(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	port := busy.Addr().(*net.TCPAddr).Port

	opts := testOptions(t)
	opts.SocketPort = port
	m := app.New(opts)
	err = m.Open(context.Background())
	m.Close()
	var pe *app.PortInUseError
	if !errors.As(err, &pe) || pe.Flag != "--socket-port" || !strings.Contains(err.Error(), strconv.Itoa(port)) {
		t.Fatalf("err = %v, want a port-in-use error naming %d and --socket-port", err, port)
	}

	opts = testOptions(t)
	opts.Addr = busy.Addr().String()
	m = app.New(opts)
	err = m.Open(context.Background())
	m.Close()
	if !errors.As(err, &pe) || pe.Flag != "--addr" {
		t.Fatalf("err = %v, want a port-in-use error naming --addr", err)
	}
}

func TestConsecutiveNodePorts(t *testing.T) {
	// Find three consecutive free ports.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	base := l.Addr().(*net.TCPAddr).Port
	l.Close()
	opts := testOptions(t)
	opts.SocketPort = base
	opts.Nodes = []string{"a", "b", "c"}
	m := app.New(opts)
	if err := m.Open(context.Background()); err != nil {
		t.Skipf("ports %d.. not free: %v", base, err)
	}
	defer m.Close()
	for i, n := range m.Manager.Nodes() {
		if n.SocketPort != base+i {
			t.Fatalf("node %s on port %d, want %d", n.Name, n.SocketPort, base+i)
		}
	}
}

// TestNodesShareOneConnectionBudget (issue 34 item 8): every node's job
// socket counts connections that are not jobs yet against one budget, so
// the bounds derived from the fd limit hold for the sim, whatever --nodes.
func TestNodesShareOneConnectionBudget(t *testing.T) {
	opts := testOptions(t)
	opts.Nodes = []string{"a", "b", "c", "d"}
	m := openApp(t, opts)
	budget := m.Listeners["a"].Budget()
	for name, l := range m.Listeners {
		if l.Budget() != budget {
			t.Fatalf("node %s's job socket has a budget of its own: the bounds hold per node, not in total", name)
		}
	}
	if len(m.Listeners) != 4 {
		t.Fatalf("%d job sockets, want 4", len(m.Listeners))
	}
}

func TestUnknownNoJobSocketNode(t *testing.T) {
	opts := testOptions(t)
	opts.NoJobSocket = []string{"z"}
	m := app.New(opts)
	err := m.Open(context.Background())
	m.Close()
	if err == nil || !strings.Contains(err.Error(), "--no-job-socket") {
		t.Fatalf("err = %v", err)
	}
}

// TestRuntimes: with an in-memory store, an auto start is ready before it
// knows whether Docker answers, and finds out after (the banner and a
// launch wait for it); a --runtime that is not available still fails the
// start, with the runtime's reason.
func TestRuntimes(t *testing.T) {
	answered := make(chan struct{})
	slowDocker := app.RuntimeFactory{Name: sim.RuntimeDocker, New: func(context.Context, sim.RuntimeObserver, sim.LogSink, *slog.Logger) (sim.Runtime, error) {
		<-answered
		return nil, errors.New("no engine at unix:///nowhere.sock")
	}}

	opts := testOptions(t)
	opts.Runtimes = []app.RuntimeFactory{slowDocker, app.ProcessRuntime()}
	m := app.New(opts)
	opened := make(chan error, 1)
	go func() { opened <- m.Open(context.Background()) }()
	select {
	case err := <-opened:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		close(answered)
		t.Fatal("Open waited for the Docker probe")
	}
	close(answered)
	// The banner says where it looked, and how to look elsewhere.
	if note := m.RuntimeNote(); note != "process (no Docker engine answered: no engine at unix:///nowhere.sock; DOCKER_HOST or the docker context names another)" {
		t.Errorf("runtime note = %q", note)
	}
	if def := m.Manager.DefaultRuntime(); def != sim.RuntimeProcess {
		t.Errorf("default runtime = %q, want process", def)
	}
	m.Close()

	opts.Runtimes = []app.RuntimeFactory{slowDocker, app.ProcessRuntime()}
	opts.Runtime = sim.RuntimeDocker
	m = app.New(opts)
	err := m.Open(context.Background())
	m.Close()
	if err == nil || !strings.Contains(err.Error(), "--runtime docker: no engine at unix:///nowhere.sock") {
		t.Fatalf("--runtime docker without an engine: err = %v", err)
	}
}

// TestBrokenTemplateNextToGoodOnes: a template that fails validation is
// listed with its error and the good ones stay usable.
func TestBrokenTemplateNextToGoodOnes(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "broken")
	os.MkdirAll(bad, 0o755)
	os.WriteFile(filepath.Join(bad, "manifest.json"), []byte(`{"productTemplateSchemaVersion":2}`), 0o644)
	opts := testOptions(t)
	opts.Templates = []string{filepath.Join("..", "templates"), dir}
	m := openApp(t, opts)
	var list []struct {
		Name  string `json:"name"`
		Valid bool   `json:"valid"`
		Error *struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
		Strategy string `json:"strategy"`
	}
	if code := getJSON(t, m.URL()+"/api/v1/templates", &list); code != 200 {
		t.Fatalf("templates: %d", code)
	}
	byName := map[string]int{}
	for i, tm := range list {
		byName[tm.Name] = i
	}
	b, ok := byName["broken"]
	if !ok || list[b].Valid || list[b].Error == nil || list[b].Error.Code != "MANIFEST_INVALID" || !strings.Contains(list[b].Error.Message, "productTemplateSchemaVersion") {
		t.Fatalf("broken template listed as %+v", list)
	}
	c, ok := byName["counter"]
	if !ok || !list[c].Valid || list[c].Strategy != "handover" {
		t.Fatalf("counter listed as %+v", list[c])
	}
	// The good one launches; the broken one is refused with its reason.
	post := func(body string) (int, string) {
		resp, err := http.Post(m.URL()+"/api/v1/instances", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var b bytes.Buffer
		b.ReadFrom(resp.Body)
		return resp.StatusCode, b.String()
	}
	if code, body := post(`{"template":"counter","node":"a","runtime":"external"}`); code != 201 {
		t.Fatalf("launch counter: %d %s", code, body)
	}
	if code, body := post(`{"template":"broken","node":"a","runtime":"external"}`); code != 422 || !strings.Contains(body, "TEMPLATE_INVALID") {
		t.Fatalf("launch broken: %d %s", code, body)
	}
	if code, body := post(`{"template":"counter","node":"zz","runtime":"external"}`); code != 404 {
		t.Fatalf("unknown node: %d %s", code, body)
	}
	if code, body := post(`{"template":"counter","node":"a","params":{"RATE":"fast"},"runtime":"external"}`); code != 422 || !strings.Contains(body, "RATE") {
		t.Fatalf("bad param: %d %s", code, body)
	}
}

// TestSecondNormsimOnAStoreIsRefused: a second normsim started on the
// store of a running one refuses to start, naming the first (its pid and
// dashboard), and leaves the first one's instance alone.
func TestSecondNormsimOnAStoreIsRefused(t *testing.T) {
	opts := testOptions(t)
	opts.DB = filepath.Join(t.TempDir(), "normsim.db")
	opts.Runtime = sim.RuntimeExternal
	first := openApp(t, opts)
	var in sim.Instance
	if code := postJSON(t, first.URL()+"/api/v1/instances", `{"template":"counter","node":"a","runtime":"external"}`, &in); code != http.StatusCreated {
		t.Fatalf("launch: %d", code)
	}
	second := app.New(opts)
	err := second.Open(context.Background())
	second.Close()
	want := fmt.Sprintf("in use by another normsim (pid %d, dashboard %s)", os.Getpid(), first.URL())
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("second normsim on the store: %v, want it refused saying %q", err, want)
	}
	var after sim.Instance
	if code := getJSON(t, first.URL()+"/api/v1/instances/"+in.ID, &after); code != http.StatusOK || after.State == sim.InstanceFailed {
		t.Fatalf("the first normsim's instance after the second tried: %d %+v", code, after)
	}
}

// TestBannerSaysWhatIsExposed: listening on every interface (the default,
// for containers) is said in the banner, with how to restrict it; bound to
// loopback it is not.
func TestBannerSaysWhatIsExposed(t *testing.T) {
	for _, tc := range []struct {
		host string
		says bool
	}{{"0.0.0.0", true}, {"127.0.0.1", false}} {
		opts := testOptions(t)
		opts.SocketHost = tc.host
		m := openApp(t, opts)
		var banner bytes.Buffer
		m.PrintBanner(&banner)
		if got := strings.Contains(banner.String(), "listen on every interface (0.0.0.0)") && strings.Contains(banner.String(), "--socket-host 127.0.0.1"); got != tc.says {
			t.Errorf("--socket-host %s: the banner says it is exposed: %v, want %v\n%s", tc.host, got, tc.says, banner.String())
		}
	}
}

// TestNodesNameTheEngine: with the Docker runtime, the banner and GET
// /api/v1/nodes name the docker context and the engine's version.
func TestNodesNameTheEngine(t *testing.T) {
	testenv.RequireDocker(t)
	opts := testOptions(t)
	opts.Runtime = sim.RuntimeDocker
	opts.Runtimes = withdocker.Runtimes()
	m := openApp(t, opts)
	var nodes []struct {
		Engine *sim.Engine `json:"engine"`
	}
	getJSON(t, m.URL()+"/api/v1/nodes", &nodes)
	if len(nodes) == 0 || nodes[0].Engine == nil || nodes[0].Engine.Version == "" || nodes[0].Engine.Context == "" || nodes[0].Engine.Host == "" {
		t.Fatalf("nodes %+v: want each to name its engine", nodes)
	}
	var banner bytes.Buffer
	m.PrintBanner(&banner)
	if want := "Docker Engine " + nodes[0].Engine.Version + ", context"; !strings.Contains(banner.String(), want) {
		t.Errorf("banner lacks %q:\n%s", want, banner.String())
	}
}

// TestOutputSinkKeepsItsPortAcrossRestarts: on the same store, the next run's
// sink takes the port the last one used, so jobs kept with --keep (whose
// NORMSIM_OUTPUT_ADDR names it) still reach it; when that port is taken the
// banner says whose output cannot arrive.
func TestOutputSinkKeepsItsPortAcrossRestarts(t *testing.T) {
	opts := testOptions(t)
	opts.DB = filepath.Join(t.TempDir(), "normsim.db")
	opts.Runtime = sim.RuntimeExternal
	first := app.New(opts)
	if err := first.Open(context.Background()); err != nil {
		t.Fatal(err)
	}
	port := first.Sink.Port()
	first.Close()

	second := app.New(opts)
	if err := second.Open(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := second.Sink.Port(); got != port {
		t.Errorf("the second run's sink is on %d, the first's was on %d", got, port)
	}
	second.Close()

	squatter, err := net.ListenPacket("udp", net.JoinHostPort(opts.SocketHost, strconv.Itoa(port)))
	if err != nil {
		t.Fatal(err)
	}
	defer squatter.Close()
	third := openApp(t, opts)
	var banner bytes.Buffer
	third.PrintBanner(&banner)
	if third.Sink.Port() == port || !strings.Contains(banner.String(), "the last run's output sink port "+strconv.Itoa(port)+" is taken") {
		t.Errorf("with the last port taken: sink on %d, banner:\n%s", third.Sink.Port(), banner.String())
	}
}
