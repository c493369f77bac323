package template

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"net"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/compose-spec/compose-go/v2/loader"

	"github.com/normsim/normsim/protocol"
	"github.com/normsim/normsim/sim"
)

// The env names the launch contract owns. A template's compose file cannot
// set them: the contract's value replaces the template's, and where the
// contract sets nothing the template's entry is removed.
const (
	EnvWorkerURL      = protocol.EnvURL   // NORSK_WORKER_WS_URL
	EnvWorkerToken    = protocol.EnvToken // NORSK_WORKER_TOKEN
	EnvAllocatedPorts = "NORSK_ALLOCATED_PORTS"
	EnvStudioAccess   = "NORSK_STUDIO_ACCESS"
)

var contractEnv = []string{EnvWorkerURL, EnvWorkerToken, EnvAllocatedPorts, EnvStudioAccess}

// The container host of the job socket and the extra_hosts entry that makes
// it resolve on native Linux.
const (
	ContainerHost  = protocol.ContainerHost // host.docker.internal
	HostGatewayMap = ContainerHost + ":host-gateway"
	processHost    = "127.0.0.1"
)

// Values of an allocatedPorts param.
const PortAuto = "auto"

// ProjectName is the compose project name of an instance:
// normsim-<instance id>, reduced to compose's project-name alphabet.
func ProjectName(instanceID string) string {
	return loader.NormalizeProjectName("normsim-" + instanceID)
}

// portNumber reads an allocated port's value that is neither blank nor
// auto.
func portNumber(param, raw string) (int, error) {
	v := strings.TrimSpace(raw)
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > 65535 || !portRe.MatchString(v) {
		return 0, sim.Errorf(sim.EParamsInvalid, "params.%s: must be blank (closed), %q or a port number 1..65535; got %q", param, PortAuto, raw)
	}
	return n, nil
}

// CheckParams judges launch params as Launch does, without launching; see
// Catalog.CheckParams.
func (l *Loaded) CheckParams(params map[string]string) error {
	if err := l.launchable(); err != nil {
		return err
	}
	_, portValues, err := l.resolveParams(params)
	if err != nil {
		return err
	}
	for _, k := range slices.Sorted(maps.Keys(portValues)) {
		if v := strings.TrimSpace(portValues[k]); v != "" && v != PortAuto {
			if _, err := portNumber(k, portValues[k]); err != nil {
				return err
			}
		}
	}
	return nil
}

// launchable is why the template cannot be launched at all, or nil.
func (l *Loaded) launchable() error {
	if !l.Template.Valid {
		return sim.Errorf(sim.ETemplateInvalid, "template %q is invalid: %s", l.Template.Name, l.Template.Error.Message)
	}
	if l.manifestOnly {
		return sim.Errorf(sim.ETemplateInvalid, "template %q is a bare manifest.json with no compose.yml to launch", l.Template.Name)
	}
	return nil
}

