package sim

// CapabilityJobSocket is the capability a node advertises while its job-socket
// listener is up (protocol.Capability; repeated here so sim stays a leaf).
const CapabilityJobSocket = "norsk.io/job-socket"

// Node is a simulated worker node.
type Node struct {
	Name string
	// SocketPort is the job-socket listener's port; 0 when the node runs
	// without a listener (--no-job-socket).
	SocketPort int
	// SocketURL is the listener's base URL as seen from the host
	// ("ws://127.0.0.1:6797"); "" without a listener.
	SocketURL string
}

// HasJobSocket reports whether the node runs a job-socket listener.
func (n Node) HasJobSocket() bool { return n.SocketPort != 0 }

// Capabilities lists what the node advertises to placement.
func (n Node) Capabilities() []string {
	if n.HasJobSocket() {
		return []string{CapabilityJobSocket}
	}
	return []string{}
}
