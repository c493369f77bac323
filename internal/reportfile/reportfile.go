// Package reportfile writes a report (JUnit, JSON, HTML) to the path a
// flag such as --junit names. A file is replaced whole, through a
// temporary file renamed into place, so a reader (a CI upload, a browser
// reloading) never sees half a report and a failed write leaves the old
// one. A device, a FIFO or a descriptor (/dev/stdout, /dev/fd/3) is a
// stream the user set up: the report is written into it, never renamed
// over it.
package reportfile

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// maxLinks is how many symbolic links resolve follows before giving up,
// as Linux does (MAXSYMLINKS).
const maxLinks = 40

// Write renders a report with write and puts it at path:
//   - a regular file, or nothing yet: replaced atomically (mode 0644,
//     synced), its missing parent directories created;
//   - a symbolic link: followed, and its target replaced (a dangling
//     link's target created); the link itself stays;
//   - a device, FIFO or other non-regular file, or a file in /proc
//     (where /dev/stdout leads): written through, and a write error such
//     as ENOSPC from /dev/full returned;
//   - a directory: an error that asks for a file path.
//
// The report is rendered in full first, so a rendering that fails writes
// nothing anywhere. Errors do not repeat path (only a failed mkdir names
// its directory): callers name it as the user gave it, with the flag that
// gave it.
func Write(path string, write func(io.Writer) error) error {
	var buf bytes.Buffer
	if err := write(&buf); err != nil {
		return err
	}
	data := buf.Bytes()
	// "reports/" says the user means a directory; resolving it would
	// name a file "reports/reports".
	if path != "" && os.IsPathSeparator(path[len(path)-1]) {
		return isDirError(path, data)
	}
	target, inProc, err := resolve(path)
	if err != nil {
		return err
	}
	fi, err := os.Stat(target)
	switch {
	case err == nil && fi.IsDir():
		return isDirError(path, data)
	case inProc || err == nil && !fi.Mode().IsRegular():
		return writeThrough(target, data)
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		return bare(err)
	}
	return replace(target, data)
}

// resolve follows path's symbolic links to the file a write should reach,
// also when the last link dangles, creating the missing directories of
// where it ends. inProc is true when that file is in /proc: its links
// (/proc/self/fd/1) name open files rather than paths, and its files are
// the kernel's, to be written and never replaced.
func resolve(path string) (target string, inProc bool, err error) {
	p := path
	for links := 0; ; links++ {
		dir, err := filepath.EvalSymlinks(filepath.Dir(p))
		if errors.Is(err, fs.ErrNotExist) {
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				return "", false, err
			}
			dir, err = filepath.EvalSymlinks(filepath.Dir(p))
		}
		if err != nil {
			return "", false, bare(err)
		}
		p = filepath.Join(dir, filepath.Base(p))
		if underProc(dir) {
			return p, true, nil
		}
		fi, err := os.Lstat(p)
		if errors.Is(err, fs.ErrNotExist) || err == nil && fi.Mode()&fs.ModeSymlink == 0 {
			return p, false, nil
		}
		if err != nil {
			return "", false, bare(err)
		}
		if links == maxLinks {
			return "", false, errors.New("too many levels of symbolic links")
		}
		link, err := os.Readlink(p)
		if err != nil {
			return "", false, bare(err)
		}
		if !filepath.IsAbs(link) {
			link = filepath.Join(dir, link)
		}
		p = link
	}
}

func underProc(dir string) bool {
	return dir == "/proc" || strings.HasPrefix(dir, "/proc/")
}

// writeThrough writes data into the existing file at target, as a shell's
// ">>" would: opened without creating or truncating it, which a device or
// FIFO ignores anyway and which would cut what a descriptor's file already
// holds.
func writeThrough(target string, data []byte) error {
	if fd, ok := ownFD(target); ok {
		return writeFD(fd, data)
	}
	f, err := os.OpenFile(target, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return fmt.Errorf("open: %w", bare(err))
	}
	return writeAndClose(f, data)
}

// writeAndClose writes data to f and closes it, returning the first error.
func writeAndClose(f *os.File, data []byte) error {
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("write: %w", bare(err))
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write: %w", bare(err))
	}
	return nil
}

// ownFD reports which of this process's descriptors target is, when it is
// one (/dev/stdout resolves to /proc/<pid>/fd/1). Writing to the
// descriptor itself shares its offset, so the report lands where the
// process's other output to it does; opening target anew would write at
// the file's start or end instead.
func ownFD(target string) (int, bool) {
	dir, name := filepath.Split(target)
	if filepath.Clean(dir) != filepath.Join("/proc", strconv.Itoa(os.Getpid()), "fd") {
		return 0, false
	}
	fd, err := strconv.Atoi(name)
	return fd, err == nil
}

// replace puts data at target through a temporary file in target's
// directory, renamed over it.
func replace(target string, data []byte) error {
	dir := filepath.Dir(target)
	f, err := os.CreateTemp(dir, ".normsim-report-*")
	if err != nil {
		return fmt.Errorf("create a temporary file in %s: %w", dir, bare(err))
	}
	renamed := false
	defer func() {
		if !renamed {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	if _, err := f.Write(data); err != nil {
		return fmt.Errorf("write: %w", bare(err))
	}
	// CreateTemp makes the file 0600; a report is for everyone to read.
	if err := f.Chmod(0o644); err != nil {
		return fmt.Errorf("chmod: %w", bare(err))
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("sync: %w", bare(err))
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write: %w", bare(err))
	}
	if err := os.Rename(f.Name(), target); err != nil {
		return fmt.Errorf("rename into place: %w", bare(err))
	}
	renamed = true
	return nil
}

// isDirError names the problem and the fix, with a file name that suits
// the report.
func isDirError(path string, data []byte) error {
	return fmt.Errorf("is a directory; give a file path, e.g. %s", filepath.Join(path, exampleName(data)))
}

// exampleName is a file name for a report of data's kind.
func exampleName(data []byte) string {
	head := bytes.ToLower(bytes.TrimSpace(data[:min(len(data), 512)]))
	switch {
	case bytes.HasPrefix(head, []byte("{")) || bytes.HasPrefix(head, []byte("[")):
		return "report.json"
	case bytes.HasPrefix(head, []byte("<!doctype html")) || bytes.HasPrefix(head, []byte("<html")):
		return "report.html"
	case bytes.HasPrefix(head, []byte("<")):
		return "report.xml"
	}
	return "report"
}

// bare drops the path an *fs.PathError or *os.LinkError carries: it is a
// temporary file or a resolved target the user never typed, and callers
// name the path the user gave.
func bare(err error) error {
	var pathErr *fs.PathError
	if errors.As(err, &pathErr) {
		return pathErr.Err
	}
	var linkErr *os.LinkError
	if errors.As(err, &linkErr) {
		return linkErr.Err
	}
	return err
}
