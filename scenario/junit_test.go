package scenario

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/normsim/normsim/sim"
)

// xnode is any XML element, for checking a report's structure.
type xnode struct {
	XMLName xml.Name
	Attrs   []xml.Attr `xml:",any,attr"`
	Nodes   []xnode    `xml:",any"`
	Text    string     `xml:",chardata"`
}

func (n *xnode) attr(name string) (string, bool) {
	for _, a := range n.Attrs {
		if a.Name.Local == name && a.Name.Space == "" {
			return a.Value, true
		}
	}
	return "", false
}

// junitRule is what the junit-4 schema allows of an element: its required
// and optional attributes, and its children in sequence order (each name's
// rank; a child may not come after a child of a higher rank).
type junitRule struct {
	required, optional []string
	children           map[string]int
	single             []string // children that may appear at most once
	text               bool     // mixed or simple content
}

var junitRules = map[string]junitRule{
	"testsuites": {optional: []string{"name", "time", "tests", "failures", "disabled", "errors"}, children: map[string]int{"testsuite": 0}},
	"testsuite": {required: []string{"name", "tests", "failures", "errors", "skipped", "time"},
		optional: []string{"disabled", "timestamp", "hostname", "id", "package"},
		children: map[string]int{"properties": 0, "testcase": 1, "system-out": 2, "system-err": 3},
		single:   []string{"properties", "system-out", "system-err"}},
	"properties": {children: map[string]int{"property": 0}},
	"property":   {required: []string{"name", "value"}},
	// file is not in junit-4.xsd; it is the attribute the common readers
	// (GitLab, Jenkins, the GitHub report actions) link a case's source by.
	"testcase": {required: []string{"name", "classname", "time"}, optional: []string{"assertions", "status", "file"},
		children: map[string]int{"skipped": 0, "error": 1, "failure": 2, "system-out": 3, "system-err": 4},
		single:   []string{"skipped"}},
	"failure":    {required: []string{"message", "type"}, text: true},
	"error":      {required: []string{"message", "type"}, text: true},
	"skipped":    {text: true},
	"system-out": {text: true},
	"system-err": {text: true},
}

var (
	decimalRe  = regexp.MustCompile(`^[0-9]+(\.[0-9]+)?$`)
	dateTimeRe = regexp.MustCompile(`^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})?$`)
)

// checkJUnit validates a report against the rules of the common junit-4
// schema, with the attributes normsim promises made required, and checks
// the counts add up.
func checkJUnit(data []byte) error {
	var root xnode
	if err := xml.Unmarshal(data, &root); err != nil {
		return fmt.Errorf("not well-formed XML: %w", err)
	}
	if root.XMLName.Local != "testsuites" {
		return fmt.Errorf("root is <%s>, want <testsuites>", root.XMLName.Local)
	}
	if err := checkElement(&root, "testsuites"); err != nil {
		return err
	}
	var tests, failures, errs int
	for i := range root.Nodes {
		s := &root.Nodes[i]
		name, _ := s.attr("name")
		var t, f, e, sk int
		for j := range s.Nodes {
			c := &s.Nodes[j]
			if c.XMLName.Local != "testcase" {
				continue
			}
			t++
			for _, k := range c.Nodes {
				switch k.XMLName.Local {
				case "failure":
					f++
				case "error":
					e++
				case "skipped":
					sk++
				}
			}
		}
		for attr, want := range map[string]int{"tests": t, "failures": f, "errors": e, "skipped": sk} {
			if got, _ := s.attr(attr); got != strconv.Itoa(want) {
				return fmt.Errorf("testsuite %q: %s=%q, but it holds %d", name, attr, got, want)
			}
		}
		tests, failures, errs = tests+t, failures+f, errs+e
	}
	for attr, want := range map[string]int{"tests": tests, "failures": failures, "errors": errs} {
		if got, ok := root.attr(attr); ok && got != strconv.Itoa(want) {
			return fmt.Errorf("testsuites: %s=%q, but the suites hold %d", attr, got, want)
		}
	}
	return nil
}

