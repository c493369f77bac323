package template

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/compose-spec/compose-go/v2/loader"
	composetpl "github.com/compose-spec/compose-go/v2/template"
	"github.com/compose-spec/compose-go/v2/types"
	"github.com/mattn/go-shellwords"

	"github.com/normsim/normsim/sim"
)

// CheckPlatform judges a service's platform: value as the Docker engine
// will, and says in its refusal what a platform looks like (nil when the
// value is one). The Docker runtime sets it (app/withdocker sets it to
// docker.CheckPlatform), so normsim validate and every launch judge it,
// in the words the runtime's own check uses; a job author's normsimtest,
// which runs no container and must not link Docker's packages, leaves it
// nil, and platform: is then not judged: only a container runs on a
// platform.
var CheckPlatform func(service, platform string) error

// ExtensionKey is the compose service extension that says how to run a
// service as a host process: {command: [..] or "string", dir: "..."}, dir
// relative to the template directory.
const ExtensionKey = "x-normsim"

// composeFile is the compose file's name at the template root.
const composeFile = "compose.yml"

// loadProject runs compose-go's loader over the compose file held in
// memory, interpolating with env only (never the host's environment).
// strict=false is for validation: env files are not read and paths are not
// resolved, since neither need exist before launch. compose-go looks at
// ctx only for includes; the interpolation looks at it before each string,
// so that a load can be stopped part way.
func loadProject(ctx context.Context, dir string, content []byte, project string, env map[string]string, strict bool) (*types.Project, error) {
	// The files compose.yml names are read afresh by every launch, and may
	// have changed since the template was validated; validation's own
	// load follows checkComposeStructure, which judged them a moment ago.
	if strict && readsFiles(content) {
		if err := checkLoadFiles(ctx, dir, content); err != nil {
			return nil, err
		}
	}
	interpolated := newInterpolationBudget()
	details := types.ConfigDetails{
		WorkingDir:  dir,
		ConfigFiles: []types.ConfigFile{{Filename: filepath.Join(dir, composeFile), Content: content}},
		Environment: types.Mapping(env),
	}
	p, err := loader.LoadWithContext(ctx, details, func(o *loader.Options) {
		o.SetProjectName(project, true)
		// compose-go warns through logrus's global logger about every unset
		// variable; an unset one interpolates to "" silently here.
		o.Interpolate.Substitute = func(s string, m composetpl.Mapping) (string, error) {
			if err := ctx.Err(); err != nil {
				return "", err
			}
			if interpolated.refused() {
				// The load fails with the one refusal; compose-go would
				// add one for every string after it.
				return "", nil
			}
			if err := interpolated.take(s, m); err != nil {
				return "", err
			}
			return composetpl.SubstituteWithOptions(s, m, composetpl.WithoutLogging)
		}
		if !strict {
			o.SkipResolveEnvironment = true
			o.SkipResolveLabels = true // label_file, relative, would be read from the cwd
			o.ResolvePaths = false
		}
	})
	if err != nil {
		if why := profiledDependency(ctx, dir, content, err); why != nil {
			return nil, why
		}
		return nil, composeError(dir, err)
	}
	return p, nil
}

// profiledDependency says what compose-go's "depends on undefined service"
// means when the service is in the file behind a profile (normsim enables
// none), and how to fix it; nil for any other error (issue 34 round 14, B1).
func profiledDependency(ctx context.Context, dir string, content []byte, err error) error {
	// compose-go's refusal of a depends_on entry whose service does not
	// run, read back with the format that wrote it.
	var service, dep string
	if _, serr := fmt.Sscanf(err.Error(), "service %q depends on undefined service %q", &service, &dep); serr != nil {
		return nil
	}
	dict, lerr := loadModel(ctx, dir, content)
	if lerr != nil {
		return nil
	}
	services, _ := dict["services"].(map[string]any)
	depended, _ := services[dep].(map[string]any)
	profiles, _ := depended["profiles"].([]any)
	if len(profiles) == 0 {
		return nil
	}
	names := make([]string, 0, len(profiles))
	for _, p := range profiles {
		names = append(names, fmt.Sprint(p))
	}
	return &composeErr{err: err, msg: fmt.Sprintf(
		"services.%s.depends_on.%s: %s runs only with profile %s, and normsim enables no profile (a launch runs what a plain docker compose up runs), so %s could never start; write required: false under depends_on.%s to start %s without it, or drop %s's profiles",
		service, dep, dep, strings.Join(names, ", "), service, dep, service, dep)}
}

