package template

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"unicode/utf8"

	"go.yaml.in/yaml/v4"

	"github.com/normsim/normsim/sim"
)

// compose-go reads more than compose.yml while it loads a template: the
// files it includes (include:), the files its services extend
// (extends.file), their env and label files, and an included project's
// .env. It reads each whole, as it finds it, with no bound and deaf to
// Ctrl-C: `include: [/dev/zero]` or an alias bomb in an extended file grew
// `normsim validate` to 23 GB. So before compose-go sees a compose file,
// every file it would read is found, judged and costed here, all of them
// together held to the bounds one template file has.
//
// Every file must be inside the template directory (after symlinks) and be
// a regular file: a template is a directory that can be archived and
// carried to another machine, and what lies outside it is not part of it.
// The paths to those files must be written out: a variable in them (an
// operator's value at launch) could point them anywhere.

// maxLoadReads bounds the files a load reads, each time a file is named
// counting once: compose-go reads (or copies) a file for every include
// and extends that names it. The shipped templates read at most two.
const maxLoadReads = 256

// loadWalk is the walk of one compose file and what it names.
type loadWalk struct {
	ctx  context.Context
	dir  string // the template directory, as given (for messages)
	root string // the same with symlinks resolved
	// packed: there is no template directory, the template is an
	// archive's (its files are looked for beside it).
	packed  bool
	reads   int
	bytes   int64    // every file read, each time it is named
	cost    yamlCost // every YAML file, each time it is named
	aliases bool
	// deps are the services each service depends on, by any of the
	// keys compose-go makes a dependency of.
	deps map[string]map[string]bool
	// bases are the services each extends within its own file: it
	// depends on what they depend on.
	bases map[string]string
	// envFiles are the services' env and label files, in the order they
	// are named.
	envFiles []envFileRef
}

// checkLoadFiles judges compose, the compose file of the template in dir,
// and every file compose-go would read for it, against the template
// bounds: each YAML file on its own and all of them together, aliases
// expanded (see yamlbounds.go), and every file read at most maxFileBytes
// in all. It fails with ctx's error when ctx ends between files.
func checkLoadFiles(ctx context.Context, dir string, compose []byte) error {
	_, err := walkLoadFiles(ctx, dir, compose)
	return err
}

// walkLoadFiles is checkLoadFiles, with the walk that found the files.
func walkLoadFiles(ctx context.Context, dir string, compose []byte) (*loadWalk, error) {
	root, err := filepath.EvalSymlinks(dir)
	if err != nil {
		root = filepath.Clean(dir) // an archive's: nothing beside it is read
	}
	w := &loadWalk{ctx: ctx, dir: dir, root: root, packed: err != nil, bytes: int64(len(compose)), deps: map[string]map[string]bool{}, bases: map[string]string{}}
	if err := w.yamlFile(compose, "", dir, "", ""); err != nil {
		return nil, err
	}
	return w, w.checkDependencies()
}

// readsFiles reports whether compose may name a file compose-go reads
// while loading (a false alarm costs a parse).
func readsFiles(compose []byte) bool {
	// A secret's or config's file is not read while loading, but mounted
	// at start: it is judged with the files read, at every launch too.
	return containsAny(compose, "include", "extends", "env_file", "label_file", "secrets", "configs")
}

// namesDependencies reports whether compose may make a service depend on
// another (a false alarm costs a parse).
func namesDependencies(compose []byte) bool {
	return containsAny(compose, "depends_on", "links", "volumes_from", "service:")
}

