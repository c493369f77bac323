package template

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode/utf16"

	"github.com/normsim/normsim/sim"
)

// bombYAML is nine levels of nine aliases ("billion laughs"): 557 bytes
// that compose-go would expand to gigabytes.
func bombYAML() string {
	s := "x-l0: &l0 lol\n"
	for i := 1; i <= 9; i++ {
		s += "x-l" + string(rune('0'+i)) + ": &l" + string(rune('0'+i)) + " [" +
			strings.TrimSuffix(strings.Repeat("*l"+string(rune('0'+i-1))+",", 9), ",") + "]\n"
	}
	return s + "services: {}\n"
}

// TestFilesReadWhileLoadingAreBounded (issue 34, the fresh attack's item
// 1): what compose.yml names — included files, extended files, env and
// label files — is held to the template bounds before compose-go reads
// it, and must lie inside the template directory as a regular file.
// Before, each of these templates made compose-go read without a bound
// (validate grew to 23 GB on an included bomb, and /dev/zero never ends).
func TestFilesReadWhileLoadingAreBounded(t *testing.T) {
	t.Parallel()
	outside := t.TempDir()
	writeFiles(t, outside, map[string]string{"other.yml": oneService, "other.env": "A=1\n"})
	tests := map[string]struct {
		compose string
		files   map[string]string
		links   map[string]string // name in the template → what it points at
		want    string
	}{
		"an included bomb": {
			compose: "include: [bomb.yml]\n" + oneService,
			files:   map[string]string{"bomb.yml": bombYAML()},
			want:    "compose.yml: bomb.yml: expands to more than 8 MiB of text through YAML aliases",
		},
		"an included bomb, written as a mapping": {
			compose: "include:\n  - path: [sub/ok.yml, sub/bomb.yml]\n" + oneService,
			files:   map[string]string{"sub/ok.yml": "services: {other: {image: busybox}}\n", "sub/bomb.yml": bombYAML()},
			want:    "sub/bomb.yml: expands to more than 8 MiB",
		},
		"an extended bomb": {
			compose: "services:\n  app:\n    image: busybox\n    extends: {file: bomb.yml, service: base}\n",
			files:   map[string]string{"bomb.yml": bombYAML()},
			want:    "bomb.yml: expands to more than 8 MiB",
		},
		"a bomb included by an included file": {
			compose: "include: [a/one.yml]\n" + oneService,
			files:   map[string]string{"a/one.yml": "include: [two.yml]\nservices: {x: {image: busybox}}\n", "a/two.yml": bombYAML()},
			want:    "compose.yml: a/two.yml: expands to more than 8 MiB",
		},
		"files that pass alone but not together": {
			compose: "include: [a.yml, b.yml]\n" + oneService,
			files: map[string]string{
				"a.yml": "services: {a: {image: busybox}}\nx-a: [" + strings.Repeat("1,", 6000) + "1]\n",
				"b.yml": "services: {b: {image: busybox}}\nx-b: [" + strings.Repeat("1,", 6000) + "1]\n",
			},
			want: "together with the files it includes and extends, it holds more than 10000 YAML nodes",
		},
		"/dev/zero included": {
			compose: "include: [/dev/zero]\n" + oneService,
			want:    `include[0].path[0]: "/dev/zero" is outside the template directory`,
		},
		"a link to /dev/zero included": {
			compose: "include: [zero.yml]\n" + oneService,
			links:   map[string]string{"zero.yml": "/dev/zero"},
			want:    `include[0].path[0]: "zero.yml" is outside the template directory`,
		},
		"a file above the template": {
			compose: "include: [../../" + filepath.Base(outside) + "/other.yml]\n" + oneService,
			want:    "is outside the template directory; a template's files",
		},
		"an env file outside": {
			compose: "services:\n  app:\n    image: busybox\n    env_file: [" + filepath.Join(outside, "other.env") + "]\n",
			want:    "services.app.env_file[0]: \"" + filepath.Join(outside, "other.env") + "\" is outside the template directory",
		},
		"an env file that is a directory": {
			compose: "services:\n  app:\n    image: busybox\n    env_file: [{path: conf}]\n",
			files:   map[string]string{"conf/x": ""},
			want:    `services.app.env_file[0]: "conf" is not a regular file (a directory)`,
		},
		"a label file linked outside": {
			compose: "services:\n  app:\n    image: busybox\n    label_file: labels\n",
			links:   map[string]string{"labels": "/dev/zero"},
			want:    `services.app.label_file[0]: "labels" is outside`,
		},
		"an include's env file": {
			compose: "include:\n  - path: ok.yml\n    env_file: /dev/zero\n" + oneService,
			files:   map[string]string{"ok.yml": "services: {other: {image: busybox}}\n"},
			want:    `include[0].env_file[0]: "/dev/zero" is outside`,
		},
		"a variable in an include": {
			compose: "include: [\"${FILE}\"]\n" + oneService,
			want:    `include[0].path[0]: "${FILE}" holds a variable`,
		},
		"a variable in an extends file": {
			compose: "services:\n  app:\n    image: busybox\n    extends: {file: $DIR/base.yml, service: base}\n",
			want:    `services.app.extends.file: "$DIR/base.yml" holds a variable`,
		},
		"a file that includes itself through another": {
			compose: "include: [a.yml]\n" + oneService,
			files:   map[string]string{"a.yml": "include: [b.yml]\nservices: {}\n", "b.yml": "include: [a.yml]\nservices: {}\n"},
			want:    "loading it would read files more than 256 times",
		},
		"a diamond of includes, twenty deep": {
			compose: "include: [d1.yml, d1.yml]\n" + oneService,
			files: func() map[string]string {
				m := map[string]string{}
				for i := 1; i <= 20; i++ {
					next := "d" + string(rune('a'+i)) + ".yml"
					m["d"+string(rune('a'+i-1))+".yml"] = "include: [" + next + ", " + next + "]\nservices: {}\n"
				}
				m["d1.yml"] = "include: [db.yml, db.yml]\nservices: {}\n"
				m["du.yml"] = "services: {}\n"
				return m
			}(),
			want: "more than 256 times",
		},
		"env files of 8 MiB named twice": {
			compose: "services:\n  app:\n    image: busybox\n    env_file: [big.env, big.env]\n",
			files:   map[string]string{"big.env": "A=" + strings.Repeat("z", maxFileBytes-100) + "\n"},
			want:    "services.app.env_file[1]: loading it would read more than 8 MiB",
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			files := tpl(tt.compose, "")
			for f, c := range tt.files {
				files[f] = c
			}
			dir := MustWriteTemplate(t, "tpl", files)
			for l, target := range tt.links {
				if err := os.Symlink(target, filepath.Join(dir, l)); err != nil {
					t.Fatal(err)
				}
			}
			start := time.Now()
			l := Load(dir)
			if l.Valid() {
				t.Fatalf("valid, want %q", tt.want)
			}
			p := l.Problems[0]
			if p.Code != sim.EComposeInvalid || !strings.Contains(p.Message, tt.want) || !strings.Contains(p.Message, "refused before loading it") {
				t.Errorf("problem %s %q, want COMPOSE_INVALID containing %q and refused before loading", p.Code, p.Message, tt.want)
			}
			t.Logf("refused in %v: %s", time.Since(start), p.Message)
		})
	}
}