// launchProject loads the compose project for a launch with env's values
// interpolated, and says what the load left out that docker compose up
// leaves out too (withoutOptionalDependencies), for the instance's
// adjustments. Loading is most of a launch's CPU (compose-go validates
// against the compose schema and canonicalises), and a job that migrates
// launches its template with the same values each time, so projects are
// kept by their values where the result depends on nothing else: not on
// the project's name (each instance has its own) and not on other files,
// which could change between launches. The project is shared: callers
// copy what they change (serviceSpec does).
func (l *Loaded) launchProject(name, instance string, env map[string]string) (*types.Project, []string, error) {
	// sim.Catalog's Launch takes no context; the YAML bounds keep a load
	// to about a second at most.
	ctx := context.Background()
	var key string
	if l.projects.enabled {
		key = envKey(env)
		if c := l.projects.get(key); c != nil {
			// The notes are kept with the project: a launch from the
			// cache says what the first one said.
			return c.project, c.notes, nil
		}
		name = cachedProjectName
	}
	var p *types.Project
	var err error
	l.labelled(instance, func() { p, err = loadProject(ctx, l.Dir, l.compose, name, env, true) })
	if err != nil {
		return nil, nil, err
	}
	p, notes := withoutOptionalDependencies(p)
	if l.projects.enabled {
		l.projects.put(key, &loadedProject{project: p, notes: notes})
	}
	return p, notes, nil
}

// withoutOptionalDependencies drops each depends_on entry with required:
// false whose service does not run (it is behind a profile, and normsim
// enables none), as docker compose up skips it: the dependent starts
// without it, on every runtime (issue 34 round 14, B1). The notes say
// which, for validate's warnings and a launch's adjustments alike (a
// launch dropped them once, so the instance never said it ran without
// the dependency); p itself is not changed.
func withoutOptionalDependencies(p *types.Project) (*types.Project, []string) {
	var notes []string
	for _, name := range p.ServiceNames() {
		deps := p.Services[name].DependsOn
		for _, d := range slices.Sorted(maps.Keys(deps)) {
			if _, runs := p.Services[d]; runs || deps[d].Required {
				continue
			}
			why := "does not run"
			if ds, ok := p.DisabledServices[d]; ok && len(ds.Profiles) > 0 {
				why = fmt.Sprintf("runs only with profile %s, and normsim enables no profile", strings.Join(ds.Profiles, ", "))
			}
			notes = append(notes, fmt.Sprintf("services.%s.depends_on.%s: %s %s, so %s starts without it (required: false; docker compose up does the same); drop the profile from %s to run it",
				name, d, d, why, name, d))
		}
	}
	if len(notes) == 0 {
		return p, nil
	}
	return p.WithoutUnresolvedOptionalDependencies(), notes
}

// cachedProjectName names the projects kept in a projectCache; nothing of
// a launch's spec comes from the name.
const cachedProjectName = "normsim-launch"

// cacheable: compose-go's result depends on nothing but the compose text
// and the values, neither on files read while loading (readsFiles) nor on
// the project's name interpolated. A compose file mentioning either is
// loaded afresh for every launch (a false alarm only costs the cache).
func cacheable(compose []byte) bool {
	return !readsFiles(compose) && !containsAny(compose, "COMPOSE_PROJECT_NAME")
}

// envKey is env as one string, the same for equal maps.
func envKey(env map[string]string) string {
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(env)) {
		b.WriteString(k)
		b.WriteByte('=')
		b.WriteString(env[k])
		b.WriteByte(0)
	}
	return b.String()
}

