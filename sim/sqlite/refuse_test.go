package sqlite

import (
	"context"
	"database/sql"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// filesIn is what a directory holds: each file's name and content.
func filesIn(t *testing.T, dir string) map[string]string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{}
	for _, e := range entries {
		if !e.Type().IsRegular() {
			files[e.Name()] = e.Type().String()
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		files[e.Name()] = string(b)
	}
	return files
}

// otherProgramsDB makes a SQLite file as another program would: with the
// statements given, in SQLite's default (rollback) journal mode, closed.
func otherProgramsDB(t *testing.T, path string, statements ...string) {
	t.Helper()
	db, err := sql.Open("sqlite", fileURI(path))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, st := range statements {
		if _, err := db.Exec(st); err != nil {
			t.Fatalf("%s: %v", st, err)
		}
	}
}

// tablesOf lists what the file's schema holds, SQLite's own tables too,
// read without opening it as a store. (Read-only, SQLite would leave a
// WAL file's -wal and -shm behind.)
func tablesOf(t *testing.T, path string) []string {
	t.Helper()
	db, err := sql.Open("sqlite", fileURI(path))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	names, err := queryNames(context.Background(), db, `SELECT type || ' ' || name FROM sqlite_master ORDER BY name`)
	if err != nil {
		t.Fatal(err)
	}
	return names
}

// refusedUnchanged opens path, wants it refused with the error want, and
// the directory it is in as it was: no table added (schema_migrations was
// written before a clashing migration failed), no journal mode changed,
// no -wal, -shm or .lock left beside it.
func refusedUnchanged(t *testing.T, path, want string) {
	t.Helper()
	dir := filepath.Dir(path)
	before, tablesBefore := filesIn(t, dir), tablesOf(t, path)
	s, err := Open(context.Background(), path)
	if err == nil {
		s.Close()
		t.Fatalf("Open accepted %s, which holds %v", path, tablesBefore)
	}
	if err.Error() != want {
		t.Errorf("error = %v\nwant    %s", err, want)
	}
	if tablesAfter := tablesOf(t, path); !slices.Equal(tablesAfter, tablesBefore) {
		t.Errorf("the refused file's tables are %v, were %v", tablesAfter, tablesBefore)
	}
	if changed := changedFiles(before, filesIn(t, dir)); len(changed) > 0 {
		t.Errorf("refusing %s changed %v", path, changed)
	}
}

// changedFiles names the files added, removed or written to from before
// to after.
func changedFiles(before, after map[string]string) []string {
	var changed []string
	for name, was := range before {
		if now, kept := after[name]; !kept || now != was {
			changed = append(changed, name)
		}
	}
	for name := range after {
		if _, was := before[name]; !was {
			changed = append(changed, name)
		}
	}
	slices.Sort(changed)
	return changed
}

// Another program's database got normsim's tables added beside its own,
// silently.
func TestOpenRefusesAnotherProgramsDatabase(t *testing.T) {
	path := filepath.Join(t.TempDir(), "other.db")
	otherProgramsDB(t, path, `CREATE TABLE foo (x TEXT)`, `INSERT INTO foo VALUES ('kept')`)
	refusedUnchanged(t, path, "--db "+path+": holds tables normsim did not make (foo); give a new file or a normsim store")
}

// One whose table has a name of normsim's failed on it, but only after
// schema_migrations was written into it.
func TestOpenRefusesAnotherProgramsTableOfNormsimsName(t *testing.T) {
	path := filepath.Join(t.TempDir(), "other.db")
	otherProgramsDB(t, path, `CREATE TABLE instances (id TEXT)`)
	refusedUnchanged(t, path, "--db "+path+": holds tables normsim did not make (instances); give a new file or a normsim store")
}

// Other programs keep a schema_migrations too (Rails, golang-migrate);
// theirs is not normsim's.
func TestOpenRefusesAnotherProgramsSchemaMigrations(t *testing.T) {
	path := filepath.Join(t.TempDir(), "other.db")
	otherProgramsDB(t, path, `CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, dirty INTEGER)`, `INSERT INTO schema_migrations VALUES (3, 0)`)
	refusedUnchanged(t, path, "--db "+path+": holds tables normsim did not make (schema_migrations); give a new file or a normsim store")
}

// A store a newer normsim migrated was opened by an older one, which then
// read and wrote a schema it did not know.
func TestOpenRefusesANewerNormsimsStore(t *testing.T) {
	path := filepath.Join(t.TempDir(), "normsim.db")
	if err := open(t, path).Close(); err != nil {
		t.Fatal(err)
	}
	otherProgramsDB(t, path, `INSERT INTO schema_migrations (name, applied_at) VALUES ('migrations/0099_from_the_future.sql', 1)`)
	known, err := fs.Glob(migrationFiles, "migrations/*.sql")
	if err != nil {
		t.Fatal(err)
	}
	latest := migrationName(slices.Max(known))
	refusedUnchanged(t, path, "--db "+path+": was written by a newer normsim (schema 0099_from_the_future, this one knows up to "+latest+"); use that normsim or a new file")
}

// What is no file is refused before it is opened: a directory named
// what open failed on.
func TestOpenRefusesADirectory(t *testing.T) {
	path := filepath.Join(t.TempDir(), "store.db")
	if err := os.Mkdir(path, 0o755); err != nil {
		t.Fatal(err)
	}
	_, err := Open(context.Background(), path)
	if want := "--db " + path + ": is a directory, not a file; give a new file or a normsim store"; err == nil || err.Error() != want {
		t.Fatalf("error = %v\nwant    %s", err, want)
	}
}

// A missing file, an empty one and a SQLite database with no tables of
// anyone's become a normsim store, and open as one again.
func TestOpenTakesAnEmptyFileOrDatabase(t *testing.T) {
	for name, prepare := range map[string]func(path string){
		"missing": func(string) {},
		"empty file": func(path string) {
			if err := os.WriteFile(path, nil, 0o644); err != nil {
				t.Fatal(err)
			}
		},
		"empty database": func(path string) {
			otherProgramsDB(t, path, `PRAGMA user_version = 7`)
		},
		// SQLite keeps sqlite_sequence after the table it counted for.
		"database with only SQLite's tables": func(path string) {
			otherProgramsDB(t, path, `CREATE TABLE gone (id INTEGER PRIMARY KEY AUTOINCREMENT)`, `INSERT INTO gone DEFAULT VALUES`, `DROP TABLE gone`)
		},
		// An older normsim made it before its first migration, and left it
		// when that failed.
		"empty schema_migrations": func(path string) {
			otherProgramsDB(t, path, `CREATE TABLE schema_migrations (name TEXT PRIMARY KEY, applied_at INTEGER NOT NULL)`)
		},
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "normsim.db")
			prepare(path)
			if name == "database with only SQLite's tables" && !slices.Contains(tablesOf(t, path), "table sqlite_sequence") {
				t.Fatalf("no sqlite_sequence to test with: %v", tablesOf(t, path))
			}
			s := open(t, path)
			owner := s.Owner()
			if mode, err := JournalMode(context.Background(), s); err != nil || mode != "wal" {
				t.Fatalf("journal mode %q, %v; want wal", mode, err)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			if again := open(t, path).Owner(); again != owner || !ownerRe.MatchString(owner) {
				t.Fatalf("owner %q, then %q on reopening", owner, again)
			}
		})
	}
}