// containsAny reports whether b may hold one of words once parsed: it
// holds one as written, or may spell one otherwise. In YAML (and JSON) a
// key or value is written other than it reads only through an escape in
// a double-quoted string ("\x69nclude", "\u0069nclude") or a tag
// (!!binary, or a %TAG handle that spells it), so any backslash or "!"
// counts as a word (an attack's "\x69nclude: [/dev/zero]" passed the
// byte search and compose-go read /dev/zero). Folding a multi-line
// scalar joins its lines with a space, so it cannot join a word.
func containsAny(b []byte, words ...string) bool {
	// Nor is a file whose bytes are not UTF-8 searched as text: the YAML
	// parser reads UTF-16 (with its BOM), where "include" is not the
	// bytes "include" (an attack's UTF-16 compose file read /dev/zero).
	if bytes.ContainsAny(b, `\!`) || !utf8.Valid(b) || bytes.IndexByte(b, 0) >= 0 {
		return true
	}
	for _, s := range words {
		if bytes.Contains(b, []byte(s)) {
			return true
		}
	}
	return false
}

// yamlFile costs a YAML file compose-go reads and walks what it names,
// as often as compose-go would: each time a file is named it is costed
// and walked again, since compose-go copies it each time. name is its path
// in the template ("" for compose.yml), wd the directory compose-go
// resolves its relative paths against. extends is the service another
// file extends in it, "" when the file is compose.yml or included: of an
// extended file compose-go follows only that service (and none of its
// includes), so a service may extend another of its own file; as is then
// the extending service, whose dependencies the extended one's become.
func (w *loadWalk) yamlFile(content []byte, name, wd, extends, as string) error {
	c, aliases := expandedCost(content)
	if err := c.err(aliases); err != nil {
		if name == "" {
			return err
		}
		return fmt.Errorf("%s: %w", name, err)
	}
	w.aliases = w.aliases || aliases
	w.cost = w.cost.add(c, 0)
	if err := w.cost.err(w.aliases); err != nil {
		return fmt.Errorf("together with the files it includes and extends, it %w", err)
	}
	if !readsFiles(content) && !namesDependencies(content) {
		return nil
	}
	where := ""
	if name != "" {
		where = name + ": "
	}
	dec := yaml.NewDecoder(bytes.NewReader(content))
	for {
		var doc map[string]any
		if err := dec.Decode(&doc); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return nil // not a mapping or not YAML: compose-go says which
		}
		services, _ := doc["services"].(map[string]any)
		var names []string
		// In an extended file, the service and those it extends in turn
		// within the file.
		for n, seen := extends, map[string]bool{}; n != "" && !seen[n]; n = sameFileExtends(services[n]) {
			seen[n] = true
			names = append(names, n)
		}
		if extends == "" {
			if err := w.includes(doc["include"], where, wd); err != nil {
				return err
			}
			for _, key := range []string{"secrets", "configs"} {
				if err := w.fileObjects(doc[key], where+key, wd); err != nil {
					return err
				}
			}
			names = slices.Sorted(maps.Keys(services))
		}
		for _, s := range names {
			svc, _ := services[s].(map[string]any)
			owner := s
			if extends != "" {
				owner = as
			}
			w.addDependencies(owner, svc)
			if err := w.service(svc, where+"services."+s, wd, owner); err != nil {
				return err
			}
		}
	}
}

