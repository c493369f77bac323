package cli

import (
	"testing"

	"github.com/normsim/normsim/sim"
)

func TestPortsColumn(t *testing.T) {
	in := sim.Instance{Published: []sim.PublishedPort{
		{Service: "ingest", ContainerPort: 1935, Protocol: "tcp", HostIP: "127.0.1.2", HostPort: 19350},
		{Service: "ingest", ContainerPort: 9000, Protocol: "udp", HostIP: "127.0.1.2"},
	}}
	if got, want := portsColumn(in), "127.0.1.2:19350->1935/tcp, 127.0.1.2:?->9000/udp"; got != want {
		t.Errorf("ports column %q, want %q", got, want)
	}
	if got := portsColumn(sim.Instance{}); got != "-" {
		t.Errorf("no ports: %q", got)
	}
}
