//go:build unix

package sqlite

import (
	"context"
	"path/filepath"
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
