// Package normsimsqlite gives a normsimtest simulator normsim's SQLite
// store, for a test that keeps its records in a file (across a restart of
// the simulator, say):
//
//	s := normsimtest.Start(t, normsimtest.Options{DB: filepath.Join(t.TempDir(), "normsim.db"), Store: normsimsqlite.Store()})
//
// normsimtest alone keeps its records in memory and links no SQLite, so a
// job author's test builds faster and smaller.
package normsimsqlite

import (
	"github.com/normsim/normsim/app"
	"github.com/normsim/normsim/app/withsqlite"
)

// Store opens normsim's SQLite store, in a file or in memory.
func Store() app.StoreOpener { return withsqlite.Open }
