package docker_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/volume"
	"github.com/docker/docker/client"

	"github.com/normsim/normsim/sim"
	"github.com/normsim/normsim/sim/docker"
)

// The runs are named on hosts that do not exist, as in TestRemoveOrphans:
// the real sim/process.JudgeRun of every other normsim sweeping the
// engine meanwhile cannot judge them, and leaves what they label.
const (
	resDeadRun    = "normsim-test-dead-host/5252/1"
	resLiveRun    = "normsim-test-live-host/5353/1"
	resUnseenRun  = "normsim-test-unseen-host/5454/1"
	resLiveRunToo = "normsim-test-live-host/5353/2"
)

func resJudge(run string) sim.RunVerdict {
	switch run {
	case resDeadRun:
		return sim.RunGone
	case resLiveRun, resLiveRunToo:
		return sim.RunAlive
	}
	return sim.RunUnjudged
}

// logBuffer is a logger whose lines a test reads.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func sweeperWithLog(t *testing.T) (*docker.Runtime, *logBuffer) {
	t.Helper()
	var lb logBuffer
	r, err := docker.New(docker.Config{Logger: slog.New(slog.NewTextHandler(&lb, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close(context.Background(), false) })
	return r, &lb
}

func networkExists(t *testing.T, cli *client.Client, name string) bool {
	t.Helper()
	_, err := cli.NetworkInspect(context.Background(), name, network.InspectOptions{})
	if err != nil && !cerrdefs.IsNotFound(err) {
		t.Fatal(err)
	}
	return err == nil
}

func volumeExists(t *testing.T, cli *client.Client, name string) bool {
	t.Helper()
	_, err := cli.VolumeInspect(context.Background(), name)
	if err != nil && !cerrdefs.IsNotFound(err) {
		t.Fatal(err)
	}
	return err == nil
}

// Round 16, B-F3: a network and a volume a killed --db :memory: normsim
// made (named in its template, name: x) were in use by another normsim's
// container when its containers were removed, so they stayed; once that
// container was gone too, no later normsim's orphan sweep found them
// (it starts from containers), and they stayed forever, labelled with a
// run that no longer exists. The sweep now takes the networks and volumes
// of gone in-memory runs that no container uses (running or not), says
// those still in use and by whom, and leaves everything else: a live
// run's, a run it cannot judge (said as unjudged), a store file's, this
// store's own.
func TestRemoveOrphansTakesAGoneRunsNetworksAndVolumes(t *testing.T) {
	img, cli := mustJobImage(t)
	ctx := context.Background()
	prefix := "normsim-test-orphanres-" + randomID()
	const owner = "owner-sweeper"
	labels := func(run, store, own string) map[string]string {
		l := map[string]string{
			"io.normsim.managed": "true",
			sim.LabelRun:         run,
			sim.LabelOwner:       own,
			sim.LabelInstance:    "tdead",
			"normsim.test":       prefix,
		}
		if store != "" {
			l[sim.LabelStore] = store
		}
		return l
	}
	mkNet := func(name string, l map[string]string) string {
		t.Helper()
		name = prefix + "-" + name
		if _, err := cli.NetworkCreate(ctx, name, network.CreateOptions{Labels: l}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cli.NetworkRemove(context.Background(), name) })
		return name
	}
	mkVol := func(name string, l map[string]string) string {
		t.Helper()
		name = prefix + "-" + name
		if _, err := cli.VolumeCreate(ctx, volume.CreateOptions{Name: name, Labels: l}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cli.VolumeRemove(context.Background(), name, true) })
		return name
	}
	deadMem := labels(resDeadRun, sim.StoreMemory, "owner-dead")
	freeNet, freeVol := mkNet("free", deadMem), mkVol("free", deadMem)
	usedNet, usedVol := mkNet("used", deadMem), mkVol("used", deadMem)
	keptNets := []string{
		mkNet("live", labels(resLiveRun, sim.StoreMemory, "owner-live")),
		mkNet("unseen", labels(resUnseenRun, sim.StoreMemory, "owner-unseen")),
		mkNet("file", labels(resDeadRun, sim.StoreFile, "owner-file")),
		mkNet("older", labels(resDeadRun, "", "owner-older")), // no store label: an older normsim's
		mkNet("mine", labels(resDeadRun, sim.StoreMemory, owner)),
	}
	keptVols := []string{
		mkVol("live", labels(resLiveRun, sim.StoreMemory, "owner-live")),
		mkVol("file", labels(resDeadRun, sim.StoreFile, "owner-file")),
		mkVol("mine", labels(resDeadRun, sim.StoreMemory, owner)),
	}
	// Another normsim's container that uses the used pair, and has
	// stopped: the engine would remove the network from under it.
	user := prefix + "-user"
	if _, err := cli.ContainerCreate(ctx, &container.Config{Image: img, Labels: map[string]string{"normsim.test": prefix}},
		&container.HostConfig{NetworkMode: container.NetworkMode(usedNet), Mounts: []mount.Mount{{Type: mount.TypeVolume, Source: usedVol, Target: "/data"}}},
		nil, nil, user); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.ContainerRemove(context.Background(), user, container.RemoveOptions{Force: true}) })

	r, lb := sweeperWithLog(t)
	sweep, err := r.RemoveOrphans(ctx, owner, resJudge)
	if err != nil {
		t.Fatal(err)
	}
	if networkExists(t, cli, freeNet) || volumeExists(t, cli, freeVol) {
		t.Errorf("the gone run's network and volume nothing uses are left")
	}
	if !networkExists(t, cli, usedNet) || !volumeExists(t, cli, usedVol) {
		t.Fatalf("the gone run's network and volume a stopped container uses were removed")
	}
	for _, n := range keptNets {
		if !networkExists(t, cli, n) {
			t.Errorf("network %s, not provably abandoned, was removed", n)
		}
	}
	for _, v := range keptVols {
		if !volumeExists(t, cli, v) {
			t.Errorf("volume %s, not provably abandoned, was removed", v)
		}
	}
	if !strings.Contains(strings.Join(sweep.Unjudged, " "), resUnseenRun) {
		t.Errorf("unjudged runs %v, want %s", sweep.Unjudged, resUnseenRun)
	}
	log := lb.String()
	for _, want := range []string{"network=" + usedNet, "volume=" + usedVol, user, "docker network rm " + usedNet, "docker volume rm " + usedVol, freeNet, freeVol} {
		if !strings.Contains(log, want) {
			t.Errorf("the sweep's log does not say %q:\n%s", want, log)
		}
	}

	// Once its user is gone, the next sweep takes the pair.
	if err := cli.ContainerRemove(ctx, user, container.RemoveOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.RemoveOrphans(ctx, owner, resJudge); err != nil {
		t.Fatal(err)
	}
	if networkExists(t, cli, usedNet) || volumeExists(t, cli, usedVol) {
		t.Errorf("the gone run's network and volume are left once nothing uses them")
	}
}

