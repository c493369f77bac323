package sqlite

import (
	"context"
	"database/sql"
	_ "embed"
	"fmt"
	"maps"
	"slices"
	"strings"
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
//
// That schema is schema.txt, written from the migrations by
// TestSchemaFileIsTheMigrations (-pin): building it at each start, on an
// in-memory database, cost about 6 ms of a file store's 9 ms open.

//go:embed schema.txt
var schemaText string

// expectedSchema is schema.txt: one object a line, "type name", a tab,
// its definition with its blanks folded.
func expectedSchema() map[string]string {
	out := map[string]string{}
	for line := range strings.Lines(schemaText) {
		if k, def, ok := strings.Cut(strings.TrimSuffix(line, "\n"), "\t"); ok {
			out[k] = def
		}
	}
	return out
}

// schemaFile is schema as schema.txt writes it, in name order.
func schemaFile(schema map[string]string) string {
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(schema)) {
		b.WriteString(k + "\t" + schema[k] + "\n")
	}
	return b.String()
}

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
	want := expectedSchema()
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
