package docker

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/compose-spec/compose-go/v2/loader"
	"github.com/compose-spec/compose-go/v2/types"
	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/cli/cli/command"
	"github.com/docker/cli/cli/flags"
	"github.com/docker/compose/v5/pkg/api"
	"github.com/docker/compose/v5/pkg/compose"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/network"
	"github.com/spf13/pflag"

	"github.com/normsim/normsim/sim"
)

// newDockerCli makes the docker CLI's own client object, initialised as
// the docker command line initialises it without flags: DOCKER_HOST,
// DOCKER_CONTEXT, DOCKER_CONFIG and the current context of
// ~/.docker/config.json decide the engine. It reads those files and
// connects to nothing.
func newDockerCli() (*command.DockerCli, error) {
	cli, err := command.NewDockerCli(command.WithOutputStream(io.Discard), command.WithErrorStream(io.Discard),
		command.WithInputStream(io.NopCloser(strings.NewReader(""))))
	if err != nil {
		return nil, fmt.Errorf("docker cli: %w", err)
	}
	// The docker command's flags with none given: their defaults carry
	// DOCKER_TLS, DOCKER_TLS_VERIFY and DOCKER_CERT_PATH.
	opts := flags.NewClientOptions()
	fs := pflag.NewFlagSet("docker", pflag.ContinueOnError)
	opts.InstallFlags(fs)
	if err := fs.Parse(nil); err != nil {
		return nil, fmt.Errorf("docker cli: %w", err)
	}
	opts.SetDefaultOptions(fs)
	if err := cli.Initialize(opts); err != nil {
		return nil, fmt.Errorf("docker cli: %w", err)
	}
	return cli, nil
}

// newComposer is the Compose SDK service `docker compose` itself runs on,
// over cli; it never prompts (a prompt would answer yes).
func newComposer(cli command.Cli, opts ...compose.Option) (api.Compose, error) {
	return compose.NewComposeService(cli, append([]compose.Option{compose.WithPrompt(compose.AlwaysOkPrompt()),
		compose.WithOutputStream(io.Discard), compose.WithErrorStream(io.Discard)}, opts...)...)
}

// failures is an api.EventProcessor that keeps the resources an SDK
// operation reported failing: compose's returned error has the engine's
// words but not the service they are about. One per operation, since the
// resource IDs ("service:web:1") do not name the project.
type failures struct {
	mu     sync.Mutex
	failed []api.Resource
}

func (f *failures) Start(context.Context, string) {}
func (f *failures) Done(string, bool)             {}
func (f *failures) On(events ...api.Resource) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, e := range events {
		if e.Status == api.Error {
			f.failed = append(f.failed, e)
		}
	}
}

// name prefixes err with the services (or networks, volumes) of p that
// failed, as `service "bad": ...`.
func (f *failures) name(p *types.Project, err error) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	var names []string
	for _, e := range f.failed {
		if n := resourceName(p, e.ID); n != "" && !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	if len(names) == 0 {
		return err
	}
	slices.Sort(names)
	return fmt.Errorf("%s: %w", strings.Join(names, ", "), err)
}

// resourceName turns a compose progress ID ("service:web:1", "Container
// proj-web-1", "network:media") into `service "web"` or `network "media"`.
func resourceName(p *types.Project, id string) string {
	if kind, rest, ok := strings.Cut(id, ":"); ok && !strings.Contains(kind, " ") {
		name, _, _ := strings.Cut(rest, ":")
		return fmt.Sprintf("%s %q", kind, name)
	}
	if c, ok := strings.CutPrefix(id, "Container "); ok {
		for _, s := range p.Services {
			if s.ContainerName == c || strings.HasPrefix(c, p.Name+"-"+s.Name+"-") {
				return fmt.Sprintf("service %q", s.Name)
			}
		}
	}
	return ""
}

