package conform

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"errors"
	"html"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/normsim/normsim/internal/junit/junittest"
)

func TestReportJSONRoundTrip(t *testing.T) {
	r := fixtureReport()
	var buf bytes.Buffer
	if err := r.WriteJSON(&buf); err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(buf.Bytes(), &back); err != nil {
		t.Fatalf("read the report back: %v", err)
	}
	// Compare as compact JSON: WriteJSON indents the frames' raw
	// payloads, which is layout, not content.
	want, _ := json.Marshal(r)
	got, _ := json.Marshal(&back)
	if !bytes.Equal(got, want) {
		t.Errorf("the report changed on its way through JSON:\n got %s\nwant %s", got, want)
	}
	if back.Chaos == nil || back.Chaos.Only != -1 || len(back.Chaos.Violations) != 1 {
		t.Errorf("chaos did not survive: %+v", back.Chaos)
	}
	if back.Counts[GradeNotApplicable] != 1 || back.Results[0].Observed.Producing == nil {
		t.Errorf("counts or observed lost: %v, %+v", back.Counts, back.Results[0].Observed)
	}
}

func TestCompareIDs(t *testing.T) {
	ids := []string{"2.10", "10.1", "1.1", "2.9", "2", "1.2.1", "1.10", "1.2", "a.1"}
	slices.SortFunc(ids, compareIDs)
	want := []string{"1.1", "1.2", "1.2.1", "1.10", "2", "2.9", "2.10", "10.1", "a.1"}
	if !slices.Equal(ids, want) {
		t.Errorf("sorted %v, want %v", ids, want)
	}
}

// The JUnit document as a CI system reads it, declared apart from the
// writer's types so the test reads what was written, not what was meant.
type junitDoc struct {
	XMLName  xml.Name `xml:"testsuites"`
	Tests    int      `xml:"tests,attr"`
	Failures int      `xml:"failures,attr"`
	Errors   int      `xml:"errors,attr"`
	Suites   []struct {
		Name     string `xml:"name,attr"`
		Tests    int    `xml:"tests,attr"`
		Failures int    `xml:"failures,attr"`
		Errors   int    `xml:"errors,attr"`
		Skipped  int    `xml:"skipped,attr"`
		Props    []struct {
			Name  string `xml:"name,attr"`
			Value string `xml:"value,attr"`
		} `xml:"properties>property"`
		Cases []junitCaseDoc `xml:"testcase"`
	} `xml:"testsuite"`
}

type junitCaseDoc struct {
	Name      string `xml:"name,attr"`
	Classname string `xml:"classname,attr"`
	Time      string `xml:"time,attr"`
	Failure   *struct {
		Message string `xml:"message,attr"`
		Type    string `xml:"type,attr"`
		Text    string `xml:",chardata"`
	} `xml:"failure"`
	Error *struct {
		Message string `xml:"message,attr"`
		Text    string `xml:",chardata"`
	} `xml:"error"`
	Skipped   *string `xml:"skipped"`
	SystemOut *string `xml:"system-out"`
}

