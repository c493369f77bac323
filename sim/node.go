package sim

import (
	"fmt"

	"github.com/normsim/normsim/protocol"
)

// Node is a simulated worker node.
type Node struct {
	Name string
	// SocketPort is the job-socket listener's port; 0 when the node runs
	// without a listener (--no-job-socket).
	SocketPort int
	// SocketURL is the listener's base URL as seen from the host
	// ("ws://127.0.0.1:6797"); "" without a listener.
	SocketURL string
	// Address is the host address the node's published ports bind, as if it
	// were a host of its own: 127.0.1.1 for the first node, 127.0.1.2 for
	// the second, … (see NodeAddress). "" leaves published ports as the
	// template writes them.
	Address string
	// SharedAddress is set when the node could not have an address of its
	// own (no such loopback address on this host) and shares Address with
	// the other nodes: a fixed published port then collides between them.
	SharedAddress bool
	// Engine is the Docker engine the node's containers run on, as the
	// docker CLI picks it; nil when none answered.
	Engine *Engine `json:"engine,omitempty"`
}

// Engine names a Docker engine: the docker context it was found through,
// its address and the version it reports.
type Engine struct {
	Context string `json:"context"`
	Host    string `json:"host"`
	Version string `json:"version"`
}

// String is how the banner names the engine.
func (e *Engine) String() string {
	return fmt.Sprintf("Docker Engine %s, context %q (%s)", e.Version, e.Context, e.Host)
}

// FallbackNodeAddress is the address nodes share when they cannot have one
// of their own.
const FallbackNodeAddress = "127.0.0.1"

// NodeAddress is the address of the i-th node (0-based, in --nodes order):
// 127.0.1.1, 127.0.1.2, …, 127.0.1.254, then 127.0.2.1, … so none ends in
// .0 or .255. On Linux all of 127.0.0.0/8 is loopback, so each binds
// without setup.
func NodeAddress(i int) string {
	return fmt.Sprintf("127.0.%d.%d", 1+i/254, 1+i%254)
}

// AliasHint is the command that gives this host the loopback address addr,
// for the operating system goos (runtime.GOOS).
func AliasHint(goos, addr string) string {
	switch goos {
	case "linux":
		return "sudo ip addr add " + addr + "/8 dev lo"
	case "darwin", "freebsd", "netbsd", "openbsd", "dragonfly":
		return "sudo ifconfig lo0 alias " + addr
	}
	return "add " + addr + " as a loopback address"
}

// NodeLocalHostIP reports whether a published port's host IP means "this
// host" in a way a node's own address replaces: none (every address),
// 0.0.0.0 (every IPv4 address) or 127.0.0.1 (IPv4 loopback). Anything else,
// IPv6 included, names an address the template chose and is left alone.
func NodeLocalHostIP(ip string) bool {
	return ip == "" || ip == "0.0.0.0" || ip == "127.0.0.1"
}

// PublishHostIP is the host IP a port the template publishes on ip gets on
// node n: the node's address where NodeLocalHostIP, else ip.
func (n Node) PublishHostIP(ip string) string {
	if n.Address != "" && NodeLocalHostIP(ip) {
		return n.Address
	}
	return ip
}

// HasJobSocket reports whether the node runs a job-socket listener.
func (n Node) HasJobSocket() bool { return n.SocketPort != 0 }

// Capabilities lists what the node advertises to placement.
func (n Node) Capabilities() []string {
	if n.HasJobSocket() {
		return []string{protocol.Capability}
	}
	return []string{}
}

// NodeView is a node as the API shows it (GET /api/v1/nodes).
type NodeView struct {
	Name string `json:"name"`
	// Address is the host address the node's published ports bind
	// (127.0.1.1, …); SharedAddress says other nodes bind it too.
	Address       string      `json:"address,omitempty"`
	SharedAddress bool        `json:"sharedAddress,omitempty"`
	Socket        *SocketView `json:"socket"`
	Capabilities  []string    `json:"capabilities"`
	// Engine is the Docker engine the node's containers run on (the
	// docker context, its address and version); absent without one.
	Engine *Engine `json:"engine,omitempty"`
}

// SocketView is a node's job-socket listener as the API shows it; nil
// on a node without one (--no-job-socket).
type SocketView struct {
	URL  string `json:"url"`
	Port int    `json:"port"`
}

// View is the node as the API shows it.
func (n Node) View() NodeView {
	v := NodeView{Name: n.Name, Address: n.Address, SharedAddress: n.SharedAddress, Capabilities: n.Capabilities(), Engine: n.Engine}
	if n.HasJobSocket() {
		v.Socket = &SocketView{URL: n.SocketURL, Port: n.SocketPort}
	}
	return v
}