// TestFilesReadWhileLoadingStillWork: what a product template reads while
// loading, inside its directory, loads as compose-go would load it (the
// guard only refuses), including a service extending another of its own
// file and a link that stays inside.
func TestFilesReadWhileLoadingStillWork(t *testing.T) {
	t.Parallel()
	compose := `include:
  - path: parts/sidecar.yml
services:
  app:
    image: busybox
    extends: {file: compose.yml, service: base}
    env_file: [app.env, {path: missing.env, required: false}]
  base:
    image: busybox
    extends: {file: parts/common.yml, service: common}
    label_file: labels
`
	dir := MustWriteTemplate(t, "tpl", map[string]string{
		"manifest.json":     manifestJSON(),
		"compose.yml":       compose,
		"app.env":           "FROM_ENV_FILE=yes\n",
		"labels":            "com.example.team=video\n",
		"parts/sidecar.yml": "services:\n  sidecar:\n    image: busybox\n    env_file: side.env\n",
		"parts/side.env":    "SIDE=1\n",
		"parts/common.yml":  "services:\n  common:\n    image: busybox\n    environment: {COMMON: '1'}\n    env_file: common.env\n",
		"parts/common.env":  "FROM_COMMON=1\n",
	})
	if err := os.Symlink("app.env", filepath.Join(dir, "linked.env")); err != nil {
		t.Fatal(err)
	}
	l := Load(dir)
	if !l.Valid() {
		t.Fatalf("invalid: %v", l.Problems)
	}
	spec, err := l.Launch(input(nil))
	if err != nil {
		t.Fatal(err)
	}
	app := service(t, spec, "app")
	for k, v := range map[string]string{"FROM_ENV_FILE": "yes", "COMMON": "1", "FROM_COMMON": "1"} {
		if app.Env[k] != v {
			t.Errorf("app's %s = %q, want %q (env %v)", k, app.Env[k], v, app.Env)
		}
	}
	if base := service(t, spec, "base"); base.Labels["com.example.team"] != "video" {
		t.Errorf("base's labels %v, want com.example.team=video from labels", base.Labels)
	}
	if side := service(t, spec, "sidecar"); side.Env["SIDE"] != "1" {
		t.Errorf("sidecar's env %v, want SIDE=1 from parts/side.env", side.Env)
	}
}

