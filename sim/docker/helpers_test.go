package docker_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/volume"
	"github.com/docker/docker/client"

	"github.com/normsim/normsim/internal/testenv"
	"github.com/normsim/normsim/sim"
	"github.com/normsim/normsim/sim/docker"
)

// The job image, built once for the whole package from testdata/job and
// removed by TestMain.
var jobImage struct {
	once sync.Once
	tag  string
	err  error
}

func TestMain(m *testing.M) {
	if mode := os.Getenv(parentEnv); mode != "" {
		os.Exit(parentMain(mode, os.Getenv(parentImageEnv), os.Getenv(parentIDEnv)))
	}
	code := m.Run()
	if jobImage.tag != "" {
		if cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation()); err == nil {
			_, err := cli.ImageRemove(context.Background(), jobImage.tag, image.RemoveOptions{Force: true, PruneChildren: true})
			if err != nil {
				fmt.Fprintf(os.Stderr, "remove test image %s: %v\n", jobImage.tag, err)
			}
			cli.Close()
		}
	}
	os.Exit(code)
}

// mustJobImage returns the tag of the test job's image, building it on
// first use; it skips the test when no engine answers.
func mustJobImage(t testing.TB) (string, *client.Client) {
	t.Helper()
	cli := testenv.RequireDocker(t)
	jobImage.once.Do(func() {
		ctx := context.Background()
		v, err := cli.ServerVersion(ctx)
		if err != nil {
			jobImage.err = err
			return
		}
		dir, err := os.MkdirTemp("", "normsim-docker-test")
		if err != nil {
			jobImage.err = err
			return
		}
		defer os.RemoveAll(dir)
		bin := filepath.Join(dir, "job")
		cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", bin, "./testdata/job")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+v.Arch)
		if out, err := cmd.CombinedOutput(); err != nil {
			jobImage.err = fmt.Errorf("go build testdata/job: %v\n%s", err, out)
			return
		}
		tag := "normsim-test/job:" + randomID()
		if err := docker.BuildScratchImage(ctx, cli, tag, bin); err != nil {
			jobImage.err = err
			return
		}
		jobImage.tag = tag
	})
	if jobImage.err != nil {
		t.Fatalf("build the test job image: %v", jobImage.err)
	}
	return jobImage.tag, cli
}

func randomID() string {
	b := make([]byte, 5)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// recorder keeps a runtime's events.
type recorder struct {
	mu     sync.Mutex
	events []sim.RuntimeEvent
	signal chan struct{}
}

func newRecorder() *recorder { return &recorder{signal: make(chan struct{})} }

func (r *recorder) observe(ev sim.RuntimeEvent) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, ev)
	close(r.signal)
	r.signal = make(chan struct{})
}

func (r *recorder) snapshot() ([]sim.RuntimeEvent, chan struct{}) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]sim.RuntimeEvent(nil), r.events...), r.signal
}

// find returns the first event of the instance's service of that kind.
func (r *recorder) find(instance, service string, kind sim.RuntimeEventKind) (sim.RuntimeEvent, bool) {
	evs, _ := r.snapshot()
	for _, ev := range evs {
		if ev.Instance == instance && ev.Service == service && ev.Kind == kind {
			return ev, true
		}
	}
	return sim.RuntimeEvent{}, false
}

// wait waits for an event of the instance's service of that kind.
func (r *recorder) wait(t *testing.T, instance, service string, kind sim.RuntimeEventKind) sim.RuntimeEvent {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		_, signal := r.snapshot()
		if ev, ok := r.find(instance, service, kind); ok {
			return ev
		}
		select {
		case <-signal:
		case <-deadline:
			evs, _ := r.snapshot()
			t.Fatalf("no %s event for %s/%s; have %+v", kind, instance, service, evs)
		}
	}
}

// newRuntime returns a runtime that records its events and removes what it
// runs when the test ends.
func newRuntime(t testing.TB) (*docker.Runtime, *recorder) {
	t.Helper()
	rec := newRecorder()
	r, err := docker.New(docker.Config{Observer: rec.observe, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := r.Close(ctx, false); err != nil {
			t.Errorf("close runtime: %v", err)
		}
	})
	return r, rec
}

