package normsimtest

import (
	"os/exec"
	"strings"
	"testing"
)

// TestRuntimeDockerNeedsNormsimdocker: asking for Docker without linking
// it says how to link it instead of failing on an unknown runtime.
func TestRuntimeDockerNeedsNormsimdocker(t *testing.T) {
	f := &fakeTB{}
	if s := Start(f, Options{Runtime: "docker"}); s != nil {
		t.Fatal("Start returned a simulator without the docker runtime")
	}
	if len(f.failures) != 1 || !strings.Contains(f.failures[0], "normsimdocker.Start(t, opts)") {
		t.Fatalf("failures = %q", f.failures)
	}
	f = &fakeTB{}
	Start(f, Options{Runtime: "podman"})
	if len(f.failures) != 1 || !strings.Contains(f.failures[0], `"podman" is not a runtime`) {
		t.Fatalf("failures = %q", f.failures)
	}
}

// TestStoreFileNeedsNormsimsqlite: a store file without the SQLite store
// linked says how to link it instead of starting with nowhere to keep it.
func TestStoreFileNeedsNormsimsqlite(t *testing.T) {
	f := &fakeTB{}
	if s := Start(f, Options{DB: "normsim.db"}); s != nil {
		t.Fatal("Start returned a simulator without a store for its file")
	}
	if len(f.failures) != 1 || !strings.Contains(f.failures[0], "Store: normsimsqlite.Store()") {
		t.Fatalf("failures = %q", f.failures)
	}
}

// TestLinksNoDockerNorSQLite: a job author's test that uses normsimtest
// (and the job-side packages) links none of Docker's or Compose's SDK, nor
// what they drag in, nor SQLite: their build time, binary size and
// start-up are paid only through normsimdocker and normsimsqlite.
func TestLinksNoDockerNorSQLite(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps",
		"github.com/normsim/normsim/normsimtest",
		"github.com/normsim/normsim/jobclient",
		"github.com/normsim/normsim/protocol").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	heavy := []string{
		"github.com/docker/docker/", "github.com/docker/compose/", "github.com/docker/cli/",
		"github.com/moby/", "github.com/containerd/", "google.golang.org/grpc",
		"go.opentelemetry.io/", "github.com/normsim/normsim/sim/docker",
		"modernc.org/", "github.com/normsim/normsim/sim/sqlite",
	}
	var linked []string
	for _, pkg := range strings.Fields(string(out)) {
		for _, h := range heavy {
			if strings.HasPrefix(pkg, h) {
				linked = append(linked, pkg)
			}
		}
	}
	if len(linked) > 0 {
		t.Fatalf("normsimtest links %d Docker-side or SQLite packages, e.g. %q", len(linked), linked[:min(5, len(linked))])
	}
}
