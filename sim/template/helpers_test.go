package template

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/normsim/normsim/sim"
)

// MustWriteTemplate writes files (name → content) into a new directory
// named name below a temp dir and returns the template's path.
func MustWriteTemplate(tb testing.TB, name string, files map[string]string) string {
	tb.Helper()
	dir := filepath.Join(tb.TempDir(), name)
	for f, content := range files {
		p := filepath.Join(dir, f)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			tb.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			tb.Fatal(err)
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		tb.Fatal(err)
	}
	return dir
}

// MustLoad writes and loads a template that must be valid.
func MustLoad(tb testing.TB, files map[string]string) *Loaded {
	tb.Helper()
	l := Load(MustWriteTemplate(tb, "tpl", files))
	if !l.Valid() {
		tb.Fatalf("template invalid: %v", l.Problems)
	}
	return l
}

// validateOne writes files as the template name and validates it: the
// test fails unless that gives one result, which it returns.
func validateOne(tb testing.TB, name string, files map[string]string) Result {
	tb.Helper()
	res, err := ValidatePath(tb.Context(), MustWriteTemplate(tb, name, files))
	if err != nil {
		tb.Fatal(err)
	}
	if len(res) != 1 {
		tb.Fatalf("validate: %+v, want one result", res)
	}
	return res[0]
}

// tpl returns the files of a valid template with the given manifest extra
// fields (key, raw JSON pairs), compose file and parameters.yaml ("" for
// none).
func tpl(compose, params string, manifestKV ...string) map[string]string {
	files := map[string]string{
		"manifest.json": manifestJSON(manifestKV...),
		"compose.yml":   compose,
	}
	if params != "" {
		files["parameters.yaml"] = params
	}
	return files
}

const oneService = `
services:
  app:
    image: busybox
`

// input is a LaunchInput on a node with a job socket, docker runtime.
func input(params map[string]string) sim.LaunchInput {
	return sim.LaunchInput{
		Instance: &sim.Instance{ID: "inst-1", JobID: "job-1", Role: "role-1", Token: "secret-token", Params: params},
		Node:     sim.Node{Name: "node-a", SocketPort: 6797, SocketURL: "ws://127.0.0.1:6797"},
		Runtime:  sim.RuntimeDocker,
		PortFree: func(int, string) bool { return true },
	}
}

func service(tb testing.TB, spec *sim.LaunchSpec, name string) sim.ServiceSpec {
	tb.Helper()
	for _, s := range spec.Services {
		if s.Name == name {
			return s
		}
	}
	tb.Fatalf("no service %q in %+v", name, spec.Services)
	return sim.ServiceSpec{}
}

// wantErr checks err has the code and a message containing want.
func wantErr(tb testing.TB, err error, code, want string) {
	tb.Helper()
	if err == nil {
		tb.Fatalf("no error, want %s %q", code, want)
	}
	if got := sim.ErrorCode(err); got != code {
		tb.Errorf("code = %s, want %s (%v)", got, code, err)
	}
	if !strings.Contains(err.Error(), want) {
		tb.Errorf("error = %q, want it to contain %q", err.Error(), want)
	}
}

// writeFiles writes files (relative name → content) below dir.
func writeFiles(tb testing.TB, dir string, files map[string]string) {
	tb.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		tb.Fatal(err)
	}
	for f, content := range files {
		p := filepath.Join(dir, f)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			tb.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			tb.Fatal(err)
		}
	}
}