// TestFilesReadWhileLoadingAreJudgedAtEachLaunch: an included file that
// changes after validation is judged again when a launch reads it.
func TestFilesReadWhileLoadingAreJudgedAtEachLaunch(t *testing.T) {
	t.Parallel()
	dir := MustWriteTemplate(t, "tpl", tpl("include: [part.yml]\n"+oneService, ""))
	writeFiles(t, dir, map[string]string{"part.yml": "services: {other: {image: busybox}}\n"})
	l := Load(dir)
	if !l.Valid() {
		t.Fatalf("invalid: %v", l.Problems)
	}
	writeFiles(t, dir, map[string]string{"part.yml": bombYAML()})
	_, err := l.Launch(input(nil))
	wantErr(t, err, sim.EComposeInvalid, "part.yml: expands to more than 8 MiB")
}

// TestInterpolationIsBounded (issue 34, the fresh attack's item 2): a
// value copied into many places by ${P} counts at its interpolated size.
// Before, a 1 MB default named in every entry of a 91 KB compose file was
// loaded as the 16 GB it makes.
func TestInterpolationIsBounded(t *testing.T) {
	t.Parallel()
	var env strings.Builder
	for i := range 200 {
		env.WriteString("      V" + string(rune('A'+i/26)) + string(rune('A'+i%26)) + ": ${P}\n")
	}
	compose := "services:\n  app:\n    image: busybox\n    environment:\n" + env.String()
	params := "parameters:\n  - name: P\n    purpose: what is copied\n    default: \"" + strings.Repeat("z", 64<<10) + "\"\n"

	// The default, 200 times 64 KiB, is past 8 MiB: the template is refused.
	l := Load(MustWriteTemplate(t, "tpl", tpl(compose, params)))
	if l.Valid() {
		t.Fatal("valid, want the interpolated size refused")
	}
	if p := l.Problems[0]; p.Code != sim.EComposeInvalid || !strings.Contains(p.Message, "interpolated, its values would come to more than 8 MiB: each ${NAME} copies its variable's value (${P} the longest of them)") {
		t.Errorf("problem %s %q", p.Code, p.Message)
	} else if n := strings.Count(p.Message, "would come to more than"); n != 1 {
		t.Errorf("the refusal is said %d times, want once: %q", n, p.Message)
	}

	// A short default passes; an operator's long value is refused at
	// launch as the operator's doing.
	l = Load(MustWriteTemplate(t, "tpl", tpl(compose, "parameters:\n  - name: P\n    purpose: what is copied\n    default: short\n")))
	if !l.Valid() {
		t.Fatalf("invalid: %v", l.Problems)
	}
	if _, err := l.Launch(input(map[string]string{"P": "short"})); err != nil {
		t.Fatal(err)
	}
	_, err := l.Launch(input(map[string]string{"P": strings.Repeat("z", 64<<10)}))
	wantErr(t, err, sim.EParamsInvalid, "interpolated, its values would come to more than 8 MiB")
}

