package sqlite_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/normsim/normsim/sim/sqlite"
)

// TestAStoreWithNoRoomSaysSo (round 12): started on a disk with a few
// KiB free, `up` failed with "create schema_migrations: disk I/O error
// (4874)", SQLite's SQLITE_IOERR_SHMSIZE, which names neither the disk
// nor the fix. The open runs in a child process whose files may not grow
// past 16 KiB (RLIMIT_FSIZE: the write fails as on a full disk), and must
// say there is no room, where, and what to do.
func TestAStoreWithNoRoomSaysSo(t *testing.T) {
	if dir := os.Getenv("NORMSIM_TEST_NO_ROOM"); dir != "" {
		signal.Ignore(syscall.SIGXFSZ) // a write past the limit fails instead of killing
		if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &syscall.Rlimit{Cur: 16 << 10, Max: 16 << 10}); err != nil {
			fmt.Println("setrlimit:", err)
			return
		}
		s, err := sqlite.Open(context.Background(), filepath.Join(dir, "n.db"))
		if err == nil {
			s.Close()
		}
		fmt.Println("OPEN:", err)
		return
	}
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestAStoreWithNoRoomSaysSo$")
	cmd.Env = append(os.Environ(), "NORMSIM_TEST_NO_ROOM="+dir)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	got := string(out)
	if !strings.Contains(got, "OPEN:") || strings.Contains(got, "OPEN: <nil>") {
		t.Fatalf("the open with no room did not fail: %s", got)
	}
	for _, want := range []string{"could not make room for the store in " + dir, "free space there, or give --db another path"} {
		if !strings.Contains(got, want) {
			t.Errorf("the open with no room said %q; want it to say %q", strings.TrimSpace(got), want)
		}
	}
}
