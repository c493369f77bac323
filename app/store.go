package app

import (
	"context"
	"fmt"

	"github.com/normsim/normsim/sim"
)

// Memory is the store path that keeps nothing: records live as long as
// the process (--db :memory:).
const Memory = ":memory:"

// Store is what a sim needs of its store (sim.RecordStore).
type Store = sim.RecordStore

// StoreOpener opens the store at path (Memory or a file). background runs
// start-up work nothing waits for until the first query.
type StoreOpener func(ctx context.Context, path string, background func(work func())) (Store, error)

// openStore opens the configured store. Without an opener, a program keeps
// its records in memory (normsimtest) and cannot open a file: the SQLite
// store is linked by the normsim binary (app/withsqlite), not by app.
func (m *Main) openStore(ctx context.Context, background func(func())) (Store, error) {
	if m.Opts.OpenStore != nil {
		return m.Opts.OpenStore(ctx, m.Opts.DB, background)
	}
	if m.Opts.DB != Memory {
		return nil, fmt.Errorf("store %s: this program keeps its records in memory only; a store file needs the SQLite store (app/withsqlite; for a Go test, normsimtest/normsimsqlite)", m.Opts.DB)
	}
	return newMemoryStore(), nil
}
