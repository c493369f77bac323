package sim

import "time"

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
	// Adjustments are the launch spec's: what normsim changed in the
	// template's compose file to run it beside other instances.
	Adjustments []string `json:"adjustments,omitempty"`
	Connected   bool     `json:"connected"`
	// Healthy is true once every service with a healthcheck reported healthy.
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