// projectCache holds loaded projects by envKey, at most projectCacheSize;
// when full it starts again (a template launched with more distinct values
// than that gains little from a cache).
type projectCache struct {
	enabled bool // the compose file is cacheable; set once, at load
	mu      sync.Mutex
	byEnv   map[string]*loadedProject
}

// loadedProject is a project launchProject loaded, with its notes.
type loadedProject struct {
	project *types.Project
	notes   []string
}

const projectCacheSize = 64

func (c *projectCache) get(key string) *loadedProject {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.byEnv[key]
}

func (c *projectCache) put(key string, p *loadedProject) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.byEnv == nil || len(c.byEnv) >= projectCacheSize {
		c.byEnv = map[string]*loadedProject{}
	}
	c.byEnv[key] = p
}

// composeError strips the absolute file name compose-go puts in messages.
func composeError(dir string, err error) error {
	msg := err.Error()
	abs := filepath.Join(dir, composeFile)
	msg = strings.ReplaceAll(msg, "validating "+abs+": ", "")
	msg = strings.ReplaceAll(msg, abs, composeFile)
	// The compose schema's jsonschema library reports a key the spec does
	// not know as "<path> false schema".
	if field, ok := strings.CutSuffix(msg, " false schema"); ok && !strings.ContainsAny(field, " \n") {
		msg = field + ": unknown key, not in the compose specification"
	}
	return &composeErr{msg: msg, err: err}
}

type composeErr struct {
	msg string
	err error
}

func (e *composeErr) Error() string { return e.msg }
func (e *composeErr) Unwrap() error { return e.err }

// interpolationFailed reports whether err comes from interpolating values,
// the operator's doing (${X:?...} with X unset, a value that breaks a
// typed field, or values too long for the places that copy them), rather
// than from the template's structure.
func interpolationFailed(err error) bool {
	var missing composetpl.MissingRequiredError
	var missingP *composetpl.MissingRequiredError
	var tooLarge errInterpolatedTooLarge
	return errors.As(err, &missing) || errors.As(err, &missingP) || errors.As(err, &tooLarge)
}

// checkComposeStructure is the first validation pass: YAML, the compose
// schema and compose-go's canonical form, with interpolation skipped so
// that placeholders such as ${PORT} are judged as text. It returns the
// env and label files the services name, as the walk of the files found
// them.
func checkComposeStructure(ctx context.Context, dir string, content []byte) ([]envFileRef, error) {
	// compose-go expands aliases, and builds a path for every node, without
	// a bound: what the file costs once expanded is judged first, on the
	// parsed tree; only that refusal is normsim's, the rest of the
	// judgement stays compose-go's.
	w, err := walkLoadFiles(ctx, dir, content)
	if err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			return nil, ctxErr
		}
		return nil, fmt.Errorf("%w; refused before loading it", err)
	}
	dict, err := loadModel(ctx, dir, content)
	if err != nil {
		return nil, composeError(dir, err)
	}
	if s, ok := dict["services"].(map[string]any); !ok || len(s) == 0 {
		return nil, errors.New("declares no services")
	}
	return w.envFiles, nil
}

// loadModel is compose-go's canonical form of the compose file, as
// written: no interpolation (placeholders such as ${PORT} are judged as
// text), no environment, no paths resolved.
func loadModel(ctx context.Context, dir string, content []byte) (map[string]any, error) {
	details := types.ConfigDetails{
		WorkingDir:  dir,
		ConfigFiles: []types.ConfigFile{{Filename: filepath.Join(dir, composeFile), Content: content}},
		Environment: types.Mapping{},
	}
	return loader.LoadModelWithContext(ctx, details, func(o *loader.Options) {
		o.SetProjectName("normsim-validate", true)
		o.SkipInterpolation = true
		o.SkipResolveEnvironment = true
		o.ResolvePaths = false
	})
}

