package sim

import (
	"reflect"
	"testing"
)

func TestNodeAddress(t *testing.T) {
	for i, want := range map[int]string{0: "127.0.1.1", 1: "127.0.1.2", 253: "127.0.1.254", 254: "127.0.2.1", 508: "127.0.3.1"} {
		if got := NodeAddress(i); got != want {
			t.Errorf("NodeAddress(%d) = %s, want %s", i, got, want)
		}
	}
}

func TestPublishHostIP(t *testing.T) {
	a := Node{Name: "a", Address: "127.0.1.1"}
	tests := []struct {
		node     Node
		ip, want string
	}{
		{a, "", "127.0.1.1"},
		{a, "0.0.0.0", "127.0.1.1"},
		{a, "127.0.0.1", "127.0.1.1"},
		{a, "10.0.0.5", "10.0.0.5"},
		{a, "127.0.0.2", "127.0.0.2"},
		{a, "::", "::"},
		{a, "::1", "::1"},
		{Node{Name: "a"}, "0.0.0.0", "0.0.0.0"},
		{Node{Name: "a", Address: "127.0.0.1", SharedAddress: true}, "", "127.0.0.1"},
	}
	for _, tt := range tests {
		if got := tt.node.PublishHostIP(tt.ip); got != tt.want {
			t.Errorf("node %q: PublishHostIP(%q) = %q, want %q", tt.node.Address, tt.ip, got, tt.want)
		}
	}
}

func TestPortClashes(t *testing.T) {
	p := func(ip string, port int, proto string) PublishedPort {
		return PublishedPort{Service: "s", ContainerPort: 1935, Protocol: proto, HostIP: ip, HostPort: port}
	}
	tests := []struct {
		name string
		a, b []PublishedPort
		want []PublishedPort
	}{
		{"own addresses", []PublishedPort{p("127.0.1.1", 1935, "tcp")}, []PublishedPort{p("127.0.1.2", 1935, "tcp")}, nil},
		{"shared address", []PublishedPort{p("127.0.0.1", 1935, "tcp")}, []PublishedPort{p("127.0.0.1", 1935, "tcp")}, []PublishedPort{p("127.0.0.1", 1935, "tcp")}},
		{"other protocol", []PublishedPort{p("127.0.0.1", 1935, "tcp")}, []PublishedPort{p("127.0.0.1", 1935, "udp")}, nil},
		{"engine picks", []PublishedPort{p("127.0.0.1", 0, "tcp")}, []PublishedPort{p("127.0.0.1", 0, "tcp")}, nil},
		{"every address", []PublishedPort{p("", 1935, "tcp")}, []PublishedPort{p("127.0.1.2", 1935, "tcp")}, []PublishedPort{p("127.0.1.2", 1935, "tcp")}},
		{"IPv4 wildcard", []PublishedPort{p("0.0.0.0", 1935, "tcp")}, []PublishedPort{p("127.0.1.2", 1935, "tcp")}, []PublishedPort{p("127.0.1.2", 1935, "tcp")}},
		{"IPv4 wildcard, IPv6", []PublishedPort{p("0.0.0.0", 1935, "tcp")}, []PublishedPort{p("::1", 1935, "tcp")}, nil},
		{"IPv6 kept", []PublishedPort{p("::", 1935, "tcp")}, []PublishedPort{p("::", 1935, "tcp")}, []PublishedPort{p("::", 1935, "tcp")}},
	}
	for _, tt := range tests {
		if got := PortClashes(tt.a, tt.b); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s: clashes %+v, want %+v", tt.name, got, tt.want)
		}
	}
}

func TestPublishedPortString(t *testing.T) {
	for p, want := range map[PublishedPort]string{
		{HostIP: "127.0.1.1", HostPort: 1935, ContainerPort: 1935, Protocol: "tcp"}: "127.0.1.1:1935->1935/tcp",
		{HostIP: "::", HostPort: 80, ContainerPort: 8080, Protocol: "udp"}:          "[::]:80->8080/udp",
		{HostIP: "127.0.1.2", ContainerPort: 3000, Protocol: "tcp"}:                 "127.0.1.2:?->3000/tcp",
		{HostPort: 80, ContainerPort: 80, Protocol: "tcp"}:                          "*:80->80/tcp",
	} {
		if got := p.String(); got != want {
			t.Errorf("%+v: %q, want %q", p, got, want)
		}
	}
}
