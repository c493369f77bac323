package template

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"math"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"unicode"
	"unicode/utf8"

	composetpl "github.com/compose-spec/compose-go/v2/template"
	"github.com/compose-spec/compose-go/v2/types"
	"go.yaml.in/yaml/v4"

	"github.com/normsim/normsim/sim"
)

// Problem is one validation finding: the contract code, the file it is in
// ("" for the template as a whole), the field path inside that file ("" for
// the file as a whole) and a message that starts with the path (or the
// file) and names the rule and the value that broke it.
type Problem struct {
	Code    string `json:"code"`
	File    string `json:"file,omitempty"`
	Path    string `json:"path"`
	Message string `json:"message"`
}

// String is the problem as `normsim validate` prints it: "CODE: message".
func (p Problem) String() string { return p.Code + ": " + p.Message }

// Loaded is one loaded product template: what the rest of normsim sees
// (Template) plus what validation found and what launching needs.
type Loaded struct {
	// Template is never nil. When Problems is not empty it is invalid and
	// its Error is the first problem.
	Template *sim.Template
	// Problems lists every problem, in the contract's order: the manifest's,
	// then parameters.yaml's, then compose.yml's.
	Problems []Problem
	// Manifest is the validated manifest, nil when it is missing or invalid.
	Manifest *Manifest
	// Warnings are what normsim will change in the compose file when it
	// launches the template beside other instances (see adjust); they do
	// not make it invalid.
	Warnings []string
	// Dir is the directory relative paths in the template resolve against:
	// the template directory, or for an archive the path without its
	// extension (as if unpacked next to itself; nothing is extracted).
	Dir string

	params  []sim.Parameter
	compose []byte
	// envFileVars are the variables the services' env and label files
	// take from outside, read as the template loaded.
	envFileVars  []envFileVariable
	manifestOnly bool
	// packed: the template is an archive, whose relative paths resolve
	// beside it (Dir), where nothing is extracted.
	packed   bool
	projects projectCache
}

// Valid reports whether the template passed validation.
func (l *Loaded) Valid() bool { return len(l.Problems) == 0 }

// maxFileBytes caps each of the three files read from a template.
const maxFileBytes = 8 << 20

// Files at the template root.
const (
	manifestFile   = "manifest.json"
	parametersFile = "parameters.yaml"
)

// rootFiles is what a template's root holds that validation reads.
type rootFiles struct {
	data map[string][]byte
	// failed names files that exist but could not be read (already
	// reported); broken says nothing could be read at all.
	failed map[string]bool
	broken bool
	// hint explains a missing manifest (an archive that wraps its files in
	// a directory).
	hint string
}

var tarExts = []string{".tar.gz", ".tgz", ".tar"}

// tarBase returns name without its archive extension and whether it has one.
func tarBase(name string) (string, bool) {
	lower := strings.ToLower(name)
	for _, ext := range tarExts {
		if strings.HasSuffix(lower, ext) && len(name) > len(ext) {
			return name[:len(name)-len(ext)], true
		}
	}
	return name, false
}

// Load is LoadContext without a deadline: it always returns the template.
func Load(p string) *Loaded {
	l, _ := LoadContext(context.Background(), p)
	return l
}

