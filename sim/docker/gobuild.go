package docker

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"time"

	"github.com/docker/docker/client"
)

// BuildGoImages compiles each named Go main package under dir into a
// static binary and builds it into a FROM-scratch image through the
// engine's API: no base image, no registry. image names the tag of each
// (the example jobs' tags come from their sources). Progress goes to w.
func BuildGoImages(ctx context.Context, cli *client.Client, dir string, names []string, image func(src string) (string, error), w io.Writer) error {
	arch := engineArch(ctx, cli)
	for _, name := range names {
		src := filepath.Join(dir, name)
		if _, err := os.Stat(filepath.Join(src, "main.go")); err != nil {
			return fmt.Errorf("example %s: no %s", name, filepath.Join(src, "main.go"))
		}
		tag, err := image(src)
		if err != nil {
			return err
		}
		if err := buildGoImage(ctx, cli, arch, tag, src, w); err != nil {
			return err
		}
	}
	return nil
}

// BuildGoImage compiles the Go main package in src statically for the
// engine's architecture and builds it into a FROM-scratch image tag.
func BuildGoImage(ctx context.Context, cli *client.Client, tag, src string, w io.Writer) error {
	return buildGoImage(ctx, cli, engineArch(ctx, cli), tag, src, w)
}

func engineArch(ctx context.Context, cli *client.Client) string {
	if v, err := cli.ServerVersion(ctx); err == nil && v.Arch != "" {
		return v.Arch
	}
	return runtime.GOARCH
}

func buildGoImage(ctx context.Context, cli *client.Client, arch, tag, src string, w io.Writer) error {
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
	if err := BuildScratchImage(ctx, cli, tag, bin); err != nil {
		fmt.Fprintln(w, "failed")
		return fmt.Errorf("build image %s: %w", tag, err)
	}
	fmt.Fprintf(w, "done in %.1fs\n", time.Since(start).Seconds())
	return nil
}
