package cli_test

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/normsim/normsim/apiclient"
	"github.com/normsim/normsim/internal/bench"
	"github.com/normsim/normsim/internal/testenv"
	"github.com/normsim/normsim/normsimtest/normsimdocker"
)

// A command block of the docs is a fenced block whose info string is sh,
// bash or shell. One that is not meant to be run says so, with the reason,
// in an HTML comment on the line before its fence:
//
//	<!-- not run: a job author's own scenarios/ directory -->
var (
	fenceRe  = regexp.MustCompile("^```\\s*(\\w*)")
	notRunRe = regexp.MustCompile(`^<!--\s*not run:\s*(\S.*?)\s*-->$`)
)

type docBlock struct {
	file  string
	line  int
	lines []string
	skip  string // why it is not run
}

func docBlocks(t *testing.T, root string) []docBlock {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	files = append([]string{filepath.Join(root, "README.md")}, files...)
	var blocks []docBlock
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, f)
		var cur *docBlock
		prev := ""
		for i, line := range strings.Split(string(b), "\n") {
			m := fenceRe.FindStringSubmatch(line)
			switch {
			case cur != nil && m != nil:
				blocks = append(blocks, *cur)
				cur = nil
			case cur != nil:
				cur.lines = append(cur.lines, line)
			case m != nil:
				switch m[1] {
				case "sh", "bash", "shell":
					cur = &docBlock{file: rel, line: i + 1}
					if n := notRunRe.FindStringSubmatch(strings.TrimSpace(prev)); n != nil {
						cur.skip = n[1]
					}
				default:
					cur = &docBlock{file: rel, line: i + 1, skip: "not a shell block"}
				}
			}
			if strings.TrimSpace(line) != "" {
				prev = line
			}
		}
	}
	out := blocks[:0]
	for _, b := range blocks {
		if b.skip != "not a shell block" {
			out = append(out, b)
		}
	}
	return out
}

