package app

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"

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
	return &lazyCatalog{done: make(chan struct{}), load: func() *template.Catalog {
		c, err := template.LoadDirs(abs...)
		if err != nil {
			m.log.Error("load templates", "err", err)
			c = template.NewCatalog()
		}
		return c
	}}, nil
}

// LoadCatalog loads, now, the catalog a simulator with opts would launch
// from: the same directories, the same validation. It starts nothing else;
// `normsim ci --check` judges scenarios against it. cleanup removes what
// unpacking the embedded templates left.
func LoadCatalog(opts Options) (cat sim.Catalog, cleanup func(), err error) {
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
	c, err := template.LoadDirs(abs...)
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
// waits until it is loaded.
type lazyCatalog struct {
	once sync.Once
	load func() *template.Catalog
	done chan struct{}
	c    *template.Catalog
}

// start begins loading in the background, once.
func (l *lazyCatalog) start() {
	l.once.Do(func() {
		go func() {
			l.c = l.load()
			close(l.done)
		}()
	})
}

// close waits for a load in progress, or makes sure none starts.
func (l *lazyCatalog) close() {
	l.once.Do(func() {
		l.c = template.NewCatalog()
		close(l.done)
	})
	<-l.done
}

func (l *lazyCatalog) wait() *template.Catalog {
	l.start()
	<-l.done
	return l.c
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