// newSpec returns a launch spec for a fresh instance with the launch
// contract's labels and extra_hosts on each service, and makes sure
// nothing of the instance outlives the test.
func newSpec(t testing.TB, cli *client.Client, services ...sim.ServiceSpec) *sim.LaunchSpec {
	t.Helper()
	id := "t" + randomID()
	spec := &sim.LaunchSpec{
		InstanceID: id,
		JobID:      "job-" + id,
		Role:       "role-a",
		Node:       "node-1",
		Template:   "test-template",
		Project:    "normsim-" + id,
	}
	for _, s := range services {
		s.Labels = map[string]string{
			"io.normsim.instance": id,
			"io.normsim.job":      spec.JobID,
			"io.normsim.role":     spec.Role,
			"io.normsim.node":     spec.Node,
			"io.normsim.template": spec.Template,
			"io.normsim.service":  s.Name,
			"io.normsim.project":  spec.Project,
			"com.example.extra":   "kept",
		}
		s.ExtraHosts = append(s.ExtraHosts, "host.docker.internal:host-gateway")
		spec.Services = append(spec.Services, s)
	}
	t.Cleanup(func() { removeInstance(t, cli, id) })
	return spec
}

// removeInstance is the safety net: it force-removes whatever carries the
// instance's label, whatever the runtime did.
func removeInstance(t testing.TB, cli *client.Client, id string) {
	ctx := context.Background()
	f := instanceFilter(id)
	cs, _ := cli.ContainerList(ctx, container.ListOptions{All: true, Filters: f})
	for _, c := range cs {
		cli.ContainerRemove(ctx, c.ID, container.RemoveOptions{Force: true, RemoveVolumes: true})
	}
	ns, _ := cli.NetworkList(ctx, network.ListOptions{Filters: f})
	for _, n := range ns {
		cli.NetworkRemove(ctx, n.ID)
	}
	vs, _ := cli.VolumeList(ctx, volume.ListOptions{Filters: f})
	for _, v := range vs.Volumes {
		cli.VolumeRemove(ctx, v.Name, true)
	}
}

func instanceFilter(id string) filters.Args {
	return filters.NewArgs(filters.Arg("label", "io.normsim.managed=true"), filters.Arg("label", "io.normsim.instance="+id))
}

// assertGone fails unless no container, network or volume of the instance
// is left in the engine.
func assertGone(t testing.TB, cli *client.Client, id string) {
	t.Helper()
	ctx := context.Background()
	f := instanceFilter(id)
	cs, err := cli.ContainerList(ctx, container.ListOptions{All: true, Filters: f})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cs {
		t.Errorf("container %s (%s) of instance %s is left", c.Names, c.State, id)
	}
	ns, err := cli.NetworkList(ctx, network.ListOptions{Filters: f})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range ns {
		t.Errorf("network %s of instance %s is left", n.Name, id)
	}
	vs, err := cli.VolumeList(ctx, volume.ListOptions{Filters: f})
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range vs.Volumes {
		t.Errorf("volume %s of instance %s is left", v.Name, id)
	}
}

// prepareStart prepares the instance spec describes and starts it.
func prepareStart(t *testing.T, r *docker.Runtime, spec *sim.LaunchSpec) {
	t.Helper()
	if err := r.Prepare(context.Background(), spec); err != nil {
		t.Fatalf("prepare: %v", err)
	}
	if err := r.Start(context.Background(), spec.InstanceID); err != nil {
		t.Fatalf("start: %v", err)
	}
}

// stopGone stops the instance, with grace, and fails unless nothing of it
// is left in the engine.
func stopGone(t *testing.T, r *docker.Runtime, cli *client.Client, id string, grace time.Duration) {
	t.Helper()
	if _, err := r.Stop(context.Background(), id, grace); err != nil {
		t.Fatal(err)
	}
	assertGone(t, cli, id)
}

// wantCode fails unless err carries the code.
func wantCode(t *testing.T, err error, code string) {
	t.Helper()
	if err == nil {
		t.Fatalf("got no error, want %s", code)
	}
	if got := sim.ErrorCode(err); got != code {
		t.Fatalf("error code %s, want %s: %v", got, code, err)
	}
}

// waitLogs polls the instance's logs until they contain every want line.
func waitLogs(t *testing.T, r *docker.Runtime, id string, want ...string) string {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		var buf bytes.Buffer
		err := r.Logs(context.Background(), id, false, &buf)
		if err != nil {
			t.Fatalf("logs: %v", err)
		}
		out := buf.String()
		missing := ""
		for _, w := range want {
			if !strings.Contains(out, w) {
				missing = w
				break
			}
		}
		if missing == "" {
			return out
		}
		if time.Now().After(deadline) {
			t.Fatalf("logs lack %q; have:\n%s", missing, out)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// state returns a container's state by name.
func state(t *testing.T, cli *client.Client, name string) *container.State {
	t.Helper()
	c, err := cli.ContainerInspect(context.Background(), name)
	if err != nil {
		t.Fatalf("inspect %s: %v", name, err)
	}
	return c.State
}

func isNotFound(err error) bool {
	var e *sim.Error
	return errors.As(err, &e) && e.Code == sim.ENotFound
}