func TestWriteJUnit(t *testing.T) {
	r := fixtureReport()
	var buf bytes.Buffer
	if err := r.WriteJUnit(&buf); err != nil {
		t.Fatal(err)
	}
	junittest.RequireValid(t, buf.Bytes())
	var doc junitDoc
	if err := xml.Unmarshal(buf.Bytes(), &doc); err != nil {
		t.Fatalf("the JUnit XML does not parse: %v\n%s", err, buf.String())
	}
	if len(doc.Suites) != 1 {
		t.Fatalf("%d testsuites, want one per report", len(doc.Suites))
	}
	s := doc.Suites[0]
	if s.Name != "normsim conform counter" {
		t.Errorf("suite name %q", s.Name)
	}
	// 7 cases and 1 chaos violation; failing: 2 cases and the violation.
	if s.Tests != 8 || s.Failures != 3 || s.Errors != 1 || s.Skipped != 1 || len(s.Cases) != 8 {
		t.Errorf("suite counts tests=%d failures=%d errors=%d skipped=%d with %d testcases; want 8, 3, 1, 1 and 8", s.Tests, s.Failures, s.Errors, s.Skipped, len(s.Cases))
	}
	if doc.Tests != s.Tests || doc.Failures != s.Failures || doc.Errors != s.Errors {
		t.Errorf("testsuites counts %d/%d/%d differ from the suite's", doc.Tests, doc.Failures, doc.Errors)
	}
	var names []string
	byName := map[string]junitCaseDoc{}
	for _, c := range s.Cases {
		names = append(names, c.Name)
		byName[c.Name] = c
	}
	wantNames := []string{"1.1 plain handover a→b", "1.2 chain a→b→a→b", "1.3 refusal", "2.1 kill the source on get-state",
		"2.9 the worker aborts on get-state", "2.10 drop the socket of the source on get-state",
		`7.1 target-applied "corrupted" & <b>worse</b>`, "chaos run 1: source producing after rollback"}
	if !slices.Equal(names, wantNames) {
		t.Errorf("testcases\n %q\nwant\n %q", names, wantNames)
	}
	props := map[string]string{}
	for _, p := range s.Props {
		props[p.Name] = p.Value
	}
	if props["strategy"] != "handover" || props["param.note"] != `<b>bold</b> & "quoted"` || props["chaos.seed"] != "42" {
		t.Errorf("properties %v", props)
	}

	pass := byName["1.1 plain handover a→b"]
	if pass.Classname != "conform.handover" || pass.Failure != nil || pass.Error != nil || pass.Skipped != nil || pass.Time != "0.700" {
		t.Errorf("passing case %+v", pass)
	}
	if na := byName["1.3 refusal"]; na.Skipped == nil || *na.Skipped != "not applicable: the job never refuses\n" {
		t.Errorf("n/a case not skipped with its why: %+v", na)
	}
	tol := byName["2.10 drop the socket of the source on get-state"]
	if tol.Failure != nil || tol.SystemOut == nil || !strings.HasPrefix(*tol.SystemOut, "tolerated: completed only after the source reconnected") {
		t.Errorf("tolerated case must pass and say why in system-out: %+v", tol)
	}
	errCase := byName["2.9 the worker aborts on get-state"]
	if errCase.Error == nil || !strings.Contains(errCase.Error.Message, "did not launch") || errCase.Failure != nil {
		t.Errorf("error case %+v", errCase)
	}

	fail := byName["2.1 kill the source on get-state"]
	if fail.Classname != "conform.faults at get-state" || fail.Failure == nil {
		t.Fatalf("failing case %+v", fail)
	}
	if fail.Failure.Message != "the target was left running "+hostileScript || fail.Failure.Type != "contract 2.4: rollback before the point of no return" {
		t.Errorf("failure message %q type %q", fail.Failure.Message, fail.Failure.Type)
	}
	for _, want := range []string{
		"timeline:\n",
		"       1.2 ms  get-state      source   fault fired: kill source on get-state\n", // sim.TimelineLine
		"last 1 log line(s) of the source, counter-1:",                                   // the migration's tail, as FormatTimeline renders it
		"last 4 log line(s) of the case (37 earlier not shown, 37 of them not kept past the case's 400):",
		"counter-1 counter | " + hostileAttr + "\n",
		"counter-1 counter | last words\n",
		`"kind": "kill"`,
	} {
		if !strings.Contains(fail.Failure.Text, want) {
			t.Errorf("failure body lacks %q:\n%s", want, fail.Failure.Text)
		}
	}
	if strings.Contains(buf.String(), "\x01") {
		t.Errorf("a control character reached the XML")
	}

	v := byName["chaos run 1: source producing after rollback"]
	if v.Classname != "conform.chaos" || v.Failure == nil || !strings.Contains(v.Failure.Text, "replay: normsim conform templates/counter --chaos 3 --seed 42 --run 1") ||
		!strings.Contains(v.Failure.Text, "minimised: {") || v.Time != "1.100" {
		t.Errorf("chaos violation testcase %+v", v)
	}
}

