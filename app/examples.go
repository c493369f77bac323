package app

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"time"

	"github.com/docker/docker/client"

	"github.com/normsim/normsim/internal/srctag"
	"github.com/normsim/normsim/sim/docker"
)

// ExampleImage is the image the example job in dir is built into:
// normsim/<name> tagged from its sources (srctag), the tag the templates
// name, so two checkouts on one engine keep their own images.
func ExampleImage(ctx context.Context, dir string) (string, error) {
	tag, err := srctag.Of(ctx, dir)
	if err != nil {
		return "", err
	}
	return "normsim/" + filepath.Base(dir) + ":" + tag, nil
}

// ExampleNames lists the example jobs under dir (each a directory with a
// main.go).
func ExampleNames(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("examples: %w", err)
	}
	var names []string
	for _, e := range entries {
		if _, err := os.Stat(filepath.Join(dir, e.Name(), "main.go")); e.IsDir() && err == nil {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	return names, nil
}

// BuildExampleImages compiles each named example under dir into a static
// binary and builds it into a FROM-scratch image through the engine's API:
// no base image, no registry. Progress goes to w.
func BuildExampleImages(ctx context.Context, cli *client.Client, dir string, names []string, w io.Writer) error {
	arch := engineArch(ctx, cli)
	for _, name := range names {
		src := filepath.Join(dir, name)
		if _, err := os.Stat(filepath.Join(src, "main.go")); err != nil {
			return fmt.Errorf("example %s: no %s", name, filepath.Join(src, "main.go"))
		}
		image, err := ExampleImage(ctx, src)
		if err != nil {
			return err
		}
		if err := buildImage(ctx, cli, arch, image, src, w); err != nil {
			return err
		}
	}
	return nil
}

func engineArch(ctx context.Context, cli *client.Client) string {
	if v, err := cli.ServerVersion(ctx); err == nil && v.Arch != "" {
		return v.Arch
	}
	return runtime.GOARCH
}

// BuildImage compiles the Go main package in src statically for the
// engine's architecture and builds it into a FROM-scratch image tag.
func BuildImage(ctx context.Context, cli *client.Client, tag, src string, w io.Writer) error {
	return buildImage(ctx, cli, engineArch(ctx, cli), tag, src, w)
}

func buildImage(ctx context.Context, cli *client.Client, arch, tag, src string, w io.Writer) error {
	work, err := os.MkdirTemp("", "normsim-image-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	start := time.Now()
	fmt.Fprintf(w, "==> %s: go build (linux/%s) ... ", tag, arch)
	bin := filepath.Join(work, filepath.Base(src))
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags=-s -w", "-o", bin, ".")
	cmd.Dir = src
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+arch)
	if out, err := cmd.CombinedOutput(); err != nil {
		fmt.Fprintln(w, "failed")
		return fmt.Errorf("go build of %s: %v\n%s", src, err, out)
	}
	fmt.Fprintf(w, "image ... ")
	if err := docker.BuildScratchImage(ctx, cli, tag, bin); err != nil {
		fmt.Fprintln(w, "failed")
		return fmt.Errorf("build image %s: %w", tag, err)
	}
	fmt.Fprintf(w, "done in %.1fs\n", time.Since(start).Seconds())
	return nil
}