// LoadContext loads and validates one template: a directory, a .tar /
// .tar.gz / .tgz archive, or a bare manifest.json (then only the manifest is
// judged, and the result cannot be launched). What is wrong with the
// template is recorded on the result; the error is only ctx's, when it
// ends before the template is judged, and then there is no result. The
// template is named after the directory, the archive without its
// extension, or the bare manifest's directory.
func LoadContext(ctx context.Context, p string) (*Loaded, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	abs, err := filepath.Abs(p)
	if err != nil {
		abs = filepath.Clean(p)
	}
	l := &Loaded{
		Template: &sim.Template{Name: filepath.Base(abs), Path: abs, Parameters: []sim.Parameter{}},
		Dir:      abs,
	}
	st, err := os.Stat(abs)
	files := rootFiles{data: map[string][]byte{}, failed: map[string]bool{}}
	switch {
	case err != nil:
		l.add(Problem{Code: sim.EManifestMissing, Message: fmt.Sprintf("%s: cannot read the template: %v", filepath.Base(abs), err)})
		files.broken = true
	case st.IsDir():
		readDir(l, abs, &files)
	case !st.Mode().IsRegular():
		// Opening a named pipe would wait for a writer, for ever.
		l.add(Problem{Code: sim.EManifestMissing, Message: fmt.Sprintf("%s: cannot read the template: is not a regular file (%s)", filepath.Base(abs), sim.FileKind(st.Mode()))})
		files.broken = true
	default:
		if base, isTar := tarBase(filepath.Base(abs)); isTar {
			l.Template.Name = base
			l.Dir = filepath.Join(filepath.Dir(abs), base)
			l.packed = true
			if err := readTar(ctx, l, abs, &files); err != nil {
				return nil, err
			}
		} else {
			l.manifestOnly = true
			l.Dir = filepath.Dir(abs)
			l.Template.Name = filepath.Base(l.Dir)
			data, err := readLimited(abs)
			if err != nil {
				l.add(Problem{Code: sim.EManifestMissing, File: manifestFile, Message: fmt.Sprintf("%s: cannot read: %v", filepath.Base(abs), err)})
				files.broken = true
			} else {
				files.data[manifestFile] = data
			}
		}
	}
	if p, bad := nameProblem(l.Template.Name); bad {
		l.add(p)
	}
	if !files.broken {
		if err := l.validate(ctx, files); err != nil {
			return nil, err
		}
	}
	// A check across files (the manifest's against compose.yml's) runs
	// after them; the problems keep the contract's order of files.
	slices.SortStableFunc(l.Problems, func(a, b Problem) int { return fileRank(a.File) - fileRank(b.File) })
	l.finish()
	return l, nil
}

// fileRank orders problems by file as the contract lists them: the
// template's own (its name), the manifest's, parameters.yaml's, then
// compose.yml's.
func fileRank(file string) int {
	switch file {
	case "":
		return 0
	case manifestFile:
		return 1
	case parametersFile:
		return 2
	}
	return 3
}

// nameProblem refuses a template name a reader cannot see whole: one with
// an invisible or control character (a zero-width space, a bidi override),
// bytes that are not UTF-8, or blanks at an end. Such a name looks like
// another's in every list, and the wrong one is launched.
func nameProblem(name string) (Problem, bool) {
	bad := func(why string) (Problem, bool) {
		return Problem{Code: sim.ETemplateInvalid, Message: fmt.Sprintf(
			"template name %+q %s, so it can look like another template's; rename the directory (or archive)", name, why)}, true
	}
	if !utf8.ValidString(name) {
		return bad("is not UTF-8")
	}
	if strings.TrimSpace(name) != name {
		return bad("begins or ends with a blank")
	}
	for i, r := range name {
		if !unicode.IsGraphic(r) || unicode.Is(unicode.Cf, r) {
			return bad(fmt.Sprintf("holds the invisible character %U at byte %d", r, i))
		}
	}
	return Problem{}, false
}

// nameOf is the name LoadContext gives the template at p (see there).
func nameOf(p string) string {
	abs, err := filepath.Abs(p)
	if err != nil {
		abs = filepath.Clean(p)
	}
	st, err := os.Stat(abs)
	switch {
	case err != nil || st.IsDir():
		return filepath.Base(abs)
	default:
		if base, isTar := tarBase(filepath.Base(abs)); isTar {
			return base
		}
		return filepath.Base(filepath.Dir(abs))
	}
}

func (l *Loaded) add(p ...Problem) { l.Problems = append(l.Problems, p...) }

