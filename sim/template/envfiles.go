package template

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/compose-spec/compose-go/v2/dotenv"
)

// rawEnvFormat is the env_file format `docker compose` adds to
// compose-go's: each line as `docker run --env-file` reads it, with no
// quotes or interpolation. compose-go alone refuses it ("unsupported
// env_file format"), so a template docker compose up runs failed at
// launch; it is registered here as the CLI registers it. The CLI's parser
// (docker/cli's kvfile) is not imported: it would bring the docker/cli
// module into every job author's build through normsimtest.
const rawEnvFormat = "raw"

func init() { dotenv.RegisterFormat(rawEnvFormat, parseRawEnvFile) }

// parseRawEnvFile reads r as `docker run --env-file` does: blank lines
// and lines starting with # (after leading blanks) are skipped; NAME=value
// is taken as written, trailing blanks and quotes kept; a NAME alone takes
// lookup's value and is left out when lookup has none. A name holding a
// blank, an empty name, or bytes that are not UTF-8 fail the file.
func parseRawEnvFile(r io.Reader, filename string, vars map[string]string, lookup func(string) (string, bool)) error {
	fail := func(format string, args ...any) error {
		return fmt.Errorf("failed to parse env_file %s: %s", filename, fmt.Sprintf(format, args...))
	}
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		b := sc.Bytes()
		if !utf8.Valid(b) {
			return fail("invalid utf8 bytes at line %d", n)
		}
		if n == 1 {
			b = bytes.TrimPrefix(b, []byte("\uFEFF"))
		}
		line := strings.TrimLeftFunc(string(b), unicode.IsSpace)
		if line == "" || line[0] == '#' {
			continue
		}
		name, value, hasValue := strings.Cut(line, "=")
		switch {
		case name == "":
			return fail("no variable name on line '%s'", line)
		case strings.ContainsAny(name, " \t"):
			return fail("variable '%s' contains whitespaces", name)
		case hasValue:
			vars[name] = value
		default:
			if v, ok := lookup(name); ok {
				vars[name] = v
			}
		}
	}
	if err := sc.Err(); err != nil {
		return fail("%v", err)
	}
	return nil
}

// An env file's values are interpolated when compose-go reads it at
// launch, from the project's environment, then the service's own
// environment, then the values set above them. docker compose up takes
// the project's environment from the shell; normsim gives a launch only
// its parameters, allocated ports and NORSK_* variables, so `${HOME}` in
// an env file is empty in every launch (and compose-go warns of it on its
// process-wide logger, labelled with the template and instance: see
// composelog.go). These are found here, to be said at validation and on
// the instance.

// envFileRef is one env or label file a service names, found by the load
// walk.
type envFileRef struct {
	field  string // services.app.env_file[0]
	path   string
	file   string // path, relative to the template directory
	format string // "" (.env) or "raw"
	// labels: a label_file, whose variables compose-go reads only from
	// the labels above them in the file, never the project's environment.
	labels      bool
	environment map[string]bool // the keys of the service's environment
}

// envFileVariable is a variable a service's env or label file uses that
// the file neither sets above it nor gives a default, and the service's
// environment does not set: compose-go reads it from the launch's values,
// and as "" when they do not hold it (a label file's, always).
type envFileVariable struct {
	field, file, name string
	labels            bool // in a label_file
}

func (u envFileVariable) String() string {
	return fmt.Sprintf("%s (%s): ${%s}", u.field, u.file, u.name)
}

// emptyIn says whether the variable is empty in a launch interpolated
// with env.
func (u envFileVariable) emptyIn(env map[string]string) bool {
	_, set := env[u.name]
	return u.labels || !set
}

// envFileVariables reads the files refs name, once, when the template is
// loaded (it loads again when a file changes), and returns each variable
// they use from outside (envFileVariable); a launch then needs no read to
// say which are empty in it. env stands in for a launch's values. It
// fails as compose-go would read the files at launch: on a variable a
// file requires (${NAME:?}) that env does not set, or a line it cannot
// parse.
func envFileVariables(refs []envFileRef, env map[string]string) ([]envFileVariable, error) {
	var out []envFileVariable
	for _, f := range refs {
		text, err := readLimited(f.path)
		if err != nil {
			continue // not there and not required
		}
		used := map[string]bool{}
		vars := map[string]string{}
		err = dotenv.ParseWithFormat(bytes.NewReader(text), f.path, vars, func(name string) (string, bool) {
			if f.format == rawEnvFormat {
				v, ok := env[name] // a bare NAME line: no interpolation
				return v, ok
			}
			if v, ok := env[name]; ok && !f.labels {
				used[name] = true
				return v, true
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
			return nil, fmt.Errorf("%s: %s: %w", f.field, f.file, err)
		}
		for _, name := range slices.Sorted(maps.Keys(used)) {
			if _, setHere := vars[name]; setHere || f.environment[name] || hasDefault(text, name) {
				continue
			}
			out = append(out, envFileVariable{field: f.field, file: f.file, name: name, labels: f.labels})
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
