package app_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	mathrand "math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/docker/cli/cli/command"
	"github.com/docker/cli/cli/flags"
	composeapi "github.com/docker/compose/v5/pkg/api"
	"github.com/docker/compose/v5/pkg/compose"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/client"

	"github.com/normsim/normsim/internal/testenv"
	"github.com/normsim/normsim/normsimtest/normsimdocker"
	"github.com/normsim/normsim/sim"
	"github.com/normsim/normsim/sim/docker"
	"github.com/normsim/normsim/sim/template"
)

// parityImage is the test job (sim/docker/testdata/job), by the tag of its
// sources (TestImageTagsMatchSources), that every file of the
// parity corpus runs: it serves until SIGTERM and `/job health` passes.
const parityImage = "normsim/compose-parity:src-2aa4bd363ec5"

// parityOwner labels what these tests create, so a crashed run's leftovers
// are recognisably theirs.
const parityOwner = "compose-parity-test"

// TestDockerComposeParity launches every compose file under
// testdata/compose twice on the same engine: through normsim (template
// launch, Docker runtime) and, as the reference, through the Compose SDK
// directly on the raw file under another project name. The containers'
// `docker inspect` must agree field by field once project-derived names are
// normalized; only normsim's documented adjustments may differ: the launch
// contract's env, its labels, the host.docker.internal extra host, and a
// container_name made unique (its written name kept as an alias). Each
// file's adjustments must be exactly the ones in its adjustments.txt.
func TestDockerComposeParity(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real containers")
	}
	cli := testenv.RequireDocker(t)
	normsimdocker.BuildJobImage(t, parityImage, filepath.Join("..", "sim", "docker", "testdata", "job"))
	ref := referenceCompose(t)

	rt, err := docker.New(docker.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close(context.Background(), false) })

	cases, err := filepath.Glob(filepath.Join("testdata", "compose", "*", "compose.yml"))
	if err != nil || len(cases) == 0 {
		t.Fatalf("no parity corpus: %v", err)
	}
	for _, file := range cases {
		name := filepath.Base(filepath.Dir(file))
		t.Run(name, func(t *testing.T) {
			dir := copyCase(t, filepath.Dir(file))
			ctx := t.Context()
			suffix := randHex(t)

			// normsim
			l := template.Load(dir)
			if !l.Valid() {
				t.Fatalf("template invalid: %v", l.Problems)
			}
			id := "parity-" + suffix
			spec, err := l.Launch(sim.LaunchInput{
				Instance: &sim.Instance{ID: id, JobID: "job-" + suffix, Role: id, Token: "token"},
				Node:     sim.Node{Name: "a", SocketPort: 6797},
				Runtime:  sim.RuntimeDocker,
			})
			if err != nil {
				t.Fatal(err)
			}
			checkAdjustments(t, filepath.Dir(file), spec.Adjustments)
			for i := range spec.Services {
				spec.Services[i].Labels[sim.LabelOwner] = parityOwner
			}
			if err := rt.Prepare(ctx, spec); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { rt.Stop(context.Background(), id, 0) })
			if err := rt.Start(ctx, id); err != nil {
				t.Fatal(err)
			}
			got := inspectProject(t, cli, spec.Project)
			if _, err := rt.Stop(ctx, id, 0); err != nil {
				t.Fatal(err)
			}

			// the reference: the Compose SDK on the raw file
			refName := "parity-ref-" + suffix
			p, err := ref.LoadProject(ctx, composeapi.ProjectLoadOptions{
				ProjectName: refName, WorkingDir: dir, ConfigPaths: []string{filepath.Join(dir, "compose.yml")}, Offline: true,
			})
			if err != nil {
				t.Fatal(err)
			}
			for n, s := range p.Services { // only so a crashed run's leftovers are found
				s.Labels = s.Labels.Add(docker.LabelManaged, "true").Add(sim.LabelOwner, parityOwner)
				p.Services[n] = s
			}
			downed := false
			t.Cleanup(func() {
				if !downed {
					downReference(ref, refName)
				}
			})
			if err := ref.Up(ctx, p, composeapi.UpOptions{Create: composeapi.CreateOptions{QuietPull: true}}); err != nil {
				t.Fatal(err)
			}
			want := inspectProject(t, cli, refName)
			downReference(ref, refName)
			downed = true

			compareProjects(t, got, want)
		})
	}
}

