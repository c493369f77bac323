package scenario

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/normsim/normsim/sim"
)

// Outcome is what a migrate step produced: the migration as it ended, or
// the API's refusal of the request (then no migration ran).
type Outcome struct {
	Migration *sim.Migration
	Refusal   *APIError
}

// Check is one expectation, judged.
type Check struct {
	// Expect is the key of the expectation: state, phase, reason, seam,
	// maxGapMs, minOverlapMs, maxTotalMs, keyframeAtJoin, mediaDefects, applied, failed, atFault,
	// judgement or error.
	Expect string `json:"expect"`
	Want   string `json:"want"`
	Got    string `json:"got"`
	OK     bool   `json:"ok"`
	// Implicit marks the check every migrate step gets whose expect says
	// nothing of the seam or the judgement: the judgement is not fail.
	Implicit bool `json:"implicit,omitempty"`
	// Message says what happened instead, when the expectation did not hold.
	Message string `json:"message,omitempty"`
}

// Judge checks an outcome against an expectation. Every expectation set is
// judged, so a report shows all that went wrong, not only the first.
func Judge(e *Expect, o Outcome) []Check {
	if e.Error != 0 {
		return judgeRefusal(e, o)
	}
	m := o.Migration
	if m == nil {
		got := "no migration"
		if o.Refusal != nil {
			got = "the request refused: " + o.Refusal.Error()
		}
		return []Check{{Expect: "state", Want: string(e.State), Got: got,
			Message: fmt.Sprintf("expected state %s, got %s", e.State, got)}}
	}
	var out []Check
	add := func(c Check) { out = append(out, c) }

	got := string(m.State)
	msg := "got " + got
	if m.State != sim.MigrationCompleted && m.Phase != "" {
		msg += " in phase " + string(m.Phase)
	}
	if m.Reason != "" {
		msg += ": " + m.Reason
	}
	add(check("state", string(e.State), got, m.State == e.State, "expected state %s, %s", e.State, msg))
	if e.Phase != "" {
		phase := string(m.Phase)
		add(check("phase", e.Phase, phase, phase == e.Phase, "expected phase %s, got %s (state %s%s)", e.Phase, orNone(phase), m.State, colon(m.Reason)))
	}
	if e.Reason != "" {
		add(check("reason", e.Reason, m.Reason, strings.Contains(m.Reason, e.Reason), "expected a reason containing %q, got %q (state %s)", e.Reason, m.Reason, m.State))
	}
	o2 := m.Output
	noSeam := func(key, want string) {
		add(Check{Expect: key, Want: want, Got: "no seam verdict",
			Message: fmt.Sprintf("expected %s, got no seam verdict (the migration ended %s%s; the seam is judged when a migration completes or fails after the point of no return, and the job sends output; an aborted one has a seam only when its target produced)", describeWant(key, want), m.State, inPhase(m))})
	}
	if e.Seam != "" {
		if o2 == nil {
			noSeam("seam", e.Seam)
		} else {
			add(check("seam", e.Seam, o2.Verdict, o2.Verdict == e.Seam, "expected seam %s, got %s (%s)", e.Seam, o2.Verdict, o2.Detail))
		}
	}
	if e.MaxGapMs != nil {
		want := num(*e.MaxGapMs)
		if o2 == nil {
			noSeam("maxGapMs", want)
		} else {
			gap := 0.0
			if o2.GapMs != nil {
				gap = *o2.GapMs
			}
			add(check("maxGapMs", want, num(gap), gap <= *e.MaxGapMs, "expected a gap of at most %s ms, got %.1f ms (%s: %s)", want, gap, o2.Verdict, o2.Detail))
		}
	}
	if e.MinOverlapMs != nil {
		want := num(*e.MinOverlapMs)
		if o2 == nil {
			noSeam("minOverlapMs", want)
		} else {
			ov := 0.0
			if o2.OverlapMs != nil {
				ov = *o2.OverlapMs
			}
			ok := ov >= *e.MinOverlapMs && (o2.OverlapMs != nil || *e.MinOverlapMs == 0)
			add(check("minOverlapMs", want, num(ov), ok, "expected an overlap of at least %s ms, got %.1f ms (%s: %s)", want, ov, o2.Verdict, o2.Detail))
		}
	}
	if e.KeyframeAtJoin != nil {
		want := strconv.FormatBool(*e.KeyframeAtJoin)
		switch {
		case o2 == nil || o2.Media == nil:
			add(Check{Expect: "keyframeAtJoin", Want: want, Got: "no media seam",
				Message: fmt.Sprintf("expected keyframeAtJoin %s, but the migration has no media seam (the job sent no MPEG-TS or RTP to its %s around the switch; it ended %s%s)", want, sim.EnvMediaURL, m.State, inPhase(m))})
		case o2.Media.KeyframeAtJoin == nil:
			add(Check{Expect: "keyframeAtJoin", Want: want, Got: "unknown",
				Message: fmt.Sprintf("expected keyframeAtJoin %s, but the target sent no video frame the receiver could read (media %s: %s)", want, o2.Media.Verdict, o2.Media.Detail)})
		default:
			got := *o2.Media.KeyframeAtJoin
			add(check("keyframeAtJoin", want, strconv.FormatBool(got), got == *e.KeyframeAtJoin, "expected keyframeAtJoin %s, got %t (media %s: %s)", want, got, o2.Media.Verdict, o2.Media.Detail))
		}
	}
	for _, want := range e.MediaDefects {
		switch {
		case o2 == nil || o2.Media == nil:
			add(Check{Expect: "mediaDefects", Want: want, Got: "no media seam",
				Message: fmt.Sprintf("expected the media defect %s, but the migration has no media seam (the job sent no MPEG-TS or RTP to its %s around the switch; it ended %s%s)", want, sim.EnvMediaURL, m.State, inPhase(m))})
		default:
			var found []string
			hit := false
			for _, d := range o2.Media.Defects {
				found = append(found, d.Check)
				hit = hit || d.Check == want
			}
			got := "none"
			if len(found) > 0 {
				got = strings.Join(slices.Compact(found), ", ")
			}
			add(check("mediaDefects", want, got, hit, "expected the media defect %s, but the seam's defects are: %s (media %s: %s)", want, got, o2.Media.Verdict, o2.Media.Detail))
		}
	}
	if e.MaxTotalMs != nil {
		want := num(*e.MaxTotalMs)
		if t := m.Durations.TotalMs; t == nil {
			add(Check{Expect: "maxTotalMs", Want: want, Got: "unknown", Message: fmt.Sprintf("expected the migration to take at most %s ms, but it has no total duration", want)})
		} else {
			add(check("maxTotalMs", want, num(*t), *t <= *e.MaxTotalMs, "expected the migration to take at most %s ms, got %.1f ms (%s)", want, *t, m.State))
		}
	}
	if e.Applied != nil {
		add(checkIDs("applied", *e.Applied, m.Result.Applied, m))
	}
	if e.Failed != nil {
		ids := make([]string, len(m.Result.Failed))
		for i, f := range m.Result.Failed {
			ids[i] = f.ID
		}
		add(checkIDs("failed", *e.Failed, ids, m))
	}
	j := m.Judged()
	if e.AtFault != "" {
		got := cmp.Or(j.AtFault, "none")
		add(check("atFault", e.AtFault, got, got == e.AtFault, "expected at fault: %s, got %s (judgement %s)", e.AtFault, got, sim.FormatJudgement(j)))
	}
	if e.Judgement != "" {
		add(check("judgement", e.Judgement, string(j.Grade), string(j.Grade) == e.Judgement, "expected judgement %s, got %s", e.Judgement, sim.FormatJudgement(j)))
	}
	if !e.SaysSeam() {
		// A step silent on the seam must not pass a broken promise.
		c := check("judgement", "pass or tolerated", string(j.Grade), j.Grade != sim.GradeFail,
			"the judgement is %s; a step that means to prove a broken promise says so (judgement: fail, or the seam it expects)", sim.FormatJudgement(j))
		c.Implicit = true
		add(c)
	}
	return out
}

