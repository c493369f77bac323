package app

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/normsim/normsim/internal/testenv"
	"github.com/normsim/normsim/sim"
	"github.com/normsim/normsim/sim/template"
)

// heldCatalog is a catalog of two copies of templates/plain, "a-held"
// (listed, and so loaded, first) and "plain", whose load of a-held waits
// until release is called, or its context ends. entered is closed when
// that load has begun. The test's end releases it, so that a test that
// fails for waiting on it ends.
func heldCatalog(t *testing.T) (lc *lazyCatalog, entered chan struct{}, release func()) {
	t.Helper()
	dir := t.TempDir()
	for _, name := range []string{"a-held", "plain"} {
		if err := os.CopyFS(filepath.Join(dir, name), os.DirFS(filepath.Join("..", "templates", "plain"))); err != nil {
			t.Fatal(err)
		}
	}
	entered, held := make(chan struct{}), make(chan struct{})
	release = sync.OnceFunc(func() { close(held) })
	load := func(ctx context.Context, p string) (*template.Loaded, error) {
		if filepath.Base(p) == "a-held" {
			close(entered)
			select {
			case <-held:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		return template.LoadContext(ctx, p)
	}
	lc = newLazyCatalog([]string{dir}, nil, slog.New(slog.NewTextHandler(io.Discard, nil)), load)
	t.Cleanup(func() { release(); lc.close() })
	return lc, entered, release
}

// within fails the test when f has not returned within a bound far above
// what it takes: it is waiting for something it must not wait for.
func within(t *testing.T, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); f() }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatalf("%s waited for the held template", what)
	}
}

// TestLaunchWaitsOnlyForItsTemplate (issue 34 item 1): while one
// template's load is held (as a slow template's would be), another
// template is found, judged and launched; the held one is there once its
// load ends, and the list then has both.
func TestLaunchWaitsOnlyForItsTemplate(t *testing.T) {
	t.Parallel()
	lc, entered, release := heldCatalog(t)
	go lc.List() // what Open does once ready: the background load
	<-entered
	in := sim.LaunchInput{
		Instance: &sim.Instance{ID: "inst-1", JobID: "job-1", Role: "role-1", Token: "secret-token"},
		Node:     sim.Node{Name: "a", SocketPort: 6797, SocketURL: "ws://127.0.0.1:6797"},
		Runtime:  sim.RuntimeExternal,
	}
	within(t, "a launch of another template", func() {
		if tm, err := lc.Get("plain"); err != nil || !tm.Valid {
			t.Errorf("get plain: %+v, %v", tm, err)
		}
		if err := lc.CheckParams("plain", map[string]string{"RATE": "10"}); err != nil {
			t.Errorf("check params of plain: %v", err)
		}
		if _, err := lc.Launch("plain", in); err != nil {
			t.Errorf("launch plain: %v", err)
		}
		if _, err := lc.Get("missing"); sim.ErrorCode(err) != sim.ENotFound {
			t.Errorf("get of an unknown template: %v, want %s", err, sim.ENotFound)
		}
	})
	release()
	if tm, err := lc.Get("a-held"); err != nil || !tm.Valid {
		t.Fatalf("get a-held once loaded: %+v, %v", tm, err)
	}
	if list := lc.List(); len(list) != 2 {
		t.Fatalf("list: %d templates, want 2", len(list))
	}
}

// TestCloseStopsAHeldLoad (issue 34 item 1): close ends a load in
// progress rather than waiting for it, and a launch that waited for that
// template is refused as normsim stops.
func TestCloseStopsAHeldLoad(t *testing.T) {
	t.Parallel()
	lc, entered, _ := heldCatalog(t)
	got := make(chan error, 1)
	go func() { _, err := lc.Get("a-held"); got <- err }()
	<-entered
	within(t, "close", lc.close)
	if err := <-got; sim.ErrorCode(err) != sim.EUnavailable {
		t.Fatalf("get of the held template at close: %v, want %s", err, sim.EUnavailable)
	}
}

// deafLoad is a template load that ends only when released, deaf to its
// context, as compose-go is between the moments it looks at it; entered
// is closed when it has begun.
func deafLoad(t *testing.T) (load func(context.Context, string) (*template.Loaded, error), entered chan struct{}) {
	entered, held := make(chan struct{}), make(chan struct{})
	t.Cleanup(func() { close(held) })
	var once sync.Once
	return func(ctx context.Context, p string) (*template.Loaded, error) {
		once.Do(func() { close(entered) })
		<-held
		return template.LoadContext(ctx, p)
	}, entered
}

