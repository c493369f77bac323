package cli_test

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/normsim/normsim/cli"
	"github.com/normsim/normsim/scenario"
)

// ci runs `normsim ci` through cli.Main, as the binary does.
func ci(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := cli.Main(append([]string{"ci"}, args...), cli.Env{Stdout: &out, Stderr: &errb})
	return code, out.String(), errb.String()
}

func exampleScenarios(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, name := range []string{"counter-handover.yaml", "counter-stop-then-start.yaml", "relay-overlap.yaml",
		"counter-refuses-overlap.yaml", "plain-repeat.yaml"} {
		out = append(out, filepath.Join("..", "examples", "scenarios", name))
	}
	return out
}

// junitCounts reads the totals of a JUnit report.
func junitCounts(t *testing.T, path string) (tests, failures, errs int, data string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("JUnit report: %v", err)
	}
	var doc struct {
		Tests    int `xml:"tests,attr"`
		Failures int `xml:"failures,attr"`
		Errors   int `xml:"errors,attr"`
	}
	if err := xml.Unmarshal(b, &doc); err != nil {
		t.Fatalf("JUnit report is not XML: %v\n%s", err, b)
	}
	return doc.Tests, doc.Failures, doc.Errors, string(b)
}

func TestCIExamplesPassExit0(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real jobs")
	}
	dir := t.TempDir()
	junit, js := filepath.Join(dir, "out.xml"), filepath.Join(dir, "reports", "out.json")
	args := append(exampleScenarios(t), "--runtime", "process", "--templates", "../templates", "--junit", junit, "--json", js)
	code, out, errOut := ci(t, args...)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	for _, want := range []string{"=== counter hands over seamlessly a→b→a", "--- PASS relay-overlap overlaps its output",
		"PASS  5 scenario(s): 5 passed, 0 failed; 25 step(s): 25 passed"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if tests, failures, errs, _ := junitCounts(t, junit); tests != 25 || failures != 0 || errs != 0 {
		t.Errorf("JUnit totals %d/%d/%d", tests, failures, errs)
	}
	b, err := os.ReadFile(js)
	if err != nil {
		t.Fatal(err)
	}
	var rep scenario.Report
	if err := json.Unmarshal(b, &rep); err != nil || !rep.Passed || len(rep.Scenarios) != 5 {
		t.Fatalf("JSON report: %v passed=%v", err, rep.Passed)
	}
	migrations := 0
	for _, s := range rep.Scenarios {
		for _, st := range s.Steps {
			if st.Migration != nil {
				migrations++
				if len(st.Migration.Events) == 0 {
					t.Errorf("migration %s without its timeline", st.Migration.ID)
				}
			}
		}
	}
	if migrations != 11 { // 2 + 1 + 1 + 1 (the overlap is refused) + 3×2
		t.Errorf("%d migrations in the JSON report, want 11", migrations)
	}
}

// TestCIReportsTargetApplied: the apply-fails scenario expects what its
// target reported and the judgement; the JSON report carries the result
// and the judgement with the checks, the JUnit summary prints them.
func TestCIReportsTargetApplied(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real jobs")
	}
	dir := t.TempDir()
	junit, js := filepath.Join(dir, "out.xml"), filepath.Join(dir, "out.json")
	code, out, errOut := ci(t, filepath.Join("..", "examples", "scenarios", "misbehaving-apply-fails.yaml"),
		"--runtime", "process", "--templates", "../templates", "--junit", junit, "--json", js)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	b, err := os.ReadFile(js)
	if err != nil {
		t.Fatal(err)
	}
	var rep scenario.Report
	if err := json.Unmarshal(b, &rep); err != nil || len(rep.Scenarios) != 1 {
		t.Fatalf("JSON report: %v", err)
	}
	st := rep.Scenarios[0].Steps[2]
	m := st.Migration
	if m == nil || m.Judgement == nil || m.Judgement.Grade != "tolerated" || len(m.Result.Failed) != 1 || m.Result.Failed[0].ID != "overlay" ||
		m.Result.Failed[0].Reason == "" || m.Result.SkewMs == nil {
		t.Fatalf("JSON report's migration %+v", m)
	}
	got := map[string]string{}
	for _, c := range st.Checks {
		got[c.Expect] = c.Got
	}
	if got["applied"] != "[counter]" || got["failed"] != "[overlay]" || got["atFault"] != "none" || got["judgement"] != "tolerated" {
		t.Errorf("checks %+v", st.Checks)
	}
	if e := st.Expect; e == nil || e.Failed == nil || len(*e.Failed) != 1 || (*e.Failed)[0] != "overlay" || e.Judgement != "tolerated" {
		t.Errorf("the JSON report's expect %+v", e)
	}
	_, _, _, data := junitCounts(t, junit)
	for _, want := range []string{"target-applied: applied counter; failed overlay (font /fonts/lower-third.ttf is missing on this node); skewMs 4",
		"judgement: tolerated (at fault: none): the target could not apply 1 participant"} {
		if !strings.Contains(data, want) {
			t.Errorf("JUnit report lacks %q:\n%s", want, data)
		}
	}
}

