package template

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/normsim/normsim/sim"
)

// TestBrokenTemplates loads each deliberately broken template under
// testdata/broken and checks the first problem: the contract code, the file,
// the field path and a piece of the message.
func TestBrokenTemplates(t *testing.T) {
	tests := map[string]struct {
		code, file, path, msg string
		codes                 []string // every problem's code, when checked
	}{
		"manifest-missing":            {sim.EManifestMissing, "manifest.json", "", "manifest.json: missing at the template root", nil},
		"manifest-not-json":           {sim.EManifestInvalid, "manifest.json", "", "manifest.json: not valid JSON", nil},
		"manifest-version-2":          {sim.EManifestInvalid, "manifest.json", "productTemplateSchemaVersion", "productTemplateSchemaVersion: must be 1; got 2", nil},
		"manifest-strategy-live":      {sim.EManifestInvalid, "manifest.json", "migration.strategy", `migration.strategy: must be one of overlap, stopThenStart, handover; got "live"`, nil},
		"manifest-target":             {sim.EManifestInvalid, "manifest.json", "target", `target: must be "docker-compose"; got "kubernetes"`, nil},
		"manifest-name-null":          {sim.EManifestInvalid, "manifest.json", "productName", "productName: must be a string; got null", nil},
		"manifest-route-reserved":     {sim.EManifestInvalid, "manifest.json", "proxy.routes[0].segment", "reserved", nil},
		"manifest-requirement-value":  {sim.EManifestInvalid, "manifest.json", "requirements.cores.value", `must be absent when mode is "required"; got 4`, nil},
		"manifest-allocated-port":     {sim.EManifestInvalid, "manifest.json", "allocatedPorts[0].param", `must match ^[A-Z][A-Z0-9_]*$; got "http_port"`, nil},
		"manifest-open-file-limit":    {sim.EManifestInvalid, "manifest.json", "advanced.openFileLimit.default", "must be between 1024 and 1048576; got 100", nil},
		"parameters-not-yaml":         {sim.EParametersInvalid, "parameters.yaml", "", "parameters.yaml: not valid YAML", nil},
		"parameters-lowercase-name":   {sim.EParametersInvalid, "parameters.yaml", "parameters[2].name", `parameters[2].name: must match ^[A-Z][A-Z0-9_]*$; got "port"`, nil},
		"parameters-unquoted-default": {sim.EParametersInvalid, "parameters.yaml", "parameters[0].default", `must be a string; got 50 (quote it: default: "50")`, nil},
		"parameters-norsk-name":       {sim.EParametersInvalid, "parameters.yaml", "parameters[0].name", "NORSK_ namespace", nil},
		"parameters-enum-no-values":   {sim.EParametersInvalid, "parameters.yaml", "parameters[0].values", "is required for type enum", nil},
		"parameters-min-max":          {sim.EParametersInvalid, "parameters.yaml", "parameters[0].min", "must be at most max (1); got 10", nil},
		"parameters-no-purpose":       {sim.EParametersInvalid, "parameters.yaml", "parameters[1].purpose", "parameters[1].purpose: is required", nil},
		"compose-missing":             {sim.EComposeInvalid, "compose.yml", "", "compose.yml: missing at the template root", nil},
		"compose-not-yaml":            {sim.EComposeInvalid, "compose.yml", "", "compose.yml: failed to parse compose.yml", nil},
		"compose-unknown-key":         {sim.EComposeInvalid, "compose.yml", "", "compose.yml: services.app.imagee: unknown key, not in the compose specification", nil},
		"compose-no-services":         {sim.EComposeInvalid, "compose.yml", "", "compose.yml: declares no services", nil},
		"compose-depends-on-missing":  {sim.EComposeInvalid, "compose.yml", "", "depends on undefined service", nil},
		"compose-bad-port":            {sim.EComposeInvalid, "compose.yml", "", "compose.yml: invalid hostPort: http", nil},
		"compose-unset-required-var":  {sim.EComposeInvalid, "compose.yml", "", "required variable NOT_A_PARAM is missing a value: declare it in parameters.yaml", nil},
		"compose-x-normsim":           {sim.EComposeInvalid, "compose.yml", "", "services.app.x-normsim.cmd: unknown key; allowed: command, dir", nil},
		"compose-x-normsim-command":   {sim.EComposeInvalid, "compose.yml", "", "services.app.x-normsim.command[1]: must be a string; got 1", nil},
		"compose-alias-bomb":          {sim.EComposeInvalid, "compose.yml", "", "compose.yml: expands to more than 8 MiB of text through YAML aliases", nil},
		"compose-alias-bomb-mild":     {sim.EComposeInvalid, "compose.yml", "", "compose.yml: holds more than 10000 YAML nodes once its aliases (*name) are expanded; a template's YAML file may hold at most 10000: use fewer aliases or fewer entries; refused before loading it", nil},
		// issue 34 item 1: what a template costs is bounded by bytes too,
		// in every document of the file, and in parameters.yaml.
		"compose-alias-bytes":           {sim.EComposeInvalid, "compose.yml", "", "compose.yml: expands to more than 8 MiB of text through YAML aliases (anchors &name, aliases *name); a template's YAML file may expand to at most 8 MiB, its size limit: use fewer aliases or alias shorter values; refused before loading it", nil},
		"compose-alias-second-document": {sim.EComposeInvalid, "compose.yml", "", "compose.yml: expands to more than 8 MiB of text through YAML aliases", nil},
		"compose-path-bomb":             {sim.EComposeInvalid, "compose.yml", "", "compose.yml: nests long keys too deep: the paths naming its values (services.app.environment.KEY and the like) add up to more than 8 MiB once its aliases (*name) are expanded; a template's YAML file may have at most 8 MiB of them: use shorter keys, nest less deeply, or alias less below long keys", nil},
		"parameters-alias-bytes":        {sim.EParametersInvalid, "parameters.yaml", "", "parameters.yaml: expands to more than 8 MiB of text through YAML aliases", nil},
		"compose-x-normsim-shell":       {sim.EComposeInvalid, "compose.yml", "", `services.app.x-normsim.command: "./job --rate 50 | tee job.log" has a shell operator at "| tee job.log"; the command runs as argv, not in a shell`, nil},
		"order-all-files": {sim.EManifestInvalid, "manifest.json", "target", `got "swarm"`,
			[]string{sim.EManifestInvalid, sim.EParametersInvalid, sim.EComposeInvalid}},
	}
	entries, err := os.ReadDir("testdata/broken")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if _, ok := tests[e.Name()]; !ok {
			t.Errorf("testdata/broken/%s has no expectation in the table", e.Name())
		}
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			l := Load(filepath.Join("testdata/broken", name))
			if l.Valid() || l.Template.Valid || l.Template.Error == nil {
				t.Fatalf("valid: %+v", l.Template)
			}
			p := l.Problems[0]
			if p.Code != tt.code || p.File != tt.file || p.Path != tt.path {
				t.Errorf("problem = %+v, want code %s file %s path %q", p, tt.code, tt.file, tt.path)
			}
			if !strings.Contains(p.Message, tt.msg) {
				t.Errorf("message = %q, want it to contain %q", p.Message, tt.msg)
			}
			if *l.Template.Error != (sim.TemplateError{Code: p.Code, Message: p.Message}) {
				t.Errorf("template error = %+v, want the first problem", l.Template.Error)
			}
			if tt.codes != nil {
				var codes []string
				for _, p := range l.Problems {
					codes = append(codes, p.Code)
				}
				if !reflect.DeepEqual(codes, tt.codes) {
					t.Errorf("codes = %v, want %v (%v)", codes, tt.codes, l.Problems)
				}
			}
			if l.Template.Name != name {
				t.Errorf("name = %q", l.Template.Name)
			}
		})
	}
}

