package app

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/normsim/normsim/sim"
	"github.com/normsim/normsim/sim/template"
)

// loadCatalogDirs finds the template directories (see resolveTemplateDirs)
// and returns the catalog that loads them in the background.
func (m *Main) loadCatalogDirs() (*lazyCatalog, error) {
	abs, note, tmp, err := resolveTemplateDirs(m.Opts)
	if tmp != "" {
		m.tempDirs = append(m.tempDirs, tmp)
	}
	if err != nil {
		return nil, err
	}
	m.templatesNote = note
	// Validating templates (compose-go compiles its JSON schema on first
	// use) is most of start-up and nothing /readyz waits for: Open queues
	// it on its lane once ready, so it does not compete for the CPU before
	// then, and the first caller that needs a template waits for it (or
	// loads it).
	watch := abs
	if tmp != "" { // the embedded defaults do not change
		watch = nil
	}
	load := m.loadTemplate
	if load == nil {
		load = template.LoadContext
	}
	c := newLazyCatalog(abs, watch, m.log, load)
	c.embedded = tmp != ""
	return c, nil
}

// LoadCatalog loads, now, the catalog a simulator with opts would launch
// from: the same directories, the same validation. It starts nothing else;
// `normsim ci --check` judges scenarios against it. cleanup removes what
// unpacking the embedded templates left. When ctx ends first the error
// is ctx's, wrapped.
func LoadCatalog(ctx context.Context, opts Options) (cat sim.Catalog, cleanup func(), err error) {
	abs, _, tmp, err := resolveTemplateDirs(opts)
	cleanup = func() {
		if tmp != "" {
			os.RemoveAll(tmp)
		}
	}
	if err != nil {
		cleanup()
		return nil, nil, err
	}
	c, err := template.LoadDirs(ctx, abs...)
	if err != nil {
		cleanup()
		return nil, nil, fmt.Errorf("load templates: %w", err)
	}
	return c, cleanup, nil
}

// resolveTemplateDirs is where opts load templates from, as absolute
// paths: opts.Templates; with none, ./templates when present; otherwise the
// embedded defaults unpacked to tmp, so a fresh machine has something to
// launch. note says which, for the banner.
func resolveTemplateDirs(opts Options) (abs []string, note, tmp string, err error) {
	dirs := opts.Templates
	if len(dirs) == 0 {
		if st, err := os.Stat("templates"); err == nil && st.IsDir() {
			dirs = []string{"templates"}
		} else if opts.DefaultTemplates != nil {
			tmp, err = os.MkdirTemp("", "normsim-templates-")
			if err != nil {
				return nil, "", "", fmt.Errorf("unpack embedded templates: %w", err)
			}
			if err := os.CopyFS(tmp, opts.DefaultTemplates); err != nil {
				return nil, "", tmp, fmt.Errorf("unpack embedded templates: %w", err)
			}
			return []string{tmp}, "embedded defaults", tmp, nil
		}
	}
	for _, d := range dirs {
		if err := CheckTemplatesDir(d); err != nil {
			return nil, "", "", err
		}
	}
	abs = make([]string, 0, len(dirs))
	for _, d := range dirs {
		a, err := filepath.Abs(d)
		if err != nil {
			return nil, "", "", err
		}
		abs = append(abs, a)
	}
	if len(abs) > 0 {
		note = fmt.Sprint(abs)
	}
	return abs, note, "", nil
}

// lazyCatalog is a sim.Catalog loaded in the background. Its templates
// are listed first, from the directories alone, and then loaded one by
// one, each on its own: Get, CheckParams and Launch wait only for the
// template they name (loading it themselves if the background has not
// reached it), so a template that is slow to judge delays no other;
// List waits for all of them. It watches its directories and loads them
// again when a template changes on disk (reloadQuiet after the last
// change): a fixed template launches without a restart, and a broken edit
// is listed, and refused at launch, with its error. What runs keeps what
// it was launched with. close stops a load in progress.
type lazyCatalog struct {
	// embedded: the templates are normsim's own defaults, unpacked to a
	// temporary directory (no ./templates and no --templates).
	embedded bool
	ctx      context.Context // ends at close
	cancel   context.CancelFunc
	loadOne  func(context.Context, string) (*template.Loaded, error)
	dirs     []string
	log      *slog.Logger

	once       sync.Once
	closeOnce  sync.Once
	cur        atomic.Pointer[catalogLoad]
	loaderDone chan struct{} // the background load and the watch's start are over

	watchDirs []string // nil: nothing to watch
	watcher   *fsnotify.Watcher
	stopWatch chan struct{}
	watchDone chan struct{}
}

// newLazyCatalog is the catalog of the templates below dirs, loaded with
// loadOne, watching watchDirs. Nothing is read before it is first used.
func newLazyCatalog(dirs, watchDirs []string, log *slog.Logger, loadOne func(context.Context, string) (*template.Loaded, error)) *lazyCatalog {
	ctx, cancel := context.WithCancel(context.Background())
	return &lazyCatalog{ctx: ctx, cancel: cancel, loadOne: loadOne, dirs: dirs, log: log,
		loaderDone: make(chan struct{}), watchDirs: watchDirs}
}

