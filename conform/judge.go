package conform

import (
	"fmt"
	"strings"

	"github.com/normsim/normsim/protocol"
	"github.com/normsim/normsim/sim"
)

// The rules a case is judged by, as the contract (section 2) states them.
const (
	ruleHandover = "contract §2 handover: the job hands over at an exact position; the target continues exactly after the source's last packet"
	ruleChain    = "contract §2 handover, repeated: the state survives every move, and every seam is exact"
	ruleRefusal  = "contract §2 step 1: a source may answer state-refused; the migration is over, nothing is placed, the source keeps running"
	ruleRollback = "contract §2: before the point of no return a break rolls back; the target is removed, the source keeps running and can hand over again"
	ruleNoReturn = "contract §2: after the point of no return nothing rolls back; the failure is reported"
	ruleSurvive  = "a short freeze or a frame delivered twice is no reason to fail: the handover completes, or rolls back cleanly"
	ruleMove     = "contract §2 %s: the target takes over; the gap or overlap is the strategy's, and measured"
	ruleStart    = "a target that cannot start leaves the source running"
	// ruleStartStopped is stopThenStart's: its source is stopped before
	// the target starts.
	ruleStartStopped = "contract §2 stopThenStart: the source is stopped before the target starts, so a target that cannot start leaves the failure reported and nothing running"
)

// verdict is a grade with why.
type verdict struct {
	grade Grade
	why   string
}

// worse keeps the worse of two verdicts; of equals the first that says
// why.
func (v verdict) worse(o verdict) verdict {
	if rank(o.grade) > rank(v.grade) || v.why == "" {
		return o
	}
	return v
}

func rank(g Grade) int {
	switch g {
	case GradeTolerated:
		return 1
	case GradeFail:
		return 2
	case GradeError:
		return 3
	}
	return 0
}

func pass(format string, a ...any) verdict { return verdict{GradePass, fmt.Sprintf(format, a...)} }
func tolerate(format string, a ...any) verdict {
	return verdict{GradeTolerated, fmt.Sprintf(format, a...)}
}
func fail(format string, a ...any) verdict { return verdict{GradeFail, fmt.Sprintf(format, a...)} }

// judge grades a case from its evidence: the grade, the rule it was judged
// by, and why.
func judge(c Case, ev *evidence) (Grade, string, string) {
	rule, v := judgeCase(c, ev)
	return v.grade, rule, v.why
}

func judgeCase(c Case, ev *evidence) (string, verdict) {
	last := ev.moves[len(ev.moves)-1]
	if c.Strategy != sim.Handover {
		return judgeMove(c, ev)
	}
	if c.Kind == kindRefusal {
		return ruleRefusal, judgeRefusal(ev)
	}
	if last.State == sim.MigrationRefused {
		rule := ruleHandover
		if c.Kind == kindFault {
			rule = ruleRollback
		}
		return rule, fail("the source refused to hand over (%s); a template that declares handover promised it", last.Reason)
	}
	switch c.Kind {
	case kindHandover, kindChain:
		rule := ruleHandover
		if c.Kind == kindChain {
			rule = ruleChain
		}
		v := verdict{grade: GradePass}
		for i, m := range ev.moves {
			if m.State != sim.MigrationCompleted {
				return rule, fail("move %d of %d %s", i+1, len(c.Moves), endOf(m))
			}
			prefix := ""
			if len(ev.moves) > 1 {
				prefix = fmt.Sprintf("move %d: ", i+1)
			}
			v = v.worse(seam(m, ev.sendsOutput, prefix))
		}
		return rule, v.worse(survivor(ev, "after the handover"))
	}
	return judgeFault(c, ev)
}

// judgeFault grades a case that arms a fault on a handover.
func judgeFault(c Case, ev *evidence) (string, verdict) {
	m := ev.moves[0]
	var f sim.Fault
	if len(c.Moves) > 0 && len(c.Moves[0].Faults) > 0 {
		f = c.Moves[0].Faults[0]
	}
	survivable := f.Kind == "pause" || f.Kind == "duplicate-frame"
	if !fired(m) {
		if m.State == sim.MigrationCompleted {
			return ruleHandover, verdict{GradeError, "the fault never fired, although the handover completed: normsim did not carry the case out"}
		}
		return ruleHandover, fail("the handover never reached %s: it %s", c.Step, endOf(m))
	}
	switch {
	case m.State == sim.MigrationCompleted:
		rule := ruleHandover
		if survivable {
			rule = ruleSurvive
		}
		if f.Side == sideTarget && (f.Kind == "kill" || f.Kind == "stop") && len(ev.running) == 0 {
			// The target applied before the signal took it: the job is
			// gone by the fault's hand, so its output cannot be asked
			// for; only a wrong position is held against it.
			if wrongPosition(m.Output) {
				return rule, seam(m, ev.sendsOutput, "")
			}
			return rule, pass("completed before the fault %s the target, which then ended as a %s job must", pastTense(f.Kind), pastTense(f.Kind))
		}
		return rule, seam(m, ev.sendsOutput, "").worse(survivor(ev, "after the handover"))
	case pastNoReturn(m):
		if survivable {
			return ruleSurvive, fail("the handover failed after the point of no return: %s", endOf(m))
		}
		return ruleNoReturn, judgeNoReturn(m, ev)
	}
	v := judgeRollback(m, f, ev)
	switch {
	case survivable && v.grade == GradePass:
		return ruleSurvive, tolerate("%s, where the handover could have completed", v.why)
	case survivable:
		return ruleSurvive, v
	}
	return ruleRollback, v
}

