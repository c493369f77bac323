package app

import "github.com/normsim/normsim/sim/memstore"

// newMemoryStore is the store of a program that links no SQLite
// (normsimtest): the same records, in memory (sim/storetest holds both
// stores to one contract).
func newMemoryStore() Store { return memstore.New() }
