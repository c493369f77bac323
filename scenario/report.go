package scenario

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/normsim/normsim/internal/reportfile"
	"github.com/normsim/normsim/sim"
)

// Step statuses.
const (
	StatusPassed  = "passed"
	StatusFailed  = "failed"  // an expectation did not hold
	StatusError   = "error"   // the step could not be carried out
	StatusSkipped = "skipped" // an earlier step of the same run could not be carried out
)

// Report is everything a `normsim ci` run found: the JSON report as written
// by WriteJSON, and what the JUnit report is made from.
type Report struct {
	StartedAt  time.Time `json:"startedAt"`
	DurationMs float64   `json:"durationMs"`
	// Passed is true when every expectation held.
	Passed      bool `json:"passed"`
	Interrupted bool `json:"interrupted,omitempty"`
	// Version is normsim's; Hostname the machine's (both set by the caller).
	Version  string `json:"version,omitempty"`
	Hostname string `json:"hostname,omitempty"`
	Counts   Counts `json:"counts"`
	// Problems are the broken scenario files; when there are any, nothing
	// ran.
	Problems  Problems          `json:"problems,omitempty"`
	Scenarios []*ScenarioResult `json:"scenarios"`
}

// Counts sum up a report.
type Counts struct {
	Scenarios       int `json:"scenarios"`
	ScenariosFailed int `json:"scenariosFailed"`
	Steps           int `json:"steps"`
	Passed          int `json:"passed"`
	Failed          int `json:"failed"`
	Errors          int `json:"errors"`
	Skipped         int `json:"skipped"`
}

// ScenarioResult is one scenario's runs.
type ScenarioResult struct {
	Name     string   `json:"name"`
	File     string   `json:"file"`
	Line     int      `json:"line"`
	Template string   `json:"template"`
	Runtime  string   `json:"runtime,omitempty"`
	Nodes    []string `json:"nodes"`
	Repeat   int      `json:"repeat"`
	// Status is passed or failed.
	Status     string        `json:"status"`
	StartedAt  time.Time     `json:"startedAt"`
	DurationMs float64       `json:"durationMs"`
	Steps      []*StepResult `json:"steps"`
	// Cleanup lists what could not be cleaned up after a run.
	Cleanup []string `json:"cleanup,omitempty"`
}

// StepResult is one step of one run.
type StepResult struct {
	// Run is which repetition (1..repeat); Index the step's place (1-based).
	Run   int    `json:"run"`
	Index int    `json:"index"`
	Kind  string `json:"kind"`
	Name  string `json:"name"`
	Pos
	// Status is passed, failed, error or skipped; Message says why when it
	// is not passed.
	Status     string    `json:"status"`
	Message    string    `json:"message,omitempty"`
	StartedAt  time.Time `json:"startedAt"`
	DurationMs float64   `json:"durationMs"`
	// Job is the step's job (as:); Instance the job's instance after the
	// step.
	Job      string `json:"job,omitempty"`
	Instance string `json:"instance,omitempty"`
	// Detail is extra text for a failure: an instance's last log lines.
	Detail    string         `json:"detail,omitempty"`
	Expect    *Expect        `json:"expect,omitempty"`
	Request   *MigrateBody   `json:"request,omitempty"`
	Refusal   *APIError      `json:"refusal,omitempty"`
	Migration *sim.Migration `json:"migration,omitempty"`
	Checks    []Check        `json:"checks,omitempty"`

	note string // what a passing step's progress line says
}

// Label is "3" for step 3, or "2.3" for step 3 of run 2 when the scenario
// repeats.
func (sr *StepResult) Label(repeat int) string {
	if repeat > 1 {
		return fmt.Sprintf("%d.%d", sr.Run, sr.Index)
	}
	return fmt.Sprint(sr.Index)
}