// loadCompose loads the launch spec's compose project as the template
// package wrote it: already interpolated (so not again: a literal "$"
// stays one), env files already merged into each service's environment
// and label files into its labels.
// It then adds what the runtime owns: compose's own labels, as
// `docker compose` adds them when it loads a file, this package's managed
// label and the spec's service labels (the manager's owner label among
// them) and pull_policy never on every service, and the instance's labels
// on every network and volume the project creates, so a later cleanup
// finds them.
func loadCompose(ctx context.Context, spec *sim.LaunchSpec) (*types.Project, error) {
	c := spec.Compose
	details := types.ConfigDetails{
		WorkingDir:  c.WorkingDir,
		ConfigFiles: []types.ConfigFile{{Filename: filepath.Join(c.WorkingDir, "compose.yml"), Content: c.YAML}},
		Environment: types.Mapping{},
	}
	p, err := loader.LoadWithContext(ctx, details, func(o *loader.Options) {
		o.SetProjectName(spec.Project, true)
		o.SkipInterpolation = true
		o.SkipResolveEnvironment = true
		// The launch merged the label files into the labels, and said
		// (on compose-go's logger, naming the instance) what they use
		// unset: read again here, they would say it again, naming none.
		o.SkipResolveLabels = true
	})
	if err != nil {
		return nil, sim.Errorf(sim.EComposeInvalid, "compose project of instance %s: %v", spec.InstanceID, err)
	}
	own := map[string]string{LabelManaged: "true", sim.LabelInstance: spec.InstanceID, sim.LabelProject: spec.Project}
	// Networks and volumes carry the run's owner too: one a file names
	// (name: x) is shared by the instances that name it, and the last of
	// them to stop removes it (removeShared), if it is this run's.
	resources := maps.Clone(own)
	if o := ownerOf(spec); o != "" {
		resources[sim.LabelOwner] = o
	}
	// And its run, so what a normsim nobody can judge left is found by
	// it whole: containers, networks and volumes (the cleanup the log
	// prints for an unjudged run).
	if run := labelOf(spec, sim.LabelRun); run != "" {
		resources[sim.LabelRun] = run
	}
	// And its store's kind: what a gone --db :memory: run made is
	// another normsim's to sweep (RemoveOrphans), a network or volume
	// that outlived its containers too; a store file's waits for the
	// next normsim on that store.
	if store := labelOf(spec, sim.LabelStore); store != "" {
		resources[sim.LabelStore] = store
	}
	for name, s := range p.Services {
		labels := types.Labels{}
		for k, v := range s.Labels {
			labels[k] = v
		}
		if i := slices.IndexFunc(spec.Services, func(ss sim.ServiceSpec) bool { return ss.Name == name }); i >= 0 {
			for k, v := range spec.Services[i].Labels {
				labels[k] = v
			}
		}
		for k, v := range own {
			labels[k] = v
		}
		labels[sim.LabelService] = name
		s.Labels = labels
		// Images are never pulled: Prepare runs the engine's (checkImages),
		// and a pull_policy that would pull anyway (always, daily, build …)
		// would try the registry (issue 34 round 14, B5); validate warns of it.
		s.PullPolicy = types.PullPolicyNever
		s.CustomLabels = types.Labels{
			api.ProjectLabel:     p.Name,
			api.ServiceLabel:     name,
			api.VersionLabel:     api.ComposeVersion,
			api.WorkingDirLabel:  p.WorkingDir,
			api.ConfigFilesLabel: strings.Join(p.ComposeFiles, ","),
			api.OneoffLabel:      "False",
		}
		p.Services[name] = s
	}
	for k, n := range p.Networks {
		if !bool(n.External) {
			n.Labels = addLabels(n.Labels, resources)
			p.Networks[k] = n
		}
	}
	for k, v := range p.Volumes {
		if !bool(v.External) {
			v.Labels = addLabels(v.Labels, resources)
			p.Volumes[k] = v
		}
	}
	return p, nil
}

func addLabels(l types.Labels, add map[string]string) types.Labels {
	out := types.Labels{}
	for k, v := range l {
		out[k] = v
	}
	for k, v := range add {
		out[k] = v
	}
	return out
}

