package template

import (
	"fmt"
	"net"
	"reflect"
	"testing"

	"github.com/normsim/normsim/sim"
)

// TestLaunchPublishesOnTheNodeAddress: what a template publishes on "this
// host" binds its node's address; an address the template names otherwise
// is kept, and a node without an address changes nothing.
func TestLaunchPublishesOnTheNodeAddress(t *testing.T) {
	const compose = `
services:
  app:
    image: busybox
    ports:
      - "19350:1935"
      - "0.0.0.0:8000:80"
      - "127.0.0.1:9000:90/udp"
      - "10.1.2.3:7000:70"
      - "[::]:7100:71"
      - "[::1]:7200:72"
      - "3000"
`
	decl := `[{"param": "P", "protocol": "tcp", "preferred": 8080, "service": "app"}]`
	l := MustLoad(t, tpl(compose, "", "allocatedPorts", decl))
	tests := []struct {
		name string
		node sim.Node
		want []string // host IP of each port in order, the allocated one last
	}{
		{"own address", sim.Node{Name: "a", Address: "127.0.1.1"},
			[]string{"127.0.1.1", "127.0.1.1", "127.0.1.1", "10.1.2.3", "::", "::1", "127.0.1.1", "127.0.1.1"}},
		{"second node", sim.Node{Name: "b", Address: "127.0.1.2"},
			[]string{"127.0.1.2", "127.0.1.2", "127.0.1.2", "10.1.2.3", "::", "::1", "127.0.1.2", "127.0.1.2"}},
		{"shared fallback", sim.Node{Name: "b", Address: "127.0.0.1", SharedAddress: true},
			[]string{"127.0.0.1", "127.0.0.1", "127.0.0.1", "10.1.2.3", "::", "::1", "127.0.0.1", "127.0.0.1"}},
		{"no address", sim.Node{Name: "a"},
			[]string{"", "0.0.0.0", "127.0.0.1", "10.1.2.3", "::", "::1", "", ""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := input(map[string]string{"P": "8080"})
			in.Node = tt.node
			spec, err := l.Launch(in)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, b := range service(t, spec, "app").Ports {
				got = append(got, b.HostIP)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("host IPs = %q, want %q", got, tt.want)
			}
			pub := spec.PublishedPorts()
			if len(pub) != len(tt.want) || pub[0].HostPort != 19350 || pub[0].ContainerPort != 1935 || pub[0].Service != "app" {
				t.Errorf("published = %+v", pub)
			}
			if last := pub[len(pub)-1]; last.HostPort != 8080 || last.HostIP != tt.want[len(tt.want)-1] {
				t.Errorf("allocated port published as %+v", last)
			}
		})
	}
}

// TestProbeHostsForNode: an auto port is probed where the node publishes it.
func TestProbeHostsForNode(t *testing.T) {
	defer func(g string) { goos = g }(goos)
	tests := []struct {
		goos string
		node sim.Node
		want []string
	}{
		{"linux", sim.Node{Address: "127.0.1.2"}, []string{"127.0.1.2"}},
		{"darwin", sim.Node{Address: "127.0.1.2"}, []string{"127.0.1.2", "0.0.0.0"}},
		{"linux", sim.Node{}, sharedProbeHosts},
		{"darwin", sim.Node{Address: "127.0.0.1", SharedAddress: true}, sharedProbeHosts},
	}
	for _, tt := range tests {
		goos = tt.goos
		if got := probeHostsFor(tt.node); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s %+v: probe hosts %q, want %q", tt.goos, tt.node, got, tt.want)
		}
	}
}

// TestAutoPortProbesTheNodeAddress: with the default probe, a port held on
// another node's address does not stop auto from choosing it, on Linux.
func TestAutoPortProbesTheNodeAddress(t *testing.T) {
	if goos != "linux" {
		t.Skip("127.0.1.x binds without setup only on Linux")
	}
	held, err := bindPort("tcp4", "127.0.1.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	port := held.(interface{ Addr() net.Addr }).Addr().(*net.TCPAddr).Port
	l := MustLoad(t, tpl(oneService, "", "allocatedPorts", fmt.Sprintf(`[{"param": "P", "protocol": "tcp", "preferred": %d, "service": "app"}]`, port)))
	for _, tt := range []struct {
		node sim.Node
		same bool
	}{
		{sim.Node{Name: "b", Address: "127.0.1.2"}, true},
		{sim.Node{Name: "a", Address: "127.0.1.1"}, false},
	} {
		in := input(map[string]string{"P": "auto"})
		in.PortFree, in.Node = nil, tt.node
		spec, err := l.Launch(in)
		if err != nil {
			t.Fatal(err)
		}
		if got := spec.AllocatedPorts["P"].Port; (got == port) != tt.same {
			t.Errorf("node %s: auto chose %d with %d held on 127.0.1.1", tt.node.Address, got, port)
		}
	}
}
