package conform

import (
	"fmt"
	"io"
	"strings"

	"github.com/normsim/normsim/sim"
)

// PrintSummary writes the lines a terminal shows at the end of a run: the
// verdict and counts per grade on one line, then every case that failed,
// could not be run or was only tolerated, one line each (cases of one
// grade and one reason together, as one line with their IDs), then the
// chaos violations with the command that replays each.
func (r *Report) PrintSummary(w io.Writer) {
	results := r.ordered()
	if r.Chaos != nil && len(results) == 0 {
		// A chaos run runs no matrix: its counts would only say 0 cases.
		fmt.Fprintf(w, "%s  normsim conform %s --chaos (%s, %s): %d run(s), %d violation(s), %d could not be run  (%s)\n",
			r.verdict(), r.Template, r.Strategy, r.Runtime, len(r.Chaos.Trials), len(r.Chaos.Violations), r.Chaos.Errors(), sim.FormatMs(r.DurationMs))
	} else {
		fmt.Fprintf(w, "%s  normsim conform %s (%s, %s): %d case(s): %s  (%s)\n",
			r.verdict(), r.Template, r.Strategy, r.Runtime, len(results), countsLine(r.counts()), sim.FormatMs(r.DurationMs))
	}
	if r.Interrupted {
		fmt.Fprintln(w, "  interrupted: the remaining cases did not run")
	}
	var shown []*Result
	idWidth := 0
	for _, res := range results {
		switch res.Grade {
		case GradePass, GradeNotApplicable:
			continue
		}
		shown = append(shown, res)
		idWidth = max(idWidth, len(res.ID))
	}
	// Cases that ended the same way for the same reason are one bug
	// told many times: they read as one line, with their IDs.
	grouped := map[*Result]*Cause{}
	for _, c := range Causes(shown) {
		for _, res := range c.Results {
			grouped[res] = c
		}
	}
	printed := map[*Cause]bool{}
	for _, res := range shown {
		if c := grouped[res]; c != nil {
			if !printed[c] {
				printed[c] = true
				ids := make([]string, len(c.Results))
				for i, r := range c.Results {
					ids[i] = r.ID
				}
				fmt.Fprintf(w, "  %-9s  %d cases: %s\n             %s\n", c.Grade, len(c.Results), c.Why, "cases "+strings.Join(ids, ", "))
			}
			continue
		}
		line := fmt.Sprintf("  %-9s  %-*s  %s", res.Grade, idWidth, res.ID, oneLine(res.Name))
		if res.Why != "" {
			line += " — " + oneLine(res.Why)
		}
		fmt.Fprintln(w, line)
	}
	c := r.Chaos
	if c == nil {
		return
	}
	runs := fmt.Sprintf("%d run(s)", c.Runs)
	if c.Only >= 0 {
		runs = fmt.Sprintf("run %d replayed alone", c.Only)
	}
	fmt.Fprintf(w, "chaos: seed %d, %s: %d violation(s)\n", c.Seed, runs, len(c.Violations))
	for _, v := range c.Violations {
		fmt.Fprintf(w, "  chaos run %d: %s — %s\n", v.Run, oneLine(v.Invariant), oneLine(v.Detail))
		fmt.Fprintf(w, "    schedule:  %s\n", v.Schedule)
		if v.Note != "" {
			fmt.Fprintf(w, "    %s\n", v.Note)
		} else {
			fmt.Fprintf(w, "    minimised: %s (%d fault(s))\n", v.Minimised, v.Minimised.Faults())
		}
		fmt.Fprintf(w, "    replay: %s\n", oneLine(v.Replay))
	}
	for _, t := range c.Trials {
		if t.Error != "" {
			fmt.Fprintf(w, "  chaos run %d could not be run: %s\n", t.Run, oneLine(t.Error))
		}
	}
}

// oneLine keeps a summary line one line: a why or detail with line
// breaks in it would break the one-case-per-line layout.
func oneLine(s string) string {
	return strings.Join(strings.FieldsFunc(s, func(r rune) bool { return r == '\n' || r == '\r' }), " ")
}

// Cause is cases of one grade that ended for one reason: one bug, told as
// often as there are cases that meet it.
type Cause struct {
	Grade   Grade
	Why     string
	Results []*Result
}

// Causes groups the results that failed, errored or were tolerated by
// grade and reason, in the order each first appears; only reasons shared
// by two cases or more make a group.
func Causes(results []*Result) []*Cause {
	type key struct {
		grade Grade
		why   string
	}
	byKey := map[key]*Cause{}
	var order []*Cause
	for _, res := range results {
		switch res.Grade {
		case GradePass, GradeNotApplicable:
			continue
		}
		why := oneLine(res.Why)
		if why == "" {
			continue
		}
		k := key{res.Grade, why}
		c := byKey[k]
		if c == nil {
			c = &Cause{Grade: res.Grade, Why: why}
			byKey[k] = c
			order = append(order, c)
		}
		c.Results = append(c.Results, res)
	}
	var out []*Cause
	for _, c := range order {
		if len(c.Results) > 1 {
			out = append(out, c)
		}
	}
	return out
}