// writeTar archives the files of dir (at the archive root, or below prefix)
// into a new file named name.
func writeTar(tb testing.TB, dir, name, prefix string, gz bool) string {
	tb.Helper()
	out := filepath.Join(tb.TempDir(), name)
	f, err := os.Create(out)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	var w io.Writer = f
	if gz {
		zw := gzip.NewWriter(f)
		defer zw.Close()
		w = zw
	}
	tw := tar.NewWriter(w)
	defer tw.Close()
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		info, err := d.Info()
		if err != nil {
			return err
		}
		h, err := tar.FileInfoHeader(info, "")
		if err != nil {
			return err
		}
		h.Name = prefix + filepath.ToSlash(rel)
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		_, err = tw.Write(data)
		return err
	})
	if err != nil {
		tb.Fatal(err)
	}
	return out
}

func TestLoadTar(t *testing.T) {
	dir := MustWriteTemplate(t, "src", tpl(`
services:
  app:
    image: busybox
    environment:
      R: ${RATE}
    x-normsim:
      command: [job]
      dir: ..
`, "parameters:\n  - name: RATE\n    purpose: p\n    default: \"5\"\n", "migration", `{"strategy": "handover"}`))
	writeFiles(t, dir, map[string]string{"assets/logo.txt": "x", "workdir-seed/a": "b"})
	tests := []struct {
		file, prefix string
		gz           bool
	}{
		{"counter.tar", "", false},
		{"counter.tar.gz", "", true},
		{"counter.tgz", "./", true},
		{"counter.TAR", "", true}, // gzip is sniffed, not trusted to the name
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			p := writeTar(t, dir, tt.file, tt.prefix, tt.gz)
			l := Load(p)
			if !l.Valid() {
				t.Fatalf("problems: %v", l.Problems)
			}
			if l.Template.Name != "counter" || l.Template.Path != p || l.Template.Strategy != sim.Handover {
				t.Errorf("template = %+v", l.Template)
			}
			if want := filepath.Join(filepath.Dir(p), "counter"); l.Dir != want {
				t.Errorf("dir = %q, want %q", l.Dir, want)
			}
			spec, err := l.Launch(input(nil))
			if err != nil {
				t.Fatal(err)
			}
			if s := spec.Services[0]; s.Env["R"] != "5" || s.Process.Dir != filepath.Dir(p) {
				t.Errorf("service = %+v", s)
			}
		})
	}
	t.Run("wrapped in a directory", func(t *testing.T) {
		l := Load(writeTar(t, dir, "wrapped.tgz", "counter/", true))
		if l.Valid() || l.Problems[0].Code != sim.EManifestMissing || !strings.Contains(l.Problems[0].Message, "the archive has counter/manifest.json") {
			t.Errorf("problems = %v", l.Problems)
		}
	})
	t.Run("not an archive", func(t *testing.T) {
		p := filepath.Join(t.TempDir(), "junk.tar.gz")
		writeFiles(t, filepath.Dir(p), map[string]string{"junk.tar.gz": "\x1f\x8bnot gzip"})
		l := Load(p)
		if l.Valid() || l.Problems[0].Code != sim.EManifestMissing || !strings.Contains(l.Problems[0].Message, "junk.tar.gz: cannot read the archive") {
			t.Errorf("problems = %v", l.Problems)
		}
		if l.Template.Name != "junk" {
			t.Errorf("name = %q", l.Template.Name)
		}
	})
	t.Run("broken manifest inside", func(t *testing.T) {
		bad := MustWriteTemplate(t, "bad", tpl(oneService, "", "migration", `{"strategy": "live"}`))
		l := Load(writeTar(t, bad, "bad.tar", "", false))
		if l.Valid() || l.Problems[0].Path != "migration.strategy" {
			t.Errorf("problems = %v", l.Problems)
		}
	})
	t.Run("LoadDirs lists archives", func(t *testing.T) {
		p := writeTar(t, dir, "counter.tgz", "", true)
		writeFiles(t, filepath.Dir(p), map[string]string{"notes.txt": "ignored"})
		c, err := LoadDirs(t.Context(), filepath.Dir(p))
		if err != nil {
			t.Fatal(err)
		}
		if l := c.List(); len(l) != 1 || l[0].Name != "counter" || !l[0].Valid {
			t.Errorf("list = %+v", l)
		}
	})
}

