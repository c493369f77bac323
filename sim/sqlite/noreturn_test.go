package sqlite

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestNoReturnMarksOutliveAKill: what a normsim that is SIGKILLed had
// marked is read by the next one on the store: each migration begun, and
// whether it passed its point of no return.
func TestNoReturnMarksOutliveAKill(t *testing.T) {
	if path := os.Getenv("NORMSIM_MARKS_HOLDER"); path != "" {
		s, err := Open(context.Background(), path)
		if err != nil {
			os.Exit(3)
		}
		for _, id := range []string{"mig-a", "mig-b", "mig-c"} {
			if err := s.MarkBegun(id); err != nil {
				os.Exit(4)
			}
		}
		if err := s.MarkPassed("mig-b"); err != nil {
			os.Exit(5)
		}
		os.Stdout.WriteString("marked\n")
		select {}
	}
	path := filepath.Join(t.TempDir(), "normsim.db")
	cmd := exec.Command(os.Args[0], "-test.run=^TestNoReturnMarksOutliveAKill$")
	cmd.Env = append(os.Environ(), "NORMSIM_MARKS_HOLDER="+path)
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 7)
	if _, err := out.Read(buf); err != nil || string(buf) != "marked\n" {
		cmd.Process.Kill()
		t.Fatalf("holder did not mark: %q %v", buf, err)
	}
	cmd.Process.Kill()
	cmd.Wait()

	s := open(t, path)
	got, err := s.Marks()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{"mig-a": false, "mig-b": true, "mig-c": false}
	if !maps.Equal(got, want) {
		t.Fatalf("marks after the kill: %v, want %v", got, want)
	}
	if err := s.ClearMarks(); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Marks(); len(got) != 0 {
		t.Fatalf("marks after ClearMarks: %v", got)
	}
	if _, err := os.Stat(marksPath(path)); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a start that cleared the marks left their file: %v", err)
	}
}

// TestNoReturnMarksFile: a line cut short is no mark; the file is emptied
// when nothing marked runs, and removed at a close with nothing running.
func TestNoReturnMarksFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "normsim.db")
	s := open(t, path)
	marks := marksPath(path)
	if err := os.WriteFile(marks, []byte("P mig-old\n- mig-cut"), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := s.Marks()
	if err != nil || !maps.Equal(got, map[string]bool{"mig-old": true}) {
		t.Fatalf("marks with a cut line: %v %v", got, err)
	}
	// Nothing marked by this store runs: the first mark empties the file.
	if err := s.MarkBegun("mig-1"); err != nil {
		t.Fatal(err)
	}
	if err := s.MarkBegun("mig-2"); err != nil {
		t.Fatal(err)
	}
	s.MarkEnded("mig-1")
	if err := s.MarkPassed("mig-2"); err != nil {
		t.Fatal(err)
	}
	if data, _ := os.ReadFile(marks); string(data) != "- mig-1\nP mig-2\n" {
		t.Fatalf("file: %q", data)
	}
	// mig-2 still runs: the close keeps its mark.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(marks); err != nil {
		t.Fatalf("marks of a running migration gone at close: %v", err)
	}
	s = open(t, path)
	s.MarkBegun("mig-3")
	s.MarkEnded("mig-3")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(marks); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("marks left after a close with nothing running: %v", err)
	}
}

// TestNoReturnMarksInMemory: an in-memory store, which nothing recovers,
// marks nothing and has no file.
func TestNoReturnMarksInMemory(t *testing.T) {
	s := open(t, Memory)
	if err := s.MarkBegun("mig-1"); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Marks(); err != nil || got != nil {
		t.Fatalf("in memory: %v %v", got, err)
	}
}

// BenchmarkNoReturnMarks is what a migration's marks cost: the passed
// mark alone (on the cutover's path), and the three of a migration
// (begun, passed, ended) while another runs, as under load.
func BenchmarkNoReturnMarks(b *testing.B) {
	s, err := Open(context.Background(), filepath.Join(b.TempDir(), "normsim.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	if err := s.MarkBegun("mig-long"); err != nil {
		b.Fatal(err)
	}
	b.Run("passed", func(b *testing.B) {
		for b.Loop() {
			s.MarkPassed("mig-long")
		}
	})
	ids := make([]string, 1024)
	for i := range ids {
		ids[i] = fmt.Sprintf("mig-%010x", i)
	}
	b.Run("migration", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			id := ids[i%len(ids)]
			s.MarkBegun(id)
			s.MarkPassed(id)
			s.MarkEnded(id)
		}
	})
}

// A store never writes over another store: one named as another's lock
// or marks file is refused, and so is a store whose lock or marks path
// holds a SQLite database (issue 34 round 11, B1: the marks cut another
// normsim's store to a line, the lock overwrote it at start).
func TestStoresDoNotShareFiles(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"s.db.noreturn", "s.db.lock"} {
		if _, err := Open(context.Background(), filepath.Join(dir, name)); err == nil || !strings.Contains(err.Error(), "name the store otherwise") {
			t.Errorf("a store named %s: %v; want it refused", name, err)
		}
	}
	// Made by hand, as an older normsim, or by renaming, could.
	other := open(t, filepath.Join(dir, "other.db"))
	other.Close()
	for _, sidecar := range []string{".noreturn", ".lock"} {
		path := filepath.Join(dir, "s"+sidecar+".db")
		data, err := os.ReadFile(filepath.Join(dir, "other.db"))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path+sidecar, data, 0o644); err != nil {
			t.Fatal(err)
		}
		_, err = Open(context.Background(), path)
		if err == nil || !strings.Contains(err.Error(), "is a SQLite database") {
			t.Errorf("a store whose %s is a database: %v; want it refused", sidecar, err)
		}
		if after, _ := os.ReadFile(path + sidecar); string(after) != string(data) {
			t.Errorf("the database at %s%s was written over", path, sidecar)
		}
	}
}

// A marks file larger than marks can be is not read into memory.
func TestMarksFileTooLargeIsRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "normsim.db")
	s := open(t, path)
	f, err := os.Create(marksPath(path))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(maxMarksBytes + 1); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if _, err := s.Marks(); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Fatalf("Marks of a huge file: %v; want it refused", err)
	}
}