// readDir reads the root files of a template directory.
func readDir(l *Loaded, dir string, files *rootFiles) {
	root, rootErr := filepath.EvalSymlinks(dir)
	for _, name := range []string{manifestFile, parametersFile, composeFile} {
		p := filepath.Join(dir, name)
		data, err := readLimited(p)
		if err == nil && rootErr == nil {
			err = linkedInside(root, p)
		}
		switch {
		case errors.Is(err, fs.ErrNotExist):
		case err != nil:
			l.add(Problem{Code: codeOf(name), File: name, Message: fmt.Sprintf("%s: cannot read: %v", name, err)})
			files.failed[name] = true
		default:
			files.data[name] = data
		}
	}
}

// linkedInside refuses a root file that is a link to a file outside the
// template directory (root, links resolved), as compose.yml may name no
// such file: the template would not be whole wherever it is copied.
func linkedInside(root, p string) error {
	real, err := filepath.EvalSymlinks(p)
	if err != nil {
		return err
	}
	if !inside(root, real) {
		return fmt.Errorf("is a link to %s, outside the template directory; a template's files must be inside it, so that the template is whole wherever it is copied: copy the file in", real)
	}
	return nil
}

// readLimited reads a template's file, at most maxFileBytes of it. It is
// judged before it is opened: opening a named pipe waits for a writer
// (for ever, deaf to Ctrl-C), and a device such as /dev/zero never ends.
func readLimited(p string) ([]byte, error) {
	st, err := os.Stat(p)
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("is not a regular file (%s)", sim.FileKind(st.Mode()))
	}
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if st, err = f.Stat(); err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() { // swapped since
		return nil, fmt.Errorf("is not a regular file (%s)", sim.FileKind(st.Mode()))
	}
	data, err := io.ReadAll(io.LimitReader(f, maxFileBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxFileBytes {
		return nil, fmt.Errorf("larger than %d bytes", maxFileBytes)
	}
	return data, nil
}

// codeOf is the validation code of a root file.
func codeOf(name string) string {
	switch name {
	case manifestFile:
		return sim.EManifestInvalid
	case parametersFile:
		return sim.EParametersInvalid
	default:
		return sim.EComposeInvalid
	}
}

// maxArchiveBytes bounds what an archive may hold once decompressed: all
// of it is read to find the root files (a later one of a name replaces an
// earlier), and a few kilobytes of gzip can hold gigabytes of zeros (a
// 42 MB archive of 40 GiB took 10 s). A template's files are far smaller.
const maxArchiveBytes = 256 << 20

// archiveReader is an archive's decompressed bytes, failing past
// maxArchiveBytes or once ctx ends.
type archiveReader struct {
	ctx  context.Context
	r    io.Reader
	read int64
}

func (a *archiveReader) Read(p []byte) (int, error) {
	if err := a.ctx.Err(); err != nil {
		return 0, err
	}
	if a.read > maxArchiveBytes {
		return 0, fmt.Errorf("holds more than %s once decompressed; a template archive may hold at most %s: archive only the template's files", mib(maxArchiveBytes), mib(maxArchiveBytes))
	}
	n, err := a.r.Read(p)
	a.read += int64(n)
	return n, err
}

// readTar reads the root files of a template archive, gzipped or not
// (sniffed, whatever the extension says). The error is ctx's, when it
// ends first; what is wrong with the archive is a problem on l.
func readTar(ctx context.Context, l *Loaded, p string, files *rootFiles) error {
	fail := func(err error) {
		l.add(Problem{Code: sim.EManifestMissing, Message: fmt.Sprintf("%s: cannot read the archive: %v", filepath.Base(p), err)})
		files.broken = true
	}
	f, err := os.Open(p)
	if err != nil {
		fail(err)
		return nil
	}
	defer f.Close()
	br := bufio.NewReader(f)
	var r io.Reader = br
	if magic, _ := br.Peek(2); bytes.Equal(magic, []byte{0x1f, 0x8b}) {
		zr, err := gzip.NewReader(br)
		if err != nil {
			fail(err)
			return nil
		}
		defer zr.Close()
		r = zr
	}
	tr := tar.NewReader(&archiveReader{ctx: ctx, r: r})
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err != nil {
			fail(err)
			return nil
		}
		name := path.Clean(strings.TrimPrefix(h.Name, "./"))
		base := path.Base(name)
		if name != base { // not at the root
			if base == manifestFile && strings.Count(name, "/") == 1 && files.hint == "" {
				files.hint = fmt.Sprintf(" (the archive has %s: archive the template's contents, not its directory)", name)
			}
			continue
		}
		if h.Typeflag != tar.TypeReg || (name != manifestFile && name != parametersFile && name != composeFile) {
			continue
		}
		if h.Size > maxFileBytes {
			l.add(Problem{Code: codeOf(name), File: name, Message: fmt.Sprintf("%s: larger than %d bytes", name, maxFileBytes)})
			files.failed[name] = true
			continue
		}
		data, err := io.ReadAll(io.LimitReader(tr, maxFileBytes))
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err != nil {
			fail(err)
			return nil
		}
		files.data[name] = data
	}
	return nil
}

