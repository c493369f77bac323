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
	// then, and the first caller that needs the catalog waits (or starts
	// it).
	load := func() *template.Catalog {
		c, err := template.LoadDirs(context.Background(), abs...)
		if err != nil {
			m.log.Error("load templates", "err", err)
			c = template.NewCatalog()
		}
		return c
	}
	lc := &lazyCatalog{done: make(chan struct{}), load: load, reload: load, log: m.log, dirs: abs}
	if tmp == "" { // the embedded defaults do not change
		lc.watchDirs = abs
	}
	return lc, nil
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
		if st, err := os.Stat(d); err != nil || !st.IsDir() {
			return nil, "", "", fmt.Errorf("--templates: %s is not a directory", d)
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

// lazyCatalog is a sim.Catalog loaded in the background; every method
// waits until it is loaded. Once loaded it watches its directories and
// loads them again when a template changes on disk (reloadQuiet after the
// last change): a fixed template launches without a restart, and a broken
// edit is listed, and refused at launch, with its error. What runs keeps
// what it was launched with.
type lazyCatalog struct {
	once sync.Once
	load func() *template.Catalog
	done chan struct{}
	cur  atomic.Pointer[template.Catalog]

	reload    func() *template.Catalog
	log       *slog.Logger
	dirs      []string
	watchDirs []string // nil: nothing to watch
	watcher   *fsnotify.Watcher
	stopWatch chan struct{}
	watchDone chan struct{}
}

// reloadQuiet is how long the directories must stay unchanged before they
// are loaded again: an editor's save is several events in a burst.
const reloadQuiet = 150 * time.Millisecond

// start begins loading in the background, once, then watching.
func (l *lazyCatalog) start() {
	l.once.Do(func() {
		go func() {
			l.cur.Store(l.load())
			l.watch()
			close(l.done)
		}()
	})
}

// close waits for a load in progress, or makes sure none starts, and
// stops watching.
func (l *lazyCatalog) close() {
	l.once.Do(func() {
		l.cur.Store(template.NewCatalog())
		close(l.done)
	})
	<-l.done
	if l.watcher != nil {
		close(l.stopWatch)
		<-l.watchDone
	}
}

func (l *lazyCatalog) wait() *template.Catalog {
	l.start()
	<-l.done
	return l.cur.Load()
}

// watch starts watching the template directories and each template in
// them; a directory that cannot be watched is logged, and its templates
// are then read once.
func (l *lazyCatalog) watch() {
	if len(l.watchDirs) == 0 || l.reload == nil {
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
			next := l.reload()
			prev := l.cur.Swap(next)
			l.log.Info("templates changed on disk; loaded them again", "templates", len(next.List()), "changed", changedNames(prev, next))
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

// List waits for the catalog and lists it.
func (l *lazyCatalog) List() []*sim.Template { return l.wait().List() }

// Get waits for the catalog and returns one template.
func (l *lazyCatalog) Get(name string) (*sim.Template, error) { return l.wait().Get(name) }

// CheckParams waits for the catalog and judges launch params.
func (l *lazyCatalog) CheckParams(name string, params map[string]string) error {
	return l.wait().CheckParams(name, params)
}

// Launch waits for the catalog and applies the launch contract.
func (l *lazyCatalog) Launch(name string, in sim.LaunchInput) (*sim.LaunchSpec, error) {
	return l.wait().Launch(name, in)
}
