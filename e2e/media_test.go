package e2e_test

import (
	"context"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"

	"github.com/normsim/normsim/internal/testenv"
	"github.com/normsim/normsim/normsimtest"
	"github.com/normsim/normsim/normsimtest/normsimdocker"
	"github.com/normsim/normsim/sim"
)

var mediaTemplates = filepath.Join("testdata", "media")

// serviceSettings is what a container of a service must carry whichever
// node runs it: the compose keys a media product depends on, with the
// instance's own names (project, node address) taken out.
type serviceSettings struct {
	ShmSize     int64
	Ulimits     string
	CapAdd      string
	Restart     string
	LogDriver   string
	Healthcheck string
	NetworkMode string // "service" when it shares another's, else the mode
	Networks    string // network names (project prefix cut) and their aliases
	Ports       string // container port → host port; the host address is the node's
	Env         string // the template's own variables
}

// settingsOf reads every container of an instance, by service.
func settingsOf(t *testing.T, instance, project string) map[string]serviceSettings {
	t.Helper()
	cli := testenv.RequireDocker(t)
	ctx := context.Background()
	list, err := cli.ContainerList(ctx, container.ListOptions{All: true, Filters: filters.NewArgs(
		filters.Arg("label", "io.normsim.managed=true"), filters.Arg("label", "io.normsim.instance="+instance))})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]serviceSettings{}
	for _, c := range list {
		ci, err := cli.ContainerInspect(ctx, c.ID)
		if err != nil {
			t.Fatal(err)
		}
		h := ci.HostConfig
		s := serviceSettings{ShmSize: h.ShmSize, CapAdd: strings.Join(h.CapAdd, ","), Restart: string(h.RestartPolicy.Name),
			LogDriver: h.LogConfig.Type, NetworkMode: string(h.NetworkMode)}
		for _, u := range h.Ulimits {
			s.Ulimits += u.Name + "=" + strconv.FormatInt(u.Soft, 10) + "/" + strconv.FormatInt(u.Hard, 10) + " "
		}
		if ci.Config.Healthcheck != nil {
			s.Healthcheck = strings.Join(ci.Config.Healthcheck.Test, " ")
		}
		if strings.HasPrefix(s.NetworkMode, "container:") {
			s.NetworkMode = "service"
		}
		s.NetworkMode = strings.TrimPrefix(s.NetworkMode, project+"_")
		var nets []string
		for name, n := range ci.NetworkSettings.Networks {
			aliases := slices.DeleteFunc(slices.Clone(n.Aliases), func(a string) bool {
				return strings.Contains(a, project) || strings.HasPrefix(c.ID, a) // the instance's own names
			})
			slices.Sort(aliases)
			nets = append(nets, strings.TrimPrefix(name, project+"_")+"["+strings.Join(aliases, ",")+"]")
		}
		slices.Sort(nets)
		s.Networks = strings.Join(nets, " ")
		var ports []string
		for p, bs := range h.PortBindings {
			for _, b := range bs {
				ports = append(ports, string(p)+"->"+b.HostPort)
			}
		}
		slices.Sort(ports)
		s.Ports = strings.Join(ports, " ")
		var env []string
		for _, kv := range ci.Config.Env {
			if k, _, _ := strings.Cut(kv, "="); k == "ENGINE_ROLE" || k == "JOB_LISTEN" || k == "JOB_RESOLVE" {
				env = append(env, kv)
			}
		}
		slices.Sort(env)
		s.Env = strings.Join(env, " ")
		out[c.Labels["io.normsim.service"]] = s
	}
	return out
}

// TestDockerMediaProductMigrates hands a realistic media product (an
// engine with shm_size 1gb, ulimits, cap_add, two networks, a sidecar in
// its network namespace, a health-gated exporter, a fixed host port, a
// fixed container_name) from node a to node b with overlap and with
// handover: both complete, and the target's containers carry the source's
// settings.
func TestDockerMediaProductMigrates(t *testing.T) {
	for _, strategy := range []sim.Strategy{sim.Overlap, sim.Handover} {
		t.Run(string(strategy), func(t *testing.T) {
			s := dockerSim(t, normsimtest.Options{Templates: []string{mediaTemplates}})
			normsimdocker.BuildSourceImage(t, "normsim/compose-parity", filepath.Join("..", "sim", "docker", "testdata", "job"))
			port := strconv.Itoa(testenv.FreePort(t))
			in := s.Launch(t, sim.LaunchRequest{Template: "media-" + string(strategy), Node: "a", Params: map[string]string{"PUBLISH_PORT": port}})
			in = s.WaitInstance(t, in.ID, 2*time.Minute, "running, healthy and connected", func(in sim.Instance) bool {
				return in.State == sim.InstanceRunning && in.Healthy && in.Connected
			})
			source := settingsOf(t, in.ID, "normsim-"+in.ID)
			e := source["engine"]
			if len(source) != 4 || e.ShmSize != 1<<30 || (e.CapAdd != "CAP_SYS_NICE" && e.CapAdd != "SYS_NICE") ||
				!strings.Contains(e.Networks, "media-engine") || source["sidecar"].NetworkMode != "service" {
				t.Fatalf("the source's containers: %+v", source)
			}
			m := s.MigrateAndWait(t, in.ID, sim.MigrateRequest{To: "b", Strategy: string(strategy)})
			normsimtest.RequireCompleted(t, m)
			target := settingsOf(t, m.Target.Instance, "normsim-"+m.Target.Instance)
			if !reflect.DeepEqual(source, target) {
				for svc := range source {
					if source[svc] != target[svc] {
						t.Errorf("%s differs on the target:\n source %+v\n target %+v", svc, source[svc], target[svc])
					}
				}
				t.FailNow()
			}
			tgt := s.Instance(t, m.Target.Instance)
			if !slices.ContainsFunc(tgt.Published, func(p sim.PublishedPort) bool {
				return p.HostIP == "127.0.1.2" && strconv.Itoa(p.HostPort) == port
			}) {
				t.Errorf("the target publishes %+v, want %s on node b's 127.0.1.2", tgt.Published, port)
			}
			requireNoContainers(t, in.ID)
		})
	}
}
