package app

import (
	"fmt"
	"net"
	"strings"

	"github.com/normsim/normsim/sim"
)

// bindAddress checks that ip can be bound on this host, the way Docker will
// bind it to publish a port there.
func bindAddress(ip string) error {
	l, err := net.Listen("tcp4", net.JoinHostPort(ip, "0"))
	if err != nil {
		return err
	}
	return l.Close()
}

// nodeAddresses gives the nodes (in order) their addresses: the i-th gets
// sim.NodeAddress(i) when it binds, and otherwise sim.FallbackNodeAddress.
// Nodes that fall back share that address when more than one does; the
// warning then says so, what it costs and how to give each node its own
// ("" when every node has one of its own).
func nodeAddresses(names []string, bind func(ip string) error, goos string) (addrs []string, shared []bool, warning string) {
	var fell []int
	var firstErr error
	for i := range names {
		ip := sim.NodeAddress(i)
		if err := bind(ip); err != nil {
			if firstErr == nil {
				firstErr = err
			}
			ip = sim.FallbackNodeAddress
			fell = append(fell, i)
		}
		addrs = append(addrs, ip)
	}
	shared = make([]bool, len(names))
	if len(fell) < 2 {
		return addrs, shared, ""
	}
	var who, fixes []string
	for _, i := range fell {
		shared[i] = true
		who = append(who, names[i])
		fixes = append(fixes, sim.AliasHint(goos, sim.NodeAddress(i)))
	}
	warning = fmt.Sprintf("nodes %s share the address %s: this host has no loopback address %s for them (%v). "+
		"A fixed host port published on one of them collides with the same port on another, so an overlap or handover "+
		"between them that would publish one is refused (stopThenStart still works). "+
		"To give each node its own address run: %s; then restart normsim",
		strings.Join(who, ", "), sim.FallbackNodeAddress, nodeAddrList(fell), firstErr, strings.Join(fixes, "; "))
	return addrs, shared, warning
}

func nodeAddrList(idx []int) string {
	var out []string
	for _, i := range idx {
		out = append(out, sim.NodeAddress(i))
	}
	return strings.Join(out, ", ")
}