// includes walks a compose file's include list. compose-go resolves an
// entry's paths against the including file's working directory, and what
// the included file names against its project directory: the directory
// of its first path unless project_directory says otherwise.
func (w *loadWalk) includes(v any, where, wd string) error {
	list, _ := v.([]any)
	for i, e := range list {
		at := fmt.Sprintf("%sinclude[%d]", where, i)
		var paths []any
		var projectDir, envFiles any
		switch e := e.(type) {
		case string:
			paths = []any{e}
		case map[string]any:
			switch p := e["path"].(type) {
			case string:
				paths = []any{p}
			case []any:
				paths = p
			}
			projectDir, envFiles = e["project_directory"], e["env_file"]
		}
		var files []string
		for j, p := range paths {
			s, ok := p.(string)
			if !ok {
				continue // compose-go says what is wrong
			}
			f, err := w.resolve(s, wd, fmt.Sprintf("%s.path[%d]", at, j))
			if err != nil {
				return err
			}
			files = append(files, f)
		}
		if len(files) == 0 {
			continue
		}
		pd := filepath.Dir(files[0])
		if s, ok := projectDir.(string); ok {
			d, err := w.resolve(s, wd, at+".project_directory")
			if err != nil {
				return err
			}
			pd = d
		}
		if envFiles != nil {
			for j, f := range stringsOf(envFiles) {
				if f == "/dev/null" { // compose-go skips it
					continue
				}
				p, err := w.resolve(f, wd, fmt.Sprintf("%s.env_file[%d]", at, j))
				if err != nil {
					return err
				}
				if err := w.plainFile(p, fmt.Sprintf("%s.env_file[%d]", at, j), true); err != nil {
					return err
				}
			}
		} else if err := w.plainFile(filepath.Join(pd, ".env"), at+" (its project directory's .env)", false); err != nil {
			return err
		}
		for j, f := range files {
			content, err := w.read(f, fmt.Sprintf("%s.path[%d]", at, j))
			if err != nil {
				return err
			}
			if content == nil {
				return w.missing(f, fmt.Sprintf("%s.path[%d]", at, j))
			}
			if err := w.yamlFile(content, w.rel(f), pd, "", ""); err != nil {
				return err
			}
		}
	}
	return nil
}

// fileObjects judges the top-level secrets or configs of a compose file
// (at is "secrets" or "configs"), which compose mounts into the services'
// containers at start. A file: source is judged as an env_file is: written
// out, inside the template, and there (an archive's beside it, where
// nothing is extracted), since a missing one fails every start ("bind
// source path does not exist"). An environment: source is refused:
// compose takes it from the environment it runs with, and normsim runs
// compose with none, neither the shell's nor the parameters, so every
// start would fail ("environment variable ... is not set").
func (w *loadWalk) fileObjects(v any, at, wd string) error {
	objects, _ := v.(map[string]any)
	for _, name := range slices.Sorted(maps.Keys(objects)) {
		o, _ := objects[name].(map[string]any)
		field := at + "." + name
		if env, ok := o["environment"].(string); ok {
			fix := "put the value in a file inside the template and name it with file:"
			if strings.HasSuffix(at, "configs") {
				fix = fmt.Sprintf("write content: ${%s} (a parameter's value is interpolated there), or put the value in a file inside the template and name it with file:", env)
			}
			return fmt.Errorf("%s.environment: %q: normsim runs compose with no environment (neither the shell's, as docker compose up would, nor the parameters), so every launch would fail to start with \"environment variable %q ... is not set\"; %s", field, env, env, fix)
		}
		s, ok := o["file"].(string)
		if !ok {
			continue // external, content, or compose-go's to refuse
		}
		p, err := w.resolve(s, wd, field+".file")
		if err != nil {
			return err
		}
		switch _, err := os.Stat(p); {
		case errors.Is(err, fs.ErrNotExist):
			return w.missing(p, field+".file")
		case err != nil:
			return fmt.Errorf("%s.file: cannot read %q: %v", field, w.rel(p), err)
		}
	}
	return nil
}

// service walks what one service names: the file it extends, relative to
// the working directory of the file it is in, and its env and label files.
func (w *loadWalk) service(svc map[string]any, at, wd, owner string) error {
	if ext, ok := svc["extends"].(map[string]any); ok {
		service, _ := ext["service"].(string)
		if s, ok := ext["file"].(string); ok && service != "" {
			f, err := w.resolve(s, wd, at+".extends.file")
			if err != nil {
				return err
			}
			content, err := w.read(f, at+".extends.file")
			if err != nil {
				return err
			}
			if content == nil {
				return w.missing(f, at+".extends.file")
			}
			if err := w.yamlFile(content, w.rel(f), filepath.Dir(f), service, owner); err != nil {
				return err
			}
		}
	}
	for _, key := range []string{"env_file", "label_file"} {
		for j, r := range fileRefsOf(svc[key]) {
			field := fmt.Sprintf("%s.%s[%d]", at, key, j)
			f, err := w.resolve(r.path, wd, field)
			if err != nil {
				return err
			}
			// compose-go reads them only at launch (validation skips
			// resolving them); a required one missing is said now.
			if err := w.plainFile(f, field, r.required); err != nil {
				return err
			}
			ref := envFileRef{field: field, path: f, file: w.rel(f), labels: true}
			if key == "env_file" {
				ref.labels, ref.format, ref.environment = false, r.format, environmentKeys(svc["environment"])
			}
			w.envFiles = append(w.envFiles, ref)
		}
	}
	return nil
}

