package scenario

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/normsim/normsim/internal/junit"
	"github.com/normsim/normsim/sim"
)

// The JUnit report (internal/junit) has one testsuite per scenario, one
// testcase per step and run. A failed expectation is a <failure>, a step
// that could not be carried out an <error>, a step after it <skipped>.

// JUnit failure types.
const (
	junitTypeExpectation = "expectation" // an expectation did not hold
	junitTypeStep        = "step"        // the step could not be carried out
	junitTypeScenario    = "scenario"    // the scenario file is broken
)

func msDur(ms float64) time.Duration { return time.Duration(ms * float64(time.Millisecond)) }

// WriteJUnit writes the report as JUnit XML.
func (r *Report) WriteJUnit(w io.Writer) error {
	doc := junit.Report{Name: "normsim ci", Time: msDur(r.DurationMs)}
	if len(r.Problems) > 0 {
		doc.Suites = problemSuites(r)
	}
	for _, s := range r.Scenarios {
		suite := junit.Suite{Name: s.Name, Time: msDur(s.DurationMs), Timestamp: s.StartedAt, Hostname: r.Hostname}
		runtime := s.Runtime
		if runtime == "" {
			runtime = "default"
		}
		suite.Properties = []junit.Property{
			{Name: "file", Value: s.File},
			{Name: "line", Value: fmt.Sprint(s.Line)},
			{Name: "template", Value: s.Template},
			{Name: "runtime", Value: runtime},
			{Name: "nodes", Value: strings.Join(s.Nodes, ",")},
			{Name: "repeat", Value: fmt.Sprint(s.Repeat)},
		}
		for _, st := range s.Steps {
			tc := junit.Case{Name: caseName(s, st), Classname: s.Name, File: s.File, Time: msDur(st.DurationMs)}
			where := fmt.Sprintf("at %s:%s\n", s.File, st.Pos.String())
			switch st.Status {
			case StatusFailed:
				tc.Failure = &junit.Problem{Message: st.Message, Type: junitTypeExpectation, Text: where + failureBody(st)}
				tc.SystemOut = failureOut(st)
			case StatusError:
				tc.Error = &junit.Problem{Message: st.Message, Type: junitTypeStep, Text: where + failureBody(st)}
				tc.SystemOut = failureOut(st)
			case StatusSkipped:
				tc.Skipped = st.Message
			default:
				if st.Migration != nil {
					tc.SystemOut = Summary(st.Migration)
				} else if st.Refusal != nil {
					tc.SystemOut = "refused as expected: " + st.Refusal.Error() + "\n"
				}
			}
			suite.Cases = append(suite.Cases, tc)
		}
		if len(s.Cleanup) > 0 {
			suite.SystemOut = "cleanup: " + strings.Join(s.Cleanup, "\ncleanup: ") + "\n"
		}
		doc.Suites = append(doc.Suites, suite)
	}
	return junit.Write(w, doc)
}

// problemSuites reports broken scenario files: one suite per file, one
// erroring testcase, so a CI page shows why nothing ran.
func problemSuites(r *Report) []junit.Suite {
	var files []string
	byFile := map[string][]string{}
	for _, p := range r.Problems {
		if _, ok := byFile[p.File]; !ok {
			files = append(files, p.File)
		}
		byFile[p.File] = append(byFile[p.File], p.Error())
	}
	var out []junit.Suite
	for _, f := range files {
		probs := byFile[f]
		msg := probs[0]
		if len(probs) > 1 {
			msg = fmt.Sprintf("%s (and %d more)", msg, len(probs)-1)
		}
		out = append(out, junit.Suite{Name: f, Timestamp: r.StartedAt, Hostname: r.Hostname,
			Cases: []junit.Case{{Name: "parse", Classname: f,
				Error: &junit.Problem{Message: msg, Type: junitTypeScenario, Text: strings.Join(probs, "\n") + "\n"}}}})
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
		b.WriteString("\n" + Summary(m) + "timeline:\n" + sim.FormatTimeline(m))
	}
	return b.String()
}

// failureOut is a failing step's <system-out>: what the job printed, the
// evidence its author looks for first.
func failureOut(st *StepResult) string {
	return st.Detail + LogTails(st.Migration)
}
