package wired_test

import (
	"path/filepath"
	"testing"

	"github.com/normsim/normsim/sim/memstore"
	"github.com/normsim/normsim/sim/template"
)

// newMemStore is a fresh store in memory, closed when the test ends.
func newMemStore(tb testing.TB) *memstore.Store {
	tb.Helper()
	store := memstore.New()
	tb.Cleanup(func() { store.Close() })
	return store
}

// repoCatalog is the repository's templates.
func repoCatalog(tb testing.TB) *template.Catalog {
	tb.Helper()
	catalog, err := template.LoadDirs(tb.Context(), filepath.Join("..", "..", "..", "templates"))
	if err != nil {
		tb.Fatal(err)
	}
	return catalog
}