func TestLoadBareManifest(t *testing.T) {
	dir := MustWriteTemplate(t, "solo", map[string]string{"manifest.json": manifestJSON("migration", `{"strategy": "overlap"}`)})
	l := Load(filepath.Join(dir, "manifest.json"))
	if !l.Valid() || l.Template.Name != "solo" || l.Template.Strategy != sim.Overlap {
		t.Fatalf("bare manifest: %+v %v", l.Template, l.Problems)
	}
	_, err := l.Launch(input(nil))
	wantErr(t, err, sim.ETemplateInvalid, "bare manifest.json")

	bad := MustWriteTemplate(t, "solo", map[string]string{"manifest.json": manifestJSON("target", "1")})
	if l := Load(filepath.Join(bad, "manifest.json")); l.Valid() || l.Problems[0].Path != "target" {
		t.Errorf("problems = %v", l.Problems)
	}
}

func TestLoadMissingPath(t *testing.T) {
	l := Load(filepath.Join(t.TempDir(), "nope"))
	if l == nil || l.Valid() || l.Problems[0].Code != sim.EManifestMissing || l.Template.Name != "nope" {
		t.Errorf("loaded = %+v %v", l, l.Problems)
	}
}

func TestLoadTemplateFields(t *testing.T) {
	const compose = `
services:
  b:
    image: x
  a:
    image: y
`
	l := MustLoad(t, tpl(compose, "parameters:\n  - name: RATE\n    purpose: p\n    type: int\n",
		"productName", `"Prod"`, "productVersion", `"2.0"`,
		"allocatedPorts", `[{"param": "P", "protocol": "udp", "preferred": 5000}]`))
	tp := l.Template
	if tp.ProductName != "Prod" || tp.ProductVersion != "2.0" || tp.Strategy != sim.StopThenStart ||
		!reflect.DeepEqual(tp.Services, []string{"a", "b"}) || len(tp.Parameters) != 1 || tp.Parameters[0].Type != "int" ||
		len(tp.AllocatedPorts) != 1 || tp.AllocatedPorts[0].Protocol != "udp" {
		t.Errorf("template = %+v", tp)
	}
	// An invalid template still lists its parameters as JSON [] not null.
	b, _ := json.Marshal(Load(filepath.Join("testdata/broken", "compose-missing")).Template)
	if !strings.Contains(string(b), `"parameters":[]`) {
		t.Errorf("json = %s", b)
	}
}

