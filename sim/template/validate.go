package template

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// ErrNotATemplate is ValidatePath's answer for a file that is neither a
// template archive nor a .json manifest (a README.md beside the templates,
// say): the catalog skips such files in a directory of templates, and a
// shell glob such as templates/* hands them to validate one by one.
var ErrNotATemplate = errors.New("not a template: give a directory, a .tar/.tar.gz/.tgz archive or a manifest .json")

// Result is the validation of one template, for `normsim validate`.
type Result struct {
	Name     string    `json:"name"`
	Path     string    `json:"path"`
	Valid    bool      `json:"valid"`
	Problems []Problem `json:"problems"` // [] when valid
	// Warnings are what a launch will adjust in the compose file to run
	// the template beside other instances; never a reason to fail.
	Warnings []string `json:"warnings,omitempty"`
}

// ValidatePath validates what path names: a template directory (one that
// holds manifest.json or compose.yml), a directory of templates, a template
// archive, or a bare manifest.json (only the manifest is judged). It returns
// one Result per template found, sorted by name; the error is only for a path
// that cannot be read, or ErrNotATemplate (wrapped) for a file that is
// none of these. A directory of templates reports name clashes as LoadDirs
// does.
func ValidatePath(path string) ([]Result, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("validate: %w", err)
	}
	var loaded []*Loaded
	if st.IsDir() {
		c, err := LoadDirs(path)
		if err != nil {
			return nil, fmt.Errorf("validate: %w", err)
		}
		loaded = c.Loaded()
	} else {
		_, isTar := tarBase(filepath.Base(path))
		if !isTar && !strings.EqualFold(filepath.Ext(path), ".json") {
			return nil, fmt.Errorf("validate %s: %w", path, ErrNotATemplate)
		}
		loaded = []*Loaded{Load(path)}
	}
	out := make([]Result, 0, len(loaded))
	for _, l := range loaded {
		r := Result{Name: l.Template.Name, Path: l.Template.Path, Valid: l.Valid(), Problems: l.Problems, Warnings: l.Warnings}
		if r.Problems == nil {
			r.Problems = []Problem{}
		}
		out = append(out, r)
	}
	return out, nil
}
