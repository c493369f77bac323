package sqlite

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"

	"github.com/normsim/normsim/sim"
)

// noReturnMarks is a store file's sim.NoReturnMarks: <store>.noreturn,
// beside the file the store's name resolves to, one line per migration
// begun since the file was last emptied: "- ID" when begun, its first
// byte overwritten with "P" in place when the migration passes its point
// of no return. An overwrite needs no new space, so a full disk cannot
// lose the mark that matters. Nothing is synced: the marks must outlive a
// killed process, and the kernel keeps what was written for that.
type noReturnMarks struct {
	mu   sync.Mutex
	path string
	f    *os.File
	size int64
	// running are the migrations marked and not yet ended, by the offset
	// of their line; when none is, the file is emptied at the next mark.
	running map[string]int64
}

const (
	markBegun  = '-'
	markPassed = 'P'
)

// maxMarksBytes bounds what is read as marks: a line per migration begun
// since the file was last emptied, which it is whenever none runs, so
// 10,000 handovers at once take about 400 KB.
const maxMarksBytes = 64 << 20

// checkOwnFile refuses what sits at path, beside the store, and cannot be
// normsim's own file there (what): anything but a regular file (a named
// pipe blocked the start for good, a link to /dev/zero read without end),
// and a SQLite database, another store, which writing would destroy. A
// missing file is normsim's to make.
func checkOwnFile(path, what string) error {
	info, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if !info.Mode().IsRegular() {
		return fmt.Errorf("%s is %s, not normsim's %s: remove it (normsim makes the file when it needs one)", path, sim.FileKind(info.Mode()), what)
	}
	if info.Size() < int64(len(sqliteHeader)) {
		return nil
	}
	is, err := isSQLite(path)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if is {
		return fmt.Errorf("%s is a SQLite database, not normsim's %s: another normsim's store? Move it, or give this store another --db", path, what)
	}
	return nil
}

// marksPath is where a store file's marks are kept.
func marksPath(store string) string {
	if real, err := filepath.EvalSymlinks(store); err == nil {
		store = real
	}
	return store + ".noreturn"
}

// newMarks is the marks of the store file at path; the file is made at
// the first mark.
func newMarks(path string) *noReturnMarks {
	return &noReturnMarks{path: marksPath(path), running: map[string]int64{}}
}

// The store's sim.NoReturnMarks. An in-memory store, which nothing
// recovers, has none: each is then a no-op.

// MarkBegun notes migration id as begun, short of its point of no return.
func (s *Store) MarkBegun(id string) error { return s.noReturn.begun(id) }

// MarkPassed notes migration id past its point of no return.
func (s *Store) MarkPassed(id string) error { return s.noReturn.passed(id) }

// MarkEnded lets migration id's mark go.
func (s *Store) MarkEnded(id string) { s.noReturn.ended(id) }

// Marks reads what a killed normsim left (sim.NoReturnMarks).
func (s *Store) Marks() (map[string]bool, error) { return s.noReturn.read() }

// ClearMarks forgets them, once recovery has ended what they marked.
func (s *Store) ClearMarks() error { return s.noReturn.clear() }

func (mk *noReturnMarks) begun(id string) error {
	if mk == nil {
		return nil
	}
	mk.mu.Lock()
	defer mk.mu.Unlock()
	if err := mk.openLocked(); err != nil {
		return err
	}
	if len(mk.running) == 0 && mk.size > 0 {
		// Nothing marked runs: what the file holds is of migrations whose
		// ends are recorded, or on their way to the store.
		if err := mk.emptyLocked(); err != nil {
			return err
		}
	}
	line := []byte{markBegun, ' '}
	line = append(append(line, id...), '\n')
	if _, err := mk.f.WriteAt(line, mk.size); err != nil {
		return fmt.Errorf("mark migration %s begun in %s: %w", id, mk.path, err)
	}
	mk.running[id] = mk.size
	mk.size += int64(len(line))
	return nil
}