func TestWriteJUnitFailsAnInterruptedRun(t *testing.T) {
	r := fixtureReport()
	r.Results = r.Results[1:3] // two passing cases
	r.Chaos = &ChaosReport{Seed: 7, Runs: 1, Only: -1, Trials: []*Trial{{Run: 0, DurationMs: 10}}}
	r.Interrupted = true
	var buf bytes.Buffer
	if err := r.WriteJUnit(&buf); err != nil {
		t.Fatal(err)
	}
	junittest.RequireValid(t, buf.Bytes())
	var doc junitDoc
	if err := xml.Unmarshal(buf.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	s := doc.Suites[0]
	var names []string
	for _, c := range s.Cases {
		names = append(names, c.Name)
	}
	want := []string{"1.1 plain handover a→b", "1.2 chain a→b→a→b", "interrupted", "chaos: 1 run(s) of seed 7"}
	if !slices.Equal(names, want) || s.Errors != 1 || s.Failures != 0 || s.Tests != 4 {
		t.Errorf("testcases %q errors=%d failures=%d tests=%d; want %q with one error", names, s.Errors, s.Failures, s.Tests, want)
	}
}

func TestPrintSummary(t *testing.T) {
	var buf bytes.Buffer
	fixtureReport().PrintSummary(&buf)
	want := `FAIL  normsim conform counter (handover, process): 7 case(s): 2 pass, 1 tolerated, 2 fail, 1 n/a, 1 error  (12.346 s)
  fail       2.1   kill the source on get-state — the target was left running <script>window.__pwned="log"</script>
  error      2.9   the worker aborts on get-state — the template did not launch: exec: "counter": executable file not found
  tolerated  2.10  drop the socket of the source on get-state — completed only after the source reconnected; the seam lost 3 packets
  fail       7.1   target-applied "corrupted" & <b>worse</b> — the target crashed and nothing reported it
chaos: seed 42, 3 run(s): 1 violation(s)
  chaos run 1: source producing after rollback — the source sent nothing for 2s after the rollback <script>window.__pwned="log"</script>
    schedule:  move 1: kill target on target-ready, drop-frame get-state
    minimised: move 1: kill target on target-ready (1 fault(s))
    replay: normsim conform templates/counter --chaos 3 --seed 42 --run 1
`
	if got := buf.String(); got != want {
		t.Errorf("summary\n%s\nwant\n%s", got, want)
	}
}

func TestPrintSummaryOfACleanRun(t *testing.T) {
	r := fixtureReport()
	r.Results = r.Results[1:4] // 1.1, 1.2 pass; 1.3 n/a
	r.Chaos = nil
	r.Count()
	var buf bytes.Buffer
	r.PrintSummary(&buf)
	want := "PASS  normsim conform counter (handover, process): 3 case(s): 2 pass, 0 tolerated, 0 fail, 1 n/a, 0 error  (12.346 s)\n"
	if got := buf.String(); got != want {
		t.Errorf("summary\n%q\nwant\n%q", got, want)
	}
}

func TestWriteHTMLEscapesAndNeedsNothingElse(t *testing.T) {
	var buf bytes.Buffer
	if err := fixtureReport().WriteHTML(&buf); err != nil {
		t.Fatal(err)
	}
	page := buf.String()
	for _, bad := range []string{hostileScript, "<img", "<b>", "window.__pwned='attr'\">"} {
		if strings.Contains(page, bad) {
			t.Errorf("the page holds %q unescaped", bad)
		}
	}
	if !strings.Contains(page, "&lt;script&gt;window.__pwned=&#34;log&#34;&lt;/script&gt;") {
		t.Errorf("the page does not show the job's <script> line as text")
	}
	for _, want := range []string{
		"37 earlier line(s) are not shown", // LogsOmitted, said out loud
		"counter-1 on node a",              // a migration's source
		"panic: killed",                    // the aborted migration's log tail
		"<td class=\"num\" title=\"2026-12-01T18:00:00.1124Z\">12.4</td>", // a timeline offset from the migration's start
		"kill target on target-ready, drop-frame get-state",               // a chaos trial's schedule in words
		"applied counter; failed none; skewMs 0.4",                        // target-applied whole (issue 29 item 9)
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	// Every link stays in the page; nothing is loaded from anywhere.
	for _, m := range regexp.MustCompile(`(?i)\b(href|src|action|srcset|data-href)\s*=\s*"([^"]*)"`).FindAllStringSubmatch(page, -1) {
		if m[1] == "src" || m[1] == "action" || m[1] == "srcset" || !strings.HasPrefix(m[2], "#") {
			t.Errorf("%s=%q leaves the page", m[1], m[2])
		}
	}
	for _, bad := range []string{"http:", "https:", "url(", "@import", "//cdn"} {
		if strings.Contains(page, bad) {
			t.Errorf("the page holds %q", bad)
		}
	}
	if n := strings.Count(page, "<script"); n != 1 {
		t.Errorf("%d script elements, want the one of the report", n)
	}
	// The CSP allows the page's own script and style by hash: a page
	// edited by hand, or a template change that alters them, breaks loudly.
	csp := regexp.MustCompile(`http-equiv="Content-Security-Policy" content="([^"]*)"`).FindStringSubmatch(page)
	if csp == nil {
		t.Fatal("no Content-Security-Policy")
	}
	script := regexp.MustCompile(`(?s)<script>(.*)</script>`).FindStringSubmatch(page)
	style := regexp.MustCompile(`(?s)<style>(.*)</style>`).FindStringSubmatch(page)
	if script == nil || style == nil {
		t.Fatal("no inline script or style")
	}
	for _, want := range []string{"default-src 'none'", "script-src " + cspHash(script[1]), "style-src " + cspHash(style[1])} {
		if !strings.Contains(html.UnescapeString(csp[1]), want) {
			t.Errorf("CSP %q lacks %q", csp[1], want)
		}
	}
}

func TestWriteHTMLWithoutCases(t *testing.T) {
	r := &Report{Template: "counter", Strategy: "handover", Runtime: "process", Filter: "9.*"}
	var buf bytes.Buffer
	if err := r.WriteHTML(&buf); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "no case ran: the filter 9.* matched none") {
		t.Errorf("an empty report does not say why it is empty")
	}
}

func TestWriteFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "out", "report.json")
	r := fixtureReport()
	if err := WriteFile(path, r.WriteJSON); err != nil {
		t.Fatal(err)
	}
	var want bytes.Buffer
	r.WriteJSON(&want)
	got, err := os.ReadFile(path)
	if err != nil || !bytes.Equal(got, want.Bytes()) {
		t.Fatalf("read back %d bytes (%v), want the %d written", len(got), err, want.Len())
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o644 {
		t.Errorf("mode %v, want 0644", fi.Mode().Perm())
	}

	// A rendering that fails halfway leaves the old report and no
	// temporary file.
	boom := errors.New("boom")
	err = WriteFile(path, func(w io.Writer) error {
		io.WriteString(w, "half a report")
		return boom
	})
	if !errors.Is(err, boom) {
		t.Errorf("error %v, want it to wrap the rendering's", err)
	}
	if got, _ := os.ReadFile(path); !bytes.Equal(got, want.Bytes()) {
		t.Errorf("a failed write replaced the report with %q", got)
	}
	entries, _ := os.ReadDir(filepath.Dir(path))
	if len(entries) != 1 {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Errorf("files left: %v, want only report.json", names)
	}
}

