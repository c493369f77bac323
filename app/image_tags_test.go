package app_test

import (
	"context"
	"flag"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/normsim/normsim/app"
	"github.com/normsim/normsim/internal/srctag"
)

var pin = flag.Bool("pin", false, "rewrite every reference to an image built from this repository's sources to the tag of those sources")

// sourceImages are the images normsim's files run that are built from its
// own sources: each example job, and the compose parity test's job.
func sourceImages(t *testing.T, root string) map[string]string {
	t.Helper()
	names, err := app.ExampleNames(filepath.Join(root, "examples", "jobs"))
	if err != nil {
		t.Fatal(err)
	}
	dirs := map[string]string{"normsim/compose-parity": filepath.Join(root, "sim", "docker", "testdata", "job")}
	for _, n := range names {
		dirs["normsim/"+n] = filepath.Join(root, "examples", "jobs", n)
	}
	tags := map[string]string{}
	for repo, dir := range dirs {
		tag, err := srctag.Of(context.Background(), dir)
		if err != nil {
			t.Fatal(err)
		}
		tags[repo] = tag
	}
	return tags
}

var imageRef = regexp.MustCompile(`\b(normsim/[a-z0-9][a-z0-9_.-]*):([A-Za-z0-9_][A-Za-z0-9_.-]*)`)

// TestImageTagsMatchSources: every template, test and doc names an image
// built from normsim's sources by the tag of those sources, so a test
// never runs an image that another checkout built from other sources.
// After changing an example job, jobclient or protocol, run
//
//	go test ./app -run TestImageTagsMatchSources -pin
func TestImageTagsMatchSources(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	tags := sourceImages(t, root)
	var stale []string
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != root && (strings.HasPrefix(name, ".") || name == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		switch filepath.Ext(path) {
		case ".yml", ".yaml", ".md", ".go", ".json":
		default:
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		changed := false
		out := imageRef.ReplaceAllStringFunc(string(b), func(ref string) string {
			m := imageRef.FindStringSubmatch(ref)
			want, ok := tags[m[1]]
			if !ok || m[2] == want {
				return ref
			}
			rel, _ := filepath.Rel(root, path)
			stale = append(stale, rel+": "+ref+" (sources: "+want+")")
			changed = true
			return m[1] + ":" + want
		})
		if changed && *pin {
			return os.WriteFile(path, []byte(out), 0o644)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(stale) > 0 && !*pin {
		t.Errorf("%d reference(s) name an image by a tag that is not its sources'; run `go test ./app -run TestImageTagsMatchSources -pin`:\n%s", len(stale), strings.Join(stale, "\n"))
	}
	if *pin {
		t.Logf("pinned %d reference(s)", len(stale))
	}
}