// checkIDs judges the ids the target reported in target-applied against
// an exact set, order aside.
func checkIDs(key string, want, got []string, m *sim.Migration) Check {
	wantS := idList(want)
	if !sim.AppliedReported(m) {
		return Check{Expect: key, Want: wantS, Got: "no target-applied",
			Message: fmt.Sprintf("expected the target to report %s %s, but it sent no target-applied (the migration ended %s%s%s)", key, wantS, m.State, inPhase(m), colon(m.Reason))}
	}
	a, b := slices.Clone(want), slices.Clone(got)
	slices.Sort(a)
	slices.Sort(b)
	ok := slices.Equal(a, slices.Compact(b))
	return check(key, wantS, idList(got), ok, "expected the target to report %s %s, got %s (target-applied: %s)", key, wantS, idList(got), sim.FormatResult(m.Result))
}

// idList is ids as a scenario writes them: [counter, overlay].
func idList(ids []string) string { return "[" + strings.Join(ids, ", ") + "]" }

func judgeRefusal(e *Expect, o Outcome) []Check {
	want := strconv.Itoa(e.Error)
	if o.Refusal == nil {
		got := "no refusal"
		msg := fmt.Sprintf("expected the request to be refused with %d, but it was accepted", e.Error)
		if m := o.Migration; m != nil {
			got = "migration " + string(m.State)
			msg = fmt.Sprintf("expected the request to be refused with %d, but migration %s started and ended %s%s%s", e.Error, m.ID, m.State, inPhase(m), colon(m.Reason))
		}
		return []Check{{Expect: "error", Want: want, Got: got, Message: msg}}
	}
	r := o.Refusal
	out := []Check{check("error", want, strconv.Itoa(r.Status), r.Status == e.Error, "expected the request to be refused with %d, got %s", e.Error, r.Error())}
	if e.Reason != "" {
		out = append(out, check("reason", e.Reason, r.Message, strings.Contains(r.Message, e.Reason), "expected a refusal containing %q, got %q", e.Reason, r.Message))
	}
	return out
}

func check(key, want, got string, ok bool, format string, args ...any) Check {
	c := Check{Expect: key, Want: want, Got: got, OK: ok}
	if !ok {
		c.Message = fmt.Sprintf(format, args...)
	}
	return c
}

func describeWant(key, want string) string {
	switch key {
	case "maxGapMs":
		return "a gap of at most " + want + " ms"
	case "minOverlapMs":
		return "an overlap of at least " + want + " ms"
	}
	return "seam " + want
}

func num(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

func colon(s string) string {
	if s == "" {
		return ""
	}
	return ": " + s
}

func inPhase(m *sim.Migration) string {
	if m.State == sim.MigrationCompleted || m.Phase == "" {
		return ""
	}
	return " in phase " + string(m.Phase)
}

// Failed reports whether any check did not hold.
func Failed(cs []Check) bool {
	for _, c := range cs {
		if !c.OK {
			return true
		}
	}
	return false
}

// FailureMessage joins what went wrong, one expectation after another.
func FailureMessage(cs []Check) string {
	var parts []string
	for _, c := range cs {
		if !c.OK {
			parts = append(parts, c.Message)
		}
	}
	return strings.Join(parts, "; ")
}