// Launch applies the launch contract to the template; see Catalog.Launch.
func (l *Loaded) Launch(in sim.LaunchInput) (*sim.LaunchSpec, error) {
	if err := l.launchable(); err != nil {
		return nil, err
	}
	if in.Instance == nil {
		return nil, fmt.Errorf("launch %s: no instance given", l.Template.Name)
	}
	for _, k := range slices.Sorted(maps.Keys(in.Env)) {
		if reserved(k) {
			return nil, fmt.Errorf("launch %s: launcher env %s is in the reserved %s namespace", l.Template.Name, k, ReservedPrefix)
		}
	}

	values, portValues, err := l.resolveParams(in.Instance.Params)
	if err != nil {
		return nil, err
	}
	// A parameter (given or defaulted) of normsim:media is the job's
	// media URL: a template's own output parameter points at normsim's
	// receiver without editing the template.
	for _, k := range slices.Sorted(maps.Keys(values)) {
		if values[k] != sim.MediaURLParam {
			continue
		}
		u := in.Env[sim.EnvMediaURL]
		if u == "" {
			return nil, sim.Errorf(sim.EParamsInvalid, "params.%s: %q stands for the job's media URL, but this launch has none (normsim runs no media receiver here: it was started with --no-media)", k, sim.MediaURLParam)
		}
		values[k] = u
	}
	ports, err := l.allocatePorts(portValues, in)
	if err != nil {
		return nil, err
	}
	env := maps.Clone(values)
	for param, p := range ports {
		env[param] = strconv.Itoa(p.Port)
	}

	project := ProjectName(in.Instance.ID)
	p, skipped, err := l.launchProject(project, in.Instance.ID, env)
	if err != nil {
		code := sim.EComposeInvalid
		if interpolationFailed(err) {
			code = sim.EParamsInvalid
		}
		return nil, sim.Errorf(code, "compose.yml: %s", err.Error())
	}
	if err := runsNoContainer(p); err != nil {
		// validate judged the template with stand-in values; these
		// values (deploy.replicas: ${N}) scale every service to 0.
		return nil, sim.Errorf(sim.EParamsInvalid, "compose.yml: %v", err)
	}

	if why := isolated(p); why != "" && in.Runtime == sim.RuntimeDocker && in.Node.HasJobSocket() {
		// validate warned (the process runtime ignores network_mode).
		return nil, sim.Errorf(sim.EComposeInvalid, "compose.yml: %s; or launch it on the process runtime", why)
	}

	contract := map[string]string{}
	if in.Node.HasJobSocket() {
		host := processHost
		if in.Runtime == sim.RuntimeDocker {
			host = ContainerHost
		}
		contract[EnvWorkerURL] = protocol.URL(host, in.Node.SocketPort, in.Instance.JobID, in.Instance.Role)
		contract[EnvWorkerToken] = in.Instance.Token
	}
	if len(l.Manifest.AllocatedPorts) > 0 {
		b, err := json.Marshal(ports) // map keys sorted: stable text
		if err != nil {
			return nil, fmt.Errorf("launch %s: encode allocated ports: %w", l.Template.Name, err)
		}
		contract[EnvAllocatedPorts] = string(b)
	}
	if l.Manifest.StudioAccessAllowed(in.StudioAccess) {
		contract[EnvStudioAccess] = in.StudioAccess
	}

	spec := &sim.LaunchSpec{
		InstanceID:     in.Instance.ID,
		JobID:          in.Instance.JobID,
		Role:           in.Instance.Role,
		Node:           in.Node.Name,
		Template:       l.Template.Name,
		Project:        project,
		AllocatedPorts: ports,
	}
	for _, name := range dependencyOrder(p) {
		s, err := serviceSpec(name, p.Services[name], l.Dir)
		if err != nil {
			return nil, sim.Errorf(sim.EComposeInvalid, "compose.yml: %v", err)
		}
		for _, k := range contractEnv {
			delete(s.Env, k)
		}
		maps.Copy(s.Env, in.Env)
		maps.Copy(s.Env, contract)

		hosts := s.ExtraHosts[:0]
		for _, h := range s.ExtraHosts {
			if !strings.HasPrefix(h, ContainerHost+":") { // the contract's mapping wins
				hosts = append(hosts, h)
			}
		}
		s.ExtraHosts = hosts
		if !sharesNetwork(p.Services[name]) {
			s.ExtraHosts = append(hosts, HostGatewayMap)
		}

		maps.Copy(s.Labels, map[string]string{
			sim.LabelInstance: in.Instance.ID,
			sim.LabelJob:      in.Instance.JobID,
			sim.LabelRole:     in.Instance.Role,
			sim.LabelNode:     in.Node.Name,
			sim.LabelTemplate: l.Template.Name,
			sim.LabelService:  name,
			sim.LabelProject:  project,
		})
		spec.Services = append(spec.Services, s)
	}

	// Publish each opened port on its declared service (a port declared
	// without a service is only interpolated and listed).
	for _, d := range l.Manifest.AllocatedPorts {
		ap, open := ports[d.Param]
		if !open || d.Service == "" {
			continue
		}
		if svc, ok := p.Services[d.Service]; ok && svc.NetworkMode == "host" {
			continue // on the host's network the job binds it itself; nothing is published
		}
		i := slices.IndexFunc(spec.Services, func(s sim.ServiceSpec) bool { return s.Name == d.Service })
		if i < 0 {
			return nil, sim.Errorf(sim.EComposeInvalid, "allocatedPorts: service %q of param %s names no compose service (have %s)",
				d.Service, d.Param, strings.Join(l.Template.Services, ", "))
		}
		s := &spec.Services[i]
		if !slices.ContainsFunc(s.Ports, func(b sim.PortBinding) bool {
			return b.HostPort == ap.Port && b.Protocol == ap.Protocol
		}) {
			s.Ports = append(s.Ports, sim.PortBinding{HostPort: ap.Port, ContainerPort: ap.Port, Protocol: ap.Protocol})
		}
	}
	// A node behaves like a host of its own: what the template publishes on
	// "this host" (no address, 0.0.0.0, 127.0.0.1) binds the node's address,
	// so a source and its target can publish the same fixed port at once.
	for i := range spec.Services {
		for j := range spec.Services[i].Ports {
			b := &spec.Services[i].Ports[j]
			b.HostIP = in.Node.PublishHostIP(b.HostIP)
		}
	}

	// The whole project, for the runtime that runs it as docker compose
	// does; the adjustments hold for every runtime that shares an engine.
	ip, adjustments := instanceProject(p, project, spec.Services)
	// What validate warned of, the instance says: a dependency skipped as
	// docker compose up skips it leaves the dependent running without it.
	spec.Adjustments = slices.Concat(skipped, adjustments) // skipped is the cache's: never appended to
	for _, u := range l.envFileVars {
		if u.labels || !u.emptyIn(env) {
			continue // a label file's: empty under docker compose too, and validate said so
		}
		spec.Adjustments = append(spec.Adjustments, fmt.Sprintf(
			"%s is not set, so it is empty in the service's environment: docker compose up would take it from the shell, and normsim interpolates a launch with its parameters and allocated ports only", u))
	}
	if in.Runtime == sim.RuntimeProcess {
		// docker compose restarts such a service; a host process is not.
		for _, name := range slices.Sorted(maps.Keys(p.Services)) {
			if r := p.Services[name].Restart; r != "" && r != "no" {
				spec.Adjustments = append(spec.Adjustments, fmt.Sprintf(
					"services.%s.restart: %q is not applied on the process runtime: a host process that exits is not started again", name, r))
			}
		}
	}
	for name, svc := range ip.Services {
		for j := range svc.Ports {
			svc.Ports[j].HostIP = in.Node.PublishHostIP(svc.Ports[j].HostIP)
		}
		ip.Services[name] = svc
	}
	if in.Runtime == sim.RuntimeDocker {
		b, err := ip.MarshalYAML()
		if err != nil {
			return nil, fmt.Errorf("launch %s: encode compose project: %w", l.Template.Name, err)
		}
		spec.Compose = &sim.ComposeProject{YAML: b, WorkingDir: ip.WorkingDir}
	}
	return spec, nil
}

