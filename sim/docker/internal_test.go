package docker

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/compose-spec/compose-go/v2/types"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/events"

	"github.com/normsim/normsim/sim"
)

func TestLineWriter(t *testing.T) {
	ts := func(s int) string { return time.Unix(1700000000, int64(s)).UTC().Format(time.RFC3339Nano) }
	tests := []struct {
		name   string
		after  time.Time
		writes []string
		want   string
		last   time.Time
	}{
		{
			name:   "strips timestamps, joins split writes",
			writes: []string{ts(1) + " one\n" + ts(2) + " tw", "o\n"},
			want:   "s | one\ns | two\n",
			last:   time.Unix(1700000000, 2),
		},
		{
			name:   "drops what a resumed follow wrote already",
			after:  time.Unix(1700000000, 2),
			writes: []string{ts(1) + " one\n" + ts(2) + " two\n" + ts(3) + " three\n"},
			want:   "s | three\n",
			last:   time.Unix(1700000000, 3),
		},
		{
			name:   "flushes a last line without newline",
			writes: []string{ts(1) + " partial"},
			want:   "s | partial\n",
			last:   time.Unix(1700000000, 1),
		},
		{
			name:   "keeps a line without timestamp",
			writes: []string{"plain line\n", ts(1) + " \n"},
			want:   "s | plain line\ns | \n",
			last:   time.Unix(1700000000, 1),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			last := tt.after
			lw := &lineWriter{out: &lineOut{w: &buf}, prefix: "s | ", after: tt.after, last: &last}
			for _, w := range tt.writes {
				if _, err := lw.Write([]byte(w)); err != nil {
					t.Fatal(err)
				}
			}
			if err := lw.flush(); err != nil {
				t.Fatal(err)
			}
			if buf.String() != tt.want {
				t.Errorf("got %q, want %q", buf.String(), tt.want)
			}
			if !last.Equal(tt.last) {
				t.Errorf("last = %v, want %v", last, tt.last)
			}
		})
	}
}

// TestServicesProject: a spec built by hand runs as the compose project
// its services describe, with the runtime's labels added.
func TestServicesProject(t *testing.T) {
	spec := &sim.LaunchSpec{InstanceID: "i1", JobID: "j1", Role: "r1", Node: "n1", Template: "tpl", Project: "normsim-i1"}
	spec.Services = []sim.ServiceSpec{{
		Name:       "app",
		Image:      "img:dev",
		Command:    []string{"serve", "--x"},
		Env:        map[string]string{"B": "2", "A": "1"},
		Labels:     map[string]string{"io.normsim.role": "from-contract", "other": "x"},
		User:       "1000",
		WorkingDir: "/w",
		ExtraHosts: []string{"host.docker.internal:host-gateway"},
		Ports: []sim.PortBinding{
			{ContainerPort: 80, Protocol: "tcp"},
			{HostIP: "127.0.0.1", HostPort: 5000, ContainerPort: 5000, Protocol: "UDP"},
		},
		Volumes: []sim.Mount{
			{Type: "bind", Source: "/host/dir", Target: "/in", ReadOnly: true},
			{Type: "volume", Source: "data", Target: "/data"},
			{Type: "volume", Target: "/anon"},
			{Type: "tmpfs", Target: "/tmp"},
		},
		Healthcheck: &sim.Healthcheck{Test: []string{"curl -f localhost"}, Interval: time.Second, Retries: 2},
		DependsOn:   []sim.Dependency{{Service: "db", Condition: "service_healthy"}, {Service: "init"}},
	}, {Name: "db", Image: "img:dev"}, {Name: "init", Image: "img:dev"}}
	c, err := servicesProject(spec)
	if err != nil {
		t.Fatal(err)
	}
	withProject := *spec
	withProject.Compose = c
	p, err := loadCompose(t.Context(), &withProject)
	if err != nil {
		t.Fatalf("%v\n%s", err, c.YAML)
	}
	s := p.Services["app"]
	if *s.Environment["A"] != "1" || *s.Environment["B"] != "2" {
		t.Errorf("env = %v", s.Environment)
	}
	for k, v := range map[string]string{"io.normsim.managed": "true", "io.normsim.instance": "i1", "io.normsim.project": "normsim-i1",
		"io.normsim.service": "app", "io.normsim.role": "from-contract", "other": "x"} {
		if s.Labels[k] != v {
			t.Errorf("label %s = %q, want %q", k, s.Labels[k], v)
		}
	}
	if s.CustomLabels["com.docker.compose.project"] != "normsim-i1" || s.CustomLabels["com.docker.compose.service"] != "app" {
		t.Errorf("compose labels %v", s.CustomLabels)
	}
	if s.Entrypoint != nil || !slices.Equal(s.Command, types.ShellCommand{"serve", "--x"}) || s.User != "1000" || s.WorkingDir != "/w" {
		t.Errorf("entrypoint %v cmd %v user %q dir %q", s.Entrypoint, s.Command, s.User, s.WorkingDir)
	}
	if want := []string{"CMD-SHELL", "curl -f localhost"}; !slices.Equal(s.HealthCheck.Test, want) || *s.HealthCheck.Retries != 2 {
		t.Errorf("healthcheck = %+v", s.HealthCheck)
	}
	if len(s.Ports) != 2 || s.Ports[0].Target != 80 || s.Ports[0].Published != "" ||
		s.Ports[1].Published != "5000" || s.Ports[1].Protocol != "udp" || s.Ports[1].HostIP != "127.0.0.1" {
		t.Errorf("ports = %+v", s.Ports)
	}
	if len(s.Volumes) != 4 || s.Volumes[0].Source != "/host/dir" || !s.Volumes[0].ReadOnly ||
		p.Volumes["data"].Name != "normsim-i1_data" || p.Volumes["data"].Labels["io.normsim.instance"] != "i1" ||
		s.Volumes[2].Source != "" || s.Volumes[3].Type != "tmpfs" {
		t.Errorf("volumes = %+v, project volumes %+v", s.Volumes, p.Volumes)
	}
	if _, ok := s.Networks["default"]; !ok || p.Networks["default"].Name != "normsim-i1_default" || p.Networks["default"].Labels["io.normsim.instance"] != "i1" {
		t.Errorf("networks %+v / %+v", s.Networks, p.Networks)
	}
	if d := s.DependsOn; d["db"].Condition != "service_healthy" || d["init"].Condition != "service_started" {
		t.Errorf("depends_on = %+v", d)
	}
	if got := s.ExtraHosts["host.docker.internal"]; !slices.Equal(got, []string{"host-gateway"}) {
		t.Errorf("extra_hosts = %v", s.ExtraHosts)
	}

	spec.Services[0].Volumes = []sim.Mount{{Type: "npipe", Target: "/x"}}
	if _, err := servicesProject(spec); sim.ErrorCode(err) != sim.EComposeInvalid {
		t.Errorf("npipe mount: %v", err)
	}
}

