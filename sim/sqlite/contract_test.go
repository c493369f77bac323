package sqlite_test

import (
	"path/filepath"
	"testing"

	"github.com/normsim/normsim/sim/sqlite"
	"github.com/normsim/normsim/sim/storetest"
)

// TestContract holds the store to the contract every store keeps
// (sim/memstore's too), in memory and in a file: a file store writes
// through the same statements with a journal of its own.
func TestContract(t *testing.T) {
	t.Run("memory", func(t *testing.T) {
		storetest.Run(t, func(t *testing.T) storetest.Store { return MustOpen(t, sqlite.Memory) })
	})
	t.Run("file", func(t *testing.T) {
		storetest.Run(t, func(t *testing.T) storetest.Store { return MustOpen(t, filepath.Join(t.TempDir(), "normsim.db")) })
	})
}
