package template

import (
	"fmt"
	"os"
)

// Result is the validation of one template, for `normsim validate`.
type Result struct {
	Name     string    `json:"name"`
	Path     string    `json:"path"`
	Valid    bool      `json:"valid"`
	Problems []Problem `json:"problems"` // [] when valid
}

// ValidatePath validates what path names: a template directory (one that
// holds manifest.json or compose.yml), a directory of templates, a template
// archive, or a bare manifest.json (only the manifest is judged). It returns
// one Result per template found, sorted by name; the error is only for a path
// that cannot be read. A directory of templates reports name clashes as
// LoadDirs does.
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
		loaded = []*Loaded{Load(path)}
	}
	out := make([]Result, 0, len(loaded))
	for _, l := range loaded {
		r := Result{Name: l.Template.Name, Path: l.Template.Path, Valid: l.Valid(), Problems: l.Problems}
		if r.Problems == nil {
			r.Problems = []Problem{}
		}
		out = append(out, r)
	}
	return out, nil
}