// faultsFired are the timeline's records of the faults that fired, in
// order (sim.TimelineFault).
func faultsFired(m *sim.Migration) []string {
	var out []string
	for _, e := range m.Events {
		if e.Kind == sim.TimelineFault {
			out = append(out, e.Detail)
		}
	}
	return out
}

// fired says whether a fault armed on the migration fired.
func fired(m *sim.Migration) bool { return len(faultsFired(m)) > 0 }

// judgeRollback checks what a rollback leaves: the target gone and silent
// after its abort, the source running (unless the fault took it),
// connected, producing, and able to hand over cleanly.
func judgeRollback(m *sim.Migration, f sim.Fault, ev *evidence) verdict {
	left, own := rollbackLeft(m, f, ev), judged(m, "the rolled-back handover: ")
	if left.grade == GradeFail && own.grade == GradeFail {
		// The case is about the handover it rolled back: what that broke
		// leads, whatever else failed after it.
		return fail("%s; after it, %s", own.why, left.why)
	}
	return left.worse(own)
}

func rollbackLeft(m *sim.Migration, f sim.Fault, ev *evidence) verdict {
	for _, in := range ev.running {
		if in.ID != m.Source.Instance {
			return fail("%s (%s on %s) is still running after the rollback", in.ID, roleOf(m, in.ID), in.Node)
		}
	}
	sourceHit := f.Side == sideSource && (f.Kind == "kill" || f.Kind == "stop")
	if sourceHit {
		if len(ev.running) == 0 {
			return pass("rolled back (%s): the target removed; the fault %s the source, and nothing of the job is left running", endOf(m), pastTense(f.Kind))
		}
		// A source the runtime restarted, or one that ignored SIGTERM.
		if f.Kind == "stop" {
			return fail("the source kept running after it was stopped (SIGTERM)")
		}
	}
	if len(ev.running) == 0 {
		return fail("the source is gone after the rollback: %s", sourceGone(m))
	}
	if !ev.connected {
		return fail("the source did not connect to its job socket again after the rollback")
	}
	v := pass("rolled back (%s); the source still producing; the follow-up handover completed", endOf(m))
	if ev.reconnected && !touchesSourceSocket(f) {
		v = tolerate("rolled back (%s); the source recovered only after a reconnect", endOf(m))
	}
	doubt := inDoubt(m)
	if doubt {
		kept := "kept its output stopped, as it must (docs/conform.md)"
		if ev.producing != nil && *ev.producing {
			// Harmless here, as the target is gone, but a guess: had the
			// handover gone on, it would have produced beside the target.
			kept = "resumed on a guess, which the contract does not back (docs/conform.md)"
		}
		v = pass("rolled back (%s); the source had been told cutover-ready and then lost its socket, so it could not know the handover rolled back; it %s; the follow-up handover completed and the job produces again", endOf(m), kept)
	} else if ev.producing != nil && !*ev.producing {
		return fail("the source stopped producing after the rollback")
	}
	if ev.followUp == nil {
		return verdict{GradeError, "no follow-up handover was run"}
	}
	if ev.followUp.State != sim.MigrationCompleted {
		return fail("the follow-up handover after the rollback %s", endOf(ev.followUp))
	}
	if ev.producingAfter != nil && !*ev.producingAfter {
		return fail("the job does not produce after the follow-up handover")
	}
	if doubt {
		// The source had stopped: the seam spans a pause the job could
		// not avoid, so only a wrong position is held against it.
		if wrongPosition(ev.followUp.Output) {
			return seam(ev.followUp, ev.sendsOutput, "the follow-up handover: ")
		}
		return v
	}
	return v.worse(seam(ev.followUp, ev.sendsOutput, "the follow-up handover: "))
}