// TestDocumentedCommands runs every command block of README.md and
// docs/*.md that is meant to be run, line by line, in a copy of the
// repository (so reports and builds land there), and requires each command
// to exit 0. `go run .` and `normsim` are a normsim built once for the
// test. A `normsim up` runs in the background on free ports (--addr 0 and
// --socket-port 0 are added, so it runs beside anything else on this
// machine) until the block ends; the block's other commands talk to it
// through NORMSIM_SERVER (as HOST:PORT), `<id>` is the instance the block last launched,
// and the sim must stop cleanly on Ctrl-C. scripts/test is the suite this
// test belongs to: it is checked to exist, not run.
func TestDocumentedCommands(t *testing.T) {
	if testing.Short() {
		t.Skip("builds normsim and runs the documented commands")
	}
	root, _ := filepath.Abs("..")
	blocks := docBlocks(t, root)
	if len(blocks) == 0 {
		t.Fatal("no command blocks found in README.md and docs/*.md")
	}
	work := copyRepo(t, root)
	bin, err := bench.Build(context.Background(), root, ".", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	docker := dockerAnswers()
	if docker {
		// What the scenarios run on the Docker runtime (auto picks it).
		jobs, _ := os.ReadDir(filepath.Join(root, "examples", "jobs"))
		for _, j := range jobs {
			if _, err := os.Stat(filepath.Join(root, "examples", "jobs", j.Name(), "main.go")); err == nil {
				normsimdocker.BuildSourceImage(t, "normsim/"+j.Name(), filepath.Join(root, "examples", "jobs", j.Name()))
			}
		}
	}
	t.Setenv("XDG_STATE_HOME", t.TempDir()) // a default --db lands here, not in ~/.local/state
	for _, b := range blocks {
		t.Run(fmt.Sprintf("%s:%d", b.file, b.line), func(t *testing.T) {
			if b.skip != "" {
				t.Skipf("marked not run: %s", b.skip)
			}
			r := &docRunner{t: t, dir: work, bin: bin, docker: docker}
			defer r.stopServer()
			for _, line := range b.lines {
				for _, cmd := range strings.Split(stripComment(line), "&&") {
					if args := shellWords(t, strings.TrimSpace(cmd), work); len(args) > 0 {
						r.run(args)
					}
				}
			}
		})
	}
}

type docRunner struct {
	t      *testing.T
	dir    string
	bin    string
	docker bool
	server *exec.Cmd
	exited chan error
	url    string
	lastID string
	out    *testenv.SyncBuffer // normsim up's output
}

func (r *docRunner) run(args []string) {
	t := r.t
	t.Helper()
	shown := strings.Join(args, " ")
	switch {
	case len(args) >= 3 && args[0] == "go" && args[1] == "run" && args[2] == ".":
		args = append([]string{r.bin}, args[3:]...)
	case args[0] == "normsim" || args[0] == "./normsim":
		args = append([]string{r.bin}, args[1:]...)
	case args[0] == "scripts/test":
		if st, err := os.Stat(filepath.Join(r.dir, args[0])); err != nil || st.Mode()&0o111 == 0 {
			t.Fatalf("%s: not an executable script (%v)", shown, err)
		}
		return
	}
	if strings.Contains(shown, "docker") || strings.Contains(shown, "build-examples") {
		if !r.docker {
			if os.Getenv(testenv.RequireDockerEnv) == "1" {
				t.Fatalf("%s needs a Docker engine and none answers", shown)
			}
			t.Logf("not run, no Docker engine answers: %s", shown)
			return
		}
	}
	for i, a := range args {
		if a == "<id>" {
			if r.lastID == "" {
				t.Fatalf("%s: no instance launched before it in this block", shown)
			}
			args[i] = r.lastID
		}
	}
	if args[0] == r.bin && len(args) > 1 && args[1] == "up" {
		r.startServer(shown, args)
		return
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Dir = r.dir
	cmd.Env = os.Environ()
	if r.url != "" {
		cmd.Env = append(cmd.Env, "NORMSIM_SERVER="+strings.TrimPrefix(r.url, "http://"))
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	err := cmd.Run()
	t.Logf("$ %s  (%s)\n%s", shown, time.Since(start).Round(time.Millisecond), tail(out.String(), 40))
	if err != nil {
		t.Fatalf("%s: %v\n%s", shown, err, out.String())
	}
	if len(args) > 1 && args[0] == r.bin && args[1] == "launch" {
		r.lastID = strings.Fields(out.String())[0]
		r.waitConnected(shown)
	}
	for i, a := range args {
		if a == "--junit" && i+1 < len(args) {
			if b, err := os.ReadFile(filepath.Join(r.dir, args[i+1])); err != nil || !bytes.Contains(b, []byte("<testsuites")) {
				t.Fatalf("%s: no JUnit report at %s (%v)", shown, args[i+1], err)
			}
		}
	}
}

// waitConnected waits for the instance just launched to be running with
// its job connected: a reader of the docs types the next command seconds
// later, by when it is; the test must not outpace them.
func (r *docRunner) waitConnected(shown string) {
	t := r.t
	t.Helper()
	c := apiclient.New(cmp.Or(r.url, "http://127.0.0.1:7788"), nil)
	deadline := time.Now().Add(60 * time.Second)
	for {
		in, err := c.Instance(context.Background(), r.lastID)
		if err == nil && in.Connected {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %s not connected within 60 s (%+v, %v)", shown, r.lastID, in, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

var dashboardRe = regexp.MustCompile(`Dashboard\s+(http://\S+?)/?\s`)

func (r *docRunner) startServer(shown string, args []string) {
	t := r.t
	t.Helper()
	if r.server != nil {
		t.Fatalf("%s: a normsim up of this block is already running", shown)
	}
	// "0" and a scheme-less NORMSIM_SERVER below are what the flags'
	// help promises; running the docs with them keeps them working.
	args = append(args, "--addr", "0", "--socket-port", "0")
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Dir = r.dir
	pr, pw := io.Pipe()
	out := &testenv.SyncBuffer{}
	r.out = out
	cmd.Stdout, cmd.Stderr = io.MultiWriter(pw, out), out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	r.server, r.exited = cmd, make(chan error, 1)
	go func() { r.exited <- cmd.Wait(); pw.Close() }()
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			if m := dashboardRe.FindStringSubmatch(sc.Text() + " "); m != nil {
				found <- m[1]
				break
			}
		}
		io.Copy(io.Discard, pr)
	}()
	select {
	case r.url = <-found:
		t.Logf("$ %s  (in the background on %s)", shown, r.url)
	case <-time.After(60 * time.Second):
		t.Fatalf("%s: no banner within 60 s\n%s", shown, out.String())
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("normsim up's output:\n%s", tail(out.String(), 60))
		}
	})
}

func (r *docRunner) stopServer() {
	if r.server == nil {
		return
	}
	r.server.Process.Signal(syscall.SIGINT)
	select {
	case err := <-r.exited:
		if err != nil {
			r.t.Errorf("normsim up did not stop cleanly on Ctrl-C: %v", err)
		}
		// Ctrl-C says what it removes and when it is done.
		out := r.out.String()
		want := "Stopping normsim: no instances to remove"
		if r.lastID != "" {
			want = "Stopping normsim: removing 1 instance: " // the one launched, or what it migrated to
		}
		if !strings.Contains(out, want) || !strings.HasSuffix(out, "normsim stopped.\n") {
			r.t.Errorf("normsim up's Ctrl-C output lacks %q or does not end with \"normsim stopped.\":\n%s", want, tail(out, 10))
		}
	case <-time.After(60 * time.Second):
		r.server.Process.Kill()
		r.t.Errorf("normsim up did not stop within 60 s of Ctrl-C")
	}
}

// stripComment cuts a trailing shell comment (a # after a blank, outside
// quotes).
func stripComment(line string) string {
	quote := rune(0)
	for i, c := range line {
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			}
		case c == '\'' || c == '"':
			quote = c
		case c == '#' && (i == 0 || line[i-1] == ' ' || line[i-1] == '\t'):
			return line[:i]
		}
	}
	return line
}