// validate judges the root files in the contract's order, collecting every
// problem. It stops with ctx's error when ctx ends: before each pass over
// compose.yml, and within the second at each string it interpolates.
func (l *Loaded) validate(ctx context.Context, files rootFiles) error {
	if data, ok := files.data[manifestFile]; files.failed[manifestFile] {
		// reported when reading
	} else if !ok {
		l.add(Problem{Code: sim.EManifestMissing, File: manifestFile,
			Message: manifestFile + ": missing at the template root" + files.hint})
	} else {
		m, probs := ValidateManifest(data)
		l.Manifest = m
		l.add(probs...)
	}
	if l.manifestOnly {
		return nil
	}

	l.params = []sim.Parameter{}
	paramsOK := true
	if files.failed[parametersFile] {
		paramsOK = false
	} else if data, ok := files.data[parametersFile]; ok {
		ps, probs := ValidateParameters(data)
		l.add(probs...)
		if ps != nil {
			l.params = ps
		} else {
			paramsOK = false
		}
		if probs := checkDefaults(ps, l.Manifest); len(probs) > 0 {
			l.add(probs...)
			paramsOK = false
		}
	}

	data, ok := files.data[composeFile]
	if files.failed[composeFile] {
		return nil
	}
	if !ok {
		l.add(Problem{Code: sim.EComposeInvalid, File: composeFile, Message: composeFile + ": missing at the template root"})
		return nil
	}
	l.compose = data
	l.projects.enabled = cacheable(data)
	if err := ctx.Err(); err != nil {
		return err
	}
	var envFiles []envFileRef
	var err error
	l.labelled("", func() { envFiles, err = checkComposeStructure(ctx, l.Dir, data) })
	if err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			return ctxErr // compose-go stopped for ctx, or finished after it ended
		}
		l.add(composeProblem(err))
		return nil
	}
	// The second pass needs the params and allocated ports to stand in for
	// the operator's values; without them it would only repeat the
	// manifest's or parameters' problems as compose ones.
	if l.Manifest == nil || !paramsOK {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	services, err := l.checkComposeLoad(ctx, envFiles)
	if ctxErr := ctx.Err(); ctxErr != nil {
		return ctxErr
	}
	if err != nil {
		l.add(composeProblem(err))
		return nil
	}
	l.Template.Services = services
	return nil
}

func composeProblem(err error) Problem {
	return Problem{Code: sim.EComposeInvalid, File: composeFile, Message: composeFile + ": " + err.Error()}
}