// prepareCompose is Prepare for a spec that carries its compose project:
// the Compose SDK creates the project's networks, volumes and containers
// exactly as `docker compose create` would, starting none of them. A
// failure removes whatever it created.
func (r *Runtime) prepareCompose(ctx context.Context, spec *sim.LaunchSpec) (_ *types.Project, _ []*service, err error) {
	p, err := loadCompose(ctx, spec)
	if err != nil {
		return nil, nil, err
	}
	if err := r.checkImages(ctx, p); err != nil {
		return nil, nil, err
	}
	// compose converges onto whatever the project already has; an
	// instance's project is new, so anything there is someone else's.
	if existing, err := r.projectContainers(ctx, spec.Project); err != nil {
		return nil, nil, err
	} else if len(existing) > 0 {
		return nil, nil, sim.Errorf(sim.EConflict, "compose project %q already has containers: another instance uses it, or an earlier run left them behind (docker compose -p %s down)", spec.Project, spec.Project)
	}
	defer func() {
		if err == nil {
			return
		}
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
		defer cancel()
		if derr := r.down(cctx, p.Name, p, 0, spec.InstanceID); derr != nil {
			r.log.Error("clean up after failed prepare", "instance", spec.InstanceID, "err", derr)
		}
		// compose returns on the first failure while other services'
		// creates may still be under way; they carry the instance's labels.
		if serr := r.sweepSettled(cctx, ownerOf(spec), spec.InstanceID); serr != nil {
			r.log.Error("clean up after failed prepare", "instance", spec.InstanceID, "err", serr)
		}
	}()
	rec := &failures{}
	composer, err := newComposer(r.dockerCli, compose.WithEventProcessor(rec))
	if err != nil {
		return nil, nil, err
	}
	if err := composer.Create(ctx, p, api.CreateOptions{
		Recreate:             api.RecreateDiverged,
		RecreateDependencies: api.RecreateDiverged,
		Inherit:              true,
		QuietPull:            true,
	}); err != nil {
		return nil, nil, r.composeErr("create compose project "+p.Name, rec.name(p, err))
	}
	list, err := r.projectContainers(ctx, p.Name)
	if err != nil {
		return nil, nil, err
	}
	services := make([]*service, 0, len(list))
	for _, c := range list {
		services = append(services, &service{name: c.Labels[sim.LabelService], container: c.ID})
	}
	slices.SortStableFunc(services, func(a, b *service) int {
		return cmp.Compare(serviceIndex(spec, a.name), serviceIndex(spec, b.name))
	})
	return p, services, nil
}

// serviceIndex is name's place in the spec (dependency order), for Logs.
func serviceIndex(spec *sim.LaunchSpec, name string) int {
	return slices.IndexFunc(spec.Services, func(s sim.ServiceSpec) bool { return s.Name == name })
}

// projectContainers lists the containers of a compose project, stopped or
// not, by compose's project label.
func (r *Runtime) projectContainers(ctx context.Context, project string) ([]container.Summary, error) {
	list, err := r.cli.ContainerList(ctx, container.ListOptions{All: true, Filters: filters.NewArgs(
		filters.Arg("label", api.ProjectLabel+"="+project))})
	if err != nil {
		return nil, r.engineErr("list containers of compose project "+project, err)
	}
	return list, nil
}

// startCompose starts a project as `docker compose start` does: services
// in dependency order, each once the ones it depends on have started,
// become healthy or completed, as their depends_on condition says. When
// that fails it stops whatever it started, so a failed launch leaves
// nothing running (the containers stay for their logs until Stop).
func (r *Runtime) startCompose(ctx context.Context, in *instance) error {
	r.mu.Lock()
	in.startFailed = false
	r.mu.Unlock()
	err := r.compose.Start(ctx, in.composeName, api.StartOptions{Project: in.project})
	if err == nil {
		return nil
	}
	// Before the stop below: the engine reports its deaths after it.
	r.mu.Lock()
	in.startFailed = true
	r.mu.Unlock()
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	zero := time.Duration(0)
	if serr := r.compose.Stop(cctx, in.composeName, api.StopOptions{Project: in.project, Timeout: &zero}); serr != nil {
		r.log.Warn("stop after failed start", "instance", in.id, "err", serr)
	}
	if unavailable(err) {
		return sim.Errorf(sim.EUnavailable, "start instance %s: docker engine does not answer: %v", in.id, err)
	}
	msg := err.Error()
	if svc := r.failedService(cctx, in.composeName); svc != "" {
		msg = fmt.Sprintf("service %q: %s", svc, msg)
	}
	if strings.Contains(msg, "port is already allocated") || strings.Contains(msg, "address already in use") {
		return sim.Errorf(sim.EConflict, "start instance %s: a published port is in use: %s", in.id, msg)
	}
	return sim.Errorf(sim.EUnprocessable, "start instance %s: %s", in.id, msg)
}

// failedService names the service whose container the engine could not
// start (compose's error names none), or "".
func (r *Runtime) failedService(ctx context.Context, project string) string {
	list, err := r.projectContainers(ctx, project)
	if err != nil {
		return ""
	}
	var failed []string
	for _, c := range list {
		in, err := r.cli.ContainerInspect(ctx, c.ID)
		if err == nil && in.State != nil && in.State.Error != "" {
			failed = append(failed, c.Labels[sim.LabelService])
		}
	}
	slices.Sort(failed)
	return strings.Join(slices.Compact(failed), ", ")
}

