// Package withsqlite links the SQLite store into a normsim program.
//
// The app package itself links no SQLite: a job author's Go test keeps its
// records in memory and does not pay for SQLite in its build time or binary
// size. The normsim binary keeps its records in a file here; with
// --db :memory: it keeps them in sim/memstore, which sim/storetest holds
// to the same contract: SQLite's rollback journal was a third of the
// sim's CPU at 10,000 jobs, and its writes fell behind the handovers,
// holding every ended migration's timeline in memory until they caught
// up (docs/benchmarks.md, section 7). normsimtest/normsimsqlite does the
// same for Go tests that need a store file.
package withsqlite

import (
	"context"

	"github.com/normsim/normsim/app"
	"github.com/normsim/normsim/sim/memstore"
	"github.com/normsim/normsim/sim/sqlite"
)

// Open opens the store at path: a SQLite file, or app.Memory.
func Open(ctx context.Context, path string, background func(work func())) (app.Store, error) {
	if path == app.Memory {
		return memstore.New(), nil
	}
	s, err := sqlite.OpenWith(ctx, path, sqlite.Options{Background: background})
	if err != nil {
		return nil, err
	}
	return s, nil
}