// sourceGone says how the source went, from the rollback's record; a
// source whose socket dropped is expected to reconnect, not to end.
func sourceGone(m *sim.Migration) string {
	gone := "the job crashed or exited"
	if rb := m.Rollback; rb != nil && rb.Source == sim.SourceGone {
		gone = rb.SourceDetail
	}
	if droppedSocket(m, sideSource) {
		return gone + "; its socket had dropped, and a job whose socket drops must reconnect and carry on, not end (docs/conform.md, \"A job's duties\")"
	}
	return gone
}

// droppedSocket says the side's socket closed during the migration.
func droppedSocket(m *sim.Migration, side string) bool {
	for _, e := range m.Events {
		if e.Side == side && e.Kind == sim.TimelineSocketClosed {
			return true
		}
	}
	return false
}

// inDoubt says whether a rolled-back handover left its source unable to
// know it rolled back: the source was told cutover-ready (so it may have
// stopped its output and sent source-stopped-output, the point of no
// return on its side) and its socket then closed before the worker could
// tell it `abort`. Nothing in the contract tells such a source on
// reconnecting, and a source that resumed on a guess would produce beside
// a target that may have taken over: its output rightly stays stopped. A
// source that got its abort knows, whatever it had sent (a
// source-stopped-output that came after the deadline, 6.10): it must
// resume, as the contract's "the source keeps running" says.
func inDoubt(m *sim.Migration) bool {
	asked := false
	for _, e := range m.Events {
		if e.Side != sideSource {
			continue
		}
		out := e.Frame != nil && e.Frame.Direction == "out"
		switch {
		case out && e.Frame.Type == protocol.TypeCutoverReady:
			asked = true
		case out && e.Frame.Type == protocol.TypeAbort:
			return false
		case asked && e.Kind == sim.TimelineSocketClosed:
			return true
		}
	}
	return false
}

// touchesSourceSocket says whether a fault breaks the source's socket or
// its frames, so a reconnect of the source is what it asks for.
func touchesSourceSocket(f sim.Fault) bool {
	switch f.Kind {
	case "drop-socket", "pause":
		return f.Side == sideSource
	case "corrupt-frame", "drop-frame", "delay-frame", "duplicate-frame":
		return true
	}
	return false
}

// judgeNoReturn checks a migration that failed past the point of no
// return: reported, and nothing rolled back (the source does not produce
// again).
func judgeNoReturn(m *sim.Migration, ev *evidence) verdict {
	if m.Reason == "" {
		return fail("the handover %s past the point of no return without a reason", m.State)
	}
	for _, in := range ev.running {
		if in.ID == m.Source.Instance && ev.producing != nil && *ev.producing {
			return fail("the source produces again after the point of no return: it rolled back")
		}
	}
	return pass("failed past the point of no return, reported: %s", m.Reason).worse(judged(m, "its seam: "))
}

// judgeRefusal grades the refusal case: only a job that refuses is graded.
func judgeRefusal(ev *evidence) verdict {
	m := ev.moves[0]
	if m.State != sim.MigrationRefused {
		return verdict{GradeNotApplicable, "the job did not refuse (the handover " + endOf(m) + "); the case grades only a refusal"}
	}
	if strings.TrimSpace(m.Reason) == "" {
		return fail("refused without a reason")
	}
	for _, in := range ev.running {
		if in.ID != m.Source.Instance {
			return fail("%s is running after a refusal: something was placed", in.ID)
		}
	}
	if len(ev.running) == 0 {
		return fail("the source is gone after it refused")
	}
	if ev.producing != nil && !*ev.producing {
		return fail("the source stopped producing after it refused")
	}
	return pass("refused (%s); nothing placed, the source still producing", m.Reason)
}