func TestValidatePath(t *testing.T) {
	root := t.TempDir()
	writeFiles(t, filepath.Join(root, "good"), tpl(oneService, ""))
	writeFiles(t, filepath.Join(root, "bad"), map[string]string{"manifest.json": manifestJSON("productName", "-", "target", `"x"`), "compose.yml": oneService})

	results, err := ValidatePath(t.Context(), root)
	if err != nil {
		t.Fatal(err)
	}
	if len(results) != 2 || results[0].Name != "bad" || results[1].Name != "good" {
		t.Fatalf("results = %+v", results)
	}
	if results[0].Valid || len(results[0].Problems) != 2 || results[0].Problems[0].Path != "productName" || results[0].Problems[1].Path != "target" {
		t.Errorf("bad = %+v", results[0])
	}
	if !results[1].Valid || results[1].Problems == nil {
		t.Errorf("good = %+v", results[1])
	}
	b, _ := json.Marshal(results[0].Problems[0])
	if want := `{"code":"MANIFEST_INVALID","file":"manifest.json","path":"productName","message":"productName: is required"}`; string(b) != want {
		t.Errorf("json = %s, want %s", b, want)
	}

	for _, p := range []string{filepath.Join(root, "good"), filepath.Join(root, "good", "manifest.json")} {
		results, err := ValidatePath(t.Context(), p)
		if err != nil || len(results) != 1 || !results[0].Valid || results[0].Name != "good" {
			t.Errorf("ValidatePath(%s) = %+v, %v", p, results, err)
		}
	}
	tarPath := writeTar(t, filepath.Join(root, "bad"), "bad.tgz", "", true)
	if results, err := ValidatePath(t.Context(), tarPath); err != nil || len(results) != 1 || results[0].Valid || results[0].Name != "bad" {
		t.Errorf("ValidatePath(tar) = %+v, %v", results, err)
	}
	if _, err := ValidatePath(t.Context(), filepath.Join(root, "missing")); err == nil {
		t.Error("a missing path must be an error")
	}
	// A README beside the templates is what templates/* also names.
	writeFiles(t, root, map[string]string{"README.md": "# templates\n"})
	if results, err := ValidatePath(t.Context(), filepath.Join(root, "README.md")); !errors.Is(err, ErrNotATemplate) || results != nil {
		t.Errorf("ValidatePath(README.md) = %+v, %v; want ErrNotATemplate", results, err)
	}
	if results, err := ValidatePath(t.Context(), root); err != nil || len(results) != 2 {
		t.Errorf("ValidatePath(dir with a README) = %+v, %v; want the two templates", results, err)
	}
	// A template dir missing its manifest is still one template.
	writeFiles(t, filepath.Join(root, "nomanifest"), map[string]string{"compose.yml": oneService})
	results, err = ValidatePath(t.Context(), filepath.Join(root, "nomanifest"))
	if err != nil || len(results) != 1 || results[0].Problems[0].Code != sim.EManifestMissing {
		t.Errorf("nomanifest = %+v, %v", results, err)
	}
}