// runsNoContainer says why a project whose services all run (no profile)
// would still start nothing: every one is scaled to 0 (deploy.replicas
// or scale). An instance of it would show running with nothing running.
func runsNoContainer(p *types.Project) error {
	names := p.ServiceNames()
	for _, n := range names {
		svc := p.Services[n]
		if svc.GetScale() != 0 {
			return nil
		}
	}
	return fmt.Errorf("services: every service that runs without a profile (%s) has deploy.replicas (or scale) 0, so a launch would start no container and the instance would show running with nothing running; give at least one service replicas 1 or more", strings.Join(names, ", "))
}

// processSpec reads a service's x-normsim extension. dir is the template
// directory that the extension's dir is relative to.
func processSpec(service string, ext types.Extensions, dir string) (*sim.ProcessSpec, error) {
	raw, ok := ext[ExtensionKey]
	if !ok {
		return nil, nil
	}
	path := "services." + service + "." + ExtensionKey
	m, ok := raw.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%s: must be a mapping {command, dir}; got %s", path, describeCompose(raw))
	}
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if k != "command" && k != "dir" {
			return nil, fmt.Errorf("%s.%s: unknown key; allowed: command, dir", path, k)
		}
	}
	ps := &sim.ProcessSpec{}
	switch c := m["command"].(type) {
	case string:
		// Split as compose splits a command string, but a shell operator
		// would end the split there and drop the rest without a word: the
		// command is run as argv, not by a shell, so it is refused.
		sp := shellwords.NewParser()
		args, err := sp.Parse(c)
		if err != nil {
			return nil, fmt.Errorf("%s.command: %v", path, err)
		}
		if sp.Position >= 0 {
			return nil, fmt.Errorf("%s.command: %q has a shell operator at %q; the command runs as argv, not in a shell: write [\"sh\", \"-c\", %q] to use one",
				path, c, c[sp.Position:], c)
		}
		ps.Command = args
	case []any:
		for i, e := range c {
			s, ok := e.(string)
			if !ok {
				return nil, fmt.Errorf("%s.command[%d]: must be a string; got %s", path, i, describeCompose(e))
			}
			ps.Command = append(ps.Command, s)
		}
	case nil:
		if _, present := m["command"]; !present {
			return nil, fmt.Errorf("%s.command: is required", path)
		}
		return nil, fmt.Errorf("%s.command: must be a list of strings or a string; got null", path)
	default:
		return nil, fmt.Errorf("%s.command: must be a list of strings or a string; got %s", path, describeCompose(c))
	}
	if len(ps.Command) == 0 {
		return nil, fmt.Errorf("%s.command: must not be empty", path)
	}
	ps.Dir = dir
	if d, present := m["dir"]; present {
		s, ok := d.(string)
		if !ok {
			return nil, fmt.Errorf("%s.dir: must be a string; got %s", path, describeCompose(d))
		}
		if filepath.IsAbs(s) {
			ps.Dir = filepath.Clean(s)
		} else {
			ps.Dir = filepath.Join(dir, s)
		}
	}
	return ps, nil
}

func describeCompose(v any) string {
	switch t := v.(type) {
	case nil:
		return "null"
	case string:
		return strconv.Quote(t)
	case map[string]any:
		return "a mapping"
	case []any:
		return "a list"
	default:
		return fmt.Sprint(t)
	}
}