func TestCIWrongExpectationExit1(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real jobs")
	}
	junit := filepath.Join(t.TempDir(), "out.xml")
	code, out, errOut := ci(t, filepath.Join("..", "scenario", "testdata", "wrong", "handover-expects-gap.yaml"),
		"--runtime", "process", "--templates", "../templates", "--junit", junit)
	if code != 1 {
		t.Fatalf("exit %d, want 1\n%s\n%s", code, out, errOut)
	}
	if !strings.Contains(out, "expected seam gap, got seamless (source stopped at") || !strings.Contains(errOut, "ci: 1 of 1 scenario(s) failed") {
		t.Errorf("output does not say what happened instead:\n%s\n%s", out, errOut)
	}
	tests, failures, errs, data := junitCounts(t, junit)
	if tests != 4 || failures != 1 || errs != 0 || !strings.Contains(data, `<failure message="expected seam gap, got seamless`) {
		t.Errorf("JUnit %d/%d/%d:\n%s", tests, failures, errs, data)
	}
}

func TestCIBrokenScenarioExit2(t *testing.T) {
	dir := t.TempDir()
	junit := filepath.Join(dir, "out.xml")
	broken := filepath.Join("..", "scenario", "testdata", "broken", "unknown-migrate-key.yaml")
	good := exampleScenarios(t)[0]
	code, out, errOut := ci(t, good, broken, "--templates", "../templates", "--junit", junit)
	if code != 2 {
		t.Fatalf("exit %d, want 2\n%s\n%s", code, out, errOut)
	}
	if !strings.Contains(errOut, broken+`:4:22: steps[1].migrate: unknown key "stratgy" (did you mean "strategy"?)`) ||
		!strings.Contains(errOut, "ci: 1 problem(s) in the scenario files; nothing was run") {
		t.Errorf("stderr does not name the line and the problem:\n%s", errOut)
	}
	if strings.Contains(out, "===") {
		t.Errorf("a scenario ran although a file is broken:\n%s", out)
	}
	if _, _, errs, data := junitCounts(t, junit); errs != 1 || !strings.Contains(data, "unknown key") {
		t.Errorf("JUnit report of the broken file:\n%s", data)
	}

	// A template that is not loaded is found once the sim is up, before
	// anything runs, and is a problem of the file too.
	f := filepath.Join(dir, "nope.yaml")
	os.WriteFile(f, []byte("template: counter\nsteps:\n  - launch: {template: nope}\n"), 0o644)
	code, out, errOut = ci(t, f, "--templates", "../templates", "--runtime", "process")
	if code != 2 || !strings.Contains(errOut, f+`:3:24: template "nope" is not loaded; loaded: counter, plain, relay-overlap`) {
		t.Errorf("unknown template: exit %d\n%s\n%s", code, out, errOut)
	}
}

func TestCIUsageAndSchema(t *testing.T) {
	for _, args := range [][]string{
		{},
		{"x.yaml", "--runtime", "external"},
		{"x.yaml", "--runtime", "kubernetes"},
		{"../examples/scenarios/counter-handover.yaml", "--templates", "/no/such/dir"},
		{"no-such-file.yaml"},
		{"--no-such-flag"},
	} {
		code, _, errOut := ci(t, args...)
		if code != 2 || errOut == "" {
			t.Errorf("ci %v: exit %d, stderr %q; want 2 with a message", args, code, errOut)
		}
	}
	code, out, _ := ci(t, "--schema")
	docs, err := os.ReadFile("../docs/scenario.schema.json")
	if err != nil || code != 0 || out != string(docs) {
		t.Errorf("--schema: exit %d, equal to docs/scenario.schema.json: %v (%v)", code, out == string(docs), err)
	}
	code, out, _ = ci(t, append([]string{"--check", "--templates", "../templates"}, exampleScenarios(t)...)...)
	if code != 0 || out != "5 scenario(s) in 5 file(s): valid, with the templates they launch, their params and the strategies they ask for\n" {
		t.Errorf("--check: exit %d %q", code, out)
	}
	code, _, errOut := ci(t, "--check", "../scenario/testdata/broken")
	if code != 2 || !strings.Contains(errOut, "syntax.yaml:4: not valid YAML") {
		t.Errorf("--check of a directory of broken files: exit %d\n%s", code, errOut)
	}
}