// checkComposeLoad is the second compose pass: the full load into
// compose-go's project, interpolated with stand-in values (each param's
// default or a value of its type, each allocated port's preferred number),
// then every service through the launch contract's conversion.
func (l *Loaded) checkComposeLoad(ctx context.Context, envFiles []envFileRef) ([]string, error) {
	env := map[string]string{}
	for _, p := range l.params {
		env[p.Name] = sampleValue(p)
		if env[p.Name] == "" && requiresValue(l.compose, p.Name) {
			// Judged as a launch that gives the value, which is what
			// this template needs of every launch.
			given := p
			given.Default = nil
			env[p.Name] = sampleValue(given)
			l.Warnings = append(l.Warnings, fmt.Sprintf("parameters.yaml: %s's default is empty, and compose.yml requires a value (${%s:?}), so a launch that does not give %s fails in compose.yml's interpolation; give it a default that is not empty, or drop the default and write required: true, so that such a launch is refused naming %s", p.Name, p.Name, p.Name, p.Name))
		}
	}
	for _, d := range l.Manifest.AllocatedPorts {
		env[d.Param] = strconv.Itoa(d.Preferred)
	}
	var p *types.Project
	var err error
	l.labelled("", func() { p, err = loadProject(ctx, l.Dir, l.compose, "normsim-validate", env, false) })
	if err != nil {
		return nil, err
	}
	p, skipped := withoutOptionalDependencies(p)
	l.Warnings = append(l.Warnings, skipped...)
	names := p.ServiceNames()
	if len(names) == 0 {
		return nil, errors.New("declares no services that run without a profile")
	}
	if err := runsNoContainer(p); err != nil {
		return nil, err
	}
	l.add(allocatedPortServiceProblems(l.Manifest, names)...)
	l.Warnings = append(l.Warnings, hostNetworkPortWarnings(l.Manifest, p)...)
	l.Warnings = append(l.Warnings, unpublishedPortWarnings(l.Manifest, p, l.compose)...)
	var buildWarnings []string
	for _, n := range names {
		ss, err := serviceSpec(n, p.Services[n], l.Dir)
		if err != nil {
			return nil, err
		}
		if l.packed {
			if err := packedBindSources(n, p.Services[n], l.Dir); err != nil {
				return nil, err
			}
		}
		if ss.Process == nil || len(ss.Process.Command) == 0 {
			l.Template.NoProcessCommand = append(l.Template.NoProcessCommand, n)
		}
		if svc := p.Services[n]; svc.Build != nil {
			// docker compose up builds it; normsim's Docker runtime runs
			// only images already in the engine.
			buildWarnings = append(buildWarnings, buildWarning(n, svc.Image, svc.Build.Context, ss.Process != nil && len(ss.Process.Command) > 0))
		}
	}
	if why := isolated(p); why != "" && len(l.Template.NoProcessCommand) == len(names) {
		// No x-normsim command either: it can run only on Docker, where
		// it can never work.
		return nil, errors.New(why)
	}
	_, warnings := instanceProject(p, "normsim-<instance>", nil)
	l.Warnings = append(l.Warnings, warnings...)
	l.Warnings = append(l.Warnings, interpolationWarnings(l.Dir, l.compose, env)...)
	if l.envFileVars, err = envFileVariables(envFiles, env); err != nil {
		return nil, err
	}
	for _, u := range l.envFileVars {
		if !u.emptyIn(env) {
			continue
		}
		if u.labels {
			l.Warnings = append(l.Warnings, fmt.Sprintf("compose.yml: %s is empty in every launch: compose reads a label file's variables only from the labels above it in the file, never from parameters or the environment (docker compose does the same); write the value, or set the label in the service's labels: as ${%s}", u, u.name))
			continue
		}
		l.Warnings = append(l.Warnings, fmt.Sprintf("compose.yml: %s is no parameter or allocated port, nor set in the service's environment, and has no default, so it is empty in every launch (normsim reads neither the shell's environment nor .env); declare it in parameters.yaml or write ${%s:-value}", u, u.name))
	}
	l.Warnings = append(l.Warnings, buildWarnings...)
	return names, nil
}

