// Package sqlite implements sim.Store on SQLite through modernc.org/sqlite
// (pure Go, no cgo). The schema is a list of embedded, ordered migrations,
// each applied once in its own transaction; files run in WAL mode with
// foreign keys on.
package sqlite
