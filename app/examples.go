package app

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"github.com/normsim/normsim/internal/srctag"
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
