//go:build unix

package sqlite

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A FIFO given as --db failed with "disk I/O error (10)", after its lock
// opened it; it is refused before anything opens it, so nothing blocks on
// it either.
func TestOpenRefusesAFIFO(t *testing.T) {
	path := filepath.Join(t.TempDir(), "fifo.db")
	if err := syscall.Mkfifo(path, 0o644); err != nil {
		t.Skipf("no FIFO here: %v", err)
	}
	opened := make(chan error, 1)
	go func() {
		s, err := Open(context.Background(), path)
		if err == nil {
			s.Close()
		}
		opened <- err
	}()
	select {
	case err := <-opened:
		if want := "--db " + path + ": is a named pipe, not a file; give a new file or a normsim store"; err == nil || err.Error() != want {
			t.Fatalf("error = %v\nwant    %s", err, want)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Open blocked on a FIFO")
	}
}

// What sits where a store keeps its files beside it is not written over:
// a named pipe where the marks go hung the start for good, and /dev/zero
// behind them ran it out of memory (issue 34 round 11, B8 and B9).
func TestMarksFileThatIsNotOneIsRefused(t *testing.T) {
	for _, tt := range []struct {
		name string
		make func(path string) error
		want string
	}{
		{"a named pipe", func(p string) error { return syscall.Mkfifo(p, 0o644) }, "is a named pipe, not normsim's point-of-no-return marks file"},
		{"a link to /dev/zero", func(p string) error { return os.Symlink("/dev/zero", p) }, "is a symbolic link, not normsim's point-of-no-return marks file"},
		{"a directory", func(p string) error { return os.Mkdir(p, 0o755) }, "is a directory, not normsim's point-of-no-return marks file"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "normsim.db")
			if err := tt.make(marksPath(path)); err != nil {
				t.Skipf("cannot make it here: %v", err)
			}
			done := make(chan error, 1)
			go func() {
				s, err := Open(context.Background(), path)
				if err == nil {
					s.Close()
				}
				done <- err
			}()
			select {
			case err := <-done:
				if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "remove it") {
					t.Fatalf("Open: %v; want it refused with %q and the fix", err, tt.want)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("Open blocked")
			}
			if _, err := os.Lstat(marksPath(path)); err != nil {
				t.Fatalf("what was there is gone: %v", err)
			}
		})
	}
}
