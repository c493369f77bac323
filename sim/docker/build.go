package docker

import (
	"archive/tar"
	"bytes"
	"cmp"
	"context"
	"debug/elf"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"time"

	"github.com/docker/docker/api/types/build"
	"github.com/docker/docker/client"
)

// entrypointName is what a binary may be called inside an image as is.
var entrypointName = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9_.-]*$`)

// BuildScratchImage builds the image tag FROM scratch with the statically
// linked Linux binary at binaryPath as its only file and its entrypoint.
// The build context is made in memory and sent through the engine's build
// API: no base image, no registry.
func (r *Runtime) BuildScratchImage(ctx context.Context, tag, binaryPath string) error {
	return BuildScratchImage(ctx, r.cli, tag, binaryPath)
}

// BuildScratchImage is Runtime.BuildScratchImage on a client of one's own.
func BuildScratchImage(ctx context.Context, cli *client.Client, tag, binaryPath string) error {
	bin, err := os.ReadFile(binaryPath)
	if err != nil {
		return fmt.Errorf("build image %s: %w", tag, err)
	}
	if err := checkStatic(bin); err != nil {
		return fmt.Errorf("build image %s: %s %w", tag, binaryPath, err)
	}
	name := filepath.Base(binaryPath)
	if !entrypointName.MatchString(name) {
		name = "app"
	}
	dockerfile := fmt.Sprintf("FROM scratch\nCOPY %s /%s\nENTRYPOINT [\"/%s\"]\n", name, name, name)

	var ctxTar bytes.Buffer
	tw := tar.NewWriter(&ctxTar)
	files := []struct {
		name string
		mode int64
		data []byte
	}{
		{"Dockerfile", 0o644, []byte(dockerfile)},
		{name, 0o755, bin},
	}
	// A fixed time keeps the context, and so the build cache, reproducible.
	mtime := time.Unix(0, 0)
	for _, f := range files {
		h := &tar.Header{Name: f.name, Mode: f.mode, Size: int64(len(f.data)), ModTime: mtime, Typeflag: tar.TypeReg}
		if err := tw.WriteHeader(h); err != nil {
			return fmt.Errorf("build image %s: context: %w", tag, err)
		}
		if _, err := tw.Write(f.data); err != nil {
			return fmt.Errorf("build image %s: context: %w", tag, err)
		}
	}
	if err := tw.Close(); err != nil {
		return fmt.Errorf("build image %s: context: %w", tag, err)
	}

	resp, err := cli.ImageBuild(ctx, &ctxTar, build.ImageBuildOptions{
		Tags:        []string{tag},
		Dockerfile:  "Dockerfile",
		Remove:      true,
		ForceRemove: true,
		Labels:      map[string]string{"io.normsim.built-by": "normsim"},
	})
	if err != nil {
		return fmt.Errorf("build image %s: %w", tag, err)
	}
	defer resp.Body.Close()
	// The engine reports a failed step inside a 200 response.
	dec := json.NewDecoder(resp.Body)
	for {
		var msg struct {
			Error       string `json:"error"`
			ErrorDetail struct {
				Message string `json:"message"`
			} `json:"errorDetail"`
		}
		if err := dec.Decode(&msg); errors.Is(err, io.EOF) {
			return nil
		} else if err != nil {
			return fmt.Errorf("build image %s: read progress: %w", tag, err)
		}
		if msg.Error != "" || msg.ErrorDetail.Message != "" {
			return fmt.Errorf("build image %s: %s", tag, cmp.Or(msg.ErrorDetail.Message, msg.Error))
		}
	}
}

// checkStatic refuses what cannot run in an empty image: anything but a
// Linux ELF executable without a dynamic loader.
func checkStatic(bin []byte) error {
	f, err := elf.NewFile(bytes.NewReader(bin))
	if err != nil {
		return errors.New("is not a Linux executable (build it with GOOS=linux CGO_ENABLED=0)")
	}
	defer f.Close()
	if f.Type != elf.ET_EXEC && f.Type != elf.ET_DYN {
		return fmt.Errorf("is an ELF %s, not an executable", f.Type)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return errors.New("is dynamically linked and cannot run FROM scratch (build it with CGO_ENABLED=0)")
		}
	}
	return nil
}