// sameFileExtends is the service svc extends in its own file, if any.
func sameFileExtends(svc any) string {
	m, _ := svc.(map[string]any)
	switch e := m["extends"].(type) {
	case string:
		return e
	case map[string]any:
		if _, other := e["file"]; !other {
			s, _ := e["service"].(string)
			return s
		}
	}
	return ""
}

// fileRef is one path of a path field, and whether compose-go fails when
// the file is not there.
type fileRef struct {
	path     string
	required bool
	format   string // an env file's (envfiles.go)
}

// stringsOf is the paths of a path field as compose writes it: a string,
// or a list of strings or of {path: ...} mappings; what is neither is
// compose-go's to refuse.
func stringsOf(v any) []string {
	var out []string
	for _, r := range fileRefsOf(v) {
		out = append(out, r.path)
	}
	return out
}

// fileRefsOf is stringsOf with each path's `required` (true unless a
// mapping says `required: false`, as compose-go reads it).
func fileRefsOf(v any) []fileRef {
	switch v := v.(type) {
	case string:
		return []fileRef{{path: v, required: true}}
	case []any:
		var out []fileRef
		for _, e := range v {
			switch e := e.(type) {
			case string:
				out = append(out, fileRef{path: e, required: true})
			case map[string]any:
				if p, ok := e["path"].(string); ok {
					format, _ := e["format"].(string)
					out = append(out, fileRef{path: p, required: !isFalse(e["required"]), format: format})
				}
			}
		}
		return out
	}
	return nil
}

// isFalse reports whether a YAML value says false, as compose-go's
// OptOut reads it.
func isFalse(v any) bool {
	switch v := v.(type) {
	case bool:
		return !v
	case string:
		return strings.EqualFold(v, "false")
	}
	return false
}

// remote reports whether p names a file docker compose would fetch: a
// URL (oci://, https://…) or a git remote (git@host:repo).
func remote(p string) bool {
	scheme, _, ok := strings.Cut(p, "://")
	return ok && scheme != "" && !strings.ContainsAny(scheme, "/\\.") || strings.HasPrefix(p, "git@")
}

// resolve is the path compose-go reads for p, written in a file whose
// working directory is wd, refused when it holds a variable or leaves the
// template directory.
func (w *loadWalk) resolve(p, wd, field string) (string, error) {
	if strings.Contains(p, "$") {
		return "", fmt.Errorf("%s: %q holds a variable; in a template the paths of files read while loading (include, extends.file, env_file, label_file, a secret's or config's file) must be written out, since a value given at launch could point them anywhere", field, p)
	}
	if remote(p) {
		// docker compose fetches these with its OCI and git loaders;
		// compose-go alone reads them as paths, and Clean would mangle
		// the name ("oci:/registry…") in the error.
		return "", fmt.Errorf("%s: %q is a remote file, which docker compose fetches (OCI artifact or git); normsim reads a template's files from its directory only and fetches nothing, so that the template is whole wherever it is copied; copy the file into the template and name it by its path", field, p)
	}
	if strings.HasPrefix(p, "~") {
		// compose-go reads "~/x" in the home directory of whoever runs
		// normsim; here it would look like a directory named "~".
		return "", fmt.Errorf("%s: %q starts with ~, the home directory of whoever runs normsim, which is outside the template directory; a template's files (include, extends.file, env_file, label_file, a secret's or config's file) must be inside it", field, p)
	}
	if !filepath.IsAbs(p) {
		p = filepath.Join(wd, p)
	}
	p = filepath.Clean(p)
	var in bool
	switch real, err := filepath.EvalSymlinks(p); {
	case errors.Is(err, fs.ErrNotExist):
		// compose-go says it is missing; its name must still be inside.
		in = inside(filepath.Clean(w.dir), p) || inside(w.root, p)
	case err != nil:
		return "", fmt.Errorf("%s: cannot read %q: %v", field, w.rel(p), err)
	default:
		in = inside(w.root, real)
	}
	if !in {
		return "", fmt.Errorf("%s: %q is outside the template directory; a template's files (include, extends.file, env_file, label_file, a secret's or config's file) must be inside it, so that the template is whole wherever it is copied", field, w.rel(p))
	}
	return p, nil
}

