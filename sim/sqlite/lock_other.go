//go:build !unix

package sqlite

import "os"

// Elsewhere a store is not locked: two normsims on one store are not
// stopped from meeting (docs/contract-choices.md).
func tryLock(*os.File) error { return nil }

func unlock(*os.File) {}