func checkElement(n *xnode, path string) error {
	name := n.XMLName.Local
	rule, ok := junitRules[name]
	if !ok {
		return fmt.Errorf("%s: element <%s> is not in the schema", path, name)
	}
	if n.XMLName.Space != "" {
		return fmt.Errorf("%s: element in namespace %q", path, n.XMLName.Space)
	}
	for _, a := range n.Attrs {
		if !slices.Contains(rule.required, a.Name.Local) && !slices.Contains(rule.optional, a.Name.Local) {
			return fmt.Errorf("%s: attribute %s is not allowed", path, a.Name.Local)
		}
	}
	for _, r := range rule.required {
		v, ok := n.attr(r)
		if !ok {
			return fmt.Errorf("%s: attribute %s is required", path, r)
		}
		switch r {
		case "tests", "failures", "errors", "skipped":
			if _, err := strconv.ParseUint(v, 10, 32); err != nil {
				return fmt.Errorf("%s: %s=%q is not a count", path, r, v)
			}
		case "time":
			if !decimalRe.MatchString(v) {
				return fmt.Errorf("%s: time=%q is not a decimal number of seconds", path, v)
			}
		}
	}
	if v, ok := n.attr("timestamp"); ok && !dateTimeRe.MatchString(v) {
		return fmt.Errorf("%s: timestamp=%q is not an xs:dateTime", path, v)
	}
	if !rule.text && strings.TrimSpace(n.Text) != "" {
		return fmt.Errorf("%s: text %q is not allowed here", path, n.Text)
	}
	if rule.text && len(n.Nodes) > 0 {
		return fmt.Errorf("%s: <%s> holds text only; found <%s>", path, name, n.Nodes[0].XMLName.Local)
	}
	if name == "properties" && len(n.Nodes) == 0 {
		return fmt.Errorf("%s: <properties> needs at least one <property>", path)
	}
	rank, seen := -1, map[string]int{}
	for i := range n.Nodes {
		c := &n.Nodes[i]
		r, ok := rule.children[c.XMLName.Local]
		if !ok {
			return fmt.Errorf("%s: <%s> may not hold <%s>", path, name, c.XMLName.Local)
		}
		if r < rank {
			return fmt.Errorf("%s: <%s> comes after an element the schema puts after it", path, c.XMLName.Local)
		}
		rank = r
		seen[c.XMLName.Local]++
		if seen[c.XMLName.Local] > 1 && slices.Contains(rule.single, c.XMLName.Local) {
			return fmt.Errorf("%s: more than one <%s>", path, c.XMLName.Local)
		}
		if err := checkElement(c, fmt.Sprintf("%s/%s[%d]", path, c.XMLName.Local, i)); err != nil {
			return err
		}
	}
	return nil
}