// TestPrintSummaryGroupsOneCause: cases that failed for one reason read
// as one line with their IDs, so one bug reads as one bug.
func TestPrintSummaryGroupsOneCause(t *testing.T) {
	r := fixtureReport()
	r.Chaos = nil
	why := "aborted in get-state: timed out waiting for the source's state"
	for _, id := range []string{"3.1", "3.2", "3.3"} {
		r.Results = append(r.Results, &Result{Case: Case{ID: id, Group: "state", Name: "case " + id}, Grade: GradeFail, Why: why})
	}
	r.Count()
	var buf bytes.Buffer
	r.PrintSummary(&buf)
	got := buf.String()
	if want := "  fail       3 cases: " + why + "\n             cases 3.1, 3.2, 3.3\n"; !strings.Contains(got, want) {
		t.Errorf("summary lacks the grouped line %q:\n%s", want, got)
	}
	if strings.Contains(got, "case 3.2") {
		t.Errorf("a grouped case also has a line of its own:\n%s", got)
	}
	if !strings.Contains(got, "  fail       2.1   kill the source on get-state") {
		t.Errorf("a case failed for a reason of its own lost its line:\n%s", got)
	}
	// The HTML report has the same grouping, each case linked.
	var page bytes.Buffer
	if err := r.WriteHTML(&page); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`id="causes"`, "<strong>3 cases</strong>: aborted in get-state: timed out waiting for the source&#39;s state",
		`<a href="#case-3.1">3.1</a>, <a href="#case-3.2">3.2</a>, <a href="#case-3.3">3.3</a>`} {
		if !strings.Contains(page.String(), want) {
			t.Errorf("HTML report lacks %q", want)
		}
	}
}
