package sim

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// InstanceState is where an instance is in its life.
type InstanceState string

// Instance states. created is a stopThenStart target that has been prepared
// but not started.
const (
	InstanceCreated  InstanceState = "created"
	InstanceStarting InstanceState = "starting"
	InstanceRunning  InstanceState = "running"
	InstanceStopping InstanceState = "stopping"
	InstanceStopped  InstanceState = "stopped"
	InstanceFailed   InstanceState = "failed"
)

// Terminal reports whether the instance will not run again.
func (s InstanceState) Terminal() bool { return s == InstanceStopped || s == InstanceFailed }

// Until is what a wait on an instance waits for (GET
// /api/v1/instances/{id}?wait=30s&until=connected).
type Until string

const (
	// UntilRunning: the instance is running.
	UntilRunning Until = "running"
	// UntilConnected: it is running and its job has said hello on its
	// node's socket.
	UntilConnected Until = "connected"
)

// ParseUntil reads an until; the error names the choices.
func ParseUntil(s string) (Until, error) {
	switch u := Until(s); u {
	case UntilRunning, UntilConnected:
		return u, nil
	}
	return "", Errorf(EInvalid, "until: must be running or connected; got %q", s)
}

// Holds reports whether the instance is where u waits for it to be.
func (u Until) Holds(in Instance) bool {
	switch u {
	case UntilRunning:
		return in.State == InstanceRunning
	case UntilConnected:
		return in.State == InstanceRunning && in.Connected
	}
	return false
}

// instanceTransitions is the instance state machine: from → allowed to.
var instanceTransitions = map[InstanceState][]InstanceState{
	"":               {InstanceCreated, InstanceStarting, InstanceRunning},
	InstanceCreated:  {InstanceStarting, InstanceStopping, InstanceStopped, InstanceFailed},
	InstanceStarting: {InstanceRunning, InstanceStopping, InstanceStopped, InstanceFailed},
	InstanceRunning:  {InstanceStopping, InstanceStopped, InstanceFailed},
	InstanceStopping: {InstanceStopped, InstanceFailed},
	InstanceStopped:  {},
	InstanceFailed:   {InstanceStopping, InstanceStopped},
}

// CanTransition reports whether an instance may go from one state to another.
func CanTransition(from, to InstanceState) bool {
	for _, s := range instanceTransitions[from] {
		if s == to {
			return true
		}
	}
	return false
}

// Runtime names.
const (
	RuntimeDocker   = "docker"
	RuntimeProcess  = "process"
	RuntimeExternal = "external"
)

// Instance is one placement of a template on a node: what the real manager
// calls an instance of a job. ID is its role (the instance key); JobID is what
// a migration keeps.
type Instance struct {
	ID       string            `json:"id"`
	JobID    string            `json:"jobId"`
	Role     string            `json:"role"`
	Node     string            `json:"node"`
	Template string            `json:"template"`
	Runtime  string            `json:"runtime"`
	State    InstanceState     `json:"state"`
	Error    string            `json:"error,omitempty"`
	Params   map[string]string `json:"params,omitempty"`
	// Token is the instance's job-socket token. Secret: only shown for
	// external instances, where the developer must paste it.
	Token string `json:"-"`
	// MigrationID is set when the instance was launched as a migration target.
	MigrationID string `json:"migrationId,omitempty"`
	// Ports keeps each allocated port param's number so a relaunch keeps it.
	Ports map[string]int `json:"ports,omitempty"`
	// Published is every port the instance publishes on the host, with the
	// address it really binds (its node's address; see Node.PublishHostIP).
	// Empty for runtimes that publish nothing (host processes, external)
	// and once the instance is stopped.
	Published []PublishedPort `json:"published,omitempty"`
	// Adjustments are the launch spec's: what normsim changed in the
	// template's compose file to run it beside other instances.
	Adjustments []string `json:"adjustments,omitempty"`
	Connected   bool     `json:"connected"`
	// Healthy is true once every service with a healthcheck reported
	// healthy (at once where none has one), and false again when the
	// instance stops or fails.
	Healthy bool `json:"healthy"`
	// Env is each service's launch-contract env (NORSK_*). Shown by the API
	// only for external instances.
	Env map[string]map[string]string `json:"env,omitempty"`
	// RuntimeRef is what the runtime needs to find the instance again after
	// a restart (e.g. process ids); never shown.
	RuntimeRef map[string]string `json:"-"`
	CreatedAt  time.Time         `json:"createdAt"`
	UpdatedAt  time.Time         `json:"updatedAt"`
}

// PublishedPort is one port an instance publishes on the host.
type PublishedPort struct {
	Service       string `json:"service"`
	ContainerPort int    `json:"containerPort"`
	Protocol      string `json:"protocol"`
	// HostIP is the address the port binds: the node's address, or the one
	// the template names when it is not a local one; "" is every address.
	HostIP string `json:"hostIP"`
	// HostPort is the host port; 0 when the engine picks one at start.
	HostPort int `json:"hostPort"`
}

// String is the port as `docker ps` shows it: "127.0.1.1:19350->1935/tcp",
// with "?" for a host port the engine picks at start.
func (p PublishedPort) String() string {
	host := p.HostIP
	if host == "" {
		host = "*"
	}
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	hostPort := "?"
	if p.HostPort != 0 {
		hostPort = strconv.Itoa(p.HostPort)
	}
	return fmt.Sprintf("%s:%s->%d/%s", host, hostPort, p.ContainerPort, p.Protocol)
}

// PublishedPorts lists what a launch spec publishes.
func (s *LaunchSpec) PublishedPorts() []PublishedPort {
	var out []PublishedPort
	for _, svc := range s.Services {
		for _, b := range svc.Ports {
			out = append(out, PublishedPort{Service: svc.Name, ContainerPort: b.ContainerPort,
				Protocol: b.Protocol, HostIP: b.HostIP, HostPort: b.HostPort})
		}
	}
	return out
}

// PortClashes lists the fixed host ports two launch specs would both bind
// at once: the same host port and protocol on the same address, or on
// addresses that overlap ("" and 0.0.0.0 cover every IPv4 address).
// Ports the engine picks (0) never clash.
func PortClashes(a, b []PublishedPort) []PublishedPort {
	var out []PublishedPort
	for _, p := range b {
		if p.HostPort == 0 {
			continue
		}
		for _, q := range a {
			if q.HostPort == p.HostPort && q.Protocol == p.Protocol && hostsOverlap(q.HostIP, p.HostIP) {
				out = append(out, p)
				break
			}
		}
	}
	return out
}

func hostsOverlap(a, b string) bool {
	if a == b {
		return true
	}
	wild := func(ip string) bool { return ip == "" || ip == "0.0.0.0" || ip == "::" }
	v6 := func(ip string) bool { return strings.Contains(ip, ":") }
	switch {
	case a == "" || b == "":
		return true // every address of both families
	case wild(a):
		return v6(a) == v6(b)
	case wild(b):
		return v6(a) == v6(b)
	}
	return false
}

// InstanceView is what the API shows of an instance: the Env (with the token)
// only for external instances, where the developer has to paste it.
func (in Instance) View() Instance {
	v := in
	if v.Runtime != RuntimeExternal {
		v.Env = nil
	}
	return v
}

// LaunchRequest asks for a template to be placed on a node.
type LaunchRequest struct {
	Template string            `json:"template"`
	Node     string            `json:"node"`
	Params   map[string]string `json:"params"`
	Runtime  string            `json:"runtime"`
}