// TestNameAReaderCannotSeeWholeIsRefused (issue 34): a template directory
// named "pla\u200bin" beside "plain" was listed as a second, valid
// "plain", and each list showed the two alike.
func TestNameAReaderCannotSeeWholeIsRefused(t *testing.T) {
	for _, tc := range []struct{ name, want string }{
		{"pla\u200bin", "holds the invisible character U+200B at byte 3"},
		{"plain\u202e", "holds the invisible character U+202E at byte 5"},
		{"pla\tin", "holds the invisible character U+0009 at byte 3"},
		{"plain ", "begins or ends with a blank"},
		{"pla\xffin", "is not UTF-8"},
	} {
		dir := filepath.Join(t.TempDir(), tc.name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "manifest.json"), []byte(`{"productName":"P","productVersion":"1","target":"jobs"}`), 0o644); err != nil {
			t.Fatal(err)
		}
		l, err := LoadContext(context.Background(), dir)
		if err != nil {
			t.Fatal(err)
		}
		if l.Valid() || len(l.Problems) == 0 || l.Problems[0].Code != sim.ETemplateInvalid || !strings.Contains(l.Problems[0].Message, tc.want) {
			t.Errorf("%+q: valid %v, problems %v; want %s", tc.name, l.Valid(), l.Problems, tc.want)
		}
	}
	// Letters of any script are names a reader sees whole.
	for _, name := range []string{"plain", "zähler", "カウンタ", "my counter"} {
		if _, bad := nameProblem(name); bad {
			t.Errorf("%q refused", name)
		}
	}
}

// TestRootFilesLinkedOutsideAreRefused (attack round 11, C9): compose.yml
// may include no file outside the template directory, but compose.yml
// itself (or manifest.json, parameters.yaml) linked to one outside was
// read, and the template was not whole wherever it was copied. A link
// inside the directory is fine.
func TestRootFilesLinkedOutsideAreRefused(t *testing.T) {
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "compose.yml"), []byte(oneService), 0o644); err != nil {
		t.Fatal(err)
	}
	files := tpl(oneService, "")
	delete(files, "compose.yml")
	dir := MustWriteTemplate(t, "linked", files)
	if err := os.Symlink(filepath.Join(outside, "compose.yml"), filepath.Join(dir, "compose.yml")); err != nil {
		t.Fatal(err)
	}
	l := Load(dir)
	if l.Valid() || !strings.Contains(fmt.Sprint(l.Problems), "compose.yml: cannot read: is a link to "+filepath.Join(outside, "compose.yml")+", outside the template directory") {
		t.Fatalf("compose.yml linked outside: valid %v, problems %v", l.Valid(), l.Problems)
	}
	in := MustWriteTemplate(t, "linked-in", map[string]string{"manifest.json": manifestJSON(), "real/compose.yml": oneService})
	if err := os.Symlink("real/compose.yml", filepath.Join(in, "compose.yml")); err != nil {
		t.Fatal(err)
	}
	if l := Load(in); !l.Valid() {
		t.Fatalf("compose.yml linked inside: %v", l.Problems)
	}
}

// TestEmptyDefaultsAreTakenAtTheirWord (attack round 11, C9): a parameter
// whose default is empty, used as ${TAG:?} (set and not empty), made the
// template invalid, "required variable TAG is missing a value", though a
// launch that gives TAG runs; and ${OPT:-}, an empty default written out,
// was warned of as having no default.
func TestEmptyDefaultsAreTakenAtTheirWord(t *testing.T) {
	compose := "services:\n  app:\n    image: \"busybox:${TAG:?}\"\n    environment: {X: \"${OPT:-}\", Y: \"${OPT2-}\", Z: \"${NONE}\"}\n"
	l := Load(MustWriteTemplate(t, "empty", tpl(compose, "parameters:\n  - name: TAG\n    purpose: the tag\n    type: string\n    default: \"\"\n")))
	if !l.Valid() {
		t.Fatalf("invalid: %v", l.Problems)
	}
	warned := strings.Join(l.Warnings, "\n")
	for _, want := range []string{"TAG's default is empty, and compose.yml requires a value", "${NONE} is no parameter"} {
		if !strings.Contains(warned, want) {
			t.Errorf("warnings %q, want one with %q", warned, want)
		}
	}
	for _, not := range []string{"${OPT}", "${OPT2}"} {
		if strings.Contains(warned, not) {
			t.Errorf("warnings %q: %s has an empty default written out", warned, not)
		}
	}
	spec, err := l.Launch(input(map[string]string{"TAG": "v1"}))
	if err != nil || service(t, spec, "app").Image != "busybox:v1" {
		t.Fatalf("a launch that gives TAG: %v", err)
	}
}