// hostNetworkPortWarnings say of each allocated port declared on a service
// with network_mode host that it is not published: Docker publishes
// nothing on the host's network, and the job must listen on it itself.
func hostNetworkPortWarnings(m *Manifest, p *types.Project) []string {
	var out []string
	for i, d := range m.AllocatedPorts {
		if svc, ok := p.Services[d.Service]; !ok || svc.NetworkMode != "host" {
			continue
		}
		out = append(out, fmt.Sprintf("manifest.json: allocatedPorts[%d] (%s) names service %s, which has network_mode host, where Docker publishes nothing: the job is told the port (in NORSK_ALLOCATED_PORTS and ${%s}) and must listen on it itself, on the host's addresses; remove network_mode: host to have it published", i, d.Param, d.Service, d.Param))
	}
	return out
}

// unpublishedPortWarnings say of each allocated port declared without a
// service that an opened one is not published (the job is told its number
// all the same), unless compose.yml publishes it itself (a service's
// ports: ["${P}:..."], judged with P at its preferred port as validation
// interpolates it) or a service runs in the host's network.
func unpublishedPortWarnings(m *Manifest, p *types.Project, compose []byte) []string {
	var out []string
	for i, d := range m.AllocatedPorts {
		if d.Service != "" {
			continue
		}
		if bytes.Contains(compose, []byte(d.Param)) && slices.ContainsFunc(p.ServiceNames(), func(n string) bool {
			svc := p.Services[n]
			return svc.NetworkMode == "host" || slices.ContainsFunc(svc.Ports, func(pc types.ServicePortConfig) bool {
				return pc.Published == strconv.Itoa(d.Preferred)
			})
		}) {
			continue
		}
		proto := ""
		if d.Protocol == "udp" {
			proto = "/udp"
		}
		out = append(out, fmt.Sprintf("manifest.json: allocatedPorts[%d] (%s) names no service, so a port a launch opens is not published: the job is told its number (in NORSK_ALLOCATED_PORTS and ${%s}) but nothing outside its container reaches it; give the service to publish it on, or publish it in compose.yml (ports: [\"${%s}:${%s}%s\"])", i, d.Param, d.Param, d.Param, d.Param, proto))
	}
	return out
}

// packedBindSources refuses a relative bind mount source in an archive
// template (validation loads without resolving paths, so a relative one
// is as written). Compose resolves it beside the archive, as if unpacked
// to dir, and Docker creates a source that is missing: a directory named
// like the template, which normsim then loads as a second template of
// that name, and every later launch of the archive is refused.
func packedBindSources(service string, s types.ServiceConfig, dir string) error {
	for i, v := range s.Volumes {
		if v.Type != types.VolumeTypeBind || v.Source == "" || filepath.IsAbs(v.Source) || strings.HasPrefix(v.Source, "~") {
			continue
		}
		return fmt.Errorf("services.%s.volumes[%d]: bind mount source %q is relative, and in a template archive relative paths resolve beside it, as if it were unpacked to %s (nothing is extracted): Docker would create the missing source there, a directory named like the template, which normsim would then load as a second template of that name; use a template directory instead of the archive, or a named volume", service, i, v.Source, dir)
	}
	return nil
}

// allocatedPortServiceProblems refuses an allocatedPorts service that
// names none of the services a launch runs (names): every launch opening
// the port would fail to publish it.
func allocatedPortServiceProblems(m *Manifest, names []string) []Problem {
	var out []Problem
	for i, d := range m.AllocatedPorts {
		if d.Service == "" || slices.Contains(names, d.Service) {
			continue
		}
		path := fmt.Sprintf("allocatedPorts[%d].service", i)
		out = append(out, Problem{Code: sim.EManifestInvalid, File: manifestFile, Path: path, Message: fmt.Sprintf(
			"%s: %q names no service of compose.yml that runs without a profile (have %s), so every launch that opens %s fails; name one of them, or leave service out to open the port without publishing it",
			path, d.Service, strings.Join(names, ", "), d.Param)})
	}
	return out
}