// shellWords splits a command as sh would for the docs' commands: blanks
// separate words, quotes group, and a word with * is a glob expanded in
// dir, where the commands run. Anything more (pipes, redirections,
// variables) is refused, so a block needing a real shell is marked.
func shellWords(t *testing.T, s, dir string) (words []string) {
	t.Helper()
	// <id> is the docs' placeholder, not a redirection.
	const id = "\x00id\x00"
	s = strings.ReplaceAll(s, "<id>", id)
	defer func() {
		for i, w := range words {
			words[i] = strings.ReplaceAll(w, id, "<id>")
		}
	}()
	var cur strings.Builder
	in, quote, glob := false, rune(0), false
	flush := func() {
		if !in {
			return
		}
		w := cur.String()
		cur.Reset()
		in = false
		if glob {
			glob = false
			if m, _ := filepath.Glob(filepath.Join(dir, w)); len(m) > 0 {
				for _, p := range m {
					rel, _ := filepath.Rel(dir, p)
					words = append(words, rel)
				}
				return
			}
		}
		words = append(words, w)
	}
	for _, c := range s {
		switch {
		case quote != 0 && c == quote:
			quote = 0
		case quote != 0:
			cur.WriteRune(c)
		case c == '\'' || c == '"':
			quote, in = c, true
		case c == ' ' || c == '\t':
			flush()
		case c == '|' || c == ';' || c == '<' || c == '>' || c == '&' || c == '$' || c == '`':
			t.Fatalf("command %q uses %q, which this test does not run; mark its block <!-- not run: why -->", s, c)
		default:
			if c == '*' {
				glob = true
			}
			cur.WriteRune(c)
			in = true
		}
	}
	if quote != 0 {
		t.Fatalf("command %q has an unclosed quote", s)
	}
	flush()
	return words
}

// copyRepo copies the repository's files (tracked and untracked, not
// ignored) to a temporary directory.
func copyRepo(t *testing.T, root string) string {
	t.Helper()
	out, err := exec.Command("git", "-C", root, "ls-files", "-co", "--exclude-standard", "-z").Output()
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	dst := t.TempDir()
	for _, f := range strings.Split(strings.TrimRight(string(out), "\x00"), "\x00") {
		src := filepath.Join(root, f)
		st, err := os.Lstat(src)
		if err != nil || !st.Mode().IsRegular() {
			continue // deleted in the work tree, or not a file
		}
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dst, f)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, st.Mode().Perm()); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

func dockerAnswers() bool {
	return exec.Command("docker", "info").Run() == nil
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = append([]string{"..."}, lines[len(lines)-n:]...)
	}
	return strings.Join(lines, "\n")
}
