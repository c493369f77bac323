package sim

// Template is a loaded product template as the rest of normsim sees it. A
// template that failed validation is still listed, with Valid false and the
// error, so nothing is silently dropped.
type Template struct {
	Name  string         `json:"name"`
	Path  string         `json:"path"`
	Valid bool           `json:"valid"`
	Error *TemplateError `json:"error"`
	// Strategy is the declared migration strategy, DefaultStrategy when the
	// manifest declares none ("" only for an invalid template).
	Strategy       Strategy    `json:"strategy,omitempty"`
	ProductName    string      `json:"productName,omitempty"`
	ProductVersion string      `json:"productVersion,omitempty"`
	Parameters     []Parameter `json:"parameters"`
	Services       []string    `json:"services,omitempty"`
	// NoProcessCommand lists the services without an x-normsim command:
	// the process runtime cannot run the template while there are any.
	NoProcessCommand []string `json:"noProcessCommand,omitempty"`
	// HasAllocatedPorts says the manifest declares allocatedPorts (so
	// NORSK_ALLOCATED_PORTS is set even when none opt in).
	AllocatedPorts []AllocatedPortDecl `json:"allocatedPorts,omitempty"`
}

// TemplateError is why a template is invalid: a contract code and a message
// naming the field path and the rule.
type TemplateError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

func (e *TemplateError) Error() string { return e.Code + ": " + e.Message }

// Parameter is one parameters.yaml entry.
type Parameter struct {
	Name string `json:"name"`
	// Purpose is required by parameters.yaml, and may be empty: written
	// out even then, so what normsim shows of a template validates again.
	Purpose  string   `json:"purpose"`
	Type     string   `json:"type"`
	Default  *string  `json:"default,omitempty"`
	Secret   bool     `json:"secret,omitempty"`
	Required bool     `json:"required,omitempty"`
	Min      *float64 `json:"min,omitempty"`
	Max      *float64 `json:"max,omitempty"`
	Values   []string `json:"values,omitempty"`
}

// AllocatedPortDecl is one manifest allocatedPorts declaration.
type AllocatedPortDecl struct {
	Param     string `json:"param"`
	Protocol  string `json:"protocol"`
	Preferred int    `json:"preferred"`
	Service   string `json:"service,omitempty"`
	Label     string `json:"label,omitempty"`
}

// LaunchInput is everything besides the template that decides what an
// instance runs.
type LaunchInput struct {
	Instance *Instance // ID, JobID, Role, Token, Params, Ports (kept from an earlier launch)
	Node     Node
	// Runtime decides the host a job reaches its worker under:
	// host.docker.internal for containers, 127.0.0.1 for host processes.
	Runtime string
	// StudioAccess is the launcher's access mode (normsim up --studio-access).
	StudioAccess string
	// Env is launcher-provided env added to every service (e.g. the output
	// sink's address). Names in the NORSK_ namespace are not allowed here.
	Env map[string]string
	// PortFree reports whether a host port is free; nil probes by binding.
	PortFree func(port int, protocol string) bool
}

// Catalog holds the loaded templates and applies the launch contract.
type Catalog interface {
	List() []*Template
	Get(name string) (*Template, error)
	// Launch applies the launch contract: the pure mapping from template and
	// input to the services to run. Refused params are EParamsInvalid.
	Launch(name string, in LaunchInput) (*LaunchSpec, error)
	// CheckParams judges launch params exactly as Launch does, without
	// launching: nil, or an EParamsInvalid naming every refused param (an
	// unknown or invalid template is ENotFound or ETemplateInvalid). Port
	// params are checked for their form only, since whether a port is
	// free is known at launch.
	CheckParams(name string, params map[string]string) error
}