// buildWarning says what a service's build: means here: nothing is built.
func buildWarning(service, image, context string, process bool) string {
	where := "on Docker it is refused (no image to run)"
	if image != "" {
		where = fmt.Sprintf("on Docker the image %s must be in the engine already (in the template directory: docker build -t %s %s)", image, image, context)
	}
	if !process {
		where += "; without an x-normsim command it cannot run as a process either"
	}
	return fmt.Sprintf("compose.yml: services.%s.build: normsim builds no image (docker compose up would): %s", service, where)
}

// interpolationWarnings say what `docker compose up` would fill in and
// normsim does not: a variable compose.yml uses without a default that is
// no parameter or allocated port interpolates to "" (Compose warns of it
// too, and would take it from the shell or .env), and a .env beside the
// file is not read.
func interpolationWarnings(dir string, compose []byte, env map[string]string) []string {
	var out []string
	var dict map[string]any
	if yaml.Unmarshal(compose, &dict) == nil {
		vars := composetpl.ExtractVariables(dict, nil)
		for _, name := range slices.Sorted(maps.Keys(vars)) {
			v := vars[name]
			if _, ok := env[name]; ok || v.DefaultValue != "" || v.PresenceValue != "" || v.Required || hasDefault(compose, name) {
				continue
			}
			out = append(out, fmt.Sprintf("compose.yml: ${%s} is no parameter or allocated port and has no default, so it is empty in every launch (normsim reads neither the shell's environment nor .env); declare it in parameters.yaml or write ${%s:-value}", name, name))
		}
	}
	if st, err := os.Stat(filepath.Join(dir, ".env")); err == nil && st.Mode().IsRegular() {
		out = append(out, ".env: not read (docker compose up would interpolate from it); put its values in parameters.yaml as defaults, or in the services' environment")
	}
	return out
}

// hasDefault says whether compose.yml gives name a default, an empty one
// too (${NAME:-} or ${NAME-}): written out, an empty value is meant.
func hasDefault(compose []byte, name string) bool {
	return bytes.Contains(compose, []byte("${"+name+":-")) || bytes.Contains(compose, []byte("${"+name+"-"))
}

// requiresValue says whether compose.yml requires name to be set and not
// empty (${NAME:?…}): interpolating it empty fails the load.
func requiresValue(compose []byte, name string) bool {
	return bytes.Contains(compose, []byte("${"+name+":?"))
}

// sampleValue stands in for an operator's value during validation.
func sampleValue(p sim.Parameter) string {
	if p.Default != nil {
		return *p.Default
	}
	switch p.Type {
	case TypeInt, TypeNumber:
		switch {
		case p.Min != nil:
			return fmtNum(math.Ceil(*p.Min))
		case p.Max != nil:
			return fmtNum(math.Floor(*p.Max))
		}
		return "1"
	case TypeBoolean:
		return "false"
	case TypeEnum:
		if len(p.Values) > 0 {
			return p.Values[0]
		}
	}
	// Not "": a value the operator must give stands in as given (so
	// ${X:?...} passes), and "1" fits most typed fields too.
	return "1"
}

// finish fills the sim.Template from what validation found.
func (l *Loaded) finish() {
	t := l.Template
	t.Valid = len(l.Problems) == 0
	t.Error = nil
	if !t.Valid {
		t.Error = &sim.TemplateError{Code: l.Problems[0].Code, Message: l.Problems[0].Message}
	}
	if m := l.Manifest; m != nil {
		t.Strategy = m.Strategy()
		t.ProductName = m.ProductName
		t.ProductVersion = m.ProductVersion
		t.AllocatedPorts = m.AllocatedPorts
	}
	if l.params != nil {
		t.Parameters = l.params
	}
}
