package scenario

import (
	"encoding/xml"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// The JUnit report follows the common junit-4 schema (the one Jenkins,
// GitLab, GitHub test-report actions and most CI systems read):
// testsuites > testsuite > properties?, testcase* > skipped?, error*,
// failure*, system-out*. One testsuite per scenario, one testcase per step
// and run. A failed expectation is a <failure>, a step that could not be
// carried out an <error>, a step after it <skipped>.

type junitSuites struct {
	XMLName  xml.Name     `xml:"testsuites"`
	Name     string       `xml:"name,attr"`
	Tests    int          `xml:"tests,attr"`
	Failures int          `xml:"failures,attr"`
	Errors   int          `xml:"errors,attr"`
	Time     string       `xml:"time,attr"`
	Suites   []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Name       string          `xml:"name,attr"`
	Tests      int             `xml:"tests,attr"`
	Failures   int             `xml:"failures,attr"`
	Errors     int             `xml:"errors,attr"`
	Skipped    int             `xml:"skipped,attr"`
	Time       string          `xml:"time,attr"`
	Timestamp  string          `xml:"timestamp,attr"`
	Hostname   string          `xml:"hostname,attr,omitempty"`
	ID         int             `xml:"id,attr"`
	Properties *junitProps     `xml:"properties,omitempty"`
	Cases      []junitTestcase `xml:"testcase"`
	SystemOut  *junitText      `xml:"system-out,omitempty"`
}

type junitProps struct {
	Props []junitProp `xml:"property"`
}

type junitProp struct {
	Name  string `xml:"name,attr"`
	Value string `xml:"value,attr"`
}

type junitTestcase struct {
	Name      string `xml:"name,attr"`
	Classname string `xml:"classname,attr"`
	// File is the scenario file (GitHub's and GitLab's reporters link it).
	File      string        `xml:"file,attr,omitempty"`
	Time      string        `xml:"time,attr"`
	Skipped   *junitText    `xml:"skipped,omitempty"`
	Error     *junitFailure `xml:"error,omitempty"`
	Failure   *junitFailure `xml:"failure,omitempty"`
	SystemOut *junitText    `xml:"system-out,omitempty"`
}

// junitText is text kept as CDATA, so multi-line bodies stay readable.
type junitText struct {
	Text string `xml:",cdata"`
}

type junitFailure struct {
	Message string `xml:"message,attr"`
	Type    string `xml:"type,attr"`
	Text    string `xml:",cdata"`
}

// JUnit failure types.
const (
	junitTypeExpectation = "expectation" // an expectation did not hold
	junitTypeStep        = "step"        // the step could not be carried out
	junitTypeScenario    = "scenario"    // the scenario file is broken
)

func secs(msOf float64) string { return fmt.Sprintf("%.3f", msOf/1000) }

// WriteJUnit writes the report as JUnit XML.
func (r *Report) WriteJUnit(w io.Writer) error {
	doc := junitSuites{Name: "normsim ci", Time: secs(r.DurationMs)}
	ts := r.StartedAt.UTC().Format("2006-01-02T15:04:05")
	if len(r.Problems) > 0 {
		doc.Suites = problemSuites(r, ts)
	}
	for i, s := range r.Scenarios {
		suite := junitSuite{Name: xmlSafe(s.Name), Time: secs(s.DurationMs), Timestamp: s.StartedAt.UTC().Format("2006-01-02T15:04:05"),
			Hostname: xmlSafe(r.Hostname), ID: i}
		runtime := s.Runtime
		if runtime == "" {
			runtime = "default"
		}
		suite.Properties = &junitProps{Props: []junitProp{
			{Name: "file", Value: xmlSafe(s.File)},
			{Name: "line", Value: fmt.Sprint(s.Line)},
			{Name: "template", Value: xmlSafe(s.Template)},
			{Name: "runtime", Value: runtime},
			{Name: "nodes", Value: xmlSafe(strings.Join(s.Nodes, ","))},
			{Name: "repeat", Value: fmt.Sprint(s.Repeat)},
		}}
		for _, st := range s.Steps {
			tc := junitTestcase{Name: xmlSafe(caseName(s, st)), Classname: xmlSafe(s.Name), File: xmlSafe(s.File), Time: secs(st.DurationMs)}
			where := fmt.Sprintf("at %s:%s\n", s.File, st.Pos.String())
			switch st.Status {
			case StatusFailed:
				suite.Failures++
				tc.Failure = &junitFailure{Message: xmlSafe(st.Message), Type: junitTypeExpectation, Text: xmlSafe(where + failureBody(st))}
				tc.SystemOut = failureOut(st)
			case StatusError:
				suite.Errors++
				tc.Error = &junitFailure{Message: xmlSafe(st.Message), Type: junitTypeStep, Text: xmlSafe(where + failureBody(st))}
				tc.SystemOut = failureOut(st)
			case StatusSkipped:
				suite.Skipped++
				tc.Skipped = &junitText{Text: xmlSafe(st.Message)}
			default:
				if st.Migration != nil {
					tc.SystemOut = &junitText{Text: xmlSafe(Summary(st.Migration))}
				} else if st.Refusal != nil {
					tc.SystemOut = &junitText{Text: xmlSafe("refused as expected: " + st.Refusal.Error() + "\n")}
				}
			}
			suite.Tests++
			suite.Cases = append(suite.Cases, tc)
		}
		if len(s.Cleanup) > 0 {
			suite.SystemOut = &junitText{Text: xmlSafe("cleanup: " + strings.Join(s.Cleanup, "\ncleanup: ") + "\n")}
		}
		doc.Suites = append(doc.Suites, suite)
	}
	for _, s := range doc.Suites {
		doc.Tests += s.Tests
		doc.Failures += s.Failures
		doc.Errors += s.Errors
	}
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return err
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(doc); err != nil {
		return err
	}
	_, err := io.WriteString(w, "\n")
	return err
}

// problemSuites reports broken scenario files: one suite per file, one
// erroring testcase, so a CI page shows why nothing ran.
func problemSuites(r *Report, ts string) []junitSuite {
	var files []string
	byFile := map[string][]string{}
	for _, p := range r.Problems {
		if _, ok := byFile[p.File]; !ok {
			files = append(files, p.File)
		}
		byFile[p.File] = append(byFile[p.File], p.Error())
	}
	var out []junitSuite
	for i, f := range files {
		probs := byFile[f]
		msg := probs[0]
		if len(probs) > 1 {
			msg = fmt.Sprintf("%s (and %d more)", msg, len(probs)-1)
		}
		out = append(out, junitSuite{Name: xmlSafe(f), Tests: 1, Errors: 1, Time: secs(0), Timestamp: ts, Hostname: xmlSafe(r.Hostname), ID: i,
			Cases: []junitTestcase{{Name: "parse", Classname: xmlSafe(f), Time: secs(0),
				Error: &junitFailure{Message: xmlSafe(msg), Type: junitTypeScenario, Text: xmlSafe(strings.Join(probs, "\n") + "\n")}}}})
	}
	return out
}

func caseName(s *ScenarioResult, st *StepResult) string {
	if s.Repeat > 1 {
		return fmt.Sprintf("run %d step %d: %s", st.Run, st.Index, st.Name)
	}
	return fmt.Sprintf("step %d: %s", st.Index, st.Name)
}

// failureBody is every failed expectation, the detail, and the migration's
// summary and timeline.
func failureBody(st *StepResult) string {
	var b strings.Builder
	for _, c := range st.Checks {
		if !c.OK {
			b.WriteString(c.Message + "\n")
		}
	}
	if st.Status == StatusError {
		b.WriteString(st.Message + "\n")
	}
	if st.Refusal != nil && st.Status == StatusFailed {
		fmt.Fprintf(&b, "the API refused the request: %s\n", st.Refusal.Error())
	}
	if st.Detail != "" {
		b.WriteString(st.Detail)
	}
	if m := st.Migration; m != nil {
		b.WriteString("\n" + Summary(m) + "timeline:\n" + Timeline(m) + LogTails(m))
	}
	return b.String()
}

// failureOut is a failing step's <system-out>: what the job printed, the
// evidence its author looks for first.
func failureOut(st *StepResult) *junitText {
	text := st.Detail + LogTails(st.Migration)
	if text == "" {
		return nil
	}
	return &junitText{Text: xmlSafe(text)}
}

// xmlSafe drops what XML 1.0 cannot carry at all (most control characters,
// invalid UTF-8), which encoding/xml would otherwise write as U+FFFD or
// refuse.
func xmlSafe(s string) string {
	ok := true
	for _, r := range s {
		if !xmlChar(r) {
			ok = false
			break
		}
	}
	if ok && utf8.ValidString(s) {
		return s
	}
	var b strings.Builder
	for _, r := range strings.ToValidUTF8(s, "\uFFFD") {
		if xmlChar(r) {
			b.WriteRune(r)
		} else {
			b.WriteRune('\uFFFD')
		}
	}
	return b.String()
}

func xmlChar(r rune) bool {
	return r == 0x09 || r == 0x0A || r == 0x0D ||
		(r >= 0x20 && r <= 0xD7FF) || (r >= 0xE000 && r <= 0xFFFD) || (r >= 0x10000 && r <= 0x10FFFF)
}
