package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
)

// editedFix is what to do with a store file whose schema or rows normsim
// did not write.
const editedFix = "move it aside and start on a new --db, or restore a copy of it"

// A store file's tables are what its migrations made; one edited since (a
// table dropped, rebuilt without its primary key) passed quick_check and
// schema_migrations alike, took a launch, and then lost every write
// ("no such table: frames"). So a file's schema is compared at open with
// the one its migrations make on an empty database: every table, index
// and trigger they make must be there, with the same definition.

var expectedSchema = sync.OnceValues(func() (map[string]string, error) {
	db, err := sql.Open("sqlite", "file::memory:")
	if err != nil {
		return nil, err
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	s := &Store{db: db, path: Memory}
	if err := s.migrate(context.Background()); err != nil {
		return nil, err
	}
	return readSchema(context.Background(), db)
})

// readSchema is each object's definition as SQLite keeps it, by "type
// name", its own internal objects left out.
func readSchema(ctx context.Context, db *sql.DB) (map[string]string, error) {
	rows, err := db.QueryContext(ctx, `SELECT type, name, COALESCE(sql, '') FROM sqlite_master WHERE name NOT LIKE 'sqlite_%'`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var typ, name, def string
		if err := rows.Scan(&typ, &name, &def); err != nil {
			return nil, err
		}
		out[typ+" "+name] = strings.Join(strings.Fields(def), " ")
	}
	return out, rows.Err()
}

// checkSchema refuses a store file whose schema is not the one its
// migrations make, naming what differs.
func checkSchema(ctx context.Context, db *sql.DB, path string) error {
	want, err := expectedSchema()
	if err != nil {
		return fmt.Errorf("the schema a store should have: %w", err)
	}
	got, err := readSchema(ctx, db)
	if err != nil {
		return fmt.Errorf("read the schema: %w", err)
	}
	var missing, changed []string
	for _, k := range slices.Sorted(maps.Keys(want)) {
		def, ok := got[k]
		switch {
		case !ok:
			missing = append(missing, k)
		case def != want[k]:
			changed = append(changed, k)
		}
	}
	if len(missing) == 0 && len(changed) == 0 {
		return nil
	}
	var parts []string
	if len(missing) > 0 {
		parts = append(parts, "missing "+strings.Join(missing, ", "))
	}
	if len(changed) > 0 {
		parts = append(parts, "defined otherwise than normsim made it: "+strings.Join(changed, ", "))
	}
	return &refusedFile{path, "its schema is not the one normsim made (" + strings.Join(parts, "; ") + "): the file was edited or damaged; " + editedFix}
}
