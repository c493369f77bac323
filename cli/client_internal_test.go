package cli

import (
	"strings"
	"testing"
	"time"

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

func TestShellQuoteAndWaitText(t *testing.T) {
	for in, want := range map[string]string{
		"50": "50", "ws://127.0.0.1:1/instances/j/i": "ws://127.0.0.1:1/instances/j/i", "": "''",
		"a b": "'a b'", "it's": `'it'\''s'`, "$HOME": "'$HOME'",
	} {
		if got := shellQuote(in); got != want {
			t.Errorf("shellQuote(%q) = %s, want %s", in, got, want)
		}
	}
	for d, want := range map[time.Duration]string{
		10 * time.Second: "10s", time.Minute: "1m", 90 * time.Second: "1m30s", time.Hour: "1h", 61 * time.Minute: "1h1m", 0: "0s",
	} {
		if got := waitText(d); got != want {
			t.Errorf("waitText(%s) = %s, want %s", d, got, want)
		}
	}
}

func TestListenAddr(t *testing.T) {
	for _, tc := range []struct{ in, want, err string }{
		{"0", "127.0.0.1:0", ""},
		{":0", "127.0.0.1:0", ""},
		{"7788", "127.0.0.1:7788", ""},
		{":7788", "127.0.0.1:7788", ""},
		{"127.0.0.1:7788", "127.0.0.1:7788", ""},
		{"0.0.0.0:80", "0.0.0.0:80", ""},
		{"[::1]:0", "[::1]:0", ""},
		{"localhost", "", `--addr: the port must be 0..65535 (0 picks a free one); got "localhost"`},
		{":70000", "", `--addr: the port must be 0..65535 (0 picks a free one); got ":70000"`},
		{"::1", "", `--addr: want HOST:PORT, PORT or :PORT; got "::1"`},
	} {
		got, err := listenAddr(tc.in)
		if tc.err != "" {
			if err == nil || !strings.HasPrefix(err.Error(), tc.err) || !isUsage(err) {
				t.Errorf("listenAddr(%q) = %q, %v; want usage error %q", tc.in, got, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("listenAddr(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}

func TestServerURL(t *testing.T) {
	for in, want := range map[string]string{
		"127.0.0.1:7788":          "http://127.0.0.1:7788",
		"http://127.0.0.1:7788":   "http://127.0.0.1:7788",
		"https://sim.example:443": "https://sim.example:443",
		" localhost:7788 ":        "http://localhost:7788",
	} {
		if got := serverURL(in); got != want {
			t.Errorf("serverURL(%q) = %q, want %q", in, got, want)
		}
	}
}