// TestInterpolationBudgetCountsWhatIsNamed: the reservation is the text
// and the value of each variable named, defaults' own variables too, and
// an escaped $ names nothing.
func TestInterpolationBudgetCountsWhatIsNamed(t *testing.T) {
	t.Parallel()
	env := map[string]string{"A": "aaaa", "B_1": "bb"}
	m := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	for s, want := range map[string]int64{
		"plain":           5,
		"$A":              2 + 4,
		"${A}-${A}":       9 + 8,
		"${X:-${B_1}}":    12 + 2,
		"$$A":             3,
		"${UNSET}":        8,
		"trailing $":      10,
		"$A$B_1${B_1}$A.": 15 + 4 + 2 + 2 + 4,
	} {
		b := newInterpolationBudget()
		if err := b.take(s, m); err != nil {
			t.Fatal(err)
		}
		if got := maxYAMLValueBytes - b.left; got != want {
			t.Errorf("%q reserves %d, want %d", s, got, want)
		}
	}
}

// TestTemplateFilesThatAreNoFilesAreRefused (issue 34, a fresh attack's
// F3): a template's own file that is a named pipe or a device is refused
// at once. Before, opening a named pipe waited for a writer for ever, deaf
// to Ctrl-C, and /dev/zero was read to the size limit.
func TestTemplateFilesThatAreNoFilesAreRefused(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"manifest.json", "parameters.yaml", "compose.yml"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			files := tpl(oneService, "parameters: []\n")
			delete(files, name)
			dir := MustWriteTemplate(t, "tpl", files)
			if err := syscall.Mkfifo(filepath.Join(dir, name), 0o644); err != nil {
				t.Skipf("no named pipes here: %v", err)
			}
			done := make(chan *Loaded, 1)
			go func() { done <- Load(dir) }()
			select {
			case l := <-done:
				if l.Valid() || !strings.Contains(l.Problems[0].Message, name+": cannot read: is not a regular file (a named pipe)") {
					t.Errorf("problems %v", l.Problems)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("loading a template whose file is a named pipe did not end")
			}
		})
	}
	t.Run("a link to /dev/zero", func(t *testing.T) {
		t.Parallel()
		files := tpl(oneService, "")
		delete(files, "compose.yml")
		dir := MustWriteTemplate(t, "tpl", files)
		if err := os.Symlink("/dev/zero", filepath.Join(dir, "compose.yml")); err != nil {
			t.Fatal(err)
		}
		if l := Load(dir); l.Valid() || !strings.Contains(l.Problems[0].Message, "compose.yml: cannot read: is not a regular file (a character device)") {
			t.Errorf("problems %v", l.Problems)
		}
	})
	t.Run("an archive that is a named pipe", func(t *testing.T) {
		t.Parallel()
		p := filepath.Join(t.TempDir(), "tpl.tar.gz")
		if err := syscall.Mkfifo(p, 0o644); err != nil {
			t.Skipf("no named pipes here: %v", err)
		}
		if l := Load(p); l.Valid() || !strings.Contains(l.Problems[0].Message, "is not a regular file (a named pipe)") {
			t.Errorf("problems %v", l.Problems)
		}
	})
}

// TestInterpolationNestingIsBounded (issue 34, a fresh attack's F2): a
// value whose ${...} defaults nest deep is refused before compose-go
// substitutes it. Before, 8,000 levels in one 48 KB value took 32 s.
func TestInterpolationNestingIsBounded(t *testing.T) {
	t.Parallel()
	nested := func(n int) string {
		v := "x"
		for range n {
			v = "${A:-" + v + "}"
		}
		return v
	}
	for _, tt := range []struct {
		depth int
		want  string // "" when valid
	}{
		{2, ""},
		{maxInterpolationDepth, ""},
		{maxInterpolationDepth + 1, "nests ${...} more than 16 deep"},
		{8000, "nests ${...} more than 16 deep"},
	} {
		compose := "services:\n  app:\n    image: busybox\n    environment:\n      X: '" + nested(tt.depth) + "'\n"
		start := time.Now()
		l := Load(MustWriteTemplate(t, "tpl", tpl(compose, "")))
		took := time.Since(start)
		switch {
		case tt.want == "" && !l.Valid():
			t.Errorf("depth %d: invalid: %v", tt.depth, l.Problems)
		case tt.want != "" && (l.Valid() || !strings.Contains(l.Problems[0].Message, tt.want) || strings.Count(l.Problems[0].Message, "nests") != 1):
			t.Errorf("depth %d: problems %v, want one %q", tt.depth, l.Problems, tt.want)
		}
		t.Logf("depth %d: %v", tt.depth, took)
	}
	if got := interpolationDepth("$${A:-${B}} ${C:-${D:-${E}}}"); got != 3 {
		t.Errorf("depth %d, want 3 ($$ escapes)", got)
	}
}