// TestNothingWaitsOutALoadDeafToItsContext (issue 34, the third attack's
// finding 4): a template whose load does not look at its context (a slow
// compose-go step) keeps no one waiting once normsim stops: not close,
// not a launch waiting for it, and not Ctrl-C while the banner waits to
// count the templates (up ignored SIGINT for 41 s, and SIGTERM).
func TestNothingWaitsOutALoadDeafToItsContext(t *testing.T) {
	t.Parallel()
	t.Run("close and a launch waiting", func(t *testing.T) {
		t.Parallel()
		load, entered := deafLoad(t)
		lc := newLazyCatalog([]string{filepath.Join("..", "templates")}, nil, slog.New(slog.DiscardHandler), load)
		got := make(chan error, 1)
		go func() { _, err := lc.Get("counter"); got <- err }()
		<-entered
		within(t, "close", lc.close)
		within(t, "a launch of the held template", func() {
			if err := <-got; sim.ErrorCode(err) != sim.EUnavailable {
				t.Errorf("get of the held template at close: %v, want %s", err, sim.EUnavailable)
			}
		})
	})
	t.Run("Ctrl-C while the banner waits for the templates", func(t *testing.T) {
		t.Parallel()
		opts := DefaultOptions()
		opts.SocketPort, opts.SocketHost, opts.Addr, opts.DB = 0, "127.0.0.1", "127.0.0.1:0", Memory
		opts.Templates = []string{filepath.Join("..", "templates")}
		opts.Runtimes = []RuntimeFactory{ProcessRuntime()}
		opts.NoMedia = true
		m := New(opts)
		m.loadTemplate, _ = deafLoad(t)
		ctx, stop := context.WithCancel(context.Background())
		var banner testenv.SyncBuffer
		ran := make(chan error, 1)
		go func() { ran <- m.Run(ctx, &banner) }()
		for !strings.Contains(banner.String(), "Store") {
			time.Sleep(10 * time.Millisecond)
		}
		stop()
		within(t, "Run, once interrupted,", func() {
			if err := <-ran; err != nil {
				t.Errorf("run: %v", err)
			}
		})
		within(t, "Close", func() { m.Close() })
		if strings.Contains(banner.String(), "Templates") {
			t.Errorf("the banner's templates were printed after the interrupt:\n%s", banner.String())
		}
	})
}

// Issue 34 round 5b: a job that writes files inside its template's
// directory (its working directory, often) made normsim log "templates
// changed on disk; loaded them again changed=[]" every half second. A
// reload that changed nothing is not news; one that changed a template
// still is.
func TestAReloadThatChangedNothingIsQuiet(t *testing.T) {
	dir := t.TempDir()
	tpl := filepath.Join(dir, "plain")
	if err := os.CopyFS(tpl, os.DirFS(filepath.Join("..", "templates", "plain"))); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var logs bytes.Buffer
	w := writerFunc(func(p []byte) (int, error) { mu.Lock(); defer mu.Unlock(); return logs.Write(p) })
	lc := newLazyCatalog([]string{dir}, []string{dir}, slog.New(slog.NewTextHandler(w, nil)), template.LoadContext)
	t.Cleanup(lc.close)
	lc.List()
	logged := func(what string) bool { mu.Lock(); defer mu.Unlock(); return strings.Contains(logs.String(), what) }
	for i := range 3 {
		if err := os.WriteFile(filepath.Join(tpl, "output.log"), []byte(strings.Repeat("x", i+1)), 0o644); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * reloadQuiet)
	}
	time.Sleep(4 * reloadQuiet)
	if logged("loaded them again") {
		t.Errorf("a file the template is not made of, written, was logged as a template change:\n%s", logs.String())
	}
	if err := os.WriteFile(filepath.Join(tpl, "manifest.json"), []byte("not json"), 0o644); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); !logged("changed=[plain]"); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("a broken manifest was not logged as a change:\n%s", logs.String())
		}
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// TestEmbeddedTemplatesSayWhyTheyCannotRunAsProcesses (round 12): run
// outside normsim's checkout, `up --runtime process` unpacked the
// embedded templates to a temporary directory, and a launch of counter
// failed with "/tmp/scripts/run-go-job does not exist" (plain's go run
// failed later): their jobs are built from the checkout. The launch now
// says so, with what to do instead; other runtimes launch as before.
func TestEmbeddedTemplatesSayWhyTheyCannotRunAsProcesses(t *testing.T) {
	templates, err := filepath.Abs(filepath.Join("..", "templates"))
	if err != nil {
		t.Fatal(err)
	}
	t.Chdir(t.TempDir()) // no ./templates: the embedded defaults are used
	opts := DefaultOptions()
	opts.DefaultTemplates = os.DirFS(templates)
	m := New(opts)
	lc, err := m.loadCatalogDirs()
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		lc.close()
		for _, d := range m.tempDirs {
			os.RemoveAll(d)
		}
	}()
	in := sim.LaunchInput{
		Instance: &sim.Instance{ID: "inst-1", JobID: "job-1", Role: "role-1", Token: "secret-token"},
		Node:     sim.Node{Name: "a", SocketPort: 6797, SocketURL: "ws://127.0.0.1:6797"},
		Runtime:  sim.RuntimeProcess,
	}
	for _, name := range []string{"counter", "plain"} {
		_, err := lc.Launch(name, in)
		if sim.ErrorCode(err) != sim.EUnprocessable || !strings.Contains(sim.ErrorMessage(err), "embedded defaults") || !strings.Contains(sim.ErrorMessage(err), "--runtime external") {
			t.Errorf("launch of embedded %s on the process runtime: %v; want %s saying why, and what to do", name, err, sim.EUnprocessable)
		}
	}
	in.Runtime = sim.RuntimeExternal
	if _, err := lc.Launch("counter", in); err != nil {
		t.Errorf("launch of embedded counter on the external runtime: %v", err)
	}
}
