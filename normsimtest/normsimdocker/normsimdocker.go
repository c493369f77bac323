// Package normsimdocker runs normsimtest's simulator with the Docker
// runtime, and builds a Go job into the FROM-scratch image its template
// names. It is its own package so that a test that runs jobs as host
// processes (normsimtest alone) links none of Docker's SDK.
//
//	ref := normsimdocker.BuildSourceImage(t, "example/myjob", "./cmd/myjob")
//	s := normsimdocker.Start(t, normsimtest.Options{Templates: []string{"./templates"}})
package normsimdocker

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"

	"github.com/docker/docker/client"

	"github.com/normsim/normsim/app"
	"github.com/normsim/normsim/app/withdocker"
	"github.com/normsim/normsim/internal/srctag"
	"github.com/normsim/normsim/internal/testenv"
	"github.com/normsim/normsim/normsimtest"
	"github.com/normsim/normsim/sim"
	"github.com/normsim/normsim/sim/docker"
)

// Start runs a simulator for the rest of the test with the Docker runtime
// linked and, unless o.Runtime says otherwise, the default: it skips the
// test when no Docker engine answers (fails with NORMSIM_REQUIRE_DOCKER=1).
func Start(tb testing.TB, o normsimtest.Options) *normsimtest.Sim {
	tb.Helper()
	testenv.RequireDocker(tb)
	if o.Runtime == "" {
		o.Runtime = sim.RuntimeDocker
	}
	o.Runtimes = append(o.Runtimes, Runtime())
	return normsimtest.Start(tb, o)
}

// Runtime is the Docker runtime, for normsimtest.Options.Runtimes.
func Runtime() app.RuntimeFactory { return withdocker.Runtime() }

// built remembers the images this test process built, so each is rebuilt
// from source once per `go test` run (never stale, never twice).
var built sync.Map

// BuildJobImage builds the Go job in srcDir (a main package) into a
// FROM-scratch image tagged tag, once per test process. It skips
// the test when no Docker engine answers (fails with
// NORMSIM_REQUIRE_DOCKER=1). Use it to run your own job on the Docker
// runtime: its template's compose.yml names the same tag.
func BuildJobImage(tb testing.TB, tag, srcDir string) {
	tb.Helper()
	cli := testenv.RequireDocker(tb)
	ctx := context.Background()
	once, _ := built.LoadOrStore(tag, &sync.Once{})
	var buildErr error
	ran := false
	once.(*sync.Once).Do(func() {
		ran = true
		buildErr = build(ctx, tb, cli, tag, srcDir)
	})
	if buildErr != nil {
		tb.Fatal(buildErr)
	}
	if !ran {
		if _, err := cli.ImageInspect(ctx, tag); err != nil {
			tb.Fatalf("normsimdocker: image %s was not built: %v", tag, err)
		}
	}
}

// BuildSourceImage builds the Go job in srcDir into repo tagged from its
// sources ("src-" and 12 hex digits over the module's packages it compiles,
// go.mod and go.sum) and returns the image reference, once per test
// process. The same sources give the same tag on every machine, and two
// checkouts of different sources on one engine keep their own images; the
// job's template names the returned reference.
func BuildSourceImage(tb testing.TB, repo, srcDir string) string {
	tb.Helper()
	testenv.RequireDocker(tb)
	abs, err := filepath.Abs(srcDir)
	if err != nil {
		tb.Fatal(err)
	}
	// go list once per directory and test process, like the build.
	v, _ := tags.LoadOrStore(abs, sync.OnceValues(func() (string, error) { return srctag.Of(context.Background(), abs) }))
	tag, err := v.(func() (string, error))()
	if err != nil {
		tb.Fatal(err)
	}
	ref := repo + ":" + tag
	BuildJobImage(tb, ref, srcDir)
	return ref
}

// tags remembers the source tag of each job directory this test process
// asked for.
var tags sync.Map

func build(ctx context.Context, tb testing.TB, cli *client.Client, tag, srcDir string) error {
	abs, err := filepath.Abs(srcDir)
	if err != nil {
		return err
	}
	var progress bytes.Buffer
	if err := docker.BuildGoImage(ctx, cli, tag, abs, &progress); err != nil {
		return fmt.Errorf("normsimdocker: build image %s from %s: %v\n%s", tag, srcDir, err, progress.String())
	}
	tb.Logf("normsimdocker: %s", progress.String())
	return nil
}