func reserved(name string) bool {
	return strings.HasPrefix(strings.ToUpper(name), ReservedPrefix)
}

// resolveParams checks the operator's values against parameters.yaml and
// the manifest's allocatedPorts and applies defaults. values is what
// compose interpolation sees (allocated-port params excluded); portValues
// holds each allocated-port param's raw value ("" = closed).
func (l *Loaded) resolveParams(given map[string]string) (values, portValues map[string]string, err error) {
	declared := map[string]*sim.Parameter{}
	for i := range l.params {
		declared[l.params[i].Name] = &l.params[i]
	}
	isPort := map[string]bool{}
	for _, d := range l.Manifest.AllocatedPorts {
		isPort[d.Param] = true
	}
	var problems []string
	for _, k := range slices.Sorted(maps.Keys(given)) {
		switch {
		case reserved(k):
			problems = append(problems, fmt.Sprintf("params.%s: names in the %s namespace are reserved for the infrastructure", k, ReservedPrefix))
		case declared[k] == nil && !isPort[k]:
			problems = append(problems, fmt.Sprintf("params.%s: unknown parameter; the template declares %s", k, l.paramNames()))
		}
	}

	values = map[string]string{}
	portValues = map[string]string{}
	for _, p := range l.params {
		if reserved(p.Name) {
			continue
		}
		v, ok := given[p.Name]
		if isPort[p.Name] { // judged as a port below, defaults included
			// The contract's "absent/blank = closed" is about the value:
			// an operator who gives none gets the default (auto opens the
			// port), one who gives a blank has closed it.
			switch {
			case ok:
				portValues[p.Name] = v
			case p.Default != nil:
				portValues[p.Name] = *p.Default
			}
			continue
		}
		fromDefault := false
		if !ok || strings.TrimSpace(v) == "" {
			ok = false
			if p.Default != nil {
				v, ok, fromDefault = *p.Default, true, true
			}
		}
		if !ok {
			if p.Required {
				problems = append(problems, fmt.Sprintf("params.%s: is required and the template gives no default", p.Name))
			}
			continue
		}
		if msg := checkValue(p, v); msg != "" {
			if fromDefault {
				msg += " (the template's default)"
			}
			problems = append(problems, fmt.Sprintf("params.%s: %s", p.Name, msg))
			continue
		}
		if p.Type == TypeInt || p.Type == TypeNumber {
			v = strings.TrimSpace(v) // " 5 " is judged as 5, and so reaches the job
		}
		values[p.Name] = v
	}
	for _, d := range l.Manifest.AllocatedPorts {
		if _, listed := declared[d.Param]; !listed {
			if v, ok := given[d.Param]; ok && !reserved(d.Param) {
				portValues[d.Param] = v
			}
		}
	}
	if len(problems) > 0 {
		return nil, nil, sim.Errorf(sim.EParamsInvalid, "%s", strings.Join(problems, "; "))
	}
	return values, portValues, nil
}