// serviceSpec turns a loaded compose service into the runtime's form,
// without the launch contract's additions.
func serviceSpec(name string, s types.ServiceConfig, dir string) (sim.ServiceSpec, error) {
	spec := sim.ServiceSpec{
		Name:       name,
		Image:      s.Image,
		Command:    cloneStrings(s.Command),
		Entrypoint: cloneStrings(s.Entrypoint),
		Env:        map[string]string{},
		Labels:     map[string]string{},
		User:       s.User,
		WorkingDir: s.WorkingDir,
	}
	for k, v := range s.Environment {
		if v != nil { // a bare name with nothing to resolve it from is unset
			spec.Env[k] = *v
		}
	}
	if err := checkExecStrings(name, spec.Env, spec.Command, spec.Entrypoint); err != nil {
		return spec, err
	}
	for k, v := range s.Labels {
		spec.Labels[k] = v
	}
	if err := checkSharedNetwork(name, s); err != nil {
		return spec, err
	}
	if s.Platform != "" && CheckPlatform != nil {
		// docker compose refuses it only at create, in containerd's
		// words, which name neither the service nor the key; the Docker
		// runtime once called it a missing image.
		if err := CheckPlatform(name, s.Platform); err != nil {
			return spec, err
		}
	}
	if s.StopSignal != "" && !engineSignal(s.StopSignal) {
		return spec, fmt.Errorf("services.%s.stop_signal: %q is no signal the engine knows (it refuses the container: \"Invalid signal\"); write a Linux signal name such as SIGTERM, SIGINT or SIGRTMIN+3 (SIG optional, any case) or its number 1..%d", name, s.StopSignal, linuxSigRTMax)
	}
	for i, p := range s.Ports {
		b := sim.PortBinding{
			HostIP:        p.HostIP,
			ContainerPort: int(p.Target),
			Protocol:      p.Protocol,
		}
		if b.Protocol == "" {
			b.Protocol = "tcp"
		}
		if p.Published != "" {
			n, err := strconv.Atoi(p.Published)
			if err != nil || n < 1 || n > 65535 {
				return spec, fmt.Errorf("services.%s.ports[%d]: published port must be a single port 1..65535; got %q", name, i, p.Published)
			}
			b.HostPort = n
		}
		if s.NetworkMode == "host" {
			// Docker discards a published port on the host's network:
			// nothing is published (issue 34 round 14, B4); adjust says so.
			continue
		}
		spec.Ports = append(spec.Ports, b)
	}
	if err := checkMountPaths(name, s.Volumes); err != nil {
		return spec, err
	}
	for _, v := range s.Volumes {
		spec.Volumes = append(spec.Volumes, sim.Mount{Type: v.Type, Source: v.Source, Target: v.Target, ReadOnly: v.ReadOnly})
	}
	hosts := s.ExtraHosts.AsList(":")
	sort.Strings(hosts)
	spec.ExtraHosts = hosts
	if h := s.HealthCheck; h != nil {
		hc := &sim.Healthcheck{Test: cloneStrings(h.Test)}
		if h.Disable {
			hc.Test = []string{"NONE"}
		}
		hc.Interval = dur(h.Interval)
		hc.Timeout = dur(h.Timeout)
		hc.StartPeriod = dur(h.StartPeriod)
		if h.Retries != nil {
			hc.Retries = int(*h.Retries)
		}
		spec.Healthcheck = hc
	}
	deps := make([]string, 0, len(s.DependsOn))
	for d := range s.DependsOn {
		deps = append(deps, d)
	}
	sort.Strings(deps)
	for _, d := range deps {
		cond := s.DependsOn[d].Condition
		if cond == "" {
			cond = types.ServiceConditionStarted
		}
		spec.DependsOn = append(spec.DependsOn, sim.Dependency{Service: d, Condition: cond})
	}
	ps, err := processSpec(name, s.Extensions, dir)
	if err != nil {
		return spec, err
	}
	spec.Process = ps
	return spec, nil
}