func referenceCompose(t *testing.T) composeapi.Compose {
	t.Helper()
	dcli, err := command.NewDockerCli(command.WithOutputStream(io.Discard), command.WithErrorStream(io.Discard))
	if err != nil {
		t.Fatal(err)
	}
	if err := dcli.Initialize(flags.NewClientOptions()); err != nil {
		t.Fatal(err)
	}
	svc, err := compose.NewComposeService(dcli, compose.WithPrompt(compose.AlwaysOkPrompt()),
		compose.WithOutputStream(io.Discard), compose.WithErrorStream(io.Discard))
	if err != nil {
		t.Fatal(err)
	}
	return svc
}

func downReference(ref composeapi.Compose, project string) {
	zero := time.Duration(0)
	ref.Down(context.Background(), project, composeapi.DownOptions{Timeout: &zero, Volumes: true, RemoveOrphans: true})
}

func randHex(t *testing.T) string {
	b := make([]byte, 4)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// copyCase copies a corpus directory into a template directory with a
// minimal manifest, so both runs resolve relative paths against one place.
func copyCase(t *testing.T, src string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), filepath.Base(src))
	err := os.CopyFS(dir, os.DirFS(src))
	if err != nil {
		t.Fatal(err)
	}
	movePublishedPorts(t, filepath.Join(dir, "compose.yml"))
	manifest := `{"productTemplateSchemaVersion": 1, "productName": "parity", "productVersion": "1", "generatedAt": "2026-01-01T00:00:00Z", "target": "docker-compose"}`
	if err := os.WriteFile(filepath.Join(dir, "manifest.json"), []byte(manifest), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// fixedHostPort is a published port written with its host port:
// IP:HOST:CONTAINER.
var fixedHostPort = regexp.MustCompile(`\b(\d+\.\d+\.\d+\.\d+):(\d+):(\d+)\b`)

// movePublishedPorts moves each fixed host port of a copied case to one
// free below Linux's ephemeral range (32768 and up): inside it, an
// outgoing connection of a test running alongside (the e2e tests, a
// bench) may hold the corpus's port, and the bind fails. Both launches
// run the copy, so they still publish the same port.
func movePublishedPorts(t *testing.T, file string) {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	moved := fixedHostPort.ReplaceAllStringFunc(string(b), func(m string) string {
		p := fixedHostPort.FindStringSubmatch(m)
		return p[1] + ":" + strconv.Itoa(freePortBelowEphemeral(t, p[1])) + ":" + p[3]
	})
	if err := os.WriteFile(file, []byte(moved), 0o644); err != nil {
		t.Fatal(err)
	}
}

func freePortBelowEphemeral(t *testing.T, ip string) int {
	t.Helper()
	for range 200 {
		port := 20000 + mathrand.IntN(12768)
		l, err := net.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(port)))
		if err == nil {
			l.Close()
			return port
		}
	}
	t.Fatalf("no free port on %s between 20000 and 32767", ip)
	return 0
}

// checkAdjustments compares what normsim said it adjusted with the case's
// adjustments.txt (one per line; no file: none), <project> standing for the
// instance's project name.
func checkAdjustments(t *testing.T, caseDir string, got []string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(caseDir, "adjustments.txt"))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var want []string
	for l := range strings.SplitSeq(strings.TrimSpace(string(b)), "\n") {
		if l != "" {
			want = append(want, l)
		}
	}
	norm := regexp.MustCompile(`normsim-parity-[0-9a-f]{8}`)
	var gotN []string
	for _, g := range got {
		gotN = append(gotN, norm.ReplaceAllString(g, "<project>"))
	}
	if !slices.Equal(gotN, want) {
		t.Errorf("adjustments:\n%s\nwant (adjustments.txt):\n%s", strings.Join(gotN, "\n"), strings.Join(want, "\n"))
	}
}

