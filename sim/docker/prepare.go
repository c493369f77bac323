package docker

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/compose-spec/compose-go/v2/types"
	cerrdefs "github.com/containerd/errdefs"
	"github.com/containerd/platforms"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/versions"
	"github.com/docker/docker/client"
	"golang.org/x/sync/errgroup"

	"github.com/normsim/normsim/sim"
)

// Depends_on conditions, as compose spells them.
const (
	conditionStarted   = "service_started"
	conditionHealthy   = "service_healthy"
	conditionCompleted = sim.ConditionCompleted
)

// cleanupTimeout bounds the removal of what a failed Prepare created; it
// runs even when the Prepare's ctx was cancelled.
const cleanupTimeout = 30 * time.Second

// dockerName is the alphabet of container and network names.
var dockerName = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9_.-]*$`)

// Prepare checks that every image is in the engine, then has the Compose
// SDK create the instance's project (networks, volumes, one container per
// service replica), started by nothing. A spec without a compose project
// (one built by hand) is turned into one first. A missing image is an
// EImageMissing error; whatever fails, nothing created is left behind.
func (r *Runtime) Prepare(ctx context.Context, spec *sim.LaunchSpec) error {
	if err := validate(spec); err != nil {
		return err
	}
	if spec.Compose == nil {
		c, err := servicesProject(spec)
		if err != nil {
			return err
		}
		withProject := *spec
		withProject.Compose = c
		spec = &withProject
	}
	if err := r.connect(ctx); err != nil {
		return err
	}
	in := &instance{id: spec.InstanceID, owner: ownerOf(spec), composeName: spec.Project}
	if err := r.track(in); err != nil {
		return err
	}
	if reapedOnDeath(spec) {
		// Listed before anything is created: a normsim killed from
		// here on leaves nothing running.
		if err := containerReaper.Watch(reaperKey(in)); err != nil {
			r.log.Warn("no reaper: the containers of this instance outlive a normsim that is killed", "instance", in.id, "err", err)
		}
		r.mu.Lock()
		in.reaped = true
		r.mu.Unlock()
	}
	project, services, err := r.prepareCompose(ctx, spec)
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
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
		defer cancel()
		err := r.down(cctx, project.Name, project, 0, in.id)
		r.forget(in)
		return errors.Join(sim.Errorf(sim.EConflict, "instance %s was stopped while it was being prepared", in.id), err)
	}
	return nil
}

// checkImages inspects every distinct image of p at once. A service whose
// platform: the image in the engine is not for is refused as missing too:
// compose would pull the image for that platform, and normsim never pulls
// (issue 34 round 14, B5). Whether it is for it is judged as compose
// judges it (containerd's platform matcher: the architecture's aliases,
// arm's default variant, an unknown platform matching nothing), against
// every platform the engine holds of the image (imagePlatformsOf). A
// platform: that is no platform is the template's mistake, not a missing
// image, and is said before any image is looked at.
func (r *Runtime) checkImages(ctx context.Context, p *types.Project) error {
	var images []string
	for _, name := range p.ServiceNames() {
		s := p.Services[name]
		if !slices.Contains(images, s.Image) {
			images = append(images, s.Image)
		}
		if s.Platform == "" {
			continue
		}
		if err := CheckPlatform(name, s.Platform); err != nil {
			return sim.Errorf(sim.EComposeInvalid, "compose.yml: %v", err)
		}
	}
	// An engine with an image store that keeps several platforms of an
	// image lists them from API 1.48; an older one is asked as before.
	var opts []client.ImageInspectOption
	if versions.GreaterThanOrEqualTo(r.cli.ClientVersion(), "1.48") {
		opts = append(opts, client.ImageInspectWithManifests(true))
	}
	var mu sync.Mutex
	var missing []string
	found := map[string]imagePlatforms{}
	g, gctx := errgroup.WithContext(ctx)
	for _, img := range images {
		g.Go(func() error {
			info, err := r.cli.ImageInspect(gctx, img, opts...)
			switch {
			case err == nil:
				mu.Lock()
				found[img] = imagePlatformsOf(info)
				mu.Unlock()
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
		return otherPlatform(p, found)
	case 1:
		return sim.Errorf(sim.EImageMissing, "image %q is not in the Docker engine: %s", missing[0], buildHint(missing))
	default:
		return sim.Errorf(sim.EImageMissing, "images %s are not in the Docker engine: %s", quoteAll(missing), buildHint(missing))
	}
}

// CheckPlatform says that a service's platform: is no platform, and what
// one looks like; nil when it is one (containerd's parser, as the engine
// reads it). compose refuses it too, at create, in containerd's words,
// which name neither the service nor the key. Templates are judged with
// it wherever this runtime is linked (template.CheckPlatform, set by
// app/withdocker), so validate and the launch say it in these words.
func CheckPlatform(service, platform string) error {
	if _, err := platforms.Parse(platform); err != nil {
		return platformParseError(service, platform, err)
	}
	return nil
}

// platformParseError is CheckPlatform's refusal of platform, which the
// parser refused with err.
func platformParseError(service, platform string, err error) error {
	return fmt.Errorf("services.%s.platform: %q is not a platform (%v); write os/arch or os/arch/variant, such as linux/amd64, linux/arm64 or linux/arm/v7, or remove platform to run the image the engine has", service, platform, err)
}

// imagePlatforms is what the engine says of the platforms an image runs
// on.
type imagePlatforms struct {
	// have are the platforms whose content the engine holds.
	have []platforms.Platform
	// listed are platforms the image's index names whose content is not
	// in the engine (an image store that keeps several platforms pulls
	// only some).
	listed []platforms.Platform
	// known is false where the engine could not say all it holds: an
	// image store that keeps several platforms, asked by an API too old
	// to list them (before 1.48), an inspect that names no platform, or
	// several manifests without their platform. Nothing is then claimed
	// missing; the engine judges the platform when it creates the
	// container.
	known bool
}

// imagePlatformsOf reads an image inspect as compose does (its
// localContentDigest): with the image's manifests listed (an image store
// that keeps several platforms: containerd's), every available image
// manifest's platform, a lone one without its platform taking the
// inspect's; otherwise the inspect's own platform, the one image the
// classic store keeps under the name.
func imagePlatformsOf(info image.InspectResponse) imagePlatforms {
	flat := platforms.Platform{OS: info.Os, Architecture: info.Architecture, Variant: info.Variant}
	if len(info.Manifests) > 0 {
		ip := imagePlatforms{known: true}
		var available, unnamed int
		for _, m := range info.Manifests {
			switch {
			case m.Kind != image.ManifestKindImage: // attestations
			case !m.Available:
				if m.ImageData != nil {
					ip.listed = append(ip.listed, m.ImageData.Platform)
				}
			case m.ImageData == nil:
				available++
				unnamed++
			default:
				available++
				ip.have = append(ip.have, m.ImageData.Platform)
			}
		}
		if unnamed > 0 {
			if available == 1 && flat.Architecture != "" {
				ip.have = append(ip.have, flat)
			} else {
				ip.known = false
			}
		}
		return ip
	}
	if flat.Architecture == "" || info.Descriptor != nil {
		// No platform to judge by, or a store that may hold others the
		// inspect did not list: the inspect's is one of them.
		ip := imagePlatforms{known: false}
		if flat.Architecture != "" {
			ip.have = []platforms.Platform{flat}
		}
		return ip
	}
	return imagePlatforms{have: []platforms.Platform{flat}, known: true}
}

// otherPlatform refuses the first service (by name) whose platform: its
// image in the engine is not for; have holds what the engine holds of
// each image.
func otherPlatform(p *types.Project, have map[string]imagePlatforms) error {
	for _, name := range p.ServiceNames() {
		s := p.Services[name]
		if s.Platform == "" {
			continue
		}
		if err := platformProblem(name, s.Platform, s.Image, have[s.Image]); err != nil {
			return err
		}
	}
	return nil
}

// platformProblem judges one service's platform: against what the engine
// holds of its image: nil when one of the image's platforms is for it, or
// when the engine could not say all it holds.
func platformProblem(service, platform, img string, ip imagePlatforms) error {
	want, err := platforms.Parse(platform)
	if err != nil {
		return sim.Errorf(sim.EComposeInvalid, "compose.yml: %v", platformParseError(service, platform, err))
	}
	m := platforms.NewMatcher(want)
	if slices.ContainsFunc(ip.have, m.Match) || !ip.known {
		return nil
	}
	is := "is for no platform it names"
	if len(ip.have) > 0 {
		names := make([]string, len(ip.have))
		for i, h := range ip.have {
			names[i] = platforms.Format(h)
		}
		is = "is for " + strings.Join(names, ", ")
	}
	if slices.ContainsFunc(ip.listed, m.Match) {
		is += fmt.Sprintf(" (its index lists %s, but that platform's content is not in the engine)", platform)
	}
	return sim.Errorf(sim.EImageMissing, "services.%s.platform: %q, but image %q in the Docker engine %s, and normsim never pulls one for another platform; remove platform to run the image the engine has, or build or load the image for %s (docker build --platform %s)",
		service, platform, img, is, platform, platform)
}

// buildHint says how to get missing images: the example jobs' images
// (normsim/NAME:src-…) build from a normsim checkout in seconds, each
// alone; any image can be loaded.
func buildHint(missing []string) string {
	var names []string
	for _, img := range missing {
		repo, tag, _ := strings.Cut(img, ":")
		name, ok := strings.CutPrefix(repo, "normsim/")
		if !ok || !strings.HasPrefix(tag, "src-") {
			return "build it with docker build where this engine can see it, or load it with docker load"
		}
		names = append(names, name)
	}
	it := "it"
	if len(names) > 1 {
		it = "them"
	}
	return "from a normsim checkout, build " + it + " in seconds with: normsim build-examples " + strings.Join(names, " ") +
		" (scripts/build-examples builds every example), or load " + it + " with docker load"
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

// servicesProject turns a spec built by hand (no compose project) into
// the compose project its services describe, so it runs through the same
// SDK path as a template's: one default network, each service's ports,
// mounts (named volumes declared at the project), healthcheck and
// depends_on as compose would read them from a file.
func servicesProject(spec *sim.LaunchSpec) (*sim.ComposeProject, error) {
	p := &types.Project{Name: spec.Project, Services: types.Services{}, Volumes: types.Volumes{}}
	for _, s := range spec.Services {
		sc := types.ServiceConfig{Name: s.Name}
		sc.Image = s.Image
		sc.Command = types.ShellCommand(slices.Clone(s.Command))
		sc.Entrypoint = types.ShellCommand(slices.Clone(s.Entrypoint))
		sc.Environment = types.MappingWithEquals{}
		sc.Labels = types.Labels(maps.Clone(s.Labels))
		sc.User = s.User
		sc.WorkingDir = s.WorkingDir
		for k, v := range s.Env {
			sc.Environment[k] = &v
		}
		if len(s.ExtraHosts) > 0 {
			sc.ExtraHosts = types.HostsList{}
			for _, h := range s.ExtraHosts {
				host, ip, _ := strings.Cut(h, ":")
				sc.ExtraHosts[host] = append(sc.ExtraHosts[host], ip)
			}
		}
		for _, b := range s.Ports {
			proto := strings.ToLower(b.Protocol)
			if proto == "" {
				proto = "tcp"
			}
			if proto != "tcp" && proto != "udp" {
				return nil, sim.Errorf(sim.EComposeInvalid, "compose.yml: service %q publishes port %d over %q; want tcp or udp", s.Name, b.ContainerPort, b.Protocol)
			}
			if b.ContainerPort < 1 || b.ContainerPort > 65535 || b.HostPort < 0 || b.HostPort > 65535 {
				return nil, sim.Errorf(sim.EComposeInvalid, "compose.yml: service %q publishes port %d:%d; ports are 1..65535", s.Name, b.HostPort, b.ContainerPort)
			}
			pc := types.ServicePortConfig{Mode: "ingress", HostIP: b.HostIP, Target: uint32(b.ContainerPort), Protocol: proto}
			if b.HostPort > 0 {
				pc.Published = strconv.Itoa(b.HostPort)
			}
			sc.Ports = append(sc.Ports, pc)
		}
		for _, m := range s.Volumes {
			v := types.ServiceVolumeConfig{Type: m.Type, Source: m.Source, Target: m.Target, ReadOnly: m.ReadOnly}
			switch m.Type {
			case types.VolumeTypeBind:
				// Like compose's short syntax: a missing host directory is made.
				v.Bind = &types.ServiceVolumeBind{CreateHostPath: true}
			case types.VolumeTypeVolume, "":
				v.Type = types.VolumeTypeVolume
				if m.Source != "" {
					p.Volumes[m.Source] = types.VolumeConfig{Name: spec.Project + "_" + m.Source}
				}
			case types.VolumeTypeTmpfs:
			default:
				return nil, sim.Errorf(sim.EComposeInvalid, "compose.yml: service %q mounts %q as %q; the docker runtime supports bind, volume and tmpfs", s.Name, m.Target, m.Type)
			}
			sc.Volumes = append(sc.Volumes, v)
		}
		if h := s.Healthcheck; h != nil {
			hc := &types.HealthCheckConfig{Test: healthTest(h.Test)}
			if h.Interval > 0 {
				hc.Interval = ptr(types.Duration(h.Interval))
			}
			if h.Timeout > 0 {
				hc.Timeout = ptr(types.Duration(h.Timeout))
			}
			if h.StartPeriod > 0 {
				hc.StartPeriod = ptr(types.Duration(h.StartPeriod))
			}
			if h.Retries > 0 {
				hc.Retries = ptr(uint64(h.Retries))
			}
			sc.HealthCheck = hc
		}
		if len(s.DependsOn) > 0 {
			sc.DependsOn = types.DependsOnConfig{}
			for _, d := range s.DependsOn {
				c := d.Condition
				if c == "" {
					c = conditionStarted
				}
				sc.DependsOn[d.Service] = types.ServiceDependency{Condition: c, Required: true}
			}
		}
		p.Services[s.Name] = sc
	}
	b, err := p.MarshalYAML()
	if err != nil {
		return nil, fmt.Errorf("launch spec of instance %s: encode compose project: %w", spec.InstanceID, err)
	}
	return &sim.ComposeProject{YAML: b, WorkingDir: os.TempDir()}, nil
}

func ptr[T any](v T) *T { return &v }
