//go:build unix

package reportfile

import (
	"bytes"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// TestWriteFIFO: a FIFO's reader gets the report, more than a pipe's
// buffer of it, and the FIFO stays.
func TestWriteFIFO(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "report.fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	report := bytes.Repeat([]byte("<testcase/>\n"), 64<<10)
	got := make(chan []byte, 1)
	go func() {
		f, err := os.Open(fifo)
		if err != nil {
			got <- nil
			return
		}
		defer f.Close()
		b, _ := io.ReadAll(f)
		got <- b
	}()
	if err := Write(fifo, render(string(report))); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(fifo); err != nil || fi.Mode()&fs.ModeNamedPipe == 0 {
		t.Fatalf("%s is no longer a FIFO (%v, %v)", fifo, fi.Mode(), err)
	}
	select {
	case b := <-got:
		if !bytes.Equal(b, report) {
			t.Errorf("the reader got %d bytes, want the %d of the report", len(b), len(report))
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the reader got nothing")
	}
}
