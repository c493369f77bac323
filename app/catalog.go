package app

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/normsim/normsim/sim"
	"github.com/normsim/normsim/sim/template"
)

// loadCatalog loads the templates below each dir. With no dirs it uses
// ./templates when present; otherwise the embedded defaults are unpacked to
// a temporary directory so a fresh machine has something to launch.
func (m *Main) loadCatalogDirs() (*lazyCatalog, error) {
	dirs := m.Opts.Templates
	if len(dirs) == 0 {
		if st, err := os.Stat("templates"); err == nil && st.IsDir() {
			dirs = []string{"templates"}
		} else if m.Opts.DefaultTemplates != nil {
			dir, err := os.MkdirTemp("", "normsim-templates-")
			if err != nil {
				return nil, fmt.Errorf("unpack embedded templates: %w", err)
			}
			m.tempDirs = append(m.tempDirs, dir)
			if err := os.CopyFS(dir, m.Opts.DefaultTemplates); err != nil {
				return nil, fmt.Errorf("unpack embedded templates: %w", err)
			}
			dirs = []string{dir}
			m.templatesNote = "embedded defaults"
		}
	}
	for _, d := range dirs {
		if st, err := os.Stat(d); err != nil || !st.IsDir() {
			return nil, fmt.Errorf("--templates: %s is not a directory", d)
		}
	}
	abs := make([]string, 0, len(dirs))
	for _, d := range dirs {
		a, err := filepath.Abs(d)
		if err != nil {
			return nil, err
		}
		abs = append(abs, a)
	}
	if m.templatesNote == "" && len(abs) > 0 {
		m.templatesNote = fmt.Sprint(abs)
	}
	// Validating templates (compose-go compiles its JSON schema on first
	// use) is most of start-up and nothing /readyz waits for: Open starts
	// it once ready, so it does not compete for the CPU before then, and
	// the first caller that needs the catalog waits (or starts it).
	return &lazyCatalog{done: make(chan struct{}), load: func() *template.Catalog {
		c, err := template.LoadDirs(abs...)
		if err != nil {
			m.log.Error("load templates", "err", err)
			c = template.NewCatalog()
		}
		return c
	}}, nil
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

// Launch waits for the catalog and applies the launch contract.
func (l *lazyCatalog) Launch(name string, in sim.LaunchInput) (*sim.LaunchSpec, error) {
	return l.wait().Launch(name, in)
}