// checkMountPaths refuses a service volume the engine refuses at every
// create ("invalid mount path: ... mount path must be absolute"), naming
// the entry. Above all the short syntax whose volume name is one letter:
// compose-go (format.ParseVolume, as Compose v2 reads it) takes a letter
// before a colon for a Windows drive, so "v:/data" is an anonymous
// volume at the path "v:/data", "v:/data:ro" a bind of the host path
// "v:/data" to "ro", and "v:/data:/x" a bind of "v:/data" to /x, where
// docker-compose 1.x read volume v. A Linux engine takes no such path,
// as the source of a bind or as any mount's target.
func checkMountPaths(service string, vols []types.ServiceVolumeConfig) error {
	for i, v := range vols {
		entry := v.Target
		if v.Source != "" {
			entry = v.Source + ":" + v.Target
		}
		refused := fmt.Sprintf("the engine refuses it at every launch (%q)", "invalid mount path: ... mount path must be absolute")
		switch {
		case v.Source == "" && windowsDrive(v.Target) != "",
			v.Type == types.VolumeTypeBind && windowsDrive(v.Source) != "" && !strings.HasPrefix(v.Target, "/"):
			// "v:/data", "v:/data:ro": meant as volume v.
			drive := windowsDrive(entry)
			rest := strings.TrimPrefix(entry, drive+":")
			target, _, _ := strings.Cut(rest, ":")
			return fmt.Errorf("services.%s.volumes[%d]: %q is no volume %s: Compose (compose-go) takes one letter before a colon for a Windows drive letter, reads the entry as the path %q on drive %s:, and %s; name the volume with two or more characters (and so in the top-level volumes), or use the long syntax (- type: volume, source: %s, target: %s)",
				service, i, entry, drive, strings.TrimSuffix(entry, ":"+v.Target), drive, refused, drive, target)
		case v.Type == types.VolumeTypeBind && windowsDrive(v.Source) != "":
			// "c:/data:/x": a Windows path to bind.
			drive := windowsDrive(v.Source)
			return fmt.Errorf("services.%s.volumes[%d]: %q binds %q, which Compose (compose-go) reads as a path on the Windows drive %s:, and %s; bind a host path from / (or ./ beside the template), or, to mount a volume named %s, name it with two or more characters or use the long syntax (- type: volume, source: %s, target: %s)",
				service, i, entry, v.Source, drive, refused, drive, drive, v.Target)
		case v.Target != "" && !strings.HasPrefix(v.Target, "/"):
			return fmt.Errorf("services.%s.volumes[%d]: the mount target %q is no absolute path in the container, and %s; write the path from /", service, i, v.Target, refused)
		}
	}
	return nil
}

// windowsDrive is the letter p starts with when compose-go reads it as a
// Windows drive (a letter, then a colon), "" when it does not.
func windowsDrive(p string) string {
	r, n := utf8.DecodeRuneInString(p)
	if n == 0 || !unicode.IsLetter(r) || !strings.HasPrefix(p[n:], ":") {
		return ""
	}
	return p[:n]
}

// checkSharedNetwork refuses what the engine refuses on a container that
// joins another's network namespace (network_mode service:x or
// container:x), before a launch gets that far: compose-go takes these keys,
// and every launch then failed in Docker's words, which name no key.
func checkSharedNetwork(name string, s types.ServiceConfig) error {
	if !sharesNetwork(s) {
		return nil
	}
	refused := func(key, what string) error {
		return fmt.Errorf("services.%s.%s: Docker refuses it with network_mode %q (%q); set it on the service whose network this one shares, or remove network_mode",
			name, key, s.NetworkMode, "conflicting options: "+what)
	}
	switch {
	case len(s.ExtraHosts) > 0:
		return refused("extra_hosts", "custom host-to-IP mapping and the network mode")
	case len(s.Ports) > 0:
		return refused("ports", "port publishing and the container type network mode")
	case len(s.Expose) > 0:
		return refused("expose", "port exposing and the container type network mode")
	case s.Hostname != "":
		return refused("hostname", "hostname and the network mode")
	case len(s.DNS) > 0:
		return refused("dns", "dns and the network mode")
	}
	return nil
}

// linuxSignals are the signal names the engine takes for a stop_signal,
// without SIG, each between blanks: moby's signal.ParseSignal on Linux
// (Docker 20.10's pkg/signal has the same map), where the engine runs.
// RTMIN+1 … RTMIN+15 and RTMAX-14 … RTMAX-1 are its names too (rtOffset).
const linuxSignals = " ABRT ALRM BUS CHLD CLD CONT FPE HUP ILL INT IO IOT KILL PIPE POLL PROF PWR QUIT SEGV STKFLT STOP SYS TERM TRAP TSTP TTIN TTOU URG USR1 USR2 VTALRM WINCH XCPU XFSZ RTMIN RTMAX "

// linuxSigRTMax is Linux's highest signal (SIGRTMAX as moby numbers it).
const linuxSigRTMax = 64

