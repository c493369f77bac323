package template

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/compose-spec/compose-go/v2/types"

	"github.com/normsim/normsim/sim"
)

// sharesNetwork reports whether a service joins another container's network
// namespace (network_mode service:x or container:x). Docker refuses extra
// hosts, published ports and network aliases on such a container: it
// resolves names through the container it shares the namespace with.
func sharesNetwork(s types.ServiceConfig) bool {
	return strings.HasPrefix(s.NetworkMode, "service:") || strings.HasPrefix(s.NetworkMode, "container:")
}

// adjust changes p in place so that it runs beside other instances of the
// same template on one engine, and says what it changed, one sentence per
// change, sorted by service. project is the instance's project name.
// p must be a copy the caller owns (see instanceProject).
//
// A container_name is global to the engine, so two instances cannot both
// use it: it becomes <project>-<name>, and the written name stays
// resolvable by the project's other services as a network alias on every
// network the service joins. A network_mode container:<name> that names
// such a container follows the rename.
func adjust(p *types.Project, project string) []string {
	var out []string
	renamed := map[string]string{}
	for _, name := range p.ServiceNames() {
		s := p.Services[name]
		if s.ContainerName == "" {
			continue
		}
		orig := s.ContainerName
		s.ContainerName = project + "-" + orig
		renamed[orig] = s.ContainerName
		msg := fmt.Sprintf("services.%s.container_name: %q runs as %q so that instances can run side by side", name, orig, s.ContainerName)
		if len(s.Networks) > 0 {
			nets := maps.Clone(s.Networks)
			for _, n := range slices.Sorted(maps.Keys(nets)) {
				c := &types.ServiceNetworkConfig{}
				if nets[n] != nil {
					cp := *nets[n]
					c = &cp
				}
				if !slices.Contains(c.Aliases, orig) {
					c.Aliases = append(slices.Clone(c.Aliases), orig)
				}
				nets[n] = c
			}
			s.Networks = nets
			msg += fmt.Sprintf("; %q stays an alias on its network(s) %s", orig, strings.Join(slices.Sorted(maps.Keys(nets)), ", "))
		} else {
			msg += fmt.Sprintf("; with network_mode %q the old name resolves nowhere", s.NetworkMode)
		}
		out = append(out, msg)
		p.Services[name] = s
	}
	for _, name := range p.ServiceNames() {
		s := p.Services[name]
		if target, ok := strings.CutPrefix(s.NetworkMode, "container:"); ok {
			if to, ok := renamed[target]; ok {
				s.NetworkMode = "container:" + to
				out = append(out, fmt.Sprintf("services.%s.network_mode: container:%s follows the rename to container:%s", name, target, to))
				p.Services[name] = s
			}
		}
		switch s.PullPolicy {
		case "", types.PullPolicyMissing, types.PullPolicyIfNotPresent, types.PullPolicyNever:
		default:
			out = append(out, fmt.Sprintf("services.%s.pull_policy: %q is not applied: normsim never pulls or builds, and a launch on Docker runs the image already in the engine (IMAGE_MISSING when it is not there); docker pull (or build) %s before launching for a newer one; remove pull_policy, which only docker compose applies", name, s.PullPolicy, s.Image))
		}
		if s.NetworkMode == "none" {
			out = append(out, fmt.Sprintf("services.%s.network_mode: \"none\" gives the container no network, so the job in it cannot reach normsim's job socket (%s, on %s) and a job run so on Docker exits as soon as it dials; remove network_mode: none unless this service never talks to normsim", name, EnvWorkerURL, ContainerHost))
		}
		if s.NetworkMode == "host" && len(s.Ports) > 0 {
			out = append(out, fmt.Sprintf("services.%s.ports: not published: with network_mode host Docker discards published ports (the container is on the host's network, so the job's ports are open on every host address as the job binds them, not as ports: maps them); remove ports, or remove network_mode: host to publish them", name))
		}
		if sharesNetwork(s) {
			out = append(out, fmt.Sprintf("services.%s: no extra_hosts %s (Docker refuses extra hosts with network_mode %s); %s resolves through the container it shares the network with",
				name, HostGatewayMap, s.NetworkMode, ContainerHost))
			if via, root := noNetworkJoined(p, name); root != "" {
				out = append(out, fmt.Sprintf("services.%s.network_mode: %q joins %s, which has network_mode none: Docker runs it, and %s has no network either (only loopback), so the job in it cannot reach normsim's job socket (%s, on %s) and a job run so on Docker exits as soon as it dials; remove network_mode: none from %s, or remove network_mode from %s to give it the default network",
					name, s.NetworkMode, via, name, EnvWorkerURL, ContainerHost, root, name))
			}
		}
	}
	return out
}