// The attack's sequence, through the Compose SDK: normsims A and B (both
// in memory) launch a template naming a network and a volume; A made
// them. A is killed and its instance removed (its reaper's work): they
// stay, B's container uses them. A sweep then leaves them, saying so; B
// stops its instance and leaves them (A's, not its own); the next sweep
// removes them. The network and volume carry the store's kind, as the
// containers do.
func TestSharedNetworkOfAKilledRunIsSweptOnceUnused(t *testing.T) {
	img, cli := mustJobImage(t)
	ctx := context.Background()
	prefix := "normsim-test-sharedres-" + randomID()
	netName, volName := prefix+"-net", prefix+"-vol"
	t.Cleanup(func() {
		cli.NetworkRemove(context.Background(), netName)
		cli.VolumeRemove(context.Background(), volName, true)
	})
	launch := func(r *docker.Runtime, owner, run string) *sim.LaunchSpec {
		t.Helper()
		spec := newSpec(t, cli, sim.ServiceSpec{Name: "a", Image: img})
		spec.Services[0].Labels[sim.LabelOwner] = owner
		spec.Services[0].Labels[sim.LabelRun] = run
		spec.Services[0].Labels[sim.LabelStore] = sim.StoreMemory
		spec.Compose = &sim.ComposeProject{WorkingDir: t.TempDir(), YAML: []byte(`services:
  a:
    image: ` + img + `
    networks: [n]
    volumes: ["vol:/data"]
networks:
  n:
    name: ` + netName + `
volumes:
  vol:
    name: ` + volName + `
`)}
		if err := r.Prepare(ctx, spec); err != nil {
			t.Fatal(err)
		}
		if err := r.Start(ctx, spec.InstanceID); err != nil {
			t.Fatal(err)
		}
		return spec
	}
	a, _ := newRuntime(t)
	specA := launch(a, "owner-a", resDeadRun)
	n, err := cli.NetworkInspect(ctx, netName, network.InspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n.Labels[sim.LabelStore] != sim.StoreMemory || n.Labels[sim.LabelRun] != resDeadRun {
		t.Fatalf("network labels %v, want A's run and store kind %s", n.Labels, sim.StoreMemory)
	}
	if v, err := cli.VolumeInspect(ctx, volName); err != nil || v.Labels[sim.LabelStore] != sim.StoreMemory {
		t.Fatalf("volume labels %v (%v), want store kind %s", v.Labels, err, sim.StoreMemory)
	}
	b, _ := newRuntime(t)
	specB := launch(b, "owner-b", resLiveRunToo)
	a.Close(ctx, true) // the kill
	// A's reaper: what A's instance left, as far as the engine lets it.
	a2, _ := newRuntime(t)
	a2.RemoveInstance(ctx, specA.InstanceID)
	if !networkExists(t, cli, netName) || !volumeExists(t, cli, volName) {
		t.Fatalf("the network or volume B's container uses was removed with A's instance")
	}

	sweeper, lb := sweeperWithLog(t)
	if _, err := sweeper.RemoveOrphans(ctx, "owner-c", resJudge); err != nil {
		t.Fatal(err)
	}
	if !networkExists(t, cli, netName) || !volumeExists(t, cli, volName) {
		t.Fatalf("the sweep removed a network or volume B's running container uses")
	}
	if log := lb.String(); !strings.Contains(log, "network="+netName) || !strings.Contains(log, "volume="+volName) {
		t.Errorf("the sweep did not say what it left in use:\n%s", log)
	}
	if _, err := b.Stop(ctx, specB.InstanceID, 0); err != nil {
		t.Fatal(err)
	}
	if err := b.RemoveInstance(ctx, specB.InstanceID); err != nil {
		t.Fatal(err)
	}
	if _, err := sweeper.RemoveOrphans(ctx, "owner-c", resJudge); err != nil {
		t.Fatal(err)
	}
	if networkExists(t, cli, netName) || volumeExists(t, cli, volName) {
		t.Errorf("the killed run's network or volume is left once nothing uses it")
	}
	nets, _ := cli.NetworkList(ctx, network.ListOptions{Filters: filters.NewArgs(filters.Arg("name", prefix))})
	if len(nets) != 0 {
		t.Errorf("networks left: %v", nets)
	}
}
