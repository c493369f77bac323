package docker

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/compose-spec/compose-go/v2/types"
	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/go-connections/nat"
	"golang.org/x/sync/errgroup"

	"github.com/normsim/normsim/sim"
)

// Depends_on conditions, as compose spells them.
const (
	conditionStarted   = "service_started"
	conditionHealthy   = "service_healthy"
	conditionCompleted = "service_completed_successfully"
)

// cleanupTimeout bounds the removal of what a failed Prepare created; it
// runs even when the Prepare's ctx was cancelled.
const cleanupTimeout = 30 * time.Second

// dockerName is the alphabet of container and network names.
var dockerName = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9_.-]*$`)

// ContainerName is the name compose gives the first container of a service.
func ContainerName(project, service string) string {
	return project + "-" + service + "-1"
}

// NetworkName is the name of an instance's network: compose's default
// network of the project.
func NetworkName(project string) string { return project + "_default" }

// Prepare checks that every image is in the engine, then creates the
// instance's network and one container per service, started by nothing.
// A missing image is an EImageMissing error; whatever fails, nothing
// created is left behind.
func (r *Runtime) Prepare(ctx context.Context, spec *sim.LaunchSpec) error {
	if err := validate(spec); err != nil {
		return err
	}
	if err := r.connect(ctx); err != nil {
		return err
	}
	in := &instance{id: spec.InstanceID, network: NetworkName(spec.Project)}
	if spec.Compose != nil {
		in.network, in.composeName = "", spec.Project
	}
	if err := r.track(in); err != nil {
		return err
	}
	var services []*service
	var project *types.Project
	var err error
	if spec.Compose != nil {
		project, services, err = r.prepareCompose(ctx, spec)
	} else {
		services, err = r.prepare(ctx, spec, in.network)
	}
	if err != nil {
		r.forget(in)
		return fmt.Errorf("prepare instance %s: %w", spec.InstanceID, err)
	}
	r.mu.Lock()
	in.services = services
	in.project = project
	stopped := in.stopping // Stop came while the containers were being made
	r.mu.Unlock()
	if stopped {
		ids := make([]string, len(services))
		for i, s := range services {
			ids[i] = s.container
		}
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
		defer cancel()
		var err error
		if project != nil {
			err = r.down(cctx, project.Name, project, 0)
		} else {
			err = r.removeAll(cctx, ids, []string{in.network}, in.id)
		}
		r.forget(in)
		return errors.Join(sim.Errorf(sim.EConflict, "instance %s was stopped while it was being prepared", in.id), err)
	}
	return nil
}

// createRequest is one service's ContainerCreate arguments.
type createRequest struct {
	config  *container.Config
	host    *container.HostConfig
	network *network.NetworkingConfig
}

func (r *Runtime) prepare(ctx context.Context, spec *sim.LaunchSpec, netName string) (_ []*service, err error) {
	reqs := make([]createRequest, len(spec.Services))
	for i := range spec.Services {
		cfg, host, netCfg, err := containerConfig(spec, &spec.Services[i], netName)
		if err != nil {
			return nil, err
		}
		reqs[i] = createRequest{cfg, host, netCfg}
	}
	if err := r.checkImages(ctx, spec); err != nil {
		return nil, err
	}

	labels := map[string]string{
		LabelManaged:      "true",
		sim.LabelInstance: spec.InstanceID,
		sim.LabelProject:  spec.Project,
	}
	net, err := r.cli.NetworkCreate(ctx, netName, network.CreateOptions{Driver: "bridge", Labels: labels})
	if err != nil {
		if cerrdefs.IsConflict(err) {
			return nil, sim.Errorf(sim.EConflict, "network %q already exists: another instance uses project %q, or an earlier run left it behind (docker network rm %s)", netName, spec.Project, netName)
		}
		if ctx.Err() != nil {
			// The engine may have made it before the cancellation reached it.
			r.removeNetworkOf(ctx, netName, spec.InstanceID)
		}
		return nil, r.engineErr("create network "+netName, err)
	}

	var mu sync.Mutex
	var created []string
	defer func() {
		if err == nil {
			return
		}
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
		defer cancel()
		// Containers whose create was cut short by ctx may exist without
		// their ID having reached us; the network finds them.
		if list, lerr := r.cli.ContainerList(cctx, container.ListOptions{All: true, Filters: filters.NewArgs(
			filters.Arg("network", net.ID), filters.Arg("label", LabelManaged+"=true"))}); lerr == nil {
			for _, c := range list {
				if !slices.Contains(created, c.ID) {
					created = append(created, c.ID)
				}
			}
		}
		if rerr := r.removeAll(cctx, created, []string{net.ID}, spec.InstanceID); rerr != nil {
			r.log.Error("clean up after failed prepare", "instance", spec.InstanceID, "err", rerr)
		}
	}()

	services := make([]*service, len(spec.Services))
	g, gctx := errgroup.WithContext(ctx)
	for i := range spec.Services {
		s, req := &spec.Services[i], reqs[i]
		g.Go(func() error {
			name := ContainerName(spec.Project, s.Name)
			resp, err := r.cli.ContainerCreate(gctx, req.config, req.host, req.network, nil, name)
			if err != nil {
				if cerrdefs.IsConflict(err) {
					return sim.Errorf(sim.EConflict, "container name %q is already in use: another instance uses project %q, or an earlier run left it behind (docker rm -f %s)", name, spec.Project, name)
				}
				return r.engineErr(fmt.Sprintf("create service %s", s.Name), err)
			}
			mu.Lock()
			created = append(created, resp.ID)
			mu.Unlock()
			services[i] = &service{name: s.Name, container: resp.ID, deps: slices.Clone(s.DependsOn)}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return services, nil
}

// removeNetworkOf removes the instance's network called name, if there is
// one, despite ctx being done.
func (r *Runtime) removeNetworkOf(ctx context.Context, name, instanceID string) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	f := filters.NewArgs(filters.Arg("name", name), filters.Arg("label", LabelManaged+"=true"), filters.Arg("label", sim.LabelInstance+"="+instanceID))
	nets, err := r.cli.NetworkList(cctx, network.ListOptions{Filters: f})
	if err != nil {
		return
	}
	for _, n := range nets {
		if n.Name == name { // the name filter matches substrings
			if err := r.cli.NetworkRemove(cctx, n.ID); err != nil {
				r.log.Error("clean up after cancelled prepare", "network", name, "err", err)
			}
		}
	}
}

// checkImages inspects every distinct image at once.
func (r *Runtime) checkImages(ctx context.Context, spec *sim.LaunchSpec) error {
	var images []string
	for _, s := range spec.Services {
		if !slices.Contains(images, s.Image) {
			images = append(images, s.Image)
		}
	}
	var mu sync.Mutex
	var missing []string
	g, gctx := errgroup.WithContext(ctx)
	for _, img := range images {
		g.Go(func() error {
			_, err := r.cli.ImageInspect(gctx, img)
			switch {
			case err == nil:
				return nil
			case cerrdefs.IsNotFound(err):
				mu.Lock()
				missing = append(missing, img)
				mu.Unlock()
				return nil
			default:
				return r.engineErr("inspect image "+img, err)
			}
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	switch sort.Strings(missing); len(missing) {
	case 0:
		return nil
	case 1:
		return sim.Errorf(sim.EImageMissing, "image %q is not in the Docker engine: build it with scripts/build-examples (or: go run . build-examples), or load it with docker load", missing[0])
	default:
		return sim.Errorf(sim.EImageMissing, "images %s are not in the Docker engine: build them with scripts/build-examples (or: go run . build-examples), or load them with docker load", quoteAll(missing))
	}
}

func quoteAll(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = strconv.Quote(s)
	}
	return strings.Join(q, ", ")
}

// validate refuses a spec the engine could not run as compose would.
func validate(spec *sim.LaunchSpec) error {
	if spec == nil || spec.InstanceID == "" {
		return sim.Errorf(sim.EInvalid, "launch spec: instance id is empty")
	}
	if !dockerName.MatchString(spec.Project) {
		return sim.Errorf(sim.EInvalid, "launch spec of instance %s: project %q is not a valid docker name ([a-zA-Z0-9][a-zA-Z0-9_.-]*)", spec.InstanceID, spec.Project)
	}
	if len(spec.Services) == 0 {
		return sim.Errorf(sim.EComposeInvalid, "compose.yml: instance %s has no services to run", spec.InstanceID)
	}
	byName := map[string]*sim.ServiceSpec{}
	for i := range spec.Services {
		s := &spec.Services[i]
		if !dockerName.MatchString(s.Name) {
			return sim.Errorf(sim.EComposeInvalid, "compose.yml: service name %q is not a valid docker name ([a-zA-Z0-9][a-zA-Z0-9_.-]*)", s.Name)
		}
		if byName[s.Name] != nil {
			return sim.Errorf(sim.EComposeInvalid, "compose.yml: service %q appears twice", s.Name)
		}
		if s.Image == "" {
			return sim.Errorf(sim.EComposeInvalid, "compose.yml: service %q has no image; the docker runtime runs images and builds none", s.Name)
		}
		byName[s.Name] = s
	}
	for _, s := range spec.Services {
		for _, d := range s.DependsOn {
			if byName[d.Service] == nil {
				return sim.Errorf(sim.EComposeInvalid, "compose.yml: service %q depends on %q, which is no service of the file", s.Name, d.Service)
			}
			switch d.Condition {
			case "", conditionStarted, conditionHealthy, conditionCompleted:
			default:
				return sim.Errorf(sim.EComposeInvalid, "compose.yml: service %q depends on %q with condition %q; want %s, %s or %s",
					s.Name, d.Service, d.Condition, conditionStarted, conditionHealthy, conditionCompleted)
			}
		}
	}
	// A cycle would make Start wait forever.
	state := map[string]int{} // 1 visiting, 2 done
	var visit func(name string, path []string) error
	visit = func(name string, path []string) error {
		switch state[name] {
		case 1:
			return sim.Errorf(sim.EComposeInvalid, "compose.yml: depends_on has a cycle: %s", strings.Join(append(path, name), " -> "))
		case 2:
			return nil
		}
		state[name] = 1
		for _, d := range byName[name].DependsOn {
			if err := visit(d.Service, append(path, name)); err != nil {
				return err
			}
		}
		state[name] = 2
		return nil
	}
	for _, s := range spec.Services {
		if err := visit(s.Name, nil); err != nil {
			return err
		}
	}
	return nil
}

// containerConfig turns one service into the engine's create request, as
// compose would.
func containerConfig(spec *sim.LaunchSpec, s *sim.ServiceSpec, netName string) (*container.Config, *container.HostConfig, *network.NetworkingConfig, error) {
	labels := maps.Clone(s.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	for k, v := range map[string]string{sim.LabelJob: spec.JobID, sim.LabelRole: spec.Role, sim.LabelNode: spec.Node, sim.LabelTemplate: spec.Template} {
		if _, ok := labels[k]; !ok && v != "" {
			labels[k] = v
		}
	}
	labels[LabelManaged] = "true"
	labels[sim.LabelInstance] = spec.InstanceID
	labels[sim.LabelProject] = spec.Project
	labels[sim.LabelService] = s.Name
	if len(s.DependsOn) > 0 {
		labels[LabelDependsOn] = encodeDeps(s.DependsOn)
	}

	env := make([]string, 0, len(s.Env))
	for _, k := range slices.Sorted(maps.Keys(s.Env)) {
		env = append(env, k+"="+s.Env[k])
	}

	cfg := &container.Config{
		Image:      s.Image,
		Env:        env,
		Labels:     labels,
		User:       s.User,
		WorkingDir: s.WorkingDir,
	}
	if len(s.Command) > 0 {
		cfg.Cmd = slices.Clone(s.Command)
	}
	if len(s.Entrypoint) > 0 {
		cfg.Entrypoint = slices.Clone(s.Entrypoint)
	}
	if h := s.Healthcheck; h != nil {
		cfg.Healthcheck = &container.HealthConfig{
			Test:        healthTest(h.Test),
			Interval:    h.Interval,
			Timeout:     h.Timeout,
			StartPeriod: h.StartPeriod,
			Retries:     h.Retries,
		}
	}

	host := &container.HostConfig{
		NetworkMode: container.NetworkMode(netName),
		ExtraHosts:  slices.Clone(s.ExtraHosts),
	}
	if len(s.Ports) > 0 {
		cfg.ExposedPorts = nat.PortSet{}
		host.PortBindings = nat.PortMap{}
	}
	for _, p := range s.Ports {
		proto := strings.ToLower(p.Protocol)
		if proto == "" {
			proto = "tcp"
		}
		if proto != "tcp" && proto != "udp" {
			return nil, nil, nil, sim.Errorf(sim.EComposeInvalid, "compose.yml: service %q publishes port %d over %q; want tcp or udp", s.Name, p.ContainerPort, p.Protocol)
		}
		if p.ContainerPort < 1 || p.ContainerPort > 65535 || p.HostPort < 0 || p.HostPort > 65535 {
			return nil, nil, nil, sim.Errorf(sim.EComposeInvalid, "compose.yml: service %q publishes port %d:%d; ports are 1..65535", s.Name, p.HostPort, p.ContainerPort)
		}
		port := nat.Port(fmt.Sprintf("%d/%s", p.ContainerPort, proto))
		cfg.ExposedPorts[port] = struct{}{}
		b := nat.PortBinding{HostIP: p.HostIP}
		if p.HostPort > 0 {
			b.HostPort = strconv.Itoa(p.HostPort)
		}
		host.PortBindings[port] = append(host.PortBindings[port], b)
	}
	for _, m := range s.Volumes {
		switch m.Type {
		case "bind":
			// Binds, not Mounts: like compose's short syntax, the engine
			// creates a missing host directory instead of failing.
			b := m.Source + ":" + m.Target
			if m.ReadOnly {
				b += ":ro"
			}
			host.Binds = append(host.Binds, b)
		case "volume", "":
			mt := mount.Mount{Type: mount.TypeVolume, Target: m.Target, ReadOnly: m.ReadOnly}
			if m.Source != "" {
				// compose's name for a project's named volume; the labels
				// let Stop remove it with the instance.
				mt.Source = spec.Project + "_" + m.Source
				mt.VolumeOptions = &mount.VolumeOptions{Labels: map[string]string{
					LabelManaged: "true", sim.LabelInstance: spec.InstanceID, sim.LabelProject: spec.Project,
				}}
			}
			host.Mounts = append(host.Mounts, mt)
		case "tmpfs":
			host.Mounts = append(host.Mounts, mount.Mount{Type: mount.TypeTmpfs, Target: m.Target})
		default:
			return nil, nil, nil, sim.Errorf(sim.EComposeInvalid, "compose.yml: service %q mounts %q as %q; the docker runtime supports bind, volume and tmpfs", s.Name, m.Target, m.Type)
		}
	}

	netCfg := &network.NetworkingConfig{EndpointsConfig: map[string]*network.EndpointSettings{
		netName: {Aliases: []string{s.Name}},
	}}
	return cfg, host, netCfg, nil
}

// healthTest returns a compose healthcheck test in the engine's form: a
// bare command string runs through the shell, as in compose.
func healthTest(test []string) []string {
	if len(test) == 0 {
		return nil
	}
	switch test[0] {
	case "NONE", "CMD", "CMD-SHELL":
		return slices.Clone(test)
	}
	return []string{"CMD-SHELL", strings.Join(test, " ")}
}

// encodeDeps and decodeDeps keep depends_on in a label, so an adopted
// instance still starts in order.
func encodeDeps(deps []sim.Dependency) string {
	parts := make([]string, len(deps))
	for i, d := range deps {
		c := d.Condition
		if c == "" {
			c = conditionStarted
		}
		parts[i] = d.Service + ":" + c
	}
	return strings.Join(parts, ",")
}

func decodeDeps(s string) []sim.Dependency {
	var deps []sim.Dependency
	for part := range strings.SplitSeq(s, ",") {
		name, cond, _ := strings.Cut(part, ":")
		if name != "" {
			deps = append(deps, sim.Dependency{Service: name, Condition: cond})
		}
	}
	return deps
}