// fakeEngine serves just enough of the engine's API for Adopt and the event
// stream; its first event connection drops after one event.
type fakeEngine struct {
	t1, t2 int64 // the events' times, after the runtime starts watching
	mu     sync.Mutex
	conns  int
	sinces []string
}

func (f *fakeEngine) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	path := r.URL.Path
	if i := strings.Index(path[1:], "/"); strings.HasPrefix(path, "/v1.") && i > 0 {
		path = path[i+1:]
	}
	labels := map[string]string{LabelManaged: "true", sim.LabelInstance: "i1", sim.LabelService: "app", sim.LabelProject: "normsim-i1", "name": "normsim-i1-app-1"}
	ev := func(action events.Action, nano int64, extra map[string]string) events.Message {
		attrs := map[string]string{}
		for k, v := range labels {
			attrs[k] = v
		}
		for k, v := range extra {
			attrs[k] = v
		}
		return events.Message{Type: events.ContainerEventType, Action: action, Actor: events.Actor{ID: "c1", Attributes: attrs},
			Time: nano / 1e9, TimeNano: nano}
	}
	t1, t2 := f.t1, f.t2
	w.Header().Set("Api-Version", "1.41")
	w.Header().Set("Content-Type", "application/json")
	switch path {
	case "/_ping":
		fmt.Fprint(w, "OK")
	case "/containers/json":
		json.NewEncoder(w).Encode([]container.Summary{{ID: "c1", Labels: labels, State: container.StateRunning}})
	case "/networks":
		fmt.Fprint(w, "[]")
	case "/events":
		if strings.Contains(r.URL.Query().Get("filters"), `"network"`) {
			// The stream of network events: none here.
			w.(http.Flusher).Flush()
			<-r.Context().Done()
			return
		}
		f.mu.Lock()
		f.conns++
		n := f.conns
		f.sinces = append(f.sinces, r.URL.Query().Get("since"))
		f.mu.Unlock()
		enc := json.NewEncoder(w)
		if n == 1 {
			enc.Encode(ev(events.ActionStart, t1, nil))
			return // the stream drops
		}
		enc.Encode(ev(events.ActionStart, t1, nil)) // replayed: must not count twice
		enc.Encode(ev(events.ActionDie, t2, map[string]string{"exitCode": "7"}))
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	default:
		http.Error(w, `{"message":"not faked"}`, http.StatusNotFound)
	}
}

