package conform

import (
	"encoding/xml"
	"fmt"
	"io"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/normsim/normsim/sim"
)

// The JUnit report follows the common junit-4 schema, the shape
// scenario's report has (testsuites > testsuite > properties?, testcase* >
// skipped?, error?, failure?, system-out?), so a CI page shows a
// conformance run as it shows `normsim ci`: one testsuite per report,
// one testcase per case. A failed case is a <failure> typed by the rule
// it broke, a case normsim could not carry out an <error>, a case that
// does not apply <skipped>; a tolerated case passes and says why in its
// <system-out>. Each chaos violation is one more failing testcase.

type junitSuites struct {
	XMLName  xml.Name     `xml:"testsuites"`
	Name     string       `xml:"name,attr"`
	Tests    int          `xml:"tests,attr"`
	Failures int          `xml:"failures,attr"`
	Errors   int          `xml:"errors,attr"`
	Skipped  int          `xml:"skipped,attr"`
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
}

type junitProps struct {
	Props []junitProp `xml:"property"`
}

type junitProp struct {
	Name  string `xml:"name,attr"`
	Value string `xml:"value,attr"`
}

type junitTestcase struct {
	Name      string        `xml:"name,attr"`
	Classname string        `xml:"classname,attr"`
	Time      string        `xml:"time,attr"`
	Skipped   *junitFailure `xml:"skipped,omitempty"`
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
	Type    string `xml:"type,attr,omitempty"`
	Text    string `xml:",cdata"`
}

// junitTypeNoRule types a failure or error whose result names no rule.
const junitTypeNoRule = "conform"

func junitSecs(ms float64) string { return fmt.Sprintf("%.3f", ms/1000) }

// WriteJUnit writes the report as JUnit XML.
func (r *Report) WriteJUnit(w io.Writer) error {
	suite := junitSuite{
		Name:       xmlSafe("normsim conform " + r.Template),
		Time:       junitSecs(r.DurationMs),
		Timestamp:  r.StartedAt.UTC().Format("2006-01-02T15:04:05"),
		Hostname:   xmlSafe(r.Hostname),
		Properties: &junitProps{Props: r.junitProperties()},
	}
	for _, res := range r.ordered() {
		tc := junitTestcase{Name: xmlSafe(res.ID + " " + res.Name), Classname: xmlSafe("conform." + res.Group), Time: junitSecs(res.DurationMs)}
		typ := res.Rule
		if typ == "" {
			typ = junitTypeNoRule
		}
		switch res.Grade {
		case GradePass:
		case GradeTolerated:
			tc.SystemOut = &junitText{Text: xmlSafe(fmt.Sprintf("tolerated: %s\nrule: %s\n", res.Why, res.Rule))}
		case GradeNotApplicable:
			suite.Skipped++
			tc.Skipped = &junitFailure{Message: xmlSafe(res.Why), Text: xmlSafe("not applicable: " + res.Why + "\n")}
		case GradeError:
			suite.Errors++
			tc.Error = &junitFailure{Message: xmlSafe(res.Why), Type: xmlSafe(typ), Text: xmlSafe(caseBody(res))}
		default: // GradeFail, and a grade this code does not know, which must not pass
			suite.Failures++
			tc.Failure = &junitFailure{Message: xmlSafe(res.Why), Type: xmlSafe(typ), Text: xmlSafe(caseBody(res))}
		}
		suite.Tests++
		suite.Cases = append(suite.Cases, tc)
	}
	if r.Interrupted {
		// The cases that never ran are not in the report; without this a
		// CI page would show a stopped run as a shorter green one.
		suite.Tests++
		suite.Errors++
		suite.Cases = append(suite.Cases, junitTestcase{Name: "interrupted", Classname: "conform", Time: junitSecs(0),
			Error: &junitFailure{Message: "the run was stopped before every case ran", Type: "interrupted",
				Text: fmt.Sprintf("%d case(s) ran before the run was stopped\n", len(r.Results))}})
	}
	if c := r.Chaos; c != nil {
		suite.Cases = append(suite.Cases, chaosTestcases(c)...)
		suite.Tests += max(1, len(c.Violations))
		suite.Failures += len(c.Violations)
	}
	doc := junitSuites{Name: "normsim conform", Time: suite.Time, Tests: suite.Tests, Failures: suite.Failures,
		Errors: suite.Errors, Skipped: suite.Skipped, Suites: []junitSuite{suite}}
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return err
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(doc); err != nil {
		return fmt.Errorf("junit: %w", err)
	}
	_, err := io.WriteString(w, "\n")
	return err
}

func (r *Report) junitProperties() []junitProp {
	props := []junitProp{
		{Name: "template", Value: xmlSafe(r.Template)},
		{Name: "strategy", Value: xmlSafe(string(r.Strategy))},
		{Name: "runtime", Value: xmlSafe(r.Runtime)},
		{Name: "version", Value: xmlSafe(r.Version)},
		{Name: "filter", Value: xmlSafe(r.Filter)},
		{Name: "parallel", Value: fmt.Sprint(r.Parallel)},
	}
	for _, k := range sortedKeys(r.Params) {
		props = append(props, junitProp{Name: xmlSafe("param." + k), Value: xmlSafe(r.Params[k])})
	}
	if c := r.Chaos; c != nil {
		props = append(props, junitProp{Name: "chaos.seed", Value: fmt.Sprint(c.Seed)}, junitProp{Name: "chaos.runs", Value: fmt.Sprint(c.Runs)})
	}
	return props
}