// inspectProject is `docker inspect` of every container of a compose
// project, keyed by the container's name with the project's prefix cut,
// each reduced to the fields that say how it runs and normalized: the
// project's name removed from names, container IDs replaced by the name of
// their container, lists whose order means nothing sorted.
func inspectProject(t *testing.T, cli *client.Client, project string) map[string]map[string]any {
	t.Helper()
	ctx := context.Background()
	list, err := cli.ContainerList(ctx, container.ListOptions{All: true, Filters: filters.NewArgs(
		filters.Arg("label", composeapi.ProjectLabel+"="+project))})
	if err != nil {
		t.Fatal(err)
	}
	if len(list) == 0 {
		t.Fatalf("project %s has no containers", project)
	}
	var inspected []container.InspectResponse
	ids := map[string]string{}
	strip := func(s string) string {
		s = strings.TrimPrefix(s, "/")
		s = strings.ReplaceAll(s, project+"-", "")
		s = strings.ReplaceAll(s, project+"_", "")
		return strings.ReplaceAll(s, project, "<project>")
	}
	for _, c := range list {
		in, err := cli.ContainerInspect(ctx, c.ID)
		if err != nil {
			t.Fatal(err)
		}
		inspected = append(inspected, in)
		ids[in.ID] = strip(in.Name)
	}
	out := map[string]map[string]any{}
	for _, in := range inspected {
		view := map[string]any{
			"Config": map[string]any{
				"Hostname": in.Config.Hostname, "Domainname": in.Config.Domainname, "User": in.Config.User,
				"Env": contractless(in.Config.Env), "Cmd": in.Config.Cmd, "Entrypoint": in.Config.Entrypoint,
				"Image": in.Config.Image, "WorkingDir": in.Config.WorkingDir, "Labels": userLabels(in.Config.Labels),
				"Healthcheck": in.Config.Healthcheck, "ExposedPorts": in.Config.ExposedPorts, "StopSignal": in.Config.StopSignal,
				"Tty": in.Config.Tty, "OpenStdin": in.Config.OpenStdin,
			},
			"HostConfig": in.HostConfig,
			"Mounts":     in.Mounts,
		}
		nets := map[string]any{}
		for n, e := range in.NetworkSettings.Networks {
			nets[n] = map[string]any{"Aliases": e.Aliases, "DNSNames": e.DNSNames, "Links": e.Links, "IPAMConfig": e.IPAMConfig, "DriverOpts": e.DriverOpts}
		}
		view["Networks"] = nets
		b, err := json.Marshal(view)
		if err != nil {
			t.Fatal(err)
		}
		var generic map[string]any
		if err := json.Unmarshal(b, &generic); err != nil {
			t.Fatal(err)
		}
		out[ids[in.ID]], _ = normalize(generic, "", func(s string) string {
			for id, name := range ids {
				s = strings.ReplaceAll(s, id, "<"+name+">")
				s = strings.ReplaceAll(s, id[:12], "<"+name+">")
			}
			return strip(s)
		}).(map[string]any)
	}
	return out
}

// contractless drops the launch contract's env: the documented injection.
func contractless(env []string) []string {
	var out []string
	for _, e := range env {
		k, _, _ := strings.Cut(e, "=")
		switch {
		case k == template.EnvWorkerURL, k == template.EnvWorkerToken, k == template.EnvAllocatedPorts, k == template.EnvStudioAccess,
			strings.HasPrefix(k, "NORMSIM_"):
			continue
		}
		out = append(out, e)
	}
	return out
}

// userLabels drops compose's and normsim's labels, both project-derived.
func userLabels(l map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range l {
		if !strings.HasPrefix(k, "com.docker.compose.") && !strings.HasPrefix(k, "io.normsim.") {
			out[k] = v
		}
	}
	return out
}

// normalize rewrites every string with fix, sorts (and dedupes) the lists
// whose order Docker does not keep, and drops the extra host normsim adds.
func normalize(v any, key string, fix func(string) string) any {
	switch t := v.(type) {
	case string:
		return fix(t)
	case map[string]any:
		if len(t) == 0 {
			// An empty object is no setting: normsim hands compose an
			// empty network config where it adds an alias, and compose
			// passes {} where the reference passes null.
			return nil
		}
		out := map[string]any{}
		for k, e := range t {
			out[fix(k)] = normalize(e, k, fix)
		}
		return out
	case []any:
		var out []any
		for _, e := range t {
			if s, ok := e.(string); ok && key == "ExtraHosts" && strings.HasPrefix(s, template.ContainerHost) {
				continue
			}
			out = append(out, normalize(e, key, fix))
		}
		switch key {
		case "Aliases", "DNSNames", "Env", "ExtraHosts", "Mounts", "Binds", "CapAdd", "CapDrop", "SecurityOpt", "Ulimits":
			sort.Slice(out, func(i, j int) bool { return fmt.Sprint(out[i]) < fmt.Sprint(out[j]) })
			out = slices.CompactFunc(out, func(a, b any) bool { return fmt.Sprint(a) == fmt.Sprint(b) })
		}
		return out
	}
	return v
}