func (mk *noReturnMarks) passed(id string) error {
	if mk == nil {
		return nil
	}
	mk.mu.Lock()
	defer mk.mu.Unlock()
	at, ok := mk.running[id]
	if !ok {
		// Its begin could not be marked, so recovery will not roll it back.
		return nil
	}
	if _, err := mk.f.WriteAt([]byte{markPassed}, at); err != nil {
		return fmt.Errorf("mark migration %s past its point of no return in %s: %w", id, mk.path, err)
	}
	return nil
}

func (mk *noReturnMarks) ended(id string) {
	if mk == nil {
		return
	}
	mk.mu.Lock()
	defer mk.mu.Unlock()
	delete(mk.running, id)
}

// read reads what the file holds: each migration marked begun, and
// whether it passed its point of no return. A line cut short by a crash
// is not a mark.
func (mk *noReturnMarks) read() (map[string]bool, error) {
	if mk == nil {
		return nil, nil
	}
	mk.mu.Lock()
	defer mk.mu.Unlock()
	data, err := readMarks(mk.path)
	if err != nil {
		return nil, err
	}
	lines := bytes.Split(data, []byte{'\n'})
	out := map[string]bool{}
	// The last is whole only when a newline ended it, and is then empty.
	for _, line := range lines[:len(lines)-1] {
		if len(line) < 3 || line[1] != ' ' || (line[0] != markBegun && line[0] != markPassed) {
			continue
		}
		out[string(line[2:])] = line[0] == markPassed
	}
	return out, nil
}

// readMarks reads the marks file whole, nothing when there is none. What
// it is was checked as the store opened (checkBeside); the read is
// bounded all the same.
func readMarks(path string) ([]byte, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxMarksBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if len(data) > maxMarksBytes {
		return nil, fmt.Errorf("%s is larger than %d MiB, more than normsim's marks can be: remove it", path, maxMarksBytes>>20)
	}
	return data, nil
}

// marksWhat names the marks file in messages.
const marksWhat = "point-of-no-return marks file"

// clear empties the file, or removes it when this store has not opened
// it yet (recovery, before any migration): a start makes no file.
func (mk *noReturnMarks) clear() error {
	if mk == nil {
		return nil
	}
	mk.mu.Lock()
	defer mk.mu.Unlock()
	clear(mk.running)
	if mk.f == nil {
		// The store's open checked that the path holds marks or nothing
		// (checkBeside).
		if err := os.Remove(mk.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("remove %s: %w", mk.path, err)
		}
		return nil
	}
	return mk.emptyLocked()
}

// emptyLocked empties the open file.
func (mk *noReturnMarks) emptyLocked() error {
	if err := mk.f.Truncate(0); err != nil {
		return fmt.Errorf("empty %s: %w", mk.path, err)
	}
	mk.size = 0
	return nil
}

// openLocked opens the file the first time it is written.
func (mk *noReturnMarks) openLocked() error {
	if mk.f != nil {
		return nil
	}
	if err := checkOwnFile(mk.path, marksWhat); err != nil {
		return err
	}
	f, err := os.OpenFile(mk.path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("open %s: %w", mk.path, err)
	}
	info, err := f.Stat()
	if err != nil {
		f.Close()
		return fmt.Errorf("open %s: %w", mk.path, err)
	}
	mk.f, mk.size = f, info.Size()
	return nil
}

// close closes the file, if it was opened, and removes it if no
// migration it marked is still running: nothing is left to recover.
func (mk *noReturnMarks) close() error {
	if mk == nil {
		return nil
	}
	mk.mu.Lock()
	defer mk.mu.Unlock()
	if mk.f == nil {
		return nil
	}
	err := mk.f.Close()
	mk.f = nil
	if len(mk.running) == 0 {
		if rmErr := os.Remove(mk.path); rmErr != nil && !errors.Is(rmErr, fs.ErrNotExist) {
			err = errors.Join(err, rmErr)
		}
	}
	return err
}