// catalogLoad is one load of the template directories: the templates, as
// listed before any is loaded, and the catalog of all of them once each
// is.
type catalogLoad struct {
	entries []*catalogEntry
	byName  map[string]*catalogEntry // the first of each name, as NewCatalog keeps it
	all     chan struct{}            // closed once cat is set
	cat     *template.Catalog
}

// catalogEntry is one template of a catalogLoad, loaded once, for whoever
// needs it first.
type catalogEntry struct {
	src  template.Source
	once sync.Once
	done chan struct{} // closed once l and err are set
	l    *template.Loaded
	err  error // the load's context ended first
}

// load waits for the template, loading it if no one has begun to, until
// ctx ends. The load runs on a goroutine of its own: compose-go looks at
// its context only now and then, and a caller (a shutdown, an API
// request) must not wait out a slow template with it.
func (e *catalogEntry) load(ctx context.Context, loadOne func(context.Context, string) (*template.Loaded, error)) (*template.Loaded, error) {
	e.once.Do(func() {
		e.done = make(chan struct{})
		go func() {
			defer close(e.done)
			e.l, e.err = loadOne(ctx, e.src.Path)
		}()
	})
	select {
	case <-e.done:
		return e.l, e.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// list lists the templates of a new load, reading only the directories;
// a directory that cannot be read is logged and leaves the catalog empty,
// as a load of all of them would.
func (l *lazyCatalog) list() *catalogLoad {
	c := &catalogLoad{byName: map[string]*catalogEntry{}, all: make(chan struct{})}
	srcs, err := template.Sources(l.dirs...)
	if err != nil {
		l.log.Error("load templates", "err", err)
		srcs = nil
	}
	for _, src := range srcs {
		e := &catalogEntry{src: src}
		c.entries = append(c.entries, e)
		if _, dup := c.byName[src.Name]; !dup {
			c.byName[src.Name] = e
		}
	}
	return c
}

// loadAll loads every template not loaded yet, in order, and then builds
// the catalog of them all; when ctx ends first, of those loaded before.
// It reports whether every template was loaded.
func (c *catalogLoad) loadAll(ctx context.Context, loadOne func(context.Context, string) (*template.Loaded, error)) bool {
	loaded := make([]*template.Loaded, 0, len(c.entries))
	complete := true
	for _, e := range c.entries {
		tl, err := e.load(ctx, loadOne)
		if err != nil {
			complete = false
			break
		}
		loaded = append(loaded, tl)
	}
	c.cat = template.NewCatalog(loaded...)
	close(c.all)
	return complete
}

// reloadQuiet is how long the directories must stay unchanged before they
// are loaded again: an editor's save is several events in a burst.
const reloadQuiet = 150 * time.Millisecond

// start, once, lists the templates, watches them and begins loading them
// in the background. The watch starts first: a Get may return before the
// rest are loaded, and a change made after it must not be missed.
func (l *lazyCatalog) start() {
	l.once.Do(func() {
		c := l.list()
		l.cur.Store(c)
		l.watch()
		go func() {
			defer close(l.loaderDone)
			c.loadAll(l.ctx, l.loadOne)
		}()
	})
}

// close stops a load in progress, or makes sure none starts, waits for
// the background load, and stops watching. Closing again does nothing.
func (l *lazyCatalog) close() {
	l.closeOnce.Do(l.doClose)
}

func (l *lazyCatalog) doClose() {
	l.cancel()
	l.once.Do(func() {
		c := &catalogLoad{byName: map[string]*catalogEntry{}, all: make(chan struct{}), cat: template.NewCatalog()}
		close(c.all)
		l.cur.Store(c)
		close(l.loaderDone)
	})
	<-l.loaderDone
	if l.watcher != nil {
		close(l.stopWatch)
		<-l.watchDone
	}
}

// current is the load in use, started if it was not.
func (l *lazyCatalog) current() *catalogLoad {
	l.start()
	return l.cur.Load()
}

// lookup waits for the template of that name, the first of that name,
// and only for it.
func (l *lazyCatalog) lookup(name string) (*template.Loaded, error) {
	e := l.current().byName[name]
	if e == nil {
		return nil, sim.Errorf(sim.ENotFound, "template %q not found", name)
	}
	tl, err := e.load(l.ctx, l.loadOne)
	if err != nil {
		return nil, sim.Errorf(sim.EUnavailable, "template %q: not loaded, normsim is stopping", name)
	}
	return tl, nil
}

// watch starts watching the template directories and each template in
// them; a directory that cannot be watched is logged, and its templates
// are then read once.
func (l *lazyCatalog) watch() {
	if len(l.watchDirs) == 0 {
		return
	}
	w, err := fsnotify.NewWatcher()
	if err != nil {
		l.log.Warn("templates will not be reloaded when they change: cannot watch them", "err", err)
		return
	}
	l.watcher, l.stopWatch, l.watchDone = w, make(chan struct{}), make(chan struct{})
	l.addWatches()
	go l.watchLoop()
}

// addWatches watches each directory and its subdirectories one level
// down (each template's own directory); watching one twice is harmless.
func (l *lazyCatalog) addWatches() {
	for _, d := range l.watchDirs {
		if err := l.watcher.Add(d); err != nil {
			l.log.Warn("cannot watch a templates directory; its changes need a restart", "dir", d, "err", err)
			continue
		}
		entries, _ := os.ReadDir(d)
		for _, e := range entries {
			if e.IsDir() && !strings.HasPrefix(e.Name(), ".") {
				_ = l.watcher.Add(filepath.Join(d, e.Name()))
			}
		}
	}
}

func (l *lazyCatalog) watchLoop() {
	defer close(l.watchDone)
	defer l.watcher.Close()
	var quiet *time.Timer
	var fire <-chan time.Time
	for {
		select {
		case <-l.stopWatch:
			return
		case ev, ok := <-l.watcher.Events:
			if !ok {
				return
			}
			if ev.Op == fsnotify.Chmod {
				continue
			}
			if quiet == nil {
				quiet = time.NewTimer(reloadQuiet)
			} else {
				quiet.Reset(reloadQuiet)
			}
			fire = quiet.C
		case err, ok := <-l.watcher.Errors:
			if !ok {
				return
			}
			l.log.Warn("watching the templates", "err", err)
		case <-fire:
			fire = nil
			l.addWatches() // a template added since
			// Loaded whole before it replaces the current load, so that a
			// launch meanwhile uses the templates as they were.
			next := l.list()
			if !next.loadAll(l.ctx, l.loadOne) {
				return // closing
			}
			prev := l.cur.Swap(next)
			// The load it replaces may still be under way (the first, in
			// the background): its catalog is read only once it is built.
			var was *template.Catalog
			select {
			case <-prev.all:
				was = prev.cat
			default:
				was = template.NewCatalog()
			}
			// A job writing in its template's directory touches it often:
			// a reload that changed no template is not news.
			if changed := changedNames(was, next.cat); len(changed) > 0 {
				l.log.Info("templates changed on disk; loaded them again", "templates", len(next.cat.List()), "changed", changed)
			} else {
				l.log.Debug("templates touched on disk; loaded them again, none changed", "templates", len(next.cat.List()))
			}
		}
	}
}

// changedNames lists the templates whose validity, strategy or problems
// differ between two loads, and those added or gone.
func changedNames(prev, next *template.Catalog) []string {
	was := map[string]string{}
	for _, t := range prev.List() {
		was[t.Name] = fmt.Sprintf("%v %s %v", t.Valid, t.Strategy, t.Error)
	}
	var out []string
	for _, t := range next.List() {
		if w, ok := was[t.Name]; !ok || w != fmt.Sprintf("%v %s %v", t.Valid, t.Strategy, t.Error) {
			out = append(out, t.Name)
		}
		delete(was, t.Name)
	}
	for name := range was {
		out = append(out, name+" (gone)")
	}
	sort.Strings(out)
	return out
}

// List waits for every template and lists them.
func (l *lazyCatalog) List() []*sim.Template {
	c := l.current()
	<-c.all
	return c.cat.List()
}

// Get waits for the named template and returns it.
func (l *lazyCatalog) Get(name string) (*sim.Template, error) {
	tl, err := l.lookup(name)
	if err != nil {
		return nil, err
	}
	return tl.Template, nil
}

// CheckParams waits for the named template and judges launch params.
func (l *lazyCatalog) CheckParams(name string, params map[string]string) error {
	tl, err := l.lookup(name)
	if err != nil {
		return err
	}
	return tl.CheckParams(params)
}

// Launch waits for the named template and applies the launch contract.
func (l *lazyCatalog) Launch(name string, in sim.LaunchInput) (*sim.LaunchSpec, error) {
	tl, err := l.lookup(name)
	if err != nil {
		return nil, err
	}
	if l.embedded && in.Runtime == sim.RuntimeProcess {
		// Their x-normsim commands build the example jobs from normsim's
		// source checkout, relative to the template; unpacked to a
		// temporary directory they name a path that is not there ("/tmp/
		// scripts/run-go-job does not exist") or fail later in go run.
		return nil, sim.Errorf(sim.EUnprocessable, "template %q is one of normsim's embedded defaults, whose jobs run on the process runtime from normsim's source checkout, which is not here; "+
			"run normsim from the root of its checkout (it then loads ./templates and can build the example jobs), use --runtime external and start the job yourself, or give --templates DIR with templates of your own", name)
	}
	return tl.Launch(in)
}

// CheckTemplatesDir refuses a --templates value that is not a directory.
// A list in one value ("a,b") is the usual slip: the flag is repeatable,
// and the error says so.
func CheckTemplatesDir(d string) error {
	if st, err := os.Stat(d); err == nil && st.IsDir() {
		return nil
	}
	if strings.Contains(d, ",") {
		return fmt.Errorf("--templates: %s is not a directory; give --templates once for each directory (--templates %s)",
			d, strings.Join(strings.Split(d, ","), " --templates "))
	}
	return fmt.Errorf("--templates: %s is not a directory", d)
}