// TestCICheckRejectsWhatTheRunRejects: a scenario whose template is not
// loaded, or whose launch params the template refuses, fails --check with
// exit 2, and a real run refuses it the same way, before anything runs.
func TestCICheckRejectsWhatTheRunRejects(t *testing.T) {
	for _, tc := range []struct{ name, yaml, want string }{
		{"unknown template", "name: x\ntemplate: nosuch\nsteps:\n  - launch: {node: a}\n",
			`x.yaml:2:11: template "nosuch" is not loaded; loaded: counter, plain, relay-overlap`},
		{"param out of range", "name: x\ntemplate: counter\nparams: {RATE: 5000}\nsteps:\n  - launch: {node: a}\n",
			`x.yaml:5:5: launch counter on a: template counter refuses these params: params.RATE: must be at most 1000; got "5000"`},
		{"unknown param in a step", "name: x\ntemplate: counter\nsteps:\n  - launch: {node: a, params: {RATE: 10, SPEED: 2}}\n",
			`x.yaml:4:5: launch counter on a: template counter refuses these params: params.SPEED: unknown parameter; the template declares RATE`},
		// Issue 34: --check passed a strategy the template refuses, and
		// the run then failed the step on the API's 422.
		{"strategy the template refuses", "name: x\ntemplate: counter\nsteps:\n  - launch: {node: a}\n  - migrate: {to: b, strategy: overlap}\n",
			`x.yaml:5:5: migrate to b (overlap): template counter declares handover, so the API refuses strategy overlap (422) and the step can only fail; use stopThenStart or handover, or expect {error: 422} to test the refusal`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := filepath.Join(t.TempDir(), "x.yaml")
			if err := os.WriteFile(f, []byte(tc.yaml), 0o644); err != nil {
				t.Fatal(err)
			}
			for _, mode := range [][]string{{"--check"}, {"--runtime", "process"}} {
				code, out, errOut := ci(t, append(mode, "--templates", "../templates", f)...)
				if code != 2 || !strings.Contains(errOut, filepath.Dir(f)+"/"+tc.want) || strings.Contains(out, "===") {
					t.Errorf("ci %v: exit %d; want 2 with %q and nothing run\nstdout: %s\nstderr: %s", mode, code, tc.want, out, errOut)
				}
			}
		})
	}
}

// TestCICheckRefusesAProcessRunOfADockerOnlyTemplate: a scenario on the
// process runtime whose template has a service without an x-normsim
// command fails --check (and a run) before anything starts.
func TestCICheckRefusesAProcessRunOfADockerOnlyTemplate(t *testing.T) {
	f := filepath.Join(t.TempDir(), "x.yaml")
	if err := os.WriteFile(f, []byte("name: x\ntemplate: docker-only\nruntime: process\nsteps:\n  - launch: {node: a}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	want := "template docker-only cannot run on the process runtime: service(s) job have no x-normsim command"
	for _, mode := range [][]string{{"--check"}, {"--runtime", "process"}} {
		code, out, errOut := ci(t, append(mode, "--templates", "testdata/templates", f)...)
		if code != 2 || !strings.Contains(errOut, want) {
			t.Errorf("ci %v: exit %d; want 2 with %q\nstdout: %s\nstderr: %s", mode, code, want, out, errOut)
		}
	}
	// The same file on docker passes --check: the template is fine there.
	g := filepath.Join(t.TempDir(), "y.yaml")
	os.WriteFile(g, []byte("name: y\ntemplate: docker-only\nruntime: docker\nsteps:\n  - launch: {node: a}\n"), 0o644)
	if code, _, errOut := ci(t, "--check", "--templates", "testdata/templates", g); code != 0 {
		t.Errorf("ci --check of a docker scenario: exit %d: %s", code, errOut)
	}
}
