package memstore_test

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/normsim/normsim/sim/memstore"
	"github.com/normsim/normsim/sim/storetest"
)

// TestContract holds the store to the contract sim/sqlite's keeps.
func TestContract(t *testing.T) {
	storetest.Run(t, func(t *testing.T) storetest.Store { return memstore.New() })
}

// TestLinksNoSQLite: the point of the package.
func TestLinksNoSQLite(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Skipf("go list: %v", err)
	}
	for _, dep := range strings.Fields(string(out)) {
		if strings.HasPrefix(dep, "modernc.org/") || strings.HasSuffix(dep, "/sim/sqlite") {
			t.Errorf("memstore depends on %s", dep)
		}
	}
}

// TestPathIsMemory: the contract's in-memory facts skip a store whose path
// is a file; a memstore's never is.
func TestPathIsMemory(t *testing.T) {
	if p := memstore.New().Path(); p != ":memory:" {
		t.Fatalf("path %q, want :memory:", p)
	}
}