// chaosTestcases are one failing testcase per violation, or one passing
// testcase saying the runs held when none broke an invariant, so a chaos
// run is never invisible on a CI page.
func chaosTestcases(c *ChaosReport) []junitTestcase {
	if len(c.Violations) == 0 {
		var ms float64
		for _, t := range c.Trials {
			ms += t.DurationMs
		}
		return []junitTestcase{{Name: fmt.Sprintf("chaos: %d run(s) of seed %d", len(c.Trials), c.Seed), Classname: "conform.chaos", Time: junitSecs(ms),
			SystemOut: &junitText{Text: fmt.Sprintf("every invariant held in %d run(s) of seed %d\n", len(c.Trials), c.Seed)}}}
	}
	trials := map[int]*Trial{}
	for _, t := range c.Trials {
		trials[t.Run] = t
	}
	var out []junitTestcase
	for _, v := range c.Violations {
		tc := junitTestcase{Name: xmlSafe(fmt.Sprintf("chaos run %d: %s", v.Run, v.Invariant)), Classname: "conform.chaos", Time: junitSecs(0)}
		var b strings.Builder
		fmt.Fprintf(&b, "invariant: %s\n%s\n\nreplay: %s\n\nschedule: %s\nminimised: %s\n", v.Invariant, v.Detail, v.Replay, scheduleJSON(v.Schedule), scheduleJSON(v.Minimised))
		if t := trials[v.Run]; t != nil {
			tc.Time = junitSecs(t.DurationMs)
			b.WriteString(observedText(t.Observed))
			b.WriteString(timelinesText(t.Migrations))
		}
		tc.Failure = &junitFailure{Message: xmlSafe(v.Detail), Type: xmlSafe(v.Invariant), Text: xmlSafe(b.String())}
		out = append(out, tc)
	}
	return out
}

// caseBody is what a failing or erroring case's testcase says: what was
// done and expected, why it was graded so, what was observed, each
// migration's timeline, and the job's last log lines.
func caseBody(res *Result) string {
	var b strings.Builder
	fmt.Fprintf(&b, "case %s: %s (%s, %s)\nexpect: %s\nrule: %s\nwhy: %s\n", res.ID, res.Name, res.Group, res.Strategy, res.Expect, orNone(res.Rule), res.Why)
	for i, m := range res.Moves {
		if len(m.Faults) > 0 {
			fmt.Fprintf(&b, "move %d faults: %s\n", i+1, faultsJSON(m.Faults))
		}
	}
	b.WriteString(observedText(res.Observed))
	b.WriteString(timelinesText(res.Migrations))
	b.WriteString(logTailText(res.Logs, res.LogsOmitted, sim.DefaultLogTail))
	return b.String()
}

func observedText(o Observed) string {
	var b strings.Builder
	b.WriteString("observed:\n")
	for _, f := range observedFields(o) {
		fmt.Fprintf(&b, "  %s: %s\n", f.Label, f.Value)
	}
	return b.String()
}

func timelinesText(ms []*sim.Migration) string {
	var b strings.Builder
	for i, m := range ms {
		fmt.Fprintf(&b, "\nmigration %d of %d, %s: %s", i+1, len(ms), m.ID, migrationTitle(m))
		if m.Reason != "" {
			fmt.Fprintf(&b, ": %s", m.Reason)
		}
		b.WriteString("\n")
		if o := m.Output; o != nil {
			fmt.Fprintf(&b, "output seam %s: %s\n", o.Verdict, o.Detail)
		}
		b.WriteString("timeline:\n" + sim.FormatTimeline(m))
	}
	return b.String()
}

// logTailText is the last n of a case's log lines, with what was left out.
func logTailText(lines []sim.LogLine, omitted, n int) string {
	if len(lines) == 0 && omitted == 0 {
		return "\nthe job printed nothing during the case\n"
	}
	shown := lines[max(0, len(lines)-n):]
	var b strings.Builder
	fmt.Fprintf(&b, "\nlast %d log line(s) of the case", len(shown))
	if left := omitted + len(lines) - len(shown); left > 0 {
		fmt.Fprintf(&b, " (%d earlier not shown", left)
		if omitted > 0 {
			fmt.Fprintf(&b, ", %d of them not kept past the case's %d", omitted, MaxCaseLogLines)
		}
		b.WriteString(")")
	}
	b.WriteString(":\n")
	for _, l := range shown {
		fmt.Fprintf(&b, "  %s %s %s\n", l.At.UTC().Format("15:04:05.000"), l.Instance, sim.FormatLogLine(l, false))
	}
	return b.String()
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// xmlSafe drops what XML 1.0 cannot carry at all (most control characters,
// invalid UTF-8), which encoding/xml would otherwise write as U+FFFD or
// refuse; it is scenario's, which conform does not import.
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
