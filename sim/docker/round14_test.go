// The Docker tests of issue 34's round 14 findings (B1, B5). Each is
// named TestRound14…, so that one command runs them all:
//
//	go test -run Round14 ./sim/docker/
//
// TestRound14CommandRunsEveryTest holds the names and this command to
// each other.

package docker_test

import (
	"context"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/docker/docker/client"

	"github.com/normsim/normsim/sim"
	"github.com/normsim/normsim/sim/template"
)

// launchTemplate loads a template made of compose (the test image as
// ${IMAGE}) and the manifest, and applies the launch contract for the
// Docker runtime, as the manager does; the instance is removed when the
// test ends.
func launchTemplate(t *testing.T, cli *client.Client, img, compose string) *sim.LaunchSpec {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "tpl")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	manifest := `{"productTemplateSchemaVersion":1,"productName":"tpl","productVersion":"0.1.0","generatedAt":"2025-01-01T00:00:00Z","target":"docker-compose","migration":{"strategy":"handover"}}`
	compose = strings.ReplaceAll(compose, "${IMAGE}", img)
	for name, content := range map[string]string{"manifest.json": manifest, "compose.yml": compose} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	l := template.Load(dir)
	if !l.Valid() {
		t.Fatalf("template invalid: %+v", l.Problems)
	}
	id := "t" + randomID()
	spec, err := l.Launch(sim.LaunchInput{
		Instance: &sim.Instance{ID: id, JobID: "job-" + id, Role: "role-a"},
		Node:     sim.Node{Name: "node-1"},
		Runtime:  sim.RuntimeDocker,
		PortFree: func(int, string) bool { return true },
	})
	if err != nil {
		t.Fatalf("launch: %v", err)
	}
	t.Cleanup(func() { removeInstance(t, cli, id) })
	return spec
}

// runsApp launches the template made of compose (see launchTemplate) on
// a fresh runtime, prepares and starts it, wants its service app running,
// and stops it, leaving nothing behind.
func runsApp(t *testing.T, compose string) {
	t.Helper()
	img, cli := mustJobImage(t)
	r, _ := newRuntime(t)
	spec := launchTemplate(t, cli, img, compose)
	prepareStart(t, r, spec)
	if s := state(t, cli, spec.Project+"-app-1"); !s.Running {
		t.Errorf("app is %s, want running", s.Status)
	}
	stopGone(t, r, cli, spec.InstanceID, 0)
}

// Issue 34 round 14, B1: app depends on db with required: false, and db
// runs only with a profile. normsim validate said ok and every launch was
// refused ("depends on db, which is no service of the file"); docker
// compose up starts app without db, and so does normsim now.
func TestRound14OptionalDependencyOnAProfiledServiceRuns(t *testing.T) {
	runsApp(t, `
services:
  app:
    image: ${IMAGE}
    depends_on:
      db:
        condition: service_started
        required: false
  db:
    image: ${IMAGE}
    profiles: [extra]
`)
}

// Issue 34 round 14, B5: pull_policy: always made a launch try the
// registry, and fail with a DNS error naming neither the key nor the fix,
// against "images are never pulled". The engine's image runs.
func TestRound14PullPolicyAlwaysRunsTheEnginesImage(t *testing.T) {
	runsApp(t, `
services:
  app:
    image: ${IMAGE}
    pull_policy: always
`)
}

// Issue 34 round 14, B5: a platform: the engine's image is not for made
// compose pull one for it (a DNS error). It is IMAGE_MISSING naming the
// key, the image's platform and the fix, with nothing created; the
// image's own platform runs.
func TestRound14PlatformTheImageIsNotForIsNamed(t *testing.T) {
	img, cli := mustJobImage(t)
	r, _ := newRuntime(t)
	ctx := context.Background()
	v, err := cli.ServerVersion(ctx)
	if err != nil {
		t.Fatal(err)
	}
	other := "linux/arm64"
	if v.Arch == "arm64" {
		other = "linux/amd64"
	}
	spec := launchTemplate(t, cli, img, `
services:
  app:
    image: ${IMAGE}
    platform: `+other+`
`)
	err = r.Prepare(ctx, spec)
	wantCode(t, err, sim.EImageMissing)
	for _, want := range []string{"services.app.platform: \"" + other + "\"", "is for linux/" + v.Arch, "never pulls", "remove platform"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	assertGone(t, cli, spec.InstanceID)

	spec = launchTemplate(t, cli, img, `
services:
  app:
    image: ${IMAGE}
    platform: linux/`+v.Arch+`
`)
	// The image's own platform runs.
	prepareStart(t, r, spec)
	stopGone(t, r, cli, spec.InstanceID, 0)
}

// The command the file's comment documents runs every test of the file:
// it matched none of them while the tests had no common name.
func TestRound14CommandRunsEveryTest(t *testing.T) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "round14_test.go", nil, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	cmd := regexp.MustCompile(`go test -run (\S+) \./sim/docker/`).FindStringSubmatch(f.Comments[0].Text())
	if cmd == nil {
		t.Fatalf("round14_test.go's first comment documents no go test -run … ./sim/docker/ command:\n%s", f.Comments[0].Text())
	}
	run := regexp.MustCompile(cmd[1]) // go test -run's pattern is a regexp
	n := 0
	for _, d := range f.Decls {
		fn, ok := d.(*ast.FuncDecl)
		if !ok || fn.Recv != nil || !strings.HasPrefix(fn.Name.Name, "Test") {
			continue
		}
		n++
		if !run.MatchString(fn.Name.Name) {
			t.Errorf("%s is not run by the documented go test -run %s", fn.Name.Name, cmd[1])
		}
	}
	if n < 2 {
		t.Errorf("round14_test.go has %d tests", n)
	}
}
