package sim

import "time"

// LaunchSpec is the concrete set of services an instance runs: the launch
// contract applied to a template, so every runtime launches the same thing.
type LaunchSpec struct {
	InstanceID string
	JobID      string
	Role       string
	Node       string
	Template   string
	// Project is the compose project name, unique per instance.
	Project  string
	Services []ServiceSpec
	// AllocatedPorts are the ports opened for allocatedPorts params, by param.
	AllocatedPorts map[string]AllocatedPort
	// Compose is the whole compose project the template's compose.yml
	// makes for this instance, with the launch contract applied, for a
	// runtime that runs it as `docker compose` does. Services holds the
	// same services reduced to what every runtime understands. Nil when
	// the spec was not made from a compose file.
	Compose *ComposeProject
	// Adjustments say, one sentence each, what normsim changed in the
	// template's compose file beyond the launch contract so that
	// instances can run side by side on one engine (a container_name made
	// unique, an extra_hosts entry left out where Docker refuses one).
	Adjustments []string
}

// ComposeProject is a compose project as `docker compose -f -` would take
// it: compose-go's canonical YAML, interpolated, env files and extends
// resolved, paths absolute, and the project's name set. sim holds it as
// bytes so the domain needs no compose library; a runtime loads it again
// without interpolating.
type ComposeProject struct {
	YAML []byte
	// WorkingDir is the project directory relative paths were resolved
	// against (the template's directory).
	WorkingDir string
}

// AllocatedPort is one opened allocatedPorts entry.
type AllocatedPort struct {
	Port     int    `json:"port"`
	Protocol string `json:"protocol"`
	Service  string `json:"service,omitempty"`
}

// ServiceSpec is one compose service ready to run.
type ServiceSpec struct {
	Name        string
	Image       string
	Command     []string
	Entrypoint  []string
	Env         map[string]string
	Ports       []PortBinding
	Volumes     []Mount
	ExtraHosts  []string
	Labels      map[string]string
	User        string
	WorkingDir  string
	Healthcheck *Healthcheck
	DependsOn   []Dependency
	// Process is the x-normsim extension: how to run the service as a host
	// process. Nil when the template gives none.
	Process *ProcessSpec
}

// PortBinding publishes a container port on the host.
type PortBinding struct {
	HostIP        string
	HostPort      int
	ContainerPort int
	Protocol      string // tcp | udp
}

// Mount is a volume or bind mount.
type Mount struct {
	Type     string // bind | volume | tmpfs
	Source   string
	Target   string
	ReadOnly bool
}

// Healthcheck is a compose healthcheck.
type Healthcheck struct {
	Test        []string
	Interval    time.Duration
	Timeout     time.Duration
	StartPeriod time.Duration
	Retries     int
}

// Dependency is a depends_on entry.
type Dependency struct {
	Service   string
	Condition string // service_started | service_healthy | service_completed_successfully
}

// ConditionCompleted is the depends_on condition of a one-shot service: its
// dependent starts once it has exited with code 0.
const ConditionCompleted = "service_completed_successfully"

// ProcessSpec runs a service as a host process.
type ProcessSpec struct {
	Command []string
	Dir     string
}
