package cli_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/normsim/normsim/cli"
	"github.com/normsim/normsim/conform"
)

// conformCmd runs `normsim conform` through cli.Main, as the binary does.
func conformCmd(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := cli.Main(append([]string{"conform"}, args...), cli.Env{Stdout: &out, Stderr: &errb})
	return code, out.String(), errb.String()
}

var exampleTemplates = []string{"--templates", "../templates", "--templates", "../examples/templates"}

func TestConformRefusesWhatCannotRunWithExit2(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"no-such"}, `template "no-such" not found (loaded: apply-fails, counter, crash-on-apply`},
		{[]string{"counter", "--case", "9.*"}, `"9.*" matches none of the 66 cases`},
		{[]string{"counter", "--param", "RATE=fast"}, "RATE"},
		{[]string{"counter", "--param", "=1"}, "want KEY=VALUE"},
		{[]string{"counter", "--param", "RATE=5", "--param", "RATE=6"}, `--param: RATE is given twice ("5" and "6"); give each parameter once`},
		{[]string{"counter", "--runtime", "external"}, "external waits for jobs you start yourself"},
		{[]string{"counter", "--parallel", "0"}, "--parallel: want at least 1"},
		{[]string{"counter", "--seed", "3"}, "go with --chaos"},
		{[]string{"counter", "--chaos", "--run", "2"}, "give the --seed it was drawn from"},
		{[]string{"counter", "--chaos", "--case", "1.1"}, "--chaos runs no matrix"},
		{[]string{"counter", "--rerun-failed", "no-such.json"}, "--rerun-failed: open no-such.json"},
		{[]string{"counter", "--rerun-failed", "conform_test.go"}, "is not a JSON report of normsim conform"},
		{[]string{"counter", "--rerun-failed", "x.json", "--case", "1.1"}, "leave --case out"},
		{[]string{"relay-overlap", "--chaos"}, "--chaos draws faults of the handover protocol"},
		{[]string{}, "TEMPLATE"},
	} {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			code, out, errOut := conformCmd(t, append(tt.args, exampleTemplates...)...)
			if code != 2 || !strings.Contains(errOut, tt.want) {
				t.Fatalf("exit %d, stderr %q (stdout %q); want 2 saying %q", code, errOut, out, tt.want)
			}
		})
	}
}

func TestConformListPrintsTheMatrix(t *testing.T) {
	code, out, errOut := conformCmd(t, append([]string{"counter", "--list"}, exampleTemplates...)...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{"66 case(s) for counter (handover)", "1.2   handover", "kill the target on target-ready",
		"source-stopped-output held past its phase's timeout (3s of 2s)", "failed, reported, nothing rolled back"} {
		if !strings.Contains(out, want) {
			t.Errorf("--list lacks %q:\n%s", want, out)
		}
	}
	// A list of patterns runs each, in the matrix's order.
	code, out, _ = conformCmd(t, append([]string{"counter", "--list", "--case", "4.1, 1.2"}, exampleTemplates...)...)
	if code != 0 || !strings.Contains(out, "2 case(s) for counter") || strings.Index(out, "1.2 ") > strings.Index(out, "4.1 ") {
		t.Errorf("--case 4.1,1.2 --list: exit %d\n%s", code, out)
	}
	// --rerun-failed takes the failed and errored cases of a report.
	report := filepath.Join(t.TempDir(), "conform.json")
	os.WriteFile(report, []byte(`{"template":"counter","results":[{"id":"1.1","grade":"pass"},{"id":"2.3","grade":"fail"},{"id":"3.1","grade":"error"}]}`), 0o644)
	code, out, errOut = conformCmd(t, append([]string{"counter", "--list", "--rerun-failed", report}, exampleTemplates...)...)
	if code != 0 || !strings.Contains(out, "2 case(s) for counter") || !strings.Contains(out, "2.3 ") || !strings.Contains(out, "3.1 ") {
		t.Errorf("--rerun-failed --list: exit %d\n%s%s", code, out, errOut)
	}
	code, _, errOut = conformCmd(t, append([]string{"relay-overlap", "--rerun-failed", report}, exampleTemplates...)...)
	if code != 2 || !strings.Contains(errOut, `a report of template "counter", not "relay-overlap"`) {
		t.Errorf("--rerun-failed of another template's report: exit %d: %s", code, errOut)
	}
	passed := filepath.Join(t.TempDir(), "passed.json")
	os.WriteFile(passed, []byte(`{"template":"counter","results":[{"id":"1.1","grade":"pass"}]}`), 0o644)
	if code, out, _ := conformCmd(t, append([]string{"counter", "--rerun-failed", passed}, exampleTemplates...)...); code != 0 || !strings.Contains(out, "nothing to run again") {
		t.Errorf("--rerun-failed of a clean report: exit %d\n%s", code, out)
	}
	code, out, _ = conformCmd(t, append([]string{"relay-overlap", "--list"}, exampleTemplates...)...)
	if code != 0 || !strings.Contains(out, "3 case(s) for relay-overlap (overlap)") {
		t.Errorf("overlap matrix: exit %d\n%s", code, out)
	}
}

// TestConformRunsCasesAndWritesItsReports runs two cases of the counter
// and a failing case of keeps-running on the process runtime, and checks
// the exit status and the three reports.
func TestConformRunsCasesAndWritesItsReports(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real jobs")
	}
	dir := t.TempDir()
	html, js, junit := filepath.Join(dir, "r.html"), filepath.Join(dir, "r.json"), filepath.Join(dir, "r.xml")
	code, out, errOut := conformCmd(t, append([]string{"counter", "--runtime", "process", "--case", "1.*",
		"--html", html, "--json", js, "--junit", junit}, exampleTemplates...)...)
	if code != 0 || !strings.Contains(out, "PASS  normsim conform counter") {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	b, err := os.ReadFile(js)
	if err != nil {
		t.Fatal(err)
	}
	var rep conform.Report
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Results) != 3 || rep.Counts[conform.GradePass] != 2 || rep.Counts[conform.GradeNotApplicable] != 1 || rep.Filter != "1.*" {
		t.Fatalf("JSON report: %d results, counts %v, filter %q", len(rep.Results), rep.Counts, rep.Filter)
	}
	tests, failures, errs, _ := junitCounts(t, junit)
	if tests != 3 || failures != 0 || errs != 0 {
		t.Fatalf("JUnit: %d tests, %d failures, %d errors", tests, failures, errs)
	}
	if page, err := os.ReadFile(html); err != nil || !strings.Contains(string(page), "case-1.2") {
		t.Fatalf("HTML report: %v", err)
	}

	code, out, _ = conformCmd(t, append([]string{"keeps-running", "--runtime", "process", "--case", "1.1", "--param", "RATE=100"}, exampleTemplates...)...)
	if code != 1 || !strings.Contains(out, "fail       1.1  plain handover a→b — the source sent") || !strings.Contains(out, "(at fault: the source)") {
		t.Fatalf("keeps-running 1.1: exit %d, want 1 with the failing case\n%s", code, out)
	}
}
