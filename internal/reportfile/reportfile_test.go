package reportfile

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// render returns a write func that writes s.
func render(s string) func(io.Writer) error {
	return func(w io.Writer) error {
		_, err := io.WriteString(w, s)
		return err
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestWriteReplacesFile(t *testing.T) {
	dir := t.TempDir()
	// The parent directory is created: users write --junit reports/junit.xml.
	path := filepath.Join(dir, "reports", "junit.xml")
	if err := Write(path, render("<old/>")); err != nil {
		t.Fatal(err)
	}
	if err := Write(path, render("<new/>")); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, path); got != "<new/>" {
		t.Errorf("content %q, want <new/>", got)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o644 {
		t.Errorf("mode %v, want 0644", fi.Mode().Perm())
	}

	// A rendering that fails halfway leaves the old report and no
	// temporary file.
	boom := errors.New("boom")
	err := Write(path, func(w io.Writer) error {
		io.WriteString(w, "half a report")
		return boom
	})
	if !errors.Is(err, boom) {
		t.Errorf("error %v, want the rendering's", err)
	}
	if got := readFile(t, path); got != "<new/>" {
		t.Errorf("a failed rendering replaced the report with %q", got)
	}
	if entries, _ := os.ReadDir(filepath.Dir(path)); len(entries) != 1 {
		t.Errorf("%d files left, want only junit.xml", len(entries))
	}
}

// TestWriteSymlink: the link's target gets the report and the link stays,
// so a link kept in a workspace keeps pointing where it did.
func TestWriteSymlink(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "real.xml")
	link := filepath.Join(dir, "link.xml")
	os.WriteFile(target, []byte("<old/>"), 0o644)
	if err := os.Symlink("real.xml", link); err != nil {
		t.Fatal(err)
	}
	if err := Write(link, render("<new/>")); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&fs.ModeSymlink == 0 {
		t.Errorf("%s is no longer a symbolic link (%v, %v)", link, fi.Mode(), err)
	}
	if got := readFile(t, target); got != "<new/>" {
		t.Errorf("the link's target holds %q, want <new/>", got)
	}
}

// TestWriteDanglingSymlink: a link to a file not made yet gets it made,
// directories included, where it points.
func TestWriteDanglingSymlink(t *testing.T) {
	dir := t.TempDir()
	link := filepath.Join(dir, "link.xml")
	if err := os.Symlink(filepath.Join("out", "real.xml"), link); err != nil {
		t.Fatal(err)
	}
	if err := Write(link, render("<new/>")); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&fs.ModeSymlink == 0 {
		t.Errorf("%s is no longer a symbolic link (%v, %v)", link, fi.Mode(), err)
	}
	if got := readFile(t, filepath.Join(dir, "out", "real.xml")); got != "<new/>" {
		t.Errorf("the link's target holds %q, want <new/>", got)
	}
}

func TestWriteDirectory(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct{ path, report, want string }{
		{dir, "<?xml version=\"1.0\"?><testsuites/>", "is a directory; give a file path, e.g. " + filepath.Join(dir, "report.xml")},
		{dir + "/", "{}", "is a directory; give a file path, e.g. " + filepath.Join(dir, "report.json")},
		{filepath.Join(dir, "new") + "/", "<!DOCTYPE html><html></html>", "e.g. " + filepath.Join(dir, "new", "report.html")},
	} {
		err := Write(tc.path, render(tc.report))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Write(%s): error %v, want one that says %q", tc.path, err, tc.want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "new")); err == nil {
		t.Errorf("a path ending in / made a directory")
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("%d files left in the directory, want none", len(entries))
	}
}

// TestWriteNotADirectory: an error names no temporary or resolved path,
// only what went wrong; the caller names the path the user gave.
func TestWriteNotADirectory(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	os.WriteFile(file, nil, 0o644)
	err := Write(filepath.Join(file, "junit.xml"), render("<x/>"))
	if !errors.Is(err, syscall.ENOTDIR) || strings.Contains(err.Error(), "/") {
		t.Errorf("error %v, want ENOTDIR naming no path", err)
	}
}

// TestWriteDevice: a character device is written into, not replaced, and
// its write errors are the caller's.
func TestWriteDevice(t *testing.T) {
	if err := Write(os.DevNull, render("<x/>")); err != nil {
		t.Errorf("Write(%s): %v", os.DevNull, err)
	}
	if fi, err := os.Lstat(os.DevNull); err != nil || fi.Mode()&fs.ModeCharDevice == 0 {
		t.Fatalf("%s is no longer a character device (%v, %v)", os.DevNull, fi.Mode(), err)
	}

	const full = "/dev/full"
	if fi, err := os.Stat(full); err != nil || fi.Mode()&fs.ModeCharDevice == 0 {
		t.Skipf("no %s here", full)
	}
	err := Write(full, render("<x/>"))
	if !errors.Is(err, syscall.ENOSPC) {
		t.Errorf("Write(%s): error %v, want ENOSPC", full, err)
	}
	if fi, err := os.Lstat(full); err != nil || fi.Mode()&fs.ModeCharDevice == 0 {
		t.Fatalf("%s is no longer a character device (%v, %v)", full, fi.Mode(), err)
	}
}
