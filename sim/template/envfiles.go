package template

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/compose-spec/compose-go/v2/dotenv"
	"github.com/docker/cli/pkg/kvfile"
)

// rawEnvFormat is the env_file format `docker compose` adds to
// compose-go's: each line as `docker run --env-file` reads it, with no
// quotes or interpolation. compose-go alone refuses it ("unsupported
// env_file format"), so a template docker compose up runs failed at
// launch; it is registered here as the CLI does, with the CLI's parser.
const rawEnvFormat = "raw"

func init() {
	dotenv.RegisterFormat(rawEnvFormat, func(r io.Reader, filename string, vars map[string]string, lookup func(string) (string, bool)) error {
		lines, err := kvfile.ParseFromReader(r, lookup)
		if err != nil {
			return fmt.Errorf("failed to parse env_file %s: %w", filename, err)
		}
		for _, line := range lines {
			k, v, _ := strings.Cut(line, "=")
			vars[k] = v
		}
		return nil
	})
}

// An env file's values are interpolated when compose-go reads it at
// launch, from the project's environment, then the service's own
// environment, then the values set above them. docker compose up takes
// the project's environment from the shell; normsim gives a launch only
// its parameters, allocated ports and NORSK_* variables, so `${HOME}` in
// an env file is empty in every launch (and compose-go warns of it on its
// process-wide logger, where no instance is named). These are found here,
// to be said at validation and on the instance.

// envFileRef is one env file a service names, found by the load walk.
type envFileRef struct {
	field       string // services.app.env_file[0]
	path        string
	format      string          // "" (.env) or "raw"
	environment map[string]bool // the keys of the service's environment
}

// unsetVariable is a variable an env file uses that nothing sets.
type unsetVariable struct {
	field, file, name string
}

func (u unsetVariable) String() string {
	return fmt.Sprintf("%s (%s): ${%s}", u.field, u.file, u.name)
}

// unsetInEnvFiles is each variable the services' env files use that env
// (what the launch interpolates with) does not set, the file gives no
// default and sets nowhere itself, and the service's environment does
// not hold: compose-go reads it as "". It reads nothing when the compose
// file names no file (readsFiles), and nothing the load walk refuses (the
// load itself says why). It fails as compose-go would read a file with
// env: on a variable the file requires (${NAME:?}) and nothing sets, or
// a line it cannot parse.
func unsetInEnvFiles(ctx context.Context, dir string, compose []byte, env map[string]string) ([]unsetVariable, error) {
	if !readsFiles(compose) {
		return nil, nil
	}
	w, err := walkLoadFiles(ctx, dir, compose)
	if err != nil {
		return nil, nil
	}
	var out []unsetVariable
	for _, f := range w.envFiles {
		text, err := readLimited(f.path)
		if err != nil {
			continue // not there and not required
		}
		used := map[string]bool{}
		vars := map[string]string{}
		err = dotenv.ParseWithFormat(bytes.NewReader(text), f.path, vars, func(name string) (string, bool) {
			if v, ok := env[name]; ok {
				return v, true
			}
			if f.format == rawEnvFormat {
				return "", false // a bare NAME line, left out: no interpolation
			}
			if required(text, name) {
				return "", false // the parse fails, saying so
			}
			// Any other name is answered, "" when not set, so that the
			// parse interpolates without compose-go's warning.
			used[name] = true
			return "", true
		}, f.format)
		if err != nil {
			return nil, fmt.Errorf("%s: %s: %w", f.field, w.rel(f.path), err)
		}
		for _, name := range slices.Sorted(maps.Keys(used)) {
			if _, setHere := vars[name]; setHere || f.environment[name] || hasDefault(text, name) {
				continue
			}
			out = append(out, unsetVariable{field: f.field, file: w.rel(f.path), name: name})
		}
	}
	return out, nil
}

// required says whether an env file requires name to be set (${NAME:?}
// or ${NAME?}).
func required(text []byte, name string) bool {
	return requiresValue(text, name) || bytes.Contains(text, []byte("${"+name+"?"))
}

// environmentKeys are the names a service's environment sets, written as
// a mapping or as a list of NAME=value (a bare NAME sets nothing here).
func environmentKeys(v any) map[string]bool {
	keys := map[string]bool{}
	switch v := v.(type) {
	case map[string]any:
		for k, val := range v {
			if val != nil {
				keys[k] = true
			}
		}
	case []any:
		for _, e := range v {
			if s, ok := e.(string); ok {
				if k, _, ok := strings.Cut(s, "="); ok {
					keys[k] = true
				}
			}
		}
	}
	return keys
}