// rtOffset reports whether name is RTMIN+n (n 1..15) or RTMAX-n (n 1..14),
// the real-time signals moby names between SIGRTMIN (34) and SIGRTMAX.
func rtOffset(name string) bool {
	v, most := "", 0
	if after, ok := strings.CutPrefix(name, "RTMIN+"); ok {
		v, most = after, 15
	} else if after, ok := strings.CutPrefix(name, "RTMAX-"); ok {
		v, most = after, 14
	}
	n, err := strconv.Atoi(v)
	return err == nil && strconv.Itoa(n) == v && n >= 1 && n <= most
}

// engineSignal reports whether the engine takes s as a container's stop
// signal: ParseSignal's rules (a number, or a name with or without SIG in
// any case), numbers held to Linux's 1..64, since the engine would take
// a larger one at create and fail to send it at stop.
func engineSignal(s string) bool {
	if n, err := strconv.Atoi(s); err == nil {
		return n >= 1 && n <= linuxSigRTMax
	}
	name := strings.TrimPrefix(strings.ToUpper(s), "SIG")
	return !strings.ContainsRune(name, ' ') && strings.Contains(linuxSignals, " "+name+" ") || rtOffset(name)
}

// Linux's bounds on what execve takes: each string of the environment
// and the command line at most MAX_ARG_STRLEN (32 pages), all of them
// together at most ARG_MAX, a quarter of the stack limit (2 MiB with the
// usual 8 MiB). A process past them is never started (E2BIG), in a
// container or not.
const (
	maxExecString = 32 * 4096
	maxExecTotal  = 2 << 20
)

// checkExecStrings refuses a service whose environment or command no
// process could be started with, before a launch gets that far: the
// engine takes the container and the start fails with "argument list too
// long".
func checkExecStrings(service string, env map[string]string, command, entrypoint []string) error {
	total := 0
	for _, k := range slices.Sorted(maps.Keys(env)) {
		n := len(k) + 1 + len(env[k]) + 1
		if n > maxExecString {
			return fmt.Errorf("services.%s.environment.%s: %d bytes, where Linux starts no process with one environment string over %d (128 KiB, MAX_ARG_STRLEN): pass it in a file instead (a volume)", service, k, n, maxExecString)
		}
		total += n
	}
	for _, arg := range slices.Concat(entrypoint, command) {
		if len(arg)+1 > maxExecString {
			return fmt.Errorf("services.%s.command: an argument of %d bytes, where Linux starts no process with one over %d (128 KiB, MAX_ARG_STRLEN): pass it in a file instead", service, len(arg)+1, maxExecString)
		}
		total += len(arg) + 1
	}
	if total > maxExecTotal {
		return fmt.Errorf("services.%s: its environment and command hold %d bytes, where Linux starts no process with more than %d of them (2 MiB, ARG_MAX with the usual 8 MiB stack): pass the large values in files instead", service, total, maxExecTotal)
	}
	return nil
}

func dur(d *types.Duration) time.Duration {
	if d == nil {
		return 0
	}
	return time.Duration(*d)
}

func cloneStrings(s []string) []string {
	if s == nil {
		return nil
	}
	return slices.Clone(s)
}

// dependencyOrder lists the project's services with every service after
// the ones it depends on, ties broken by name.
func dependencyOrder(p *types.Project) []string {
	names := p.ServiceNames() // sorted
	placed := map[string]bool{}
	var out []string
	for len(out) < len(names) {
		progress := false
		for _, n := range names {
			if placed[n] {
				continue
			}
			ready := true
			for d := range p.Services[n].DependsOn {
				if _, known := p.Services[d]; known && !placed[d] {
					ready = false
					break
				}
			}
			if ready {
				placed[n] = true
				out = append(out, n)
				progress = true
			}
		}
		if !progress { // a cycle compose-go let through: keep name order
			for _, n := range names {
				if !placed[n] {
					placed[n] = true
					out = append(out, n)
				}
			}
		}
	}
	return out
}