// TestDependencyGraphsAreBounded (issue 34, a fresh attack's F1): services
// whose dependencies make many paths, or a cycle, are refused before
// compose-go follows every path. Before, 24 services each depending on
// all before them (2 KB) took 16 s, and 120 over ten minutes.
func TestDependencyGraphsAreBounded(t *testing.T) {
	t.Parallel()
	tests := map[string]struct {
		compose string
		files   map[string]string
		want    string // "" when valid
	}{
		"a chain of 50":            {chain(50), nil, ""},
		"12 services, all to all":  {dense(12, "depends_on"), nil, ""},
		"26 services, all to all":  {dense(26, "depends_on"), nil, "makes more than 100000 paths from service to service"},
		"the same through links":   {dense(26, "links"), nil, "makes more than 100000 paths"},
		"120 services, all to all": {dense(120, "depends_on"), nil, "makes more than 100000 paths"},
		"a cycle":                  {"services:\n  a: {image: busybox, depends_on: [b]}\n  b: {image: busybox, network_mode: 'service:c'}\n  c: {image: busybox, volumes_from: ['a:ro']}\n", nil, "forms a cycle: a -> b -> c -> a"},
		"through an included file": {"include: [more.yml]\nservices:\n  top:\n    image: busybox\n    depends_on: [s19]\n",
			map[string]string{"more.yml": dense(26, "depends_on")}, "makes more than 100000 paths"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			files := tpl(tt.compose, "")
			for f, c := range tt.files {
				files[f] = c
			}
			start := time.Now()
			l := Load(MustWriteTemplate(t, "tpl", files))
			took := time.Since(start)
			switch {
			case tt.want == "" && !l.Valid():
				t.Errorf("invalid: %v", l.Problems)
			case tt.want != "" && (l.Valid() || !strings.Contains(l.Problems[0].Message, tt.want)):
				t.Errorf("problems %v, want %q", l.Problems, tt.want)
			}
			t.Logf("%v", took)
		})
	}
}

// chain is n services, each depending on the one before.
func chain(n int) string {
	var b strings.Builder
	b.WriteString("services:\n")
	for i := range n {
		fmt.Fprintf(&b, "  s%d:\n    image: busybox\n", i)
		if i > 0 {
			fmt.Fprintf(&b, "    depends_on: [s%d]\n", i-1)
		}
	}
	return b.String()
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) { clear(p); return len(p), nil }

// TestArchivesAreReadWithinABound (issue 34, a fresh attack's F5): an
// archive is read at most maxArchiveBytes decompressed, and stops when
// the load is cancelled. Before, a 42 MB gzip of 40 GiB was read whole
// (10 s, deaf to SIGTERM).
func TestArchivesAreReadWithinABound(t *testing.T) {
	t.Parallel()
	n, err := io.Copy(io.Discard, &archiveReader{ctx: context.Background(), r: zeros{}})
	if err == nil || !strings.Contains(err.Error(), "holds more than 256 MiB once decompressed") || n > maxArchiveBytes+1<<20 {
		t.Errorf("read %d bytes: %v", n, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := io.Copy(io.Discard, &archiveReader{ctx: ctx, r: zeros{}}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
	// Through the loader: an archive whose entries pass the bound.
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for name, content := range tpl(oneService, "") {
		tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(content)), Typeflag: tar.TypeReg})
		tw.Write([]byte(content))
	}
	const junk = maxArchiveBytes + 1<<20
	tw.WriteHeader(&tar.Header{Name: "junk", Mode: 0o644, Size: junk, Typeflag: tar.TypeReg})
	io.CopyN(tw, zeros{}, junk)
	tw.Close()
	zw.Close()
	p := filepath.Join(t.TempDir(), "big.tar.gz")
	os.WriteFile(p, buf.Bytes(), 0o644)
	if l := Load(p); l.Valid() || !strings.Contains(l.Problems[0].Message, "big.tar.gz: cannot read the archive: holds more than 256 MiB once decompressed") {
		t.Errorf("problems %v", l.Problems)
	}
}

