package manager

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/normsim/normsim/sim/sqlite"
	"github.com/normsim/normsim/sim/template"
)

// The parts a manager test builds a Manager from; exported for the
// manager_test package too.

// NewMemStore is a fresh in-memory store, closed when the test ends.
func NewMemStore(tb testing.TB) *sqlite.Store {
	tb.Helper()
	store, err := sqlite.Open(context.Background(), sqlite.Memory)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { store.Close() })
	return store
}

// RepoCatalog is the repository's templates (../../templates).
func RepoCatalog(tb testing.TB) *template.Catalog {
	tb.Helper()
	catalog, err := template.LoadDirs(filepath.Join("..", "..", "templates"))
	if err != nil {
		tb.Fatal(err)
	}
	return catalog
}