func (l *Loaded) paramNames() string {
	var names []string
	for _, p := range l.params {
		names = append(names, p.Name)
	}
	for _, d := range l.Manifest.AllocatedPorts {
		if !slices.Contains(names, d.Param) {
			names = append(names, d.Param)
		}
	}
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

// decimalRe is the number syntax accepted for int and number params: plain
// decimal, no hex, no Infinity, no NaN.
var (
	decimalRe = regexp.MustCompile(`^[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][+-]?[0-9]+)?$`)
	portRe    = regexp.MustCompile(`^[0-9]+$`)
)

// checkValue judges one value against its parameter; "" means accepted.
func checkValue(p sim.Parameter, v string) string {
	switch p.Type {
	case TypeInt, TypeNumber:
		s := strings.TrimSpace(v)
		f, err := strconv.ParseFloat(s, 64)
		if !decimalRe.MatchString(s) || err != nil || math.IsInf(f, 0) {
			if p.Type == TypeInt {
				return fmt.Sprintf("must be an int; got %q", v)
			}
			return fmt.Sprintf("must be a finite number; got %q", v)
		}
		if p.Type == TypeInt && f != math.Trunc(f) {
			return fmt.Sprintf("must be an int (a whole number); got %q", v)
		}
		if p.Min != nil && f < *p.Min {
			return fmt.Sprintf("must be at least %s; got %q", fmtNum(*p.Min), v)
		}
		if p.Max != nil && f > *p.Max {
			return fmt.Sprintf("must be at most %s; got %q", fmtNum(*p.Max), v)
		}
	case TypeBoolean:
		// strings.ToLower, not EqualFold: "falſe" is not false.
		if lv := strings.ToLower(v); lv != "true" && lv != "false" {
			return fmt.Sprintf("must be true or false; got %q", v)
		}
	case TypeEnum:
		if !slices.Contains(p.Values, v) {
			return fmt.Sprintf("must be one of %s; got %q", strings.Join(p.Values, ", "), v)
		}
	}
	return ""
}

// allocatePorts opens the allocatedPorts the params opt into: blank is
// closed, "auto" the kept port of an earlier launch or else the first free
// one from preferred upward, a number that port.
func (l *Loaded) allocatePorts(values map[string]string, in sim.LaunchInput) (map[string]sim.AllocatedPort, error) {
	free := in.PortFree
	if free == nil {
		hosts := probeHostsFor(in.Node)
		free = func(port int, protocol string) bool { return probePortWith(bindPort, hosts, port, protocol) }
	}
	out := map[string]sim.AllocatedPort{}
	taken := map[string]bool{} // "port/protocol" chosen in this launch
	key := func(port int, proto string) string { return strconv.Itoa(port) + "/" + proto }
	var auto []sim.AllocatedPortDecl
	for _, d := range l.Manifest.AllocatedPorts {
		v := strings.TrimSpace(values[d.Param])
		switch {
		case v == "":
			continue
		case v == PortAuto:
			if kept := in.Instance.Ports[d.Param]; kept >= 1 && kept <= 65535 {
				out[d.Param] = sim.AllocatedPort{Port: kept, Protocol: d.Protocol, Service: d.Service}
				taken[key(kept, d.Protocol)] = true
				continue
			}
			auto = append(auto, d) // after the fixed ones, so it avoids them
		default:
			n, err := portNumber(d.Param, values[d.Param])
			if err != nil {
				return nil, err
			}
			out[d.Param] = sim.AllocatedPort{Port: n, Protocol: d.Protocol, Service: d.Service}
			taken[key(n, d.Protocol)] = true
		}
	}
	for _, d := range auto {
		port := 0
		for p := d.Preferred; p <= 65535; p++ {
			if !taken[key(p, d.Protocol)] && free(p, d.Protocol) {
				port = p
				break
			}
		}
		if port == 0 {
			return nil, sim.Errorf(sim.EUnavailable, "params.%s: no free %s port from %d upward", d.Param, d.Protocol, d.Preferred)
		}
		out[d.Param] = sim.AllocatedPort{Port: port, Protocol: d.Protocol, Service: d.Service}
		taken[key(port, d.Protocol)] = true
	}
	return out, nil
}

// sharedProbeHosts are the addresses an auto port must be free on when it
// is published on every address, or on an address the nodes share: Docker
// publishes a port without a host IP on every IPv4 and IPv6 address, so a
// port that anything holds on one interface would fail the publish;
// loopback is probed too because on BSD-derived systems a wildcard bind
// succeeds beside a socket bound to 127.0.0.1. Linux refuses the 0.0.0.0
// bind there itself.
var sharedProbeHosts = []string{"127.0.0.1", "0.0.0.0", "::"}

// probeHostsFor is where an auto port must be free for node n. A node with
// an address of its own publishes only there, so the port must bind there;
// the wildcard is not probed on Linux, where the node-address bind already
// fails beside a wildcard holder and a wildcard bind would fail beside
// another node's port (the very clash node addresses avoid). BSD-derived
// systems let a specific bind succeed beside a wildcard one, so there the
// wildcard is probed too.
func probeHostsFor(n sim.Node) []string {
	if n.Address == "" || n.SharedAddress || sim.NodeLocalHostIP(n.Address) {
		return sharedProbeHosts
	}
	if goos == "linux" {
		return []string{n.Address}
	}
	return []string{n.Address, "0.0.0.0"}
}

// goos is runtime.GOOS, a variable so the BSD probe list can be tested.
var goos = runtime.GOOS

// probePort reports whether port is free for protocol ("tcp" or "udp") on
// every shared probe host, by binding it.
func probePort(port int, protocol string) bool {
	return probePortWith(bindPort, sharedProbeHosts, port, protocol)
}

// bindPort binds network ("tcp4", "udp6", ...) at addr and returns what to
// close.
func bindPort(network, addr string) (io.Closer, error) {
	if strings.HasPrefix(network, "udp") {
		return net.ListenPacket(network, addr)
	}
	return net.Listen(network, addr)
}

// probePortWith is probePort with the bind injected, so the IPv6-less host
// can be tested.
func probePortWith(bind func(network, addr string) (io.Closer, error), hosts []string, port int, protocol string) bool {
	for _, host := range hosts {
		family := "4"
		if strings.Contains(host, ":") {
			// tcp6/udp6 binds :: for IPv6 only; 0.0.0.0 covers IPv4.
			family = "6"
		}
		c, err := bind(protocol+family, net.JoinHostPort(host, strconv.Itoa(port)))
		if err == nil {
			c.Close()
			continue
		}
		if family == "6" && noIPv6(err) {
			continue // nothing can hold an IPv6 port, nor will Docker publish one
		}
		return false
	}
	return true
}

// noIPv6 reports whether a bind on :: failed because the host has no IPv6
// (the kernel lacks it, or it is disabled), not because the port is taken.
func noIPv6(err error) bool {
	return errors.Is(err, syscall.EAFNOSUPPORT) || errors.Is(err, syscall.EADDRNOTAVAIL) || errors.Is(err, syscall.EPROTONOSUPPORT)
}
