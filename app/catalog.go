package app

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/normsim/normsim/sim/template"
)

// loadCatalog loads the templates below each dir. With no dirs it uses
// ./templates when present; otherwise the embedded defaults are unpacked to
// a temporary directory so a fresh machine has something to launch.
func (m *Main) loadCatalogDirs() (*template.Catalog, error) {
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
	c, err := template.LoadDirs(abs...)
	if err != nil {
		return nil, fmt.Errorf("--templates: %w", err)
	}
	return c, nil
}

var _ fs.FS // DefaultTemplates is an fs.FS
