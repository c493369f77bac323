// Package storetest is the contract every normsim store keeps: what a
// caller of sim/sqlite's store sees (the product's reference) and of
// sim/memstore's (what normsimtest runs on), so that the two behave the
// same. A store's tests call Run.
//
// Behaviour about files, locks, schema migrations and damage is a file
// store's alone and is tested in sim/sqlite.
package storetest

import (
	"context"
	"testing"

	"github.com/normsim/normsim/sim"
)

// Store is what the contract tests of a store: what a sim needs of it
// (sim.RecordStore), and the path, batches and bounds.
type Store interface {
	sim.RecordStore
	Path() string
	Batch(ctx context.Context, fn func(ctx context.Context)) error
	SetFrameLimits(l sim.FrameLimits)
	SetEventLimits(l sim.EventLimits)
	SetLogLimits(l sim.LogLimits)
}

// Opener opens a new, empty store with the default bounds. Each test
// closes the stores it opens (some more than once).
type Opener func(t *testing.T) Store

// test is one contract test: it opens the stores it needs with open.
type test struct {
	name string
	run  func(t *testing.T, open Opener)
}

// Run runs every contract test on the stores open opens.
func Run(t *testing.T, open Opener) {
	opened := func(t *testing.T) Store {
		t.Helper()
		s := open(t)
		t.Cleanup(func() { s.Close() })
		return s
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.run(t, opened) })
	}
}

// tests are the contract, by the part of the store they are about.
var tests = concat(recordTests, batchTests, migrationTests, eventTests, frameTests, logTests, captureTests, pruneTests, storeTests)

func concat(lists ...[]test) []test {
	var out []test
	for _, l := range lists {
		out = append(out, l...)
	}
	return out
}