// TestMissingFilesAreSaidAtValidation (issue 34, F6): a file compose-go
// needs at launch (an env file, a label file, an include, an extended
// file) that is not there is reported by validation, not first by a
// launch; an archive's message says where its files are looked for.
func TestMissingFilesAreSaidAtValidation(t *testing.T) {
	t.Parallel()
	tests := map[string]struct {
		compose string
		want    string // "" when the template is valid
	}{
		"a missing env file":   {"services:\n  app:\n    image: busybox\n    env_file: app.env\n", `services.app.env_file[0]: "app.env" does not exist in the template directory; add it, or mark it ` + "`required: false`"},
		"an optional env file": {"services:\n  app:\n    image: busybox\n    env_file: [{path: app.env, required: false}]\n", ""},
		"a required: 'false'":  {"services:\n  app:\n    image: busybox\n    env_file: [{path: app.env, required: 'false'}]\n", ""},
		// Round 12: a remote include was named mangled ("oci:/registry…")
		// and called missing, with "add it" as the fix.
		"an OCI include":         {"include: ['oci://registry.example/x:1']\nservices:\n  app:\n    image: busybox\n", `include[0].path[0]: "oci://registry.example/x:1" is a remote file, which docker compose fetches`},
		"a git include":          {"include: ['git@github.com:x/y.git']\nservices:\n  app:\n    image: busybox\n", `include[0].path[0]: "git@github.com:x/y.git" is a remote file`},
		"a remote extends":       {"services:\n  app:\n    image: busybox\n    extends: {file: 'https://example.com/base.yml', service: b}\n", `"https://example.com/base.yml" is a remote file`},
		"a missing label file":   {"services:\n  app:\n    image: busybox\n    label_file: labels\n", `services.app.label_file[0]: "labels" does not exist in the template directory; add it;`},
		"a missing include":      {"include: [part.yml]\n" + oneService, `include[0].path[0]: "part.yml" does not exist`},
		"a missing extends file": {"services:\n  app:\n    image: busybox\n    extends: {file: base.yml, service: b}\n", `services.app.extends.file: "base.yml" does not exist`},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			l := Load(MustWriteTemplate(t, "tpl", tpl(tt.compose, "")))
			if tt.want == "" {
				if !l.Valid() {
					t.Fatalf("invalid: %v", l.Problems)
				}
				return
			}
			if l.Valid() {
				t.Fatalf("valid, want %q", tt.want)
			}
			if p := l.Problems[0]; p.Code != sim.EComposeInvalid || !strings.Contains(p.Message, tt.want) {
				t.Errorf("problem %s %q, want COMPOSE_INVALID containing %q", p.Code, p.Message, tt.want)
			}
		})
	}
	t.Run("in an archive", func(t *testing.T) {
		t.Parallel()
		dir := MustWriteTemplate(t, "packed", tpl("services:\n  app:\n    image: busybox\n    env_file: app.env\n", ""))
		writeFiles(t, dir, map[string]string{"app.env": "A=1\n"})
		archive := writeTar(t, dir, "packed.tgz", "", true)
		l := Load(archive)
		if l.Valid() {
			t.Fatal("valid: the env file is in the archive but nothing beside it, where a launch reads it")
		}
		want := `services.app.env_file[0]: "app.env" is not there: the files a template archive's compose.yml names are read beside the archive, as if it were unpacked to ` + strings.TrimSuffix(archive, ".tgz") + ` (nothing is extracted)`
		if p := l.Problems[0]; !strings.Contains(p.Message, want) {
			t.Errorf("problem %q, want it to contain %q", p.Message, want)
		}
	})
}

