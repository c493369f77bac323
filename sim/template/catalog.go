package template

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/normsim/normsim/sim"
)

// Catalog is the set of loaded templates; it implements sim.Catalog. It is
// read-only once built, so safe for concurrent use.
type Catalog struct {
	all    []*Loaded          // sorted by name, then load order
	byName map[string]*Loaded // the first template loaded under each name
}

var _ sim.Catalog = (*Catalog)(nil)

// NewCatalog builds a catalog from loaded templates. When two share a name
// the first keeps it and each later one is listed as invalid with a
// CONFLICT problem naming both paths.
func NewCatalog(loaded ...*Loaded) *Catalog {
	c := &Catalog{byName: map[string]*Loaded{}}
	for _, l := range loaded {
		if first, dup := c.byName[l.Template.Name]; dup {
			l.Problems = append([]Problem{{
				Code: sim.EConflict,
				Message: fmt.Sprintf("%s: another template of this name was loaded first, from %s; this one (%s) is ignored",
					l.Template.Name, first.Template.Path, l.Template.Path),
			}}, l.Problems...)
			l.finish()
		} else {
			c.byName[l.Template.Name] = l
		}
		c.all = append(c.all, l)
	}
	sort.SliceStable(c.all, func(i, j int) bool { return c.all[i].Template.Name < c.all[j].Template.Name })
	return c
}

// LoadDirs loads every template below each dir, in order. A dir holding
// manifest.json or compose.yml is itself a template; otherwise each of its
// subdirectories and .tar / .tar.gz / .tgz files is one (names starting
// with "." are skipped, other files ignored). A broken template is listed
// with its problems and never stops the others; the error is for a dir
// that cannot be read, or ctx's when it ends first.
func LoadDirs(ctx context.Context, dirs ...string) (*Catalog, error) {
	srcs, err := Sources(dirs...)
	if err != nil {
		return nil, err
	}
	loaded := make([]*Loaded, 0, len(srcs))
	for _, src := range srcs {
		l, err := LoadContext(ctx, src.Path)
		if err != nil {
			return nil, err
		}
		loaded = append(loaded, l)
	}
	return NewCatalog(loaded...), nil
}

// Source is a template LoadDirs would load, named as Load will name it,
// so that a catalog can be told which template is which without loading
// any of them.
type Source struct {
	Name string
	Path string
}

// Sources lists the templates below each dir in LoadDirs' order, reading
// only the directories. NewCatalog keeps a name for the first of them.
func Sources(dirs ...string) ([]Source, error) {
	var out []Source
	for _, dir := range dirs {
		paths, err := templatePaths(dir)
		if err != nil {
			return nil, err
		}
		for _, p := range paths {
			out = append(out, Source{Name: nameOf(p), Path: p})
		}
	}
	return out, nil
}

// templatePaths lists the templates below dir.
func templatePaths(dir string) ([]string, error) {
	if isTemplateDir(dir) {
		return []string{dir}, nil
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("read templates dir: %w", err)
	}
	var out []string
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, ".") {
			continue
		}
		p := filepath.Join(dir, name)
		info, err := os.Stat(p) // follows symlinks
		if err != nil {
			out = append(out, p) // Load reports it
			continue
		}
		if _, isTar := tarBase(name); info.IsDir() || (isTar && info.Mode().IsRegular()) {
			out = append(out, p)
		}
	}
	return out, nil
}

func isTemplateDir(dir string) bool {
	for _, name := range []string{manifestFile, composeFile} {
		if _, err := os.Stat(filepath.Join(dir, name)); err == nil {
			return true
		}
	}
	return false
}

// List returns every template, valid or not, sorted by name.
func (c *Catalog) List() []*sim.Template {
	out := make([]*sim.Template, len(c.all))
	for i, l := range c.all {
		out[i] = l.Template
	}
	return out
}

// Loaded returns every loaded template with its problems, sorted by name.
func (c *Catalog) Loaded() []*Loaded {
	return append([]*Loaded(nil), c.all...)
}

// Lookup returns the loaded template of that name, or nil.
func (c *Catalog) Lookup(name string) *Loaded { return c.byName[name] }

// Get returns the template of that name, valid or not (callers check
// Valid), or a NOT_FOUND error.
func (c *Catalog) Get(name string) (*sim.Template, error) {
	l := c.byName[name]
	if l == nil {
		return nil, sim.Errorf(sim.ENotFound, "template %q not found", name)
	}
	return l.Template, nil
}

// Launch applies the launch contract to the named template:
//   - params: unknown names, NORSK_* names, a required param without value
//     or default, and values that break the param's type or bounds are
//     PARAMS_INVALID; blank values count as not given, so defaults apply;
//   - allocatedPorts: blank is closed, "auto" reuses in.Instance.Ports[param]
//     or takes the first free port from preferred upward, a number is that
//     port; opened ports are interpolated under param, published (host port
//     = container port) on the declared service if any, and listed in
//     NORSK_ALLOCATED_PORTS;
//   - compose.yml is interpolated with the param values and opened ports
//     only, never the host's environment;
//   - every service gets the host.docker.internal:host-gateway extra host,
//     normsim's labels, in.Env, and the contract env (NORSK_WORKER_WS_URL and
//     NORSK_WORKER_TOKEN when the node has a job socket,
//     NORSK_ALLOCATED_PORTS when allocatedPorts are declared,
//     NORSK_STUDIO_ACCESS when the manifest lists in.StudioAccess), which
//     replaces any same-named compose entry.
//
// An unknown template is NOT_FOUND, an invalid one TEMPLATE_INVALID.
// CheckParams judges params as Launch would (see sim.Catalog).
func (c *Catalog) CheckParams(name string, params map[string]string) error {
	l := c.byName[name]
	if l == nil {
		return sim.Errorf(sim.ENotFound, "template %q not found", name)
	}
	return l.CheckParams(params)
}

func (c *Catalog) Launch(name string, in sim.LaunchInput) (*sim.LaunchSpec, error) {
	l := c.byName[name]
	if l == nil {
		return nil, sim.Errorf(sim.ENotFound, "template %q not found", name)
	}
	return l.Launch(in)
}