// requireValidJUnit checks a report with checkJUnit and, where xmllint is
// installed, against testdata/junit-4.xsd.
func requireValidJUnit(t *testing.T, data []byte) {
	t.Helper()
	if err := checkJUnit(data); err != nil {
		t.Fatalf("JUnit report is not valid: %v\n%s", err, data)
	}
	xmllint, err := exec.LookPath("xmllint")
	if err != nil {
		t.Log("xmllint not installed; checked the junit-4 rules in Go only")
		return
	}
	xsd, err := filepath.Abs(filepath.Join("testdata", "junit-4.xsd"))
	if err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(t.TempDir(), "report.xml")
	if err := os.WriteFile(f, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(xmllint, "--noout", "--schema", xsd, f).CombinedOutput(); err != nil {
		t.Fatalf("xmllint --schema junit-4.xsd: %v\n%s\n%s", err, out, data)
	}
}

// sampleReport has a step of every status, odd characters included.
func sampleReport() *Report {
	start := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	mig := &sim.Migration{ID: "mig-1", Strategy: sim.Handover, State: sim.MigrationAborted, Phase: "target-ready",
		Reason: "the target aborted: \"bad\" <state> & \x00\x1b[31mred\x1b[0m ]]> end",
		Source: sim.MigrationEndpoint{Instance: "counter-1", Node: "a"}, Target: sim.MigrationEndpoint{Instance: "counter-2", Node: "b"},
		StartedAt: start, Durations: sim.Durations{TotalMs: f64(31)},
		Events: []sim.MigrationEvent{{Seq: 1, At: start, Phase: "get-state", Side: "manager", Detail: "requested"},
			{Seq: 2, At: start.Add(31 * time.Millisecond), Phase: "target-ready", Side: "target", Detail: "abort \xff invalid utf-8"}}}
	ok := &sim.Migration{ID: "mig-0", Strategy: sim.Handover, State: sim.MigrationCompleted, StartedAt: start,
		Output: &sim.OutputReport{Verdict: sim.VerdictSeamless, Detail: "source stopped at 9, target continued at 10"},
		Result: sim.MigrationResult{Applied: []string{"counter"}, Failed: []sim.FailedApply{{ID: "overlay", Reason: "font missing"}}, SkewMs: f64(4)}}
	checks := Judge(&Expect{State: sim.MigrationCompleted}, Outcome{Migration: mig})
	r := &Report{StartedAt: start, Hostname: "ci-runner", Scenarios: []*ScenarioResult{{
		Name: "handover & <friends>", File: "s.yaml", Line: 1, Template: "counter", Nodes: []string{"a", "b"}, Repeat: 2,
		Status: StatusFailed, StartedAt: start, DurationMs: 1234.5, Cleanup: []string{"remove instance x: 409 CONFLICT"},
		Steps: []*StepResult{
			{Run: 1, Index: 1, Kind: KindLaunch, Name: "launch counter on a", Status: StatusPassed, DurationMs: 120, Pos: Pos{Line: 3, Column: 5}},
			{Run: 1, Index: 2, Kind: KindMigrate, Name: "migrate to b (handover)", Status: StatusPassed, DurationMs: 200, Migration: ok, Pos: Pos{Line: 4, Column: 5}},
			{Run: 1, Index: 3, Kind: KindMigrate, Name: "migrate to a", Status: StatusPassed, Refusal: &APIError{Status: 422, Code: "UNPROCESSABLE", Message: "no"}},
			{Run: 2, Index: 1, Kind: KindLaunch, Name: "launch counter on a", Status: StatusError, Message: "instance counter-3 is failed: exit 1",
				Detail: "last log lines of counter-3:\npanic: boom\n"},
			{Run: 2, Index: 2, Kind: KindMigrate, Name: "migrate to b (handover)", Status: StatusSkipped, Message: "not run: step 2.1 could not be carried out"},
			{Run: 2, Index: 3, Kind: KindMigrate, Name: "migrate to a", Status: StatusFailed, Message: FailureMessage(checks), Checks: checks, Migration: mig},
		}}}}
	r.finish(start.Add(1500 * time.Millisecond))
	return r
}

func TestJUnitReportIsValid(t *testing.T) {
	var buf bytes.Buffer
	if err := sampleReport().WriteJUnit(&buf); err != nil {
		t.Fatal(err)
	}
	data := buf.Bytes()
	requireValidJUnit(t, data)
	var doc junitSuites
	if err := xml.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Tests != 6 || doc.Failures != 1 || doc.Errors != 1 || len(doc.Suites) != 1 {
		t.Fatalf("totals %+v", doc)
	}
	s := doc.Suites[0]
	if s.Name != "handover & <friends>" || s.Skipped != 1 || s.Time != "1.234" || s.Timestamp != "2025-03-01T12:00:00" || s.Hostname != "ci-runner" {
		t.Fatalf("suite %+v", s)
	}
	fail := s.Cases[5]
	if fail.Name != "run 2 step 3: migrate to a" || fail.Classname != s.Name || fail.Failure == nil || fail.Failure.Type != "expectation" {
		t.Fatalf("failing case %+v", fail)
	}
	if !strings.HasPrefix(fail.Failure.Message, "expected state completed, got aborted in phase target-ready: the target aborted: \"bad\" <state> & ") {
		t.Errorf("failure message %q", fail.Failure.Message)
	}
	for _, want := range []string{"timeline:\n", "requested\n", "abort \uFFFD invalid utf-8", "]]> end"} {
		if !strings.Contains(fail.Failure.Text, want) {
			t.Errorf("failure body lacks %q:\n%s", want, fail.Failure.Text)
		}
	}
	if e := s.Cases[3].Error; e == nil || e.Type != "step" || !strings.Contains(e.Text, "panic: boom") {
		t.Errorf("erroring case %+v", s.Cases[3])
	}
	if sk := s.Cases[4].Skipped; sk == nil || !strings.HasPrefix(sk.Text, "not run:") {
		t.Errorf("skipped case %+v", s.Cases[4])
	}
	if out := s.Cases[1].SystemOut; out == nil || !strings.Contains(out.Text, "output seam seamless") ||
		!strings.Contains(out.Text, "\ntarget-applied: applied counter; failed overlay (font missing); skewMs 4\n") ||
		!strings.Contains(out.Text, "\njudgement: tolerated (at fault: none): the target could not apply 1 participant: overlay (font missing)\n") {
		t.Errorf("passing migration's system-out %+v", out)
	}
	if !strings.Contains(fail.Failure.Text, "\njudgement: pass (at fault: none): rolled back") || strings.Contains(fail.Failure.Text, "target-applied:") {
		t.Errorf("a rollback's failure body shows its judgement and no result:\n%s", fail.Failure.Text)
	}
}

func TestJUnitReportOfBrokenFilesIsValid(t *testing.T) {
	_, err1 := ParseFile(filepath.Join("testdata", "broken", "unknown-key.yaml"))
	_, err2 := ParseFile(filepath.Join("testdata", "broken", "syntax.yaml"))
	probs := append(problems(t, err1), problems(t, err2)...)
	var buf bytes.Buffer
	r := ProblemsReport(time.Now(), probs)
	if r.Passed {
		t.Fatal("a report with problems passed")
	}
	if err := r.WriteJUnit(&buf); err != nil {
		t.Fatal(err)
	}
	requireValidJUnit(t, buf.Bytes())
	var doc junitSuites
	xml.Unmarshal(buf.Bytes(), &doc)
	if len(doc.Suites) != 2 || doc.Errors != 2 || !strings.Contains(doc.Suites[0].Cases[0].Error.Message, "(and 1 more)") ||
		!strings.Contains(doc.Suites[1].Cases[0].Error.Text, "syntax.yaml:4: not valid YAML") {
		t.Fatalf("report %s", buf.Bytes())
	}
}

// TestCheckJUnitCatchesViolations makes sure the checker is not a rubber
// stamp.
func TestCheckJUnitCatchesViolations(t *testing.T) {
	for _, tc := range []struct{ doc, want string }{
		{`<testsuite name="x" tests="0"/>`, "root is <testsuite>"},
		{`<testsuites><testsuite tests="0" failures="0" errors="0" skipped="0" time="0"/></testsuites>`, "attribute name is required"},
		{`<testsuites><testsuite name="x" tests="1" failures="0" errors="0" skipped="0" time="0"><testcase name="a" time="1"/></testsuite></testsuites>`, "attribute classname is required"},
		{`<testsuites><testsuite name="x" tests="1" failures="1" errors="0" skipped="0" time="0"><testcase name="a" classname="c" time="1"><failure type="t">x</failure></testcase></testsuite></testsuites>`, "attribute message is required"},
		{`<testsuites><testsuite name="x" tests="1" failures="0" errors="0" skipped="0" time="0"><testcase name="a" classname="c" time="1" package="f"/></testsuite></testsuites>`, "attribute package is not allowed"},
		{`<testsuites><testsuite name="x" tests="1" failures="1" errors="1" skipped="0" time="0"><testcase name="a" classname="c" time="1"><failure message="m" type="t"/><error message="m" type="t"/></testcase></testsuite></testsuites>`, "<error> comes after"},
		{`<testsuites><testsuite name="x" tests="2" failures="0" errors="0" skipped="0" time="0"><testcase name="a" classname="c" time="1"/></testsuite></testsuites>`, "tests=\"2\", but it holds 1"},
		{`<testsuites><testsuite name="x" tests="0" failures="0" errors="0" skipped="0" time="1s"/></testsuites>`, "not a decimal"},
		{`<testsuites><testsuite name="x" tests="1" failures="0" errors="0" skipped="1" time="0"><testcase name="a" classname="c" time="1"><skipped message="m"/></testcase></testsuite></testsuites>`, "attribute message is not allowed"},
	} {
		err := checkJUnit([]byte(tc.doc))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.doc, err, tc.want)
		}
	}
}