// TestFilesNamedByRespelledKeysAreJudged (issue 34, the third attack's
// finding 1): a key spelled with an escape ("\x69nclude", JSON's
// "\u0069nclude") or a tag is the same key once parsed, and is judged as
// the plain one is. Before, the walk was skipped: validate read
// /dev/zero until it ran out of memory, a launch read an env file
// outside the template, and 30 services depending on each other kept
// validation busy for minutes.
func TestFilesNamedByRespelledKeysAreJudged(t *testing.T) {
	t.Parallel()
	outside := filepath.Join(t.TempDir(), "outside.yml")
	writeFiles(t, filepath.Dir(outside), map[string]string{"outside.yml": "services: {x: {image: busybox}}\n"})
	tests := map[string]struct{ compose, want string }{
		"an escaped include of /dev/zero": {`"\x69nclude": [/dev/zero]` + "\n" + oneService, `include[0].path[0]: "/dev/zero" is outside the template directory`},
		"a JSON include outside":          {`{"\u0069nclude": ["` + outside + `"], "services": {"app": {"image": "busybox"}}}`, `include[0].path[0]: "` + outside + `" is outside the template directory`},
		"a tagged include":                {"!!str include: [/dev/zero]\n" + oneService, `"/dev/zero" is outside the template directory`},
		"a binary include":                {"!!binary aW5jbHVkZQ==: [/dev/zero]\n" + oneService, `"/dev/zero" is outside the template directory`},
		"an escaped env_file":             {"services:\n  app:\n    image: busybox\n    \"env_\\x66ile\": /dev/zero\n", `services.app.env_file[0]: "/dev/zero" is outside the template directory`},
		"escaped dense depends_on":        {dense(30, `"depends_\x6fn"`), "paths"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			start := time.Now()
			l := Load(MustWriteTemplate(t, "tpl", tpl(tt.compose, "")))
			if l.Valid() {
				t.Fatalf("valid, want %q", tt.want)
			}
			if p := l.Problems[0]; p.Code != sim.EComposeInvalid || !strings.Contains(p.Message, tt.want) {
				t.Errorf("problem %s %q, want COMPOSE_INVALID containing %q", p.Code, p.Message, tt.want)
			}
			t.Logf("refused in %v", time.Since(start))
		})
	}
}

// utf16WithBOM is s as UTF-16 (little-endian) with its byte-order mark,
// which the YAML parser reads as it reads UTF-8.
func utf16WithBOM(s string) string {
	b := []byte{0xFF, 0xFE}
	for _, u := range utf16.Encode([]rune(s)) {
		b = append(b, byte(u), byte(u>>8))
	}
	return string(b)
}

// TestFilesNamedInAnyEncodingOrFromHomeAreJudged (issue 34, the fourth
// attack's findings 1 and 2): a compose file in UTF-16 is the same file to
// the YAML parser, and "~/x" is read by compose-go in the home directory
// of whoever runs normsim. Before, a UTF-16 include of /dev/zero ran
// validate out of memory and a UTF-16 dense depends_on took a minute; an
// env_file "~/secret.env" put a file from $HOME in the job's environment,
// and "~/../dev/zero" crashed the sim at launch.
func TestFilesNamedInAnyEncodingOrFromHomeAreJudged(t *testing.T) {
	t.Parallel()
	tests := map[string]struct{ compose, want string }{
		"a UTF-16 include of /dev/zero": {utf16WithBOM("include: [/dev/zero]\n" + oneService), `"/dev/zero" is outside the template directory`},
		"a UTF-16 dense depends_on":     {utf16WithBOM(dense(30, "depends_on")), "paths"},
		"an env_file in ~":              {"services:\n  app:\n    image: busybox\n    env_file: [{path: ~/secret.env, required: false}]\n", `services.app.env_file[0]: "~/secret.env" starts with ~, the home directory`},
		"a label_file in ~":             {"services:\n  app:\n    image: busybox\n    label_file: ~/../dev/zero\n", `services.app.label_file[0]: "~/../dev/zero" starts with ~`},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			files := tpl(tt.compose, "")
			files["~/secret.env"] = "SECRET=no\n" // a decoy inside the template
			files["dev/zero"] = ""
			l := Load(MustWriteTemplate(t, "tpl", files))
			if l.Valid() {
				t.Fatalf("valid, want %q", tt.want)
			}
			if p := l.Problems[0]; p.Code != sim.EComposeInvalid || !strings.Contains(p.Message, tt.want) {
				t.Errorf("problem %s %q, want COMPOSE_INVALID containing %q", p.Code, p.Message, tt.want)
			}
		})
	}
}

// dense is n services, each depending on every one before it, written
// with the key given ("depends_on", "links", or a spelling of one).
func dense(n int, key string) string {
	var b strings.Builder
	b.WriteString("services:\n")
	for i := range n {
		fmt.Fprintf(&b, "  s%d:\n    image: busybox\n", i)
		if i > 0 {
			fmt.Fprintf(&b, "    %s: [", key)
			for j := range i {
				if j > 0 {
					b.WriteString(", ")
				}
				fmt.Fprintf(&b, "s%d", j)
			}
			b.WriteString("]\n")
		}
	}
	return b.String()
}

