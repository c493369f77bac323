package app_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/normsim/normsim/internal/bench"
	"github.com/normsim/normsim/internal/testenv"
	"github.com/normsim/normsim/sim"
)

// TestACopyOfAStoreInUseIsRefused (issue 34, the fourth attack's finding
// 4): the lock is on the store file, and a copy of a store in use (its
// -wal with it) is another file with the same owner label, whose recovery
// adopted the first normsim's containers, removed one and, at its exit,
// the rest. A normsim on such a copy is refused while the first runs,
// and starts once it has stopped.
func TestACopyOfAStoreInUseIsRefused(t *testing.T) {
	c := buildChild(t)
	dir := t.TempDir()
	up := func(db string) []string {
		return []string{"up", "--db", db, "--addr", "127.0.0.1:" + strconv.Itoa(testenv.FreePort(t)), "--socket-port", "0",
			"--output-port", "0", "--no-media", "--runtime", sim.RuntimeProcess, "--templates", filepath.Join(c.root, "templates")}
	}
	first := up(filepath.Join(dir, "a.db"))
	cmd, exited, out := c.start(t, first...)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := bench.WaitReady(ctx, "http://"+first[4]+"/readyz"); err != nil {
		t.Fatalf("the first normsim: %v\n%s", err, out.String())
	}
	for _, suffix := range []string{"", "-wal"} {
		data, err := os.ReadFile(filepath.Join(dir, "a.db"+suffix))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "b.db"+suffix), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	_, copyExited, copyOut := c.start(t, up(filepath.Join(dir, "b.db"))...)
	select {
	case <-copyExited:
	case <-time.After(30 * time.Second):
		t.Fatalf("a normsim on a copy of a store in use is running:\n%s", copyOut.String())
	}
	if !strings.Contains(copyOut.String(), "was last opened by a normsim that is still running") {
		t.Fatalf("a normsim on a copy of a store in use said:\n%s", copyOut.String())
	}

	cmd.Process.Signal(syscall.SIGINT)
	<-exited
	second := up(filepath.Join(dir, "b.db"))
	_, _, secondOut := c.start(t, second...)
	if err := bench.WaitReady(ctx, "http://"+second[4]+"/readyz"); err != nil {
		t.Fatalf("the copy once the first normsim stopped: %v\n%s", err, secondOut.String())
	}
}