// TestEnvironmentNoProcessCouldStartWithIsRefused (attack round 11, C9):
// a 7 MB environment value passed validate, and every launch failed at
// the engine's start ("argument list too long"). Linux's execve bounds
// are judged at validate, and at a launch whose values pass them.
func TestEnvironmentNoProcessCouldStartWithIsRefused(t *testing.T) {
	big := strings.Repeat("x", 200<<10)
	for name, tc := range map[string]struct{ compose, want string }{
		"one value":    {"services:\n  app:\n    image: busybox\n    environment: {BIG: " + big + "}\n", "services.app.environment.BIG: 204805 bytes, where Linux starts no process with one environment string over 131072"},
		"an argument":  {"services:\n  app:\n    image: busybox\n    command: [echo, " + big + "]\n", "services.app.command: an argument of 204801 bytes"},
		"all together": {"services:\n  app:\n    image: busybox\n    environment: {" + manyVars(30, 100<<10) + "}\n", "its environment and command hold"},
	} {
		t.Run(name, func(t *testing.T) {
			l := Load(MustWriteTemplate(t, "big", tpl(tc.compose, "")))
			if l.Valid() || !strings.Contains(fmt.Sprint(l.Problems), tc.want) {
				t.Fatalf("valid %v, problems %v; want %q", l.Valid(), l.Problems, tc.want)
			}
		})
	}
}

// manyVars is n environment entries V0..Vn-1 of size bytes each, as flow
// YAML.
func manyVars(n, size int) string {
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "V%d: %s", i, strings.Repeat("z", size))
	}
	return b.String()
}

// round 13, B1: a .tar template with a relative bind mount validated ok;
// Docker created the source beside the archive, a directory named like
// the template, which the watcher then loaded as a conflicting template,
// and every later launch was refused.
func TestArchiveRelativeBindSourceRefused(t *testing.T) {
	for name, c := range map[string]struct {
		volumes string
		want    string
	}{
		"short syntax":  {`["./data:/data"]`, `services.app.volumes[0]: bind mount source "./data" is relative`},
		"long syntax":   {`[{type: bind, source: data, target: /data}]`, `bind mount source "data" is relative`},
		"a second one":  {`["vol:/v", "../x:/x"]`, `services.app.volumes[1]: bind mount source "../x" is relative`},
		"named volume":  {`["vol:/v"]`, ""},
		"absolute bind": {`["/tmp:/t"]`, ""},
	} {
		t.Run(name, func(t *testing.T) {
			compose := "services:\n  app:\n    image: busybox\n    volumes: " + c.volumes + "\nvolumes:\n  vol: {}\n"
			dir := MustWriteTemplate(t, "src", tpl(compose, ""))
			// The directory template runs as docker compose up runs it.
			if l := Load(dir); !l.Valid() {
				t.Fatalf("directory: problems %v, want valid", l.Problems)
			}
			l := Load(writeTar(t, dir, "tbind.tar", "", false))
			if c.want == "" {
				if !l.Valid() {
					t.Fatalf("problems %v, want valid", l.Problems)
				}
				return
			}
			if l.Valid() || len(l.Problems) != 1 || l.Problems[0].Code != sim.EComposeInvalid ||
				!strings.Contains(l.Problems[0].Message, c.want) || !strings.Contains(l.Problems[0].Message, "use a template directory instead of the archive, or a named volume") {
				t.Fatalf("problems %v, want COMPOSE_INVALID saying %q and the fix", l.Problems, c.want)
			}
		})
	}
}
