package app_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/volume"

	"github.com/normsim/normsim/internal/testenv"
	"github.com/normsim/normsim/normsimtest/normsimdocker"
	"github.com/normsim/normsim/sim"
	"github.com/normsim/normsim/sim/docker"
	"github.com/normsim/normsim/sim/template"
)

// TestDockerStopLeavesVolumesItDidNotMake (issue 34, round three, F1): a
// compose file may name a volume that exists already (compose warns and
// uses it). Stopping the instance removed it with its data, as `docker
// compose down --volumes` removes every volume the file declares by name;
// normsim removes only the volumes made for the instance, by their labels.
func TestDockerStopLeavesVolumesItDidNotMake(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real containers")
	}
	cli := testenv.RequireDocker(t)
	normsimdocker.BuildJobImage(t, parityImage, filepath.Join("..", "sim", "docker", "testdata", "job"))
	ctx := t.Context()
	suffix := randHex(t)

	precious := "normsim-test-precious-" + suffix
	if _, err := cli.VolumeCreate(ctx, volume.CreateOptions{Name: precious}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.VolumeRemove(context.Background(), precious, true) })

	compose := `services:
  app:
    image: ` + parityImage + `
    volumes: ["data:/data", "scratch:/scratch"]
volumes:
  data:
    name: ` + precious + `
  scratch: {}
`
	l := loadComposeTemplate(t, "volumes", compose)
	rt := newDockerRuntime(t)
	id := "volumes-" + suffix
	startOnDocker(t, rt, l, id, "job-"+suffix)
	made := func() []string {
		list, err := cli.VolumeList(ctx, volume.ListOptions{Filters: filters.NewArgs(filters.Arg("label", sim.LabelInstance+"="+id))})
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, v := range list.Volumes {
			names = append(names, v.Name)
		}
		return names
	}
	if n := made(); len(n) != 1 {
		t.Fatalf("volumes made for the instance: %v, want its scratch volume alone", n)
	}
	if _, err := rt.Stop(ctx, id, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.VolumeInspect(ctx, precious); err != nil {
		t.Errorf("the volume that existed before the launch is gone after its stop: %v", err)
	}
	if n := made(); len(n) != 0 {
		t.Errorf("volumes made for the instance left after its stop: %v", n)
	}
}

// TestDockerSharedNamesGoWithTheirLastUser (issue 34, round four, F2, F3):
// a compose file that names a volume and a network (name: x) shares them
// between the source and the target of a handover. The source's stop
// failed on the volume the target still used, failing a seamless
// handover, and the network was left on the engine for good. A stop now
// leaves what another instance still uses, and the last user's stop
// removes both.
func TestDockerSharedNamesGoWithTheirLastUser(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real containers")
	}
	cli := testenv.RequireDocker(t)
	normsimdocker.BuildJobImage(t, parityImage, filepath.Join("..", "sim", "docker", "testdata", "job"))
	ctx := t.Context()
	suffix := randHex(t)
	vol, net := "normsim-test-sharedvol-"+suffix, "normsim-test-sharednet-"+suffix
	t.Cleanup(func() {
		cli.VolumeRemove(context.Background(), vol, true)
		cli.NetworkRemove(context.Background(), net)
	})
	compose := `services:
  app:
    image: ` + parityImage + `
    volumes: ["state:/data"]
    networks: [shared]
volumes:
  state:
    name: ` + vol + `
networks:
  shared:
    name: ` + net + `
`
	l := loadComposeTemplate(t, "shared", compose)
	rt := newDockerRuntime(t)
	start := func(id string) { startOnDocker(t, rt, l, id, "job-"+suffix) }
	exists := func() (volumeThere, networkThere bool) {
		_, verr := cli.VolumeInspect(ctx, vol)
		_, nerr := cli.NetworkInspect(ctx, net, network.InspectOptions{})
		return verr == nil, nerr == nil
	}
	source, target := "shared-src-"+suffix, "shared-tgt-"+suffix
	start(source)
	start(target)
	if _, err := rt.Stop(ctx, source, 0); err != nil {
		t.Fatalf("the source's stop failed on what the target still uses: %v", err)
	}
	if v, n := exists(); !v || !n {
		t.Fatalf("after the source's stop the volume is there %v, the network %v; the target still uses both", v, n)
	}
	if _, err := rt.Stop(ctx, target, 0); err != nil {
		t.Fatal(err)
	}
	if v, n := exists(); v || n {
		t.Errorf("after the last user's stop the volume is left %v, the network %v; want both removed", v, n)
	}
}

// newDockerRuntime is a Docker runtime closed when the test ends.
func newDockerRuntime(t *testing.T) *docker.Runtime {
	t.Helper()
	rt, err := docker.New(docker.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close(context.Background(), false) })
	return rt
}

// startOnDocker launches the template l as instance id of job on node a,
// labelled as these tests' own, and stops it when the test ends.
func startOnDocker(t *testing.T, rt *docker.Runtime, l *template.Loaded, id, job string) {
	t.Helper()
	spec, err := l.Launch(sim.LaunchInput{
		Instance: &sim.Instance{ID: id, JobID: job, Role: id, Token: "token"},
		Node:     sim.Node{Name: "a", SocketPort: 6797},
		Runtime:  sim.RuntimeDocker,
	})
	if err != nil {
		t.Fatal(err)
	}
	for i := range spec.Services {
		spec.Services[i].Labels[sim.LabelOwner] = parityOwner
	}
	if err := rt.Prepare(t.Context(), spec); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Stop(context.Background(), id, 0) })
	if err := rt.Start(t.Context(), id); err != nil {
		t.Fatal(err)
	}
}

// loadComposeTemplate writes compose.yml and a minimal manifest into a
// template directory called name, and loads it; the test fails if it is
// not valid.
func loadComposeTemplate(t *testing.T, name, compose string) *template.Loaded {
	t.Helper()
	dir := filepath.Join(t.TempDir(), name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	manifest := `{"productTemplateSchemaVersion": 1, "productName": "` + name + `", "productVersion": "1", "generatedAt": "2026-01-01T00:00:00Z", "target": "docker-compose"}`
	for file, text := range map[string]string{"compose.yml": compose, "manifest.json": manifest} {
		if err := os.WriteFile(filepath.Join(dir, file), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	l := template.Load(dir)
	if !l.Valid() {
		t.Fatalf("template invalid: %v", l.Problems)
	}
	return l
}