// instanceProject is p (shared, loaded under any name) made the project
// of one instance: named project, with network and volume names derived
// from that name, each service's environment, labels and extra_hosts set
// as the launch spec's service says, its allocated ports published, and
// adjust's changes applied. p itself is not changed.
func instanceProject(p *types.Project, project string, specs []sim.ServiceSpec) (*types.Project, []string) {
	c := *p
	c.Name = project
	loadedAs := p.Name
	c.Networks = maps.Clone(p.Networks)
	for k, n := range c.Networks {
		if !bool(n.External) && n.Name == loadedAs+"_"+k {
			n.Name = project + "_" + k
			c.Networks[k] = n
		}
	}
	c.Volumes = maps.Clone(p.Volumes)
	for k, v := range c.Volumes {
		if !bool(v.External) && v.Name == loadedAs+"_"+k {
			v.Name = project + "_" + k
			c.Volumes[k] = v
		}
	}
	c.Services = types.Services{}
	for name, s := range p.Services {
		i := slices.IndexFunc(specs, func(sp sim.ServiceSpec) bool { return sp.Name == name })
		if i < 0 {
			c.Services[name] = s
			continue
		}
		spec := specs[i]
		env := types.MappingWithEquals{}
		for k, v := range s.Environment {
			if v == nil { // unset stays unset
				env[k] = nil
			}
		}
		for k, v := range spec.Env {
			env[k] = &v
		}
		s.Environment = env
		s.Labels = maps.Clone(spec.Labels)
		hosts := types.HostsList{}
		for _, h := range spec.ExtraHosts {
			host, ip, _ := strings.Cut(h, ":")
			hosts[host] = append(hosts[host], ip)
		}
		s.ExtraHosts = hosts
		if len(hosts) == 0 {
			s.ExtraHosts = nil
		}
		s.Ports = slices.Clone(s.Ports)
		for _, b := range spec.Ports {
			if b.HostPort == 0 { // the template's own, unpublished
				continue
			}
			published := strconv.Itoa(b.HostPort)
			if !slices.ContainsFunc(s.Ports, func(pc types.ServicePortConfig) bool {
				return pc.Published == published && (pc.Protocol == b.Protocol || pc.Protocol == "" && b.Protocol == "tcp")
			}) {
				s.Ports = append(s.Ports, types.ServicePortConfig{Mode: "ingress", HostIP: b.HostIP, Target: uint32(b.ContainerPort), Published: published, Protocol: b.Protocol})
			}
		}
		c.Services[name] = s
	}
	return &c, adjust(&c, project)
}

// isolated says why no service of p could reach the job socket: every one
// runs with network_mode none (issue 34 round 14, B6), or joins the
// namespace of one that does; "" when one can.
func isolated(p *types.Project) string {
	names := p.ServiceNames()
	var joined []string // of the services that join one on none
	for _, n := range names {
		if p.Services[n].NetworkMode == "none" {
			continue
		}
		via, root := noNetworkJoined(p, n)
		if root == "" {
			return ""
		}
		joined = append(joined, fmt.Sprintf("%s joins %s", n, via))
	}
	if len(joined) == 0 {
		return fmt.Sprintf("services: every service (%s) has network_mode none, so no job can reach normsim's job socket (%s, on %s) and every launch on Docker ends with the job exiting (\"exited with code 1\"); remove network_mode: none from the job's service (the default network reaches the socket)",
			strings.Join(names, ", "), EnvWorkerURL, ContainerHost)
	}
	return fmt.Sprintf("services: no service (%s) has a network: each has network_mode none or joins the namespace of one that has (%s), so no job can reach normsim's job socket (%s, on %s) and every launch on Docker ends with the job exiting (\"exited with code 1\"); remove network_mode: none from the job's service, or the network_mode that joins it (the default network reaches the socket)",
		strings.Join(names, ", "), strings.Join(joined, "; "), EnvWorkerURL, ContainerHost)
}

// noNetworkJoined follows the network_mode of service name through the
// namespaces it joins (service:x, or container:c where c is the
// container_name of one of p's services) to a service with network_mode
// none, and returns how name joins it (`service x` or `x, which joins
// z`) and that service's name; "" for root when name has a network, or
// joins a container that is not p's (nothing to judge by). Docker starts
// a container in the namespace of one with no network without a word:
// the joiner has only loopback, like the one it joins.
func noNetworkJoined(p *types.Project, name string) (via, root string) {
	seen := map[string]bool{name: true}
	var path []string
	for cur := name; ; {
		mode := p.Services[cur].NetworkMode
		next := ""
		if t, ok := strings.CutPrefix(mode, "service:"); ok {
			next = t
		} else if c, ok := strings.CutPrefix(mode, "container:"); ok {
			for _, n := range p.ServiceNames() {
				if p.Services[n].ContainerName == c {
					next = n
					break
				}
			}
		}
		if _, known := p.Services[next]; !known || seen[next] {
			return "", "" // a network of its own, or nothing normsim can follow
		}
		seen[next] = true
		path = append(path, next)
		if p.Services[next].NetworkMode == "none" {
			via = "service " + path[0]
			for _, n := range path[1:] {
				via += ", which joins " + n
			}
			return via, next
		}
		cur = next
	}
}