// finish computes the counts and the verdict.
func (r *Report) finish(now time.Time) {
	r.DurationMs = ms(now.Sub(r.StartedAt))
	c := Counts{Scenarios: len(r.Scenarios)}
	for _, s := range r.Scenarios {
		if s.Status != StatusPassed {
			c.ScenariosFailed++
		}
		for _, st := range s.Steps {
			c.Steps++
			switch st.Status {
			case StatusPassed:
				c.Passed++
			case StatusFailed:
				c.Failed++
			case StatusError:
				c.Errors++
			case StatusSkipped:
				c.Skipped++
			}
		}
	}
	r.Counts = c
	r.Passed = len(r.Problems) == 0 && !r.Interrupted && c.Failed == 0 && c.Errors == 0 && c.ScenariosFailed == 0
}

// ProblemsReport is the report of a run that found broken scenario files:
// nothing ran.
func ProblemsReport(started time.Time, probs Problems) *Report {
	r := &Report{StartedAt: started, Problems: probs, Scenarios: []*ScenarioResult{}}
	r.finish(started)
	return r
}

// WriteJSON writes the report as indented JSON.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteFile writes the report to path with write (WriteJSON or WriteJUnit);
// see reportfile.Write for what path may name.
func WriteFile(path string, write func(io.Writer) error) error {
	return reportfile.Write(path, write)
}

// PrintSummary writes the final lines: counts, then every step that did
// not pass with where it is.
func (r *Report) PrintSummary(w io.Writer) {
	c := r.Counts
	if len(r.Problems) > 0 {
		fmt.Fprintf(w, "\n%d problem(s) in the scenario files; nothing was run.\n", len(r.Problems))
		return
	}
	verdict := "PASS"
	if !r.Passed {
		verdict = "FAIL"
	}
	fmt.Fprintf(w, "\n%s  %d scenario(s): %d passed, %d failed; %d step(s): %d passed, %d failed, %d error(s), %d skipped  (%.1fs)\n",
		verdict, c.Scenarios, c.Scenarios-c.ScenariosFailed, c.ScenariosFailed, c.Steps, c.Passed, c.Failed, c.Errors, c.Skipped, r.DurationMs/1000)
	if r.Interrupted {
		fmt.Fprintln(w, "      interrupted: the remaining steps and scenarios did not run")
	}
	for _, s := range r.Scenarios {
		for _, st := range s.Steps {
			if st.Status != StatusFailed && st.Status != StatusError {
				continue
			}
			fmt.Fprintf(w, "  %-5s %s:%s  %s › step %s %s: %s\n", statusWord(st.Status), s.File, st.Pos.String(), s.Name, st.Label(s.Repeat), st.Name, st.Message)
		}
	}
}

func statusWord(status string) string {
	switch status {
	case StatusPassed:
		return "ok"
	case StatusFailed:
		return "FAIL"
	case StatusError:
		return "ERROR"
	}
	return "skip"
}

// LogTails is the last log lines of each side a failed migration carries,
// as text; "" when it carries none.
func LogTails(m *sim.Migration) string {
	if m == nil || m.Logs == nil {
		return ""
	}
	return sim.FormatLogTails(m.Logs.Tails)
}

// Summary says how a migration went in a few lines: who moved where, how it
// ended, what the seam looked like, what the target reported in
// target-applied, and normsim's judgement.
func Summary(m *sim.Migration) string {
	var b bytes.Buffer
	fmt.Fprintf(&b, "migration %s: %s of %s from node %s to node %s (%s)\n", m.ID, m.Strategy, m.Source.Instance, m.Source.Node, m.Target.Node, orNone(m.Target.Instance))
	fmt.Fprintf(&b, "ended %s%s", m.State, inPhase(m))
	if t := m.Durations.TotalMs; t != nil {
		fmt.Fprintf(&b, " after %s", sim.FormatMs(*t))
	}
	fmt.Fprintf(&b, "%s\n", colon(m.Reason))
	if o := m.Output; o != nil {
		fmt.Fprintf(&b, "output seam %s: %s\n", o.Verdict, o.Detail)
	}
	if sim.AppliedReported(m) {
		fmt.Fprintf(&b, "target-applied: %s\n", sim.FormatResult(m.Result))
	}
	if m.State.Ended() {
		fmt.Fprintf(&b, "judgement: %s\n", sim.FormatJudgement(m.Judged()))
	}
	return b.String()
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
