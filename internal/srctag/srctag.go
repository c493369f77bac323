// Package srctag derives an image tag from the sources of a Go main
// package, so images built from two checkouts on one engine do not
// overwrite each other's: different sources, different tags; the same
// sources, the same image.
package srctag

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

// Prefix starts every tag Of returns.
const Prefix = "src-"

// Of returns the tag of the main package in dir: "src-" and 12 hex digits
// of a SHA-256 over what `go build` compiles from its own module (each
// package's Go and embedded files, by path relative to the module) and the
// module's go.mod and go.sum. Packages of other modules enter through
// go.sum; the toolchain does not enter at all. Files are listed for
// linux/amd64 without cgo, as the images are built.
func Of(ctx context.Context, dir string) (string, error) {
	cmd := exec.CommandContext(ctx, "go", "list", "-deps", "-json=ImportPath,Dir,GoFiles,EmbedFiles,Module", ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOOS=linux", "GOARCH=amd64", "CGO_ENABLED=0")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("source tag of %s: go list: %v: %s", dir, err, strings.TrimSpace(stderr.String()))
	}
	type module struct{ Path, Dir, GoMod string }
	type pkg struct {
		ImportPath, Dir     string
		GoFiles, EmbedFiles []string
		Module              *module
	}
	var pkgs []pkg
	var main *module
	for dec := json.NewDecoder(bytes.NewReader(out)); ; {
		var p pkg
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return "", fmt.Errorf("source tag of %s: go list: %w", dir, err)
		}
		pkgs = append(pkgs, p)
		main = p.Module // the last one listed is the package itself
	}
	if main == nil || main.Dir == "" {
		return "", fmt.Errorf("source tag of %s: not a package of a module", dir)
	}
	h := sha256.New()
	add := func(name, path string) error {
		b, err := os.ReadFile(path)
		if err != nil {
			return fmt.Errorf("source tag of %s: %w", dir, err)
		}
		fmt.Fprintf(h, "%s %d\n", filepath.ToSlash(name), len(b))
		h.Write(b)
		return nil
	}
	for _, name := range []string{"go.mod", "go.sum"} {
		if err := add(name, filepath.Join(main.Dir, name)); err != nil && name == "go.mod" {
			return "", err
		}
	}
	slices.SortFunc(pkgs, func(a, b pkg) int { return strings.Compare(a.ImportPath, b.ImportPath) })
	for _, p := range pkgs {
		if p.Module == nil || p.Module.Path != main.Path {
			continue
		}
		rel, err := filepath.Rel(main.Dir, p.Dir)
		if err != nil {
			return "", fmt.Errorf("source tag of %s: %w", dir, err)
		}
		files := append(slices.Clone(p.GoFiles), p.EmbedFiles...)
		slices.Sort(files)
		for _, f := range files {
			if err := add(filepath.Join(rel, f), filepath.Join(p.Dir, f)); err != nil {
				return "", err
			}
		}
	}
	return Prefix + hex.EncodeToString(h.Sum(nil))[:12], nil
}
