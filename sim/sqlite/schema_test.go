package sqlite

import (
	"context"
	"database/sql"
	"flag"
	"os"
	"testing"
)

var pin = flag.Bool("pin", false, "rewrite schema.txt from the migrations")

// TestSchemaFileIsTheMigrations holds schema.txt, the schema a store file
// is held to at open, to what the migrations make on an empty database.
// A new migration fails it until `go test ./sim/sqlite -run
// TestSchemaFileIsTheMigrations -pin` writes the file again.
func TestSchemaFileIsTheMigrations(t *testing.T) {
	db, err := sql.Open("sqlite", "file::memory:")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	if err := (&Store{db: db, path: Memory}).migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	made, err := readSchema(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	want := schemaFile(made)
	if *pin {
		if err := os.WriteFile("schema.txt", []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if schemaText != want {
		t.Fatalf("schema.txt is not what the migrations make; run `go test ./sim/sqlite -run TestSchemaFileIsTheMigrations -pin`")
	}
}