// down removes a compose project the way `docker compose down
// --remove-orphans -t grace` does: containers stopped (SIGTERM, SIGKILL
// after grace, rounded up to whole seconds as the engine counts them) and
// removed, then its networks; then the volumes made for instanceID, by
// their labels. Not compose's --volumes: it removes every named volume
// the file declares by its name, and a volume named there that existed
// before (compose only warns and uses it) is the user's, data and all.
// p may be nil: compose then finds the project's resources by their
// labels.
func (r *Runtime) down(ctx context.Context, project string, p *types.Project, grace time.Duration, instanceID string) error {
	secs := time.Duration(math.Ceil(max(grace, 0).Seconds())) * time.Second
	err := r.compose.Down(ctx, project, api.DownOptions{Project: p, Timeout: &secs, RemoveOrphans: true})
	if err != nil {
		return r.composeErr("remove compose project "+project, err)
	}
	return errors.Join(r.removeVolumes(ctx, r.trackedOwner(instanceID), instanceID), r.removeShared(ctx, p))
}

// removeShared removes the networks and volumes p names (name: x) that
// this run made and no container uses any more: another instance of the
// run that names them too made them, or used them until now. One still in
// use is left to its last user; another run's, or one normsim did not
// make, is never touched.
func (r *Runtime) removeShared(ctx context.Context, p *types.Project) error {
	if p == nil {
		return nil
	}
	owner := ""
	for _, s := range p.Services {
		if owner = s.Labels[sim.LabelOwner]; owner != "" {
			break
		}
	}
	if owner == "" {
		return nil
	}
	ours := func(labels map[string]string) bool {
		return labels[LabelManaged] == "true" && labels[sim.LabelOwner] == owner
	}
	var errs []error
	for _, v := range p.Volumes {
		if bool(v.External) || v.Name == "" {
			continue
		}
		if got, err := r.cli.VolumeInspect(ctx, v.Name); err != nil || !ours(got.Labels) {
			continue
		}
		if err := r.cli.VolumeRemove(ctx, v.Name, false); err != nil && !cerrdefs.IsNotFound(err) && !inUse(err) {
			errs = append(errs, r.engineErr("remove volume "+v.Name, err))
		}
	}
	for _, n := range p.Networks {
		if bool(n.External) || n.Name == "" {
			continue
		}
		if got, err := r.cli.NetworkInspect(ctx, n.Name, network.InspectOptions{}); err != nil || !ours(got.Labels) {
			continue
		}
		if err := r.cli.NetworkRemove(ctx, n.Name); err != nil && !cerrdefs.IsNotFound(err) && !inUse(err) {
			errs = append(errs, r.engineErr("remove network "+n.Name, err))
		}
	}
	return errors.Join(errs...)
}

// inUse reports the engine's refusal to remove a volume a container
// mounts, or a network a container is attached to.
func inUse(err error) bool {
	return cerrdefs.IsConflict(err) || cerrdefs.IsPermissionDenied(err) ||
		strings.Contains(err.Error(), "in use") || strings.Contains(err.Error(), "active endpoints")
}

// composeErr gives an SDK error a code: the engine's refusal of what the
// compose file asks (a key it does not accept, a value out of range) is
// the template's doing, EUnprocessable, with the engine's words and the
// service compose names; an engine that does not answer is EUnavailable.
func (r *Runtime) composeErr(op string, err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%s: %w", op, err)
	}
	if unavailable(err) {
		return sim.Errorf(sim.EUnavailable, "%s: docker engine does not answer: %v", op, err)
	}
	if noAddressPool(err) {
		return sim.Errorf(sim.EUnavailable, "%s: the Docker engine has no address pool left for another network. Each Docker instance gets a compose network of its own, and the engine's default pools hold about 31 bridge networks, shared by every normsim and tool on it: remove networks nobody uses (docker network ls, docker network prune), or give the engine more with default-address-pools in /etc/docker/daemon.json. The engine said: %v", op, err)
	}
	return sim.Errorf(sim.EUnprocessable, "%s: %s", op, err.Error())
}

// noAddressPool reports the engine's refusal to make a network because
// its address pools are used up: not the template's doing, and not
// something the template can change.
func noAddressPool(err error) bool {
	return strings.Contains(err.Error(), "non-overlapping IPv4 address pool") ||
		strings.Contains(err.Error(), "all predefined address pools have been fully subnetted")
}

// unavailable reports an SDK error that says the engine does not answer;
// the SDK's client is not this package's, so its error types differ.
func unavailable(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "Cannot connect to the Docker daemon") || strings.Contains(msg, "connection refused") ||
		strings.Contains(msg, "no such file or directory") && strings.Contains(msg, "docker.sock")
}