// A normsim store keeps a table someone added to it: it is a store all
// the same, and theirs to keep.
func TestOpenTakesAStoreWithATableAdded(t *testing.T) {
	path := filepath.Join(t.TempDir(), "normsim.db")
	if err := open(t, path).Close(); err != nil {
		t.Fatal(err)
	}
	otherProgramsDB(t, path, `CREATE TABLE my_notes (text TEXT)`)
	open(t, path)
	if tables := strings.Join(tablesOf(t, path), ","); !strings.Contains(tables, "table my_notes") {
		t.Fatalf("tables %s", tables)
	}
}

// TestADamagedStoreSaysSo (attack round 9a, L3): a store cut short read
// as "database disk image is malformed (11)" and no more. It says the file
// is damaged and what to do.
func TestADamagedStoreSaysSo(t *testing.T) {
	dir := t.TempDir()
	whole := filepath.Join(dir, "whole.db")
	s := open(t, whole)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(whole)
	if err != nil {
		t.Fatal(err)
	}
	for name, cut := range map[string][]byte{"the header only": b[:100], "half": b[:len(b)/2]} {
		path := filepath.Join(dir, strings.ReplaceAll(name, " ", "-")+".db")
		if err := os.WriteFile(path, cut, 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := Open(context.Background(), path)
		if err == nil || !strings.Contains(err.Error(), "the file is damaged") || !strings.Contains(err.Error(), "start on a new --db") {
			t.Errorf("%s: %v; want it said damaged, with what to do", name, err)
		}
	}
}

// A store file edited since normsim made it passed quick_check and
// schema_migrations, took a launch, and then lost every write ("no such
// table: frames", "ON CONFLICT clause does not match any PRIMARY KEY"),
// the instance's own record too (issue 34, round 12). It is refused at
// open, saying what differs and what to do.
func TestOpenRefusesAnEditedSchema(t *testing.T) {
	for name, c := range map[string]struct {
		edit []string
		want string
	}{
		"a table dropped": {[]string{`DROP TABLE frames`}, "its schema is not the one normsim made (missing index frames_instance, table frames)"},
		"a key lost": {[]string{
			`CREATE TABLE instances_copy AS SELECT * FROM instances`, `DROP TABLE instances`, `ALTER TABLE instances_copy RENAME TO instances`,
		}, "defined otherwise than normsim made it: table instances"},
		"the owner row deleted": {[]string{`DELETE FROM meta`}, "its owner row (table meta) is gone"},
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "normsim.db")
			if err := open(t, path).Close(); err != nil {
				t.Fatal(err)
			}
			otherProgramsDB(t, path, append([]string{`PRAGMA foreign_keys=OFF`}, c.edit...)...)
			s, err := Open(context.Background(), path)
			if err == nil {
				s.Close()
				t.Fatal("an edited store opened")
			}
			if !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "move it aside and start on a new --db") {
				t.Fatalf("error %q, want it to say %q and the fix", err, c.want)
			}
		})
	}
	// Unedited, it opens.
	path := filepath.Join(t.TempDir(), "normsim.db")
	if err := open(t, path).Close(); err != nil {
		t.Fatal(err)
	}
	s, err := Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
}
