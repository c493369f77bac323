package scenario

import _ "embed"

// schema is the JSON Schema of a scenario file. docs/scenario.schema.json
// is the same file (a test keeps them equal) so editors and people can find
// it without the binary.
//
//go:embed scenario.schema.json
var schema []byte

// Schema returns the JSON Schema (draft 2020-12) of a scenario file, as
// `normsim ci --schema` prints it.
func Schema() []byte { return append([]byte(nil), schema...) }
