package template

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
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
// that cannot be read, ErrNotATemplate (wrapped) for a file that is
// none of these, or ctx's when it ends first. A directory of templates
// reports name clashes as LoadDirs does.
func ValidatePath(ctx context.Context, path string) ([]Result, error) {
	loaded, err := loadPath(ctx, path)
	if err != nil {
		return nil, err
	}
	return results(NewCatalog(loaded...)), nil
}

// ValidatePaths validates several paths together, as a sim loads several
// template directories: a name that two of them share is a CONFLICT, the
// first path's template keeping it. A path named twice is judged once. A
// file that is no template is left out and returned in skipped; the
// error is only for a path that cannot be read, or ctx's when it ends
// before every template is judged.
func ValidatePaths(ctx context.Context, paths []string) (res []Result, skipped []string, err error) {
	var loaded []*Loaded
	seen := map[string]bool{}
	for _, p := range paths {
		key := p
		if abs, err := filepath.Abs(p); err == nil {
			key = abs
		}
		if seen[key] {
			continue
		}
		seen[key] = true
		l, err := loadPath(ctx, p)
		if errors.Is(err, ErrNotATemplate) {
			skipped = append(skipped, p)
			continue
		}
		if err != nil {
			return nil, nil, err
		}
		loaded = append(loaded, l...)
	}
	return results(NewCatalog(loaded...)), skipped, nil
}

// loadPath loads each template path names (see ValidatePath).
func loadPath(ctx context.Context, path string) ([]*Loaded, error) {
	st, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("validate: %s does not exist; give a template directory, a directory of templates, a .tar or .tar.gz template, or a manifest.json: %w", path, err)
	}
	if err != nil {
		return nil, fmt.Errorf("validate: %w", err)
	}
	if !st.IsDir() {
		_, isTar := tarBase(filepath.Base(path))
		if !isTar && !strings.EqualFold(filepath.Ext(path), ".json") {
			return nil, fmt.Errorf("validate %s: %w", path, ErrNotATemplate)
		}
		l, err := LoadContext(ctx, path)
		if err != nil {
			return nil, err
		}
		return []*Loaded{l}, nil
	}
	paths, err := templatePaths(path)
	if err != nil {
		return nil, fmt.Errorf("validate: %w", err)
	}
	loaded := make([]*Loaded, 0, len(paths))
	for _, p := range paths {
		l, err := LoadContext(ctx, p)
		if err != nil {
			return nil, err
		}
		loaded = append(loaded, l)
	}
	return loaded, nil
}

// results are a catalog's templates as validate reports them.
func results(c *Catalog) []Result {
	loaded := c.Loaded()
	out := make([]Result, 0, len(loaded))
	for _, l := range loaded {
		r := Result{Name: l.Template.Name, Path: l.Template.Path, Valid: l.Valid(), Problems: l.Problems, Warnings: l.Warnings}
		if r.Problems == nil {
			r.Problems = []Problem{}
		}
		out = append(out, r)
	}
	return out
}