// judgeMove grades the cases of an overlap or stopThenStart template.
func judgeMove(c Case, ev *evidence) (string, verdict) {
	rule := fmt.Sprintf(ruleMove, c.Strategy)
	if c.Kind == kindFault {
		m := ev.moves[0]
		if m.State == sim.MigrationCompleted {
			return ruleStart, verdict{GradeError, "the migration completed although its target was to fail to start: normsim did not carry the case out"}
		}
		for _, in := range ev.running {
			if in.ID == m.Target.Instance {
				return ruleStart, fail("the target %s runs although its start failed", in.ID)
			}
		}
		if m.Reason == "" {
			return ruleStart, fail("the migration %s without saying why", m.State)
		}
		if c.Strategy == sim.StopThenStart && len(ev.running) == 0 {
			// stopThenStart stops the source before it starts the target:
			// a target that cannot start leaves nothing running, which is
			// the strategy's cost, not the job's fault.
			return ruleStartStopped, pass("%s; the source had been stopped first, as stopThenStart does", endOf(m))
		}
		if len(ev.running) != 1 || ev.running[0].ID != m.Source.Instance {
			return ruleStart, fail("the source is not the one instance left running after the target failed to start (running: %d)", len(ev.running))
		}
		if ev.producing != nil && !*ev.producing {
			return ruleStart, fail("the source stopped producing after the target failed to start")
		}
		return ruleStart, pass("%s; the source still running", endOf(m))
	}
	var measured []string
	for i, m := range ev.moves {
		if m.State != sim.MigrationCompleted {
			return rule, fail("move %d of %d %s", i+1, len(c.Moves), endOf(m))
		}
		if o := m.Output; o != nil {
			measured = append(measured, seamText(o))
		}
	}
	v := pass("completed")
	if len(measured) > 0 {
		v = pass("completed; %s", strings.Join(measured, "; "))
	}
	// The strategy's seam is its cost, but what the judgement holds
	// against a move (packets it could not read) grades it here too.
	for i, m := range ev.moves {
		if m.Judged().Grade != sim.GradePass {
			v = v.worse(judged(m, fmt.Sprintf("move %d of %d: ", i+1, len(c.Moves))))
		}
	}
	return rule, v.worse(survivor(ev, "after the move"))
}

// seam grades a handover's output seam by the migration's one judgement
// (sim.Judge), the one migrate --wait, normsim ci, normsimtest and the
// dashboard print. A move without a seam report is not judged on it, and
// says why; what else the judgement holds against it (a participant
// the target could not apply) grades it all the same.
func seam(m *sim.Migration, sendsOutput bool, prefix string) verdict {
	if m.Output == nil && m.Judged().Grade == sim.GradePass {
		if !sendsOutput {
			return pass("%scompleted; normsim's output sink received nothing from the job before the first move, so the seam is not judged", prefix)
		}
		return pass("%scompleted; no seam was measured (the sink saw none of the job's packets around this move)", prefix)
	}
	return judged(m, prefix)
}

// judged is the migration's judgement as a case's verdict.
func judged(m *sim.Migration, prefix string) verdict {
	j := m.Judged()
	blame := ""
	if j.AtFault != "" {
		blame = " (at fault: the " + j.AtFault + ")"
	}
	switch j.Grade {
	case sim.GradeFail:
		return fail("%s%s%s", prefix, j.Why, blame)
	case sim.GradeTolerated:
		return tolerate("%s%s%s", prefix, j.Why, blame)
	}
	return pass("%s%s", prefix, j.Why)
}

// wrongPosition says a seam broke the promise a handover makes whatever a
// fault did to its timing: numbers lost or repeated, a picture that
// glitches at the join, or a side producing when it must not. A seam that
// merely came late (a source in doubt, a target a fault took) is not held
// against the job; these are.
func wrongPosition(o *sim.OutputReport) bool {
	if o == nil {
		return false
	}
	return o.Verdict == sim.VerdictDuplicate || o.Verdict == sim.VerdictOverlap || o.Verdict == sim.VerdictGlitch || o.Lost > 0 ||
		o.SourceAfterStop > 0 || o.TargetBeforeApply > 0 || o.TargetAfterAbort > 0
}

// seamText is a seam in numbers.
func seamText(o *sim.OutputReport) string {
	s := o.Verdict
	if o.Lost > 0 {
		s += fmt.Sprintf(", %s lost", sim.Plural(o.Lost, "packet"))
	}
	if o.Duplicated > 0 {
		s += fmt.Sprintf(", %s repeated", sim.Plural(o.Duplicated, "packet"))
	}
	if o.SourceAfterStop > 0 {
		s += fmt.Sprintf(", %s from the source after it stopped", sim.Plural(o.SourceAfterStop, "packet"))
	}
	if o.GapMs != nil {
		// Time, not numbers: a duplicate can come late too.
		s += fmt.Sprintf(", the target's first packet %.0f ms after the source's last", *o.GapMs)
	}
	if o.OverlapMs != nil {
		s += fmt.Sprintf(", overlap %.0f ms", *o.OverlapMs)
	}
	return s
}

// survivor checks the instance a completed move left: it runs and
// produces.
func survivor(ev *evidence, when string) verdict {
	if len(ev.running) != 1 {
		return fail("%d instances of the job are running %s, not one", len(ev.running), when)
	}
	if ev.producing != nil && !*ev.producing {
		return fail("the job stopped producing %s", when)
	}
	return pass("")
}

func roleOf(m *sim.Migration, id string) string {
	if s := sideOf(m, id); s != "" {
		return "the " + s
	}
	return "an instance of the job"
}

func pastTense(kind string) string {
	if kind == "stop" {
		return "stopped"
	}
	return "killed"
}
