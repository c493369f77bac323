package e2e_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/client"

	"github.com/normsim/normsim/internal/testenv"
	"github.com/normsim/normsim/normsimtest"
	"github.com/normsim/normsim/sim"
)

var publishedTemplates = filepath.Join("testdata", "published")

// bindingWatcher polls the engine for a job's running containers and
// records, for each moment two of them ran at once, the host bindings of
// their published port 1935: what two hosts publishing the same port look
// like.
type bindingWatcher struct {
	mu   sync.Mutex
	both map[string]bool // "127.0.1.1:19350 127.0.1.2:19350" (sorted) seen while two ran
	stop func()
}

func watchBindings(t *testing.T, cli *client.Client, jobID string) *bindingWatcher {
	t.Helper()
	w := &bindingWatcher{both: map[string]bool{}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	w.stop = func() { cancel(); <-done }
	t.Cleanup(w.stop)
	go func() {
		defer close(done)
		f := filters.NewArgs(filters.Arg("label", sim.LabelJob+"="+jobID), filters.Arg("status", "running"))
		for ctx.Err() == nil {
			list, err := cli.ContainerList(ctx, container.ListOptions{Filters: f})
			if err == nil && len(list) >= 2 {
				var binds []string
				for _, c := range list {
					info, err := cli.ContainerInspect(ctx, c.ID)
					if err != nil || info.NetworkSettings == nil {
						continue
					}
					for port, bs := range info.NetworkSettings.Ports {
						if port.Port() == "1935" {
							for _, b := range bs {
								binds = append(binds, b.HostIP+":"+b.HostPort)
							}
						}
					}
				}
				slices.Sort(binds)
				w.mu.Lock()
				w.both[strings.Join(binds, " ")] = true
				w.mu.Unlock()
			}
			time.Sleep(15 * time.Millisecond)
		}
	}()
	return w
}

func (w *bindingWatcher) seen() []string {
	w.stop()
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Sorted(func(yield func(string) bool) {
		for k := range w.both {
			if !yield(k) {
				return
			}
		}
	})
}

// TestDockerFixedPortMigratesBetweenNodeAddresses: a template that
// publishes a fixed host port migrates with overlap and with handover,
// because each node publishes on its own address; while both containers
// run, one binds 127.0.1.1:P and the other 127.0.1.2:P, and the API shows
// each instance's real binding. Before nodes had addresses both bound
// 0.0.0.0:P and the target failed with "port is already allocated".
func TestDockerFixedPortMigratesBetweenNodeAddresses(t *testing.T) {
	for _, strategy := range []sim.Strategy{sim.Overlap, sim.Handover} {
		t.Run(string(strategy), func(t *testing.T) {
			s := dockerSim(t, normsimtest.Options{Templates: []string{publishedTemplates}})
			cli := testenv.RequireDocker(t)
			port := strconv.Itoa(testenv.FreePort(t))
			in := s.Launch(t, sim.LaunchRequest{Template: "published-" + string(strategy), Node: "a", Params: map[string]string{"PUBLISH_PORT": port}})
			// The engine's picks are read back just after the start, which
			// the job's hello may overtake.
			in = s.WaitInstance(t, in.ID, time.Minute, "connected with its ports read back", func(in sim.Instance) bool {
				return in.State == sim.InstanceRunning && in.Connected &&
					!slices.ContainsFunc(in.Published, func(p sim.PublishedPort) bool { return p.HostPort == 0 })
			})
			requirePublished(t, in, strategy, "127.0.1.1", mustAtoi(t, port))
			w := watchBindings(t, cli, in.JobID)
			m := s.MigrateAndWait(t, in.ID, sim.MigrateRequest{To: "b", Strategy: string(strategy)})
			normsimtest.RequireCompleted(t, m)
			want := "127.0.1.1:" + port + " 127.0.1.2:" + port
			if seen := w.seen(); !slices.Contains(seen, want) {
				t.Fatalf("bindings while both ran: %q, want %q\n%s", seen, want, normsimtest.Timeline(m))
			}
			requirePublished(t, s.Instance(t, m.Target.Instance), strategy, "127.0.1.2", mustAtoi(t, port))
			if src := s.Instance(t, in.ID); src.State != sim.InstanceStopped || len(src.Published) != 0 {
				t.Errorf("the stopped source shows %s and publishes %+v", src.State, src.Published)
			}
			requireNoContainers(t, in.ID)
		})
	}
}

// TestDockerFixedPortOnSharedAddressIsRefused: where the nodes cannot have
// addresses of their own (simulated: their bind fails) they share
// 127.0.0.1, and an overlap that would publish the same fixed port twice is
// refused before anything starts, with why and what to do, instead of a
// target failing with the engine's bare "port is already allocated".
// stopThenStart, which stops the source first, still migrates.
func TestDockerFixedPortOnSharedAddressIsRefused(t *testing.T) {
	o := normsimtest.Options{Templates: []string{publishedTemplates},
		BindAddress: func(ip string) error { return fmt.Errorf("listen tcp4 %s:0: bind: can't assign requested address", ip) }}
	s := dockerSim(t, o)
	port := strconv.Itoa(testenv.FreePort(t))
	in := s.Launch(t, sim.LaunchRequest{Template: "published-overlap", Node: "a", Params: map[string]string{"PUBLISH_PORT": port, "DRAIN_MS": "0"}})
	in = s.WaitConnected(t, in.ID)
	if len(in.Published) != 1 || in.Published[0].HostIP != "127.0.0.1" {
		t.Fatalf("source publishes %+v, want on the shared 127.0.0.1", in.Published)
	}
	_, err := s.Migrate(in.ID, sim.MigrateRequest{To: "b"})
	var apiErr *normsimtest.APIError
	if !errors.As(err, &apiErr) || apiErr.Status != http.StatusUnprocessableEntity {
		t.Fatalf("overlap on a shared address: %v, want a 422", err)
	}
	for _, want := range []string{"127.0.0.1:" + port + "->1935/tcp", "nodes a and b share the address 127.0.0.1",
		"no loopback address 127.0.1.2", "127.0.1.2", "stopThenStart"} {
		if !strings.Contains(apiErr.Message, want) {
			t.Errorf("refusal %q\nlacks %q", apiErr.Message, want)
		}
	}
	if got := s.Instance(t, in.ID); got.State != sim.InstanceRunning {
		t.Fatalf("the refused migration touched the source: %s", got.State)
	}
	m := s.MigrateAndWait(t, in.ID, sim.MigrateRequest{To: "b", Strategy: string(sim.StopThenStart)})
	normsimtest.RequireCompleted(t, m)
}

// requirePublished checks what the API says an instance publishes: the
// fixed port 1935 on the node's address, and for the handover template
// 1936 on a port the engine picked, read back from the engine.
func requirePublished(t *testing.T, in sim.Instance, strategy sim.Strategy, addr string, port int) {
	t.Helper()
	want := []sim.PublishedPort{{Service: "counter", ContainerPort: 1935, Protocol: "tcp", HostIP: addr, HostPort: port}}
	if strategy == sim.Handover {
		i := slices.IndexFunc(in.Published, func(p sim.PublishedPort) bool { return p.ContainerPort == 1936 })
		if i < 0 || in.Published[i].HostPort == 0 {
			t.Fatalf("%s publishes %+v: want 1936 on the host port the engine picked", in.ID, in.Published)
		}
		want = append(want, sim.PublishedPort{Service: "counter", ContainerPort: 1936, Protocol: "tcp", HostIP: addr, HostPort: in.Published[i].HostPort})
	}
	if !slices.Equal(in.Published, want) {
		t.Fatalf("%s publishes %+v, want %+v", in.ID, in.Published, want)
	}
}

func mustAtoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestJobsGetTheirNodeAddress: every instance learns its node's address
// (a host process cannot be moved to it, but can bind or advertise it), and
// an instance whose runtime publishes nothing lists nothing.
func TestJobsGetTheirNodeAddress(t *testing.T) {
	s := startSim(t, normsimtest.Options{Runtime: sim.RuntimeExternal})
	for node, want := range map[string]string{"a": "127.0.1.1", "b": "127.0.1.2"} {
		in := s.Launch(t, sim.LaunchRequest{Template: "counter", Node: node})
		if got := in.Env["counter"][sim.EnvNodeAddr]; got != want {
			t.Errorf("node %s: %s=%q, want %q", node, sim.EnvNodeAddr, got, want)
		}
		if len(in.Published) != 0 {
			t.Errorf("external instance publishes %+v", in.Published)
		}
	}
}