func TestEventStreamReconnects(t *testing.T) {
	now := time.Now().UnixNano()
	engine := &fakeEngine{t1: now + 1e9 + 1, t2: now + 2e9 + 2}
	srv := httptest.NewServer(engine)
	defer srv.Close()
	t.Setenv("DOCKER_HOST", "tcp://"+strings.TrimPrefix(srv.URL, "http://"))
	t.Setenv("DOCKER_TLS_VERIFY", "")
	t.Setenv("DOCKER_API_VERSION", "")

	var mu sync.Mutex
	var got []sim.RuntimeEvent
	r, err := New(Config{Observer: func(ev sim.RuntimeEvent) {
		mu.Lock()
		got = append(got, ev)
		mu.Unlock()
	}})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Adopt(t.Context(), "i1"); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		mu.Lock()
		n := len(got)
		mu.Unlock()
		if n >= 2 || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := r.Close(t.Context(), true); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 2 || got[0].Kind != sim.ServiceStarted || got[1].Kind != sim.ServiceExited || got[1].ExitCode != 7 || got[1].Service != "app" {
		t.Errorf("events = %+v", got)
	}
	engine.mu.Lock()
	defer engine.mu.Unlock()
	if want := fmt.Sprintf("%d.%09d", engine.t1/1e9, engine.t1%1e9); len(engine.sinces) < 2 || engine.sinces[1] != want {
		t.Errorf("reconnects asked since %q, want the last event's time", engine.sinces)
	}
}

// TestDockerContextIsFollowed: without DOCKER_HOST the engine is the one
// the docker CLI's current context names (here DOCKER_CONTEXT, in a
// context store under DOCKER_CONFIG), for this runtime's own client too.
//
// The docker CLI reads DOCKER_CONFIG once per process, so the test runs
// itself again in a fresh one.
func TestDockerContextIsFollowed(t *testing.T) {
	if os.Getenv("NORMSIM_CONTEXT_CHILD") == "" {
		cmd := exec.Command(os.Args[0], "-test.run=^TestDockerContextIsFollowed$", "-test.count=1")
		cmd.Env = append(os.Environ(), "NORMSIM_CONTEXT_CHILD=1")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		return
	}
	srv := httptest.NewServer(&fakeEngine{})
	defer srv.Close()
	host := "tcp://" + strings.TrimPrefix(srv.URL, "http://")
	cfg := t.TempDir()
	name := "normsim-test"
	sum := sha256.Sum256([]byte(name))
	meta := filepath.Join(cfg, "contexts", "meta", hex.EncodeToString(sum[:]))
	if err := os.MkdirAll(meta, 0o755); err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(map[string]any{"Name": name, "Metadata": map[string]any{},
		"Endpoints": map[string]any{"docker": map[string]any{"Host": host, "SkipTLSVerify": false}}})
	if err := os.WriteFile(filepath.Join(meta, "meta.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("DOCKER_CONFIG", cfg)
	t.Setenv("DOCKER_CONTEXT", name)
	t.Setenv("DOCKER_HOST", "")
	os.Unsetenv("DOCKER_HOST")
	t.Setenv("DOCKER_API_VERSION", "")

	r, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close(context.Background(), true)
	if got := r.Client().DaemonHost(); got != host {
		t.Fatalf("client host %q, want the context's %q", got, host)
	}
	if err := r.Ping(t.Context()); err != nil {
		t.Fatalf("ping the context's engine: %v", err)
	}
}

// TestLineWriterSkipsALineReadAgain: a stream's lines come in time order;
// one before the last (the json-file driver reading a rotated file again)
// is not written twice.
func TestLineWriterSkipsALineReadAgain(t *testing.T) {
	var buf bytes.Buffer
	var last time.Time
	lw := &lineWriter{out: &lineOut{w: &buf}, prefix: "s | ", last: &last}
	ts := func(n int) string { return time.Unix(1700000000, int64(n)).UTC().Format(time.RFC3339Nano) }
	for _, w := range []string{ts(1) + " a\n", ts(2) + " b\n", ts(1) + " a\n", ts(2) + " b\n", ts(2) + " c\n", ts(3) + " d\n"} {
		if _, err := lw.Write([]byte(w)); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := buf.String(), "s | a\ns | b\ns | c\ns | d\n"; got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
}