// inside reports whether p is dir or below it.
func inside(dir, p string) bool {
	rel, err := filepath.Rel(dir, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) && !filepath.IsAbs(rel)
}

// rel names p for messages: relative to the template directory.
func (w *loadWalk) rel(p string) string {
	if r, err := filepath.Rel(w.dir, p); err == nil && inside(w.dir, p) {
		return filepath.ToSlash(r)
	}
	return p
}

// count adds a read of n bytes, refusing past maxLoadReads or maxFileBytes.
func (w *loadWalk) count(n int64, field string) error {
	if err := w.ctx.Err(); err != nil {
		return err
	}
	w.reads++
	if w.reads > maxLoadReads {
		return fmt.Errorf("%s: loading it would read files more than %d times (each include and extends counts, and a file that includes itself, directly or not, never ends); a template may read at most %d", field, maxLoadReads, maxLoadReads)
	}
	w.bytes += n
	if w.bytes > maxFileBytes {
		return fmt.Errorf("%s: loading it would read more than %s (compose.yml and every file it includes, extends or reads env and labels from, each time it is named); a template may read at most %s, the size limit of one file", field, mib(maxFileBytes), mib(maxFileBytes))
	}
	return nil
}

// regular checks that p, if it exists, is a regular file and counts it;
// exists is false for a file that is not there (compose-go says so, or
// skips it where that is allowed).
func (w *loadWalk) regular(p, field string) (exists bool, err error) {
	st, err := os.Stat(p)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("%s: cannot read %q: %v", field, w.rel(p), err)
	}
	if !st.Mode().IsRegular() {
		return false, fmt.Errorf("%s: %q is not a regular file (%s); a template's files must be", field, w.rel(p), sim.FileKind(st.Mode()))
	}
	return true, w.count(st.Size(), field)
}

// plainFile judges a file compose-go reads that is not YAML (an env or
// label file); one that is required must be there.
func (w *loadWalk) plainFile(p, field string, required bool) error {
	exists, err := w.regular(p, field)
	if err != nil || exists || !required {
		return err
	}
	return w.missing(p, field)
}

// missing is the error for a file compose-go needs that is not there.
func (w *loadWalk) missing(p, field string) error {
	if w.packed {
		// An archive's files resolve beside it, where nothing is
		// unpacked: say so rather than name a path the user never wrote.
		return fmt.Errorf("%s: %q is not there: the files a template archive's compose.yml names are read beside the archive, as if it were unpacked to %s (nothing is extracted); unpack the archive there, or use the template directory", field, w.rel(p), w.dir)
	}
	fix := "add it"
	if strings.Contains(field, "env_file") {
		fix += ", or mark it `required: false`"
	}
	return fmt.Errorf("%s: %q does not exist in the template directory; %s", field, w.rel(p), fix)
}

// read reads a YAML file compose-go would read; nil when it is not there.
func (w *loadWalk) read(p, field string) ([]byte, error) {
	exists, err := w.regular(p, field)
	if err != nil || !exists {
		return nil, err
	}
	data, err := readLimited(p)
	if err != nil {
		return nil, fmt.Errorf("%s: cannot read %q: %v", field, w.rel(p), err)
	}
	return data, nil
}

