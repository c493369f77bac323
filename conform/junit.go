package conform

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/normsim/normsim/internal/junit"
	"github.com/normsim/normsim/sim"
)

// The JUnit report (internal/junit, the shape `normsim ci`'s has, so a CI
// page shows both alike) is one testsuite per report, one testcase per
// case. A failed case is a <failure> typed by the rule it broke, a case
// normsim could not carry out an <error>, a case that does not apply
// <skipped>; a tolerated case passes and says why in its <system-out>.
// Each chaos violation is one more failing testcase.

// junitTypeNoRule types a failure or error whose result names no rule.
const junitTypeNoRule = "conform"

func msDur(ms float64) time.Duration { return time.Duration(ms * float64(time.Millisecond)) }

// WriteJUnit writes the report as JUnit XML.
func (r *Report) WriteJUnit(w io.Writer) error {
	suite := junit.Suite{
		Name:       "normsim conform " + r.Template,
		Time:       msDur(r.DurationMs),
		Timestamp:  r.StartedAt,
		Hostname:   r.Hostname,
		Properties: r.junitProperties(),
	}
	for _, res := range r.ordered() {
		tc := junit.Case{Name: res.ID + " " + res.Name, Classname: "conform." + res.Group, Time: msDur(res.DurationMs)}
		typ := res.Rule
		if typ == "" {
			typ = junitTypeNoRule
		}
		switch res.Grade {
		case GradePass:
		case GradeTolerated:
			tc.SystemOut = fmt.Sprintf("tolerated: %s\nrule: %s\n", res.Why, res.Rule)
		case GradeNotApplicable:
			tc.Skipped = "not applicable: " + res.Why + "\n"
		case GradeError:
			tc.Error = &junit.Problem{Message: res.Why, Type: typ, Text: caseBody(res)}
		default: // GradeFail, and a grade this code does not know, which must not pass
			tc.Failure = &junit.Problem{Message: res.Why, Type: typ, Text: caseBody(res)}
		}
		suite.Cases = append(suite.Cases, tc)
	}
	if r.Interrupted {
		// The cases that never ran are not in the report; without this a
		// CI page would show a stopped run as a shorter green one.
		suite.Cases = append(suite.Cases, junit.Case{Name: "interrupted", Classname: "conform",
			Error: &junit.Problem{Message: "the run was stopped before every case ran", Type: "interrupted",
				Text: fmt.Sprintf("%d case(s) ran before the run was stopped\n", len(r.Results))}})
	}
	if c := r.Chaos; c != nil {
		suite.Cases = append(suite.Cases, chaosTestcases(c)...)
	}
	return junit.Write(w, junit.Report{Name: "normsim conform", Time: suite.Time, Suites: []junit.Suite{suite}})
}

func (r *Report) junitProperties() []junit.Property {
	props := []junit.Property{
		{Name: "template", Value: r.Template},
		{Name: "strategy", Value: string(r.Strategy)},
		{Name: "runtime", Value: r.Runtime},
		{Name: "version", Value: r.Version},
		{Name: "filter", Value: r.Filter},
		{Name: "parallel", Value: fmt.Sprint(r.Parallel)},
	}
	for _, k := range sortedKeys(r.Params) {
		props = append(props, junit.Property{Name: "param." + k, Value: r.Params[k]})
	}
	if c := r.Chaos; c != nil {
		props = append(props, junit.Property{Name: "chaos.seed", Value: fmt.Sprint(c.Seed)}, junit.Property{Name: "chaos.runs", Value: fmt.Sprint(c.Runs)})
	}
	return props
}

// chaosTestcases are one failing testcase per violation, or one passing
// testcase saying the runs held when none broke an invariant, so a chaos
// run is never invisible on a CI page.
func chaosTestcases(c *ChaosReport) []junit.Case {
	if len(c.Violations) == 0 {
		var ms float64
		for _, t := range c.Trials {
			ms += t.DurationMs
		}
		return []junit.Case{{Name: fmt.Sprintf("chaos: %d run(s) of seed %d", len(c.Trials), c.Seed), Classname: "conform.chaos", Time: msDur(ms),
			SystemOut: fmt.Sprintf("every invariant held in %d run(s) of seed %d\n", len(c.Trials), c.Seed)}}
	}
	trials := map[int]*Trial{}
	for _, t := range c.Trials {
		trials[t.Run] = t
	}
	var out []junit.Case
	for _, v := range c.Violations {
		tc := junit.Case{Name: fmt.Sprintf("chaos run %d: %s", v.Run, v.Invariant), Classname: "conform.chaos"}
		var b strings.Builder
		fmt.Fprintf(&b, "invariant: %s\n%s\n\nreplay: %s\n\nschedule: %s\nminimised: %s\n", v.Invariant, v.Detail, v.Replay, scheduleJSON(v.Schedule), scheduleJSON(v.Minimised))
		if t := trials[v.Run]; t != nil {
			tc.Time = msDur(t.DurationMs)
			b.WriteString(observedText(t.Observed))
			b.WriteString(timelinesText(t.Migrations))
		}
		tc.Failure = &junit.Problem{Message: v.Detail, Type: v.Invariant, Text: b.String()}
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
