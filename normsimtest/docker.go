package normsimtest

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"

	"github.com/docker/docker/client"

	"github.com/normsim/normsim/app"
	"github.com/normsim/normsim/internal/testenv"
)

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
			tb.Fatalf("normsimtest: image %s was not built: %v", tag, err)
		}
	}
}

func build(ctx context.Context, tb testing.TB, cli *client.Client, tag, srcDir string) error {
	abs, err := filepath.Abs(srcDir)
	if err != nil {
		return err
	}
	var progress bytes.Buffer
	if err := app.BuildImage(ctx, cli, tag, abs, &progress); err != nil {
		return fmt.Errorf("normsimtest: build image %s from %s: %v\n%s", tag, srcDir, err, progress.String())
	}
	tb.Logf("normsimtest: %s", progress.String())
	return nil
}
