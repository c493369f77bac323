package app

import (
	"errors"
	"reflect"
	"runtime"
	"strings"
	"testing"
)

func TestNodeAddresses(t *testing.T) {
	refuse := func(ips ...string) func(string) error {
		return func(ip string) error {
			for _, r := range ips {
				if ip == r {
					return errors.New("listen tcp4 " + ip + ":0: bind: can't assign requested address")
				}
			}
			return nil
		}
	}
	tests := []struct {
		name     string
		nodes    []string
		bind     func(string) error
		goos     string
		want     []string
		shared   []bool
		warnings []string // "" = no warning
	}{
		{"every address binds", []string{"a", "b", "c"}, refuse(), "linux",
			[]string{"127.0.1.1", "127.0.1.2", "127.0.1.3"}, []bool{false, false, false}, nil},
		{"macOS without aliases", []string{"a", "b"}, refuse("127.0.1.1", "127.0.1.2"), "darwin",
			[]string{"127.0.0.1", "127.0.0.1"}, []bool{true, true},
			[]string{"nodes a, b share the address 127.0.0.1", "no loopback address 127.0.1.1, 127.0.1.2",
				"can't assign requested address", "overlap or handover", "refused", "stopThenStart still works",
				"sudo ifconfig lo0 alias 127.0.1.1; sudo ifconfig lo0 alias 127.0.1.2", "restart normsim"}},
		{"one alias is enough for two nodes", []string{"a", "b"}, refuse("127.0.1.1"), "darwin",
			[]string{"127.0.0.1", "127.0.1.2"}, []bool{false, false}, nil},
		{"linux hint", []string{"a", "b", "c"}, refuse("127.0.1.2", "127.0.1.3"), "linux",
			[]string{"127.0.1.1", "127.0.0.1", "127.0.0.1"}, []bool{false, true, true},
			[]string{"nodes b, c share", "sudo ip addr add 127.0.1.2/8 dev lo; sudo ip addr add 127.0.1.3/8 dev lo"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			addrs, shared, warning := nodeAddresses(tt.nodes, tt.bind, tt.goos)
			if !reflect.DeepEqual(addrs, tt.want) || !reflect.DeepEqual(shared, tt.shared) {
				t.Errorf("addresses %q shared %v, want %q %v", addrs, shared, tt.want, tt.shared)
			}
			if len(tt.warnings) == 0 && warning != "" {
				t.Errorf("unexpected warning %q", warning)
			}
			for _, w := range tt.warnings {
				if !strings.Contains(warning, w) {
					t.Errorf("warning %q\nlacks %q", warning, w)
				}
			}
		})
	}
}

// TestNodeAddressesBindHere: on Linux every 127.0.1.x binds without setup.
func TestNodeAddressesBindHere(t *testing.T) {
	addrs, _, warning := nodeAddresses([]string{"a", "b"}, bindAddress, "linux")
	if warning != "" {
		if goosIsLinux {
			t.Fatalf("Linux must bind 127.0.1.x without setup: %s", warning)
		}
		t.Skipf("this host has no 127.0.1.x: %s", warning)
	}
	if !reflect.DeepEqual(addrs, []string{"127.0.1.1", "127.0.1.2"}) {
		t.Errorf("addresses %q", addrs)
	}
}

var goosIsLinux = runtime.GOOS == "linux"
