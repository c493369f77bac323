package conform

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/normsim/normsim/internal/reportfile"
	"github.com/normsim/normsim/sim"
)

// This file holds what the three renderings of a Report (HTML, JUnit, the
// terminal summary) share: the order of the cases, the counts, and the
// words for what a case observed.

// ordered is r's results in case-ID order ("3.10" after "3.9"): a
// parallel runner may finish them in any order, and every rendering
// groups them by the matrix's sections.
func (r *Report) ordered() []*Result {
	out := slices.Clone(r.Results)
	slices.SortStableFunc(out, func(a, b *Result) int { return compareIDs(a.ID, b.ID) })
	return out
}

// compareIDs orders case IDs part by part, numerically where both parts
// are numbers.
func compareIDs(a, b string) int {
	pa, pb := strings.Split(a, "."), strings.Split(b, ".")
	for i := 0; i < len(pa) && i < len(pb); i++ {
		na, errA := strconv.Atoi(pa[i])
		nb, errB := strconv.Atoi(pb[i])
		var c int
		if errA == nil && errB == nil {
			c = na - nb
		} else {
			c = strings.Compare(pa[i], pb[i])
		}
		if c != 0 {
			return c
		}
	}
	return len(pa) - len(pb)
}

// gradeCount is how many cases got a grade.
type gradeCount struct {
	Grade Grade
	N     int
}

// counts are the cases per grade, every grade in Grades order, counted
// from the results themselves so a rendering never disagrees with the
// rows it shows; a grade outside Grades comes last.
func (r *Report) counts() []gradeCount {
	n := map[Grade]int{}
	for _, res := range r.Results {
		n[res.Grade]++
	}
	out := make([]gradeCount, 0, len(Grades))
	for _, g := range Grades {
		out = append(out, gradeCount{g, n[g]})
		delete(n, g)
	}
	var odd []Grade
	for g := range n {
		odd = append(odd, g)
	}
	slices.Sort(odd)
	for _, g := range odd {
		out = append(out, gradeCount{g, n[g]})
	}
	return out
}

// countsLine is "12 pass, 1 tolerated, 2 fail, 1 n/a, 0 error".
func countsLine(cs []gradeCount) string {
	parts := make([]string, len(cs))
	for i, c := range cs {
		parts[i] = fmt.Sprintf("%d %s", c.N, c.Grade)
	}
	return strings.Join(parts, ", ")
}

// verdict is the report's one word: FAIL exactly when Failed says so.
func (r *Report) verdict() string {
	if r.Failed() {
		return "FAIL"
	}
	return "PASS"
}

// gradeClass is a grade as a CSS class name ("n/a" cannot be one).
func gradeClass(g Grade) string {
	switch g {
	case GradePass, GradeTolerated, GradeFail, GradeError:
		return string(g)
	case GradeNotApplicable:
		return "na"
	}
	return "unknown"
}

// labelled is one value of a rendering and its label.
type labelled struct {
	Label, Value string
}

// observedFields are what a case observed, in words, in the order the
// grading reads them.
func observedFields(o Observed) []labelled {
	producing := "— (normsim's sink received nothing from the job in the 3 s before the first move, so its output is not judged)"
	if o.Producing != nil {
		producing = yesNo(*o.Producing)
	}
	applied, judged := "—", "—"
	if o.Result != nil {
		applied = sim.FormatResult(*o.Result)
	}
	if o.Judgement != "" {
		judged = fmt.Sprintf("%s (at fault: %s)", o.Judgement, cmp.Or(o.AtFault, "none"))
	}
	return []labelled{
		{"states", orNone(strings.Join(o.States, "; "))},
		{"seam", orNone(o.Seam)},
		{"target-applied", applied},
		{"judgement", judged},
		{"past point of no return", yesNo(o.PastPointOfNoReturn)},
		{"fired faults", orNone(strings.Join(o.Fired, "; "))},
		{"producing", producing},
		{"running", orNone(strings.Join(o.Running, ", "))},
		{"reconnects", strconv.Itoa(o.Reconnects)},
		{"follow-up", orNone(o.FollowUp)},
	}
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func orNone(s string) string {
	if s == "" {
		return "—"
	}
	return s
}

// faultsJSON is a move's faults as indented JSON, "[]" for a clean move.
func faultsJSON(fs []sim.Fault) string {
	if len(fs) == 0 {
		return "[]"
	}
	b, err := json.MarshalIndent(fs, "", "  ")
	if err != nil {
		return fmt.Sprintf("(faults not representable as JSON: %v)", err)
	}
	return string(b)
}

// scheduleJSON is a chaos schedule as indented JSON.
func scheduleJSON(s Schedule) string {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return fmt.Sprintf("(schedule not representable as JSON: %v)", err)
	}
	return string(b)
}

// faultWords says a fault in a few words: "kill source on get-state",
// "delay-frame target-ready 2s".
func faultWords(f sim.Fault) string {
	w := []string{f.Kind}
	if f.Side != "" {
		w = append(w, f.Side)
	}
	if f.On != "" {
		w = append(w, "on "+f.On)
	}
	if f.Frame != "" {
		w = append(w, f.Frame)
	}
	if f.Direction != "" {
		w = append(w, f.Direction)
	}
	if f.Delay > 0 {
		w = append(w, f.Delay.D().String())
	}
	return strings.Join(w, " ")
}

// scheduleWords says a chaos schedule in one line: each move's faults,
// the moves one after another.
func scheduleWords(s Schedule) string {
	if len(s.Moves) == 0 {
		return "no moves"
	}
	moves := make([]string, len(s.Moves))
	for i, m := range s.Moves {
		if len(m.Faults) == 0 {
			moves[i] = "clean"
			continue
		}
		fs := make([]string, len(m.Faults))
		for j, f := range m.Faults {
			fs[j] = faultWords(f)
		}
		moves[i] = strings.Join(fs, ", ")
	}
	return strings.Join(moves, " → ")
}

// migrationTitle names a migration by its sides: "handover a→b, ended
// aborted in get-state".
func migrationTitle(m *sim.Migration) string {
	s := fmt.Sprintf("%s %s→%s, %s", m.Strategy, orNone(m.Source.Node), orNone(m.Target.Node), m.State)
	if m.State != sim.MigrationCompleted && m.Phase != "" {
		s += " in " + string(m.Phase)
	}
	return s
}

// msSince is t's offset from start in milliseconds.
func msSince(t, start time.Time) float64 { return float64(t.Sub(start)) / float64(time.Millisecond) }

// WriteFile writes a rendering of a report (WriteJSON, WriteHTML,
// WriteJUnit) to path; see reportfile.Write for what path may name.
func WriteFile(path string, write func(io.Writer) error) error {
	return reportfile.Write(path, write)
}
