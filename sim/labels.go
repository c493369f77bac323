package sim

// The labels normsim puts on everything it launches. The launch contract sets
// the instance, job, role, node, template, service and project keys on every
// service; runtimes use them to find what they run again, and the manager
// adds the owner so a restart adopts only what its own store launched.
const (
	LabelInstance = "io.normsim.instance"
	LabelJob      = "io.normsim.job"
	LabelRole     = "io.normsim.role"
	LabelNode     = "io.normsim.node"
	LabelTemplate = "io.normsim.template"
	LabelService  = "io.normsim.service"
	LabelProject  = "io.normsim.project"
	LabelOwner    = "io.normsim.owner"
)
