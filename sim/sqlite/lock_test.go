package sqlite

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/normsim/normsim/sim"
)

// TestSecondOpenOfAStoreIsRefused: while one normsim has a store open, a
// second Open of the same file is refused naming the first; once the
// first closes, it opens.
func TestSecondOpenOfAStoreIsRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "normsim.db")
	first := open(t, path)
	first.SetHolder("pid 4242, dashboard http://127.0.0.1:7788")
	_, err := Open(context.Background(), path)
	if sim.ErrorCode(err) != sim.EConflict || !strings.Contains(err.Error(), "in use by another normsim (pid 4242, dashboard http://127.0.0.1:7788)") {
		t.Fatalf("second open: %v", err)
	}
	first.Close()
	open(t, path) // free again
}

// TestLockOfAKilledHolderIsReleased: a process holding a store's lock that
// is SIGKILLed leaves nothing stuck.
func TestLockOfAKilledHolderIsReleased(t *testing.T) {
	if os.Getenv("NORMSIM_LOCK_HOLDER") != "" {
		if _, err := acquireLock(os.Getenv("NORMSIM_LOCK_HOLDER")); err != nil {
			os.Exit(3)
		}
		os.Stdout.WriteString("locked\n")
		time.Sleep(time.Minute)
		return
	}
	path := filepath.Join(t.TempDir(), "normsim.db")
	cmd := exec.Command(os.Args[0], "-test.run=^TestLockOfAKilledHolderIsReleased$")
	cmd.Env = append(os.Environ(), "NORMSIM_LOCK_HOLDER="+path)
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 7)
	if _, err := out.Read(buf); err != nil || string(buf) != "locked\n" {
		t.Fatalf("holder did not lock: %q %v", buf, err)
	}
	if _, err := Open(context.Background(), path); err == nil || !strings.Contains(err.Error(), "pid "+strconv.Itoa(cmd.Process.Pid)) {
		t.Fatalf("open while held: %v", err)
	}
	cmd.Process.Kill()
	cmd.Wait()
	open(t, path)
}

// TestLockFollowsTheFile (issue 34 item 3): the lock is the file's, not
// its name's: a second normsim that reaches a store in use through a
// symlink or a hard link is refused, and one through the symlink names the
// holder.
func TestLockFollowsTheFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "normsim.db")
	first := open(t, path)
	first.SetHolder("pid 4242")

	symlink := filepath.Join(dir, "via-symlink.db")
	if err := os.Symlink(path, symlink); err != nil {
		t.Fatal(err)
	}
	_, err := Open(context.Background(), symlink)
	if sim.ErrorCode(err) != sim.EConflict || !strings.Contains(err.Error(), "(pid 4242)") {
		t.Fatalf("open through a symlink: %v", err)
	}

	hardlink := filepath.Join(t.TempDir(), "via-hardlink.db")
	if err := os.Link(path, hardlink); err != nil {
		t.Skipf("no hard links here: %v", err)
	}
	_, err = Open(context.Background(), hardlink)
	if sim.ErrorCode(err) != sim.EConflict || !strings.Contains(err.Error(), "in use by another normsim") {
		t.Fatalf("open through a hard link: %v", err)
	}

	first.Close()
	open(t, hardlink) // free again, by any name
}

// TestAStoreIsTheFileItsPathNames (issue 34, the third attack's finding
// 2): SQLite opens its file by URI, where %XX is decoded and "?" or "#"
// ends the path, while the lock was taken on the file as named: a second
// normsim given --db '%73.db' or 's.db?x=1' locked a new empty file and
// opened s.db beside the normsim holding it, then stopped its jobs. Each
// name must open the file it names, and the same file by another
// spelling is refused.
func TestAStoreIsTheFileItsPathNames(t *testing.T) {
	dir := t.TempDir()
	first := open(t, filepath.Join(dir, "s.db"))
	defer first.Close()
	for _, name := range []string{"%73.db", "s.db?x=1", "s.db#x", "%2573.db", "a b.db"} {
		path := filepath.Join(dir, name)
		s, err := Open(context.Background(), path)
		if err != nil {
			t.Fatalf("open %q beside s.db: %v", name, err)
		}
		s.Close()
		if st, err := os.Stat(path); err != nil || st.Size() == 0 {
			t.Errorf("%q: the store was not written to the file it names (%v): SQLite opened another", name, err)
		}
	}
	if _, err := Open(context.Background(), filepath.Join(dir, ".", "s.db")); sim.ErrorCode(err) != sim.EConflict {
		t.Errorf("s.db by another spelling: %v, want it refused as in use", err)
	}
}

// TestAStoreRenamedInUseIsNotOpenedUnderItsOldName (attack round 9a, M1):
// a store renamed while a normsim runs on it leaves its write-ahead log
// under the old name, in use. A second normsim on the old name used to
// take the log as its new file's, truncate it and remove the lock file:
// the first one's records were lost. It is refused, and touches nothing.
func TestAStoreRenamedInUseIsNotOpenedUnderItsOldName(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "s.db")
	first := open(t, path)
	ctx := context.Background()
	if err := first.SaveInstance(ctx, &sim.Instance{ID: "i1", JobID: "j1", Role: "i1", State: sim.InstanceRunning}); err != nil {
		t.Fatal(err)
	}
	wal, err := os.Stat(path + "-wal")
	if err != nil {
		t.Fatalf("no write-ahead log to test with: %v", err)
	}
	moved := filepath.Join(dir, "moved.db")
	if err := os.Rename(path, moved); err != nil {
		t.Fatal(err)
	}
	_, err = Open(ctx, path)
	if sim.ErrorCode(err) != sim.EConflict || !strings.Contains(err.Error(), "renamed or removed while a normsim ran on it") {
		t.Fatalf("open under the old name: %v; want it refused", err)
	}
	if now, err := os.Stat(path + "-wal"); err != nil || now.Size() < wal.Size() {
		t.Fatalf("the first one's log after the refusal: %v, %v; want it as it was (%d bytes)", now, err, wal.Size())
	}
	if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the refused open left a file under the old name: %v", err)
	}
	if err := first.SaveInstance(ctx, &sim.Instance{ID: "i2", JobID: "j2", Role: "i2", State: sim.InstanceRunning}); err != nil {
		t.Fatal(err)
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	// SQLite writes nothing back into a file renamed under it: the
	// records wait in the log under the old name, whole, until the file
	// is named so again.
	if err := os.Rename(moved, path); err != nil {
		t.Fatal(err)
	}
	again := open(t, path)
	defer again.Close()
	for _, id := range []string{"i1", "i2"} {
		if _, err := again.GetInstance(ctx, id); err != nil {
			t.Errorf("%s once the store has its name back: %v", id, err)
		}
	}
}

// TestAStoreNormsimCannotWriteSaysWhatToDo (round 13, B11): a --db that
// is a symlink to a missing directory, or in a directory normsim cannot
// write, was refused as "lock store x.db: open x.db: no such file or
// directory", naming no fix. The refusal says what to do. (A directory
// made read-only cannot refuse root, who runs the tests here: the
// symlink stands for both.)
func TestAStoreNormsimCannotWriteSaysWhatToDo(t *testing.T) {
	dir := t.TempDir()
	dangling := filepath.Join(dir, "dangling.db")
	if err := os.Symlink(filepath.Join(dir, "gone", "x.db"), dangling); err != nil {
		t.Fatal(err)
	}
	_, err := Open(t.Context(), dangling)
	if err == nil || !strings.Contains(err.Error(), "it is a symlink to a path that cannot be opened") {
		t.Errorf("a symlink to a missing directory: %v; want the fix", err)
	}
}