// round 13, B3: secrets and configs sources validated ok and failed every
// launch: a file: that is missing, or inside a .tar (looked for beside it),
// or outside the template (/etc/hostname was mounted), and an environment:
// source, which compose takes from an environment normsim never gives it.
func TestSecretAndConfigSources(t *testing.T) {
	svc := "services:\n  app:\n    image: busybox\n    secrets: [s1]\n    configs: [c1]\n"
	tests := map[string]struct {
		top   string
		files map[string]string
		want  string
	}{
		"fine":                    {"secrets:\n  s1:\n    file: ./s.txt\nconfigs:\n  c1:\n    file: conf/c.txt\n", map[string]string{"s.txt": "x", "conf/c.txt": "y"}, ""},
		"fine, content, external": {"secrets:\n  s1:\n    external: true\nconfigs:\n  c1:\n    content: hello\n", nil, ""},
		"a missing secret file":   {"secrets:\n  s1:\n    file: ./nope.txt\nconfigs:\n  c1:\n    content: x\n", nil, `secrets.s1.file: "nope.txt" does not exist in the template directory`},
		"a missing config file":   {"secrets:\n  s1:\n    external: true\nconfigs:\n  c1:\n    file: ./nope.txt\n", nil, `configs.c1.file: "nope.txt" does not exist in the template directory`},
		"outside":                 {"secrets:\n  s1:\n    file: /etc/hostname\nconfigs:\n  c1:\n    content: x\n", nil, `secrets.s1.file: "/etc/hostname" is outside the template directory`},
		"a variable":              {"secrets:\n  s1:\n    file: ./${F}\nconfigs:\n  c1:\n    content: x\n", nil, `secrets.s1.file: "./${F}" holds a variable`},
		"environment":             {"secrets:\n  s1:\n    environment: HOME\nconfigs:\n  c1:\n    content: x\n", nil, `secrets.s1.environment: "HOME": normsim runs compose with no environment`},
		"a config's environment":  {"secrets:\n  s1:\n    external: true\nconfigs:\n  c1:\n    environment: TOKEN\n", nil, `write content: ${TOKEN}`},
	}
	for name, c := range tests {
		t.Run(name, func(t *testing.T) {
			files := tpl(svc+c.top, "")
			for f, content := range c.files {
				files[f] = content
			}
			l := Load(MustWriteTemplate(t, "sec", files))
			if c.want == "" {
				if !l.Valid() {
					t.Fatalf("problems %v, want valid", l.Problems)
				}
				if _, err := l.Launch(input(nil)); err != nil {
					t.Fatal(err)
				}
				return
			}
			if l.Valid() || len(l.Problems) != 1 || l.Problems[0].Code != sim.EComposeInvalid || !strings.Contains(l.Problems[0].Message, c.want) {
				t.Fatalf("problems %v, want COMPOSE_INVALID saying %q", l.Problems, c.want)
			}
		})
	}
	t.Run("in an archive", func(t *testing.T) {
		dir := MustWriteTemplate(t, "src", tpl(svc+"secrets:\n  s1:\n    file: ./s.txt\nconfigs:\n  c1:\n    content: x\n", ""))
		writeFiles(t, dir, map[string]string{"s.txt": "x"})
		l := Load(writeTar(t, dir, "sec.tar", "", false))
		if l.Valid() || !strings.Contains(l.Problems[0].Message, `secrets.s1.file: "s.txt" is not there: the files a template archive's compose.yml names are read beside the archive`) {
			t.Fatalf("problems %v, want the secret's file not beside the archive", l.Problems)
		}
	})
	t.Run("removed after validate", func(t *testing.T) {
		dir := MustWriteTemplate(t, "sec", tpl(svc+"secrets:\n  s1:\n    file: ./s.txt\nconfigs:\n  c1:\n    content: x\n", ""))
		writeFiles(t, dir, map[string]string{"s.txt": "x"})
		l := Load(dir)
		if !l.Valid() {
			t.Fatalf("problems %v, want valid", l.Problems)
		}
		if err := os.Remove(filepath.Join(dir, "s.txt")); err != nil {
			t.Fatal(err)
		}
		_, err := l.Launch(input(nil))
		wantErr(t, err, sim.EComposeInvalid, `secrets.s1.file: "s.txt" does not exist in the template directory`)
	})
}
