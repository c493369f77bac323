package reportfile

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// TestWriteOwnDescriptor: a path to one of the process's own descriptors
// (what /dev/stdout leads to) is written at the descriptor's offset, so
// output before and after the report keeps its order, even when the
// descriptor is a regular file.
func TestWriteOwnDescriptor(t *testing.T) {
	path := filepath.Join(t.TempDir(), "stdout.txt")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	f.WriteString("before\n")
	if err := Write(fmt.Sprintf("/proc/self/fd/%d", f.Fd()), render("<report/>\n")); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString("after\n"); err != nil {
		t.Fatalf("the descriptor no longer takes writes: %v", err)
	}
	if got, want := readFile(t, path), "before\n<report/>\nafter\n"; got != want {
		t.Errorf("the file holds %q, want %q", got, want)
	}
	if fi, err := os.Lstat(path); err != nil || !fi.Mode().IsRegular() {
		t.Errorf("%s is not the file it was (%v)", path, err)
	}
}
