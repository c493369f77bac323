// Package withsqlite links the SQLite store into a normsim program.
//
// The app package itself links no SQLite: a job author's Go test keeps its
// records in memory and does not pay for SQLite in its build time or binary
// size. The normsim binary keeps its records here, in memory (--db :memory:)
// or in a file; normsimtest/normsimsqlite does the same for Go tests that
// need a store file.
package withsqlite

import (
	"context"

	"github.com/normsim/normsim/app"
	"github.com/normsim/normsim/sim/sqlite"
)

// Open opens the SQLite store at path (app.Memory or a file).
func Open(ctx context.Context, path string, background func(work func())) (app.Store, error) {
	s, err := sqlite.OpenWith(ctx, path, sqlite.Options{Background: background})
	if err != nil {
		return nil, err
	}
	return s, nil
}
