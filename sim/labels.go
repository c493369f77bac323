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
	// LabelRun names the normsim process that launched a container:
	// "<host>/<pid>/<start>/<pidns>/<boot>". A later normsim on the same
	// machine (boot) that sees the same pids (pidns) removes the containers
	// of a run whose process is gone (a SIGKILLed --db :memory: run, whose
	// owner label no store remembers); no other normsim can prove that,
	// and none removes them.
	LabelRun = "io.normsim.run"
	// LabelStore says whether the store that launched a container is a
	// file a later normsim recovers it from (StoreFile) or in memory
	// (StoreMemory): only the containers of an in-memory store's run, which
	// no recovery will ever find, are another normsim's to remove once
	// that run is gone. A file store's (left by --keep, or by a kill) wait
	// for the next normsim on that store, which adopts or removes them.
	LabelStore  = "io.normsim.store"
	StoreMemory = "memory"
	StoreFile   = "file"
)

// The variables normsim adds to every instance's environment, beside the
// contract's NORSK_* ones. A host process carries its instance ID with it, so
// a restart finds the processes a killed normsim started even when their
// pids never reached the store.
const (
	EnvInstance = "NORMSIM_INSTANCE"
	EnvJob      = "NORMSIM_JOB"
	// EnvOwner is the store's owner label (LabelOwner): a restart only
	// touches host processes that carry its own store's owner beside their
	// instance ID, never those of another normsim whose instance IDs
	// happen to match.
	EnvOwner = "NORMSIM_OWNER"
	// EnvNodeAddr is the node's address (Node.Address): where the node's
	// published ports are reachable from the host, and what a host process,
	// which shares the host's addresses, may bind or advertise to behave
	// like a job on a host of its own.
	EnvNodeAddr = "NORMSIM_NODE_ADDR"
)