// addDependencies records what svc, taken as owner's, makes owner depend
// on: depends_on, links, volumes_from and the service: modes, as
// compose-go adds each to the service's depends_on.
func (w *loadWalk) addDependencies(owner string, svc map[string]any) {
	deps := w.deps[owner]
	if deps == nil {
		deps = map[string]bool{}
		w.deps[owner] = deps
	}
	switch d := svc["depends_on"].(type) {
	case []any:
		for _, e := range d {
			if s, ok := e.(string); ok {
				deps[s] = true
			}
		}
	case map[string]any:
		for s := range d {
			deps[s] = true
		}
	}
	for _, key := range []string{"links", "volumes_from"} {
		list, _ := svc[key].([]any)
		for _, e := range list {
			s, _ := e.(string)
			if s == "" || strings.HasPrefix(s, "container:") {
				continue
			}
			name, _, _ := strings.Cut(s, ":") // "db:alias", "data:ro"
			deps[name] = true
		}
	}
	for _, key := range []string{"network_mode", "ipc", "pid"} {
		if s, ok := svc[key].(string); ok {
			if name, ok := strings.CutPrefix(s, "service:"); ok {
				deps[name] = true
			}
		}
	}
	if base := sameFileExtends(svc); base != "" && base != owner {
		w.bases[owner] = base
	}
}

// maxDependencyPaths bounds the paths through the services' dependencies.
// compose-go looks for a cycle by following every path from every service
// (not each service once), so its time doubles with each service of a
// dense graph: 24 services, each depending on all before it, took it 16 s
// in 2 KB. A product's services make a few dozen paths.
const maxDependencyPaths = 100_000

// checkDependencies refuses dependencies that form a cycle or that make
// more than maxDependencyPaths paths, before compose-go follows them.
func (w *loadWalk) checkDependencies() error {
	// A service extending another of its file depends on what it does.
	for owner := range w.deps {
		seen := map[string]bool{owner: true}
		for base := w.bases[owner]; base != "" && !seen[base]; base = w.bases[base] {
			seen[base] = true
			for d := range w.deps[base] {
				w.deps[owner][d] = true
			}
		}
	}
	names := slices.Sorted(maps.Keys(w.deps))
	const (
		unvisited = iota
		visiting
		done
	)
	state := map[string]int{}
	paths := map[string]int64{} // paths starting at a service, itself included
	var stack []string
	var visit func(n string) error
	visit = func(n string) error {
		switch state[n] {
		case done:
			return nil
		case visiting:
			i := slices.Index(stack, n)
			return fmt.Errorf("services: depends_on (with links, volumes_from and service: modes) forms a cycle: %s -> %s; a service cannot depend on itself, directly or not", strings.Join(stack[i:], " -> "), n)
		}
		state[n] = visiting
		stack = append(stack, n)
		p := int64(1)
		for _, d := range slices.Sorted(maps.Keys(w.deps[n])) {
			if _, known := w.deps[d]; !known {
				continue // compose-go says the service is undefined
			}
			if err := visit(d); err != nil {
				return err
			}
			p = min(p+paths[d], maxDependencyPaths+1)
		}
		stack = stack[:len(stack)-1]
		state[n], paths[n] = done, p
		return nil
	}
	var total int64
	for _, n := range names {
		if err := visit(n); err != nil {
			return err
		}
		total = min(total+paths[n], maxDependencyPaths+1)
	}
	if total > maxDependencyPaths {
		return fmt.Errorf("services: depends_on (with links, volumes_from and service: modes) makes more than %d paths from service to service, which compose-go follows one by one; a template may make at most %d: let a service depend only on what it needs directly, not on what its dependencies depend on",
			maxDependencyPaths, maxDependencyPaths)
	}
	return nil
}