// compareProjects reports each container and field where normsim's run
// differs from the reference.
func compareProjects(t *testing.T, got, want map[string]map[string]any) {
	t.Helper()
	names := func(m map[string]map[string]any) []string {
		var n []string
		for k := range m {
			n = append(n, k)
		}
		sort.Strings(n)
		return n
	}
	if !slices.Equal(names(got), names(want)) {
		t.Fatalf("containers: normsim %v, compose %v", names(got), names(want))
	}
	for _, name := range names(want) {
		diffFields(t, name, "", got[name], want[name])
	}
}

func diffFields(t *testing.T, ctr, path string, got, want any) {
	t.Helper()
	gm, gok := got.(map[string]any)
	wm, wok := want.(map[string]any)
	if gok && wok {
		keys := map[string]bool{}
		for k := range gm {
			keys[k] = true
		}
		for k := range wm {
			keys[k] = true
		}
		for _, k := range slices.Sorted(func(yield func(string) bool) {
			for k := range keys {
				if !yield(k) {
					return
				}
			}
		}) {
			diffFields(t, ctr, path+"."+k, gm[k], wm[k])
		}
		return
	}
	gb, _ := json.Marshal(got)
	wb, _ := json.Marshal(want)
	if string(gb) != string(wb) {
		t.Errorf("%s%s:\n  normsim %s\n  compose %s", ctr, path, gb, wb)
	}
}

// TestDockerComposeRefused: a compose key the engine refuses fails the
// launch with the engine's words naming the service, and leaves nothing
// running; Stop then removes everything.
func TestDockerComposeRefused(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real containers")
	}
	cli := testenv.RequireDocker(t)
	normsimdocker.BuildJobImage(t, parityImage, filepath.Join("..", "sim", "docker", "testdata", "job"))
	rt, err := docker.New(docker.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close(context.Background(), false) })
	tests := []struct {
		name, compose string
		want          []string // in the error
	}{
		{"capability", "services:\n  ok:\n    image: " + parityImage + "\n  bad:\n    image: " + parityImage + "\n    cap_add: [NOT_A_CAPABILITY]\n",
			[]string{`service "bad"`, "NOT_A_CAPABILITY"}},
		{"sysctl", "services:\n  ok:\n    image: " + parityImage + "\n  bad:\n    image: " + parityImage + "\n    sysctls: {vm.swappiness: 10}\n    depends_on: [ok]\n",
			[]string{`service "bad"`, "vm.swappiness"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			os.WriteFile(filepath.Join(dir, "compose.yml"), []byte(tt.compose), 0o644)
			dir = copyCase(t, dir)
			l := template.Load(dir)
			if !l.Valid() {
				t.Fatalf("template invalid: %v", l.Problems)
			}
			id := "parity-bad-" + randHex(t)
			spec, err := l.Launch(sim.LaunchInput{Instance: &sim.Instance{ID: id, JobID: id, Role: id, Token: "t"},
				Node: sim.Node{Name: "a", SocketPort: 6797}, Runtime: sim.RuntimeDocker})
			if err != nil {
				t.Fatal(err)
			}
			for i := range spec.Services {
				spec.Services[i].Labels[sim.LabelOwner] = parityOwner
			}
			t.Cleanup(func() { rt.Stop(context.Background(), id, 0) })
			err = rt.Prepare(t.Context(), spec)
			if err == nil {
				err = rt.Start(t.Context(), id)
			}
			if err == nil {
				t.Fatal("launch succeeded")
			}
			t.Logf("launch: %v", err)
			if sim.ErrorCode(err) != sim.EUnprocessable {
				t.Errorf("code %s, want %s: %v", sim.ErrorCode(err), sim.EUnprocessable, err)
			}
			for _, w := range tt.want {
				if !strings.Contains(sim.ErrorMessage(err), w) {
					t.Errorf("error %q does not name %s", sim.ErrorMessage(err), w)
				}
			}
			f := filters.NewArgs(filters.Arg("label", sim.LabelInstance+"="+id))
			running, err := cli.ContainerList(context.Background(), container.ListOptions{Filters: f})
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range running {
				t.Errorf("container %s still running after the failed launch", c.Names)
			}
			if _, err := rt.Stop(context.Background(), id, 0); err != nil {
				t.Fatal(err)
			}
			all, _ := cli.ContainerList(context.Background(), container.ListOptions{All: true, Filters: f})
			for _, c := range all {
				t.Errorf("container %s left after Stop", c.Names)
			}
		})
	}
}
