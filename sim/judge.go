package sim

import (
	"fmt"
	"strings"
)

// Grade is how what a job did measures against the contract's promises.
// conform adds n/a and error for cases; a migration is one of these three.
type Grade string

// Grades, best first.
const (
	// GradePass: every promise checked held.
	GradePass Grade = "pass"
	// GradeTolerated: allowed but costly, or not provable either way (a
	// seam normsim could not read whole, a target that had to be killed
	// after the stop grace, participants the target could not apply).
	GradeTolerated Grade = "tolerated"
	// GradeFail: a promise was broken.
	GradeFail Grade = "fail"
)

// Worse is the worse of two grades ("" counts as pass).
func (g Grade) Worse(o Grade) Grade {
	if gradeRank(o) > gradeRank(g) {
		return o
	}
	if g == "" {
		return GradePass
	}
	return g
}

func gradeRank(g Grade) int {
	switch g {
	case GradeTolerated:
		return 1
	case GradeFail:
		return 2
	}
	return 0
}

// Judgement is normsim's one verdict on what a job did in a migration,
// judged from the migration's record alone: migrate --wait, normsim ci,
// normsim conform, normsimtest and the dashboard all print this one.
// It judges the job's promises (the position it handed over, who produced
// when, what the target applied, the answers it owed in time), not
// whether the migration completed: that is the migration's state, and a
// fault may have ended it on purpose.
type Judgement struct {
	Grade Grade `json:"grade"`
	// AtFault is the side that broke a promise: source, target, or
	// "source and target"; empty when none did or none can be blamed.
	AtFault string `json:"atFault,omitempty"`
	// Why is the findings in one line, worst first.
	Why string `json:"why"`
	// Findings are the promises checked that did not simply hold, and
	// the one that did when nothing else is to be said.
	Findings []Finding `json:"findings"`
}

// Finding is one promise and what the record says of it.
type Finding struct {
	Grade Grade `json:"grade"`
	// Check names what was looked at (CheckPosition, …), for tools that
	// act on some findings only.
	Check string `json:"check"`
	// Promise names the rule (docs/conform.md, "Every promise").
	Promise string `json:"promise"`
	AtFault string `json:"atFault,omitempty"`
	Detail  string `json:"detail"`
}

// The promises a migration's record is judged by (docs/conform.md lists
// them with the check that sees each).
const (
	PromiseExactPosition = "handover: the target continues exactly after the source's last packet"
	PromiseOneProducer   = "handover: the source produces nothing after source-stopped-output, the target nothing before cutover-apply"
	PromiseStrategySeam  = "overlap/stopThenStart: the gap or overlap is the strategy's, measured"
	PromiseRollback      = "rollback: the target, told abort, produces nothing more and exits on SIGTERM"
	PromiseApplied       = "handover: target-applied reports what the target applied and what it could not"
	PromiseReadable      = "every output packet of the job can be read"
	PromiseStops         = "a job told to stop (SIGTERM) exits within the stop grace"
	// What a job's socket promises (Migration.Broken).
	PromiseAnswerInTime   = "the job answers what it is asked in time (state, target-ready, source-stopped-output, target-applied)"
	PromiseWellFormed     = "the job sends well-formed frames of its direction, in phase and within 64 KiB"
	PromiseStaysUp        = "the job keeps running, and its socket open, while it is moved, until it is told to stop"
	PromiseReads          = "the job reads what its worker writes to it (frames, and the pongs to its own pings) within 5 s"
	PromiseReportNotAbort = "past the point of no return no side aborts: the source committed with source-stopped-output, and the target reports what it could not apply in target-applied"
)

// What a finding looked at.
const (
	// CheckPosition: the numbers at the seam (lost, repeated, exact).
	CheckPosition = "position"
	// CheckProducers: who produced when (the handover's moments).
	CheckProducers = "producers"
	// CheckOutputSeen: whether the target's output reached the sink.
	CheckOutputSeen = "output-seen"
	// CheckRollback: what the rolled-back target did after its abort.
	CheckRollback = "rollback"
	// CheckApplied: what target-applied reported.
	CheckApplied = "applied"
	// CheckReadable: whether the job's packets could all be read.
	CheckReadable = "readable"
	// CheckStrategySeam: an overlap's or stopThenStart's measured seam.
	CheckStrategySeam = "strategy"
	// CheckMedia: the media seam as a receiver sees it (keyframe at the
	// join, tables, counters, clocks, codec parameters).
	CheckMedia = "media"
	// CheckStop: whether a side normsim stopped exited on SIGTERM.
	CheckStop = "stop"
	// CheckProtocol: what ended the migration, when a side broke a
	// promise of the job socket or exited on its own (Migration.Broken).
	CheckProtocol = "protocol"
)

// Judged is the migration's judgement: the one it was stored with, or,
// for a record written before normsim judged at the end, Judge's.
func (m *Migration) Judged() Judgement {
	if m.Judgement != nil {
		return *m.Judgement
	}
	return Judge(m)
}

// Judge judges an ended migration from its record. A running one is
// judged as far as it has got.
func Judge(m *Migration) Judgement {
	var fs []Finding
	add := func(g Grade, check, promise, atFault, format string, a ...any) {
		fs = append(fs, Finding{Grade: g, Check: check, Promise: promise, AtFault: atFault, Detail: fmt.Sprintf(format, a...)})
	}
	o := m.Output
	if m.Reason == ReasonInterrupted && (m.State == MigrationFailed || m.Rollback != nil && m.Rollback.AtRestart) {
		// Killed while it ran: what the job sent then went with normsim.
		detail := "not judged: normsim stopped while the migration ran, and what the job sent then was not kept"
		if m.State == MigrationAborted {
			detail += "; at its next start, " + rolledBack(m)
		}
		add(GradeTolerated, CheckOutputSeen, PromiseExactPosition, "", "%s", detail)
		return summarize(fs)
	}
	if b := m.Broken; b != nil && m.State != MigrationCompleted {
		add(GradeFail, CheckProtocol, b.Promise, b.Side, "%s", b.Detail)
	}
	switch {
	case m.State == MigrationRefused:
		add(GradePass, CheckProducers, PromiseOneProducer, "", "refused before anything was placed; no seam")
	case m.Strategy != Handover:
		if o != nil {
			add(GradePass, CheckStrategySeam, PromiseStrategySeam, "", "%s: %s", o.Verdict, o.Detail)
		}
	case m.State == MigrationAborted:
		judgeRollback(m, add)
	default:
		judgeHandoverSeam(m, add)
	}
	if m.State == MigrationCompleted && m.Strategy == Handover && len(m.Result.Failed) > 0 {
		parts := make([]string, len(m.Result.Failed))
		for i, f := range m.Result.Failed {
			parts[i] = f.ID + " (" + f.Reason + ")"
		}
		add(GradeTolerated, CheckApplied, PromiseApplied, "", "the target could not apply %s: %s", Plural(int64(len(parts)), "participant"), strings.Join(parts, ", "))
	}
	if o != nil && o.Unreadable != nil && o.Unreadable.FromJob > 0 && o.Verdict != VerdictUnknown {
		add(GradeTolerated, CheckReadable, PromiseReadable, "", "%s", o.Unreadable.String())
	}
	if m.SourceKilled != "" {
		add(GradeTolerated, CheckStop, PromiseStops, "source", "the source did not exit on SIGTERM (%s) and was killed (SIGKILL)", m.SourceKilled)
	}
	return summarize(fs)
}

type adder func(g Grade, check, promise, atFault, format string, a ...any)

// judgeHandoverSeam judges a handover's seam, whether it completed or
// failed past the point of no return: a wrong position or two producers
// fail in every end state.
func judgeHandoverSeam(m *Migration, add adder) {
	o := m.Output
	if o == nil {
		if m.State == MigrationCompleted {
			add(GradePass, CheckOutputSeen, PromiseExactPosition, "", "normsim's output sink received nothing from the job, so the seam is not judged")
		}
		return
	}
	if o.SourceAfterStop > 0 || o.TargetBeforeApply > 0 {
		add(GradeFail, CheckProducers, PromiseOneProducer, o.AtFault, "%s", o.Detail)
	}
	// A video job's seam is in frames, not numbers: its gap is pictures
	// missing, its overlap pictures shown again.
	fromMedia := o.Media != nil && o.Media.Verdict == o.Verdict && o.Lost == 0 && o.Duplicated == 0
	switch {
	case fromMedia && o.Verdict == VerdictGap && o.Media.FramesMissing == 0:
		// Less than a frame: no picture is missing, each shows late.
		add(GradeFail, CheckMedia, PromiseExactPosition, o.AtFault, "the pictures go on late at the seam: %s", o.Detail)
		return
	case fromMedia && o.Verdict == VerdictGap:
		add(GradeFail, CheckMedia, PromiseExactPosition, o.AtFault, "frames missing at the seam: %s", o.Detail)
		return
	case fromMedia && o.Verdict == VerdictOverlap && o.SourceAfterStop == 0 && o.TargetBeforeApply == 0 && o.Media.FramesRepeated == 0:
		add(GradeFail, CheckMedia, PromiseExactPosition, o.AtFault, "the pictures go on early at the seam: %s", o.Detail)
		return
	case fromMedia && o.Verdict == VerdictOverlap && o.SourceAfterStop == 0 && o.TargetBeforeApply == 0:
		add(GradeFail, CheckMedia, PromiseExactPosition, o.AtFault, "frames presented again at the seam: %s", o.Detail)
		return
	}
	switch o.Verdict {
	case VerdictSeamless:
		add(GradePass, CheckPosition, PromiseExactPosition, "", "seamless: %s", o.Detail)
	case VerdictUnknown:
		add(GradeTolerated, CheckPosition, PromiseExactPosition, "", "the seam cannot be vouched for: %s", o.Detail)
	case VerdictGap:
		add(GradeFail, CheckPosition, PromiseExactPosition, o.AtFault, "numbers lost at the seam: %s", o.Detail)
	case VerdictDuplicate:
		if len(o.RepeatedFrom) > 0 && o.Lost == 0 {
			add(GradeTolerated, CheckPosition, PromiseExactPosition, "", "numbers repeated at the seam, but not by this handover: %s", o.Detail)
			break
		}
		add(GradeFail, CheckPosition, PromiseExactPosition, o.AtFault, "numbers repeated at the seam: %s", o.Detail)
	case VerdictGlitch:
		add(GradeFail, CheckMedia, PromiseExactPosition, o.AtFault, "the picture glitches at the seam: %s", o.Detail)
	case VerdictOverlap:
		if o.SourceAfterStop == 0 && o.TargetBeforeApply == 0 {
			add(GradeFail, CheckProducers, PromiseOneProducer, o.AtFault, "%s", o.Detail)
		}
	case VerdictNoOutput:
		if m.State == MigrationCompleted {
			add(GradeFail, CheckOutputSeen, PromiseExactPosition, "", "completed, but %s", o.Detail)
		} else if o.SourceAfterStop == 0 && o.TargetBeforeApply == 0 {
			add(GradePass, CheckOutputSeen, PromiseExactPosition, "", "the migration failed (%s); %s", m.Reason, o.Detail)
		}
	}
}

// judgeRollback judges what a rolled-back handover's sides did: the target
// it removed must have produced nothing (it never got cutover-apply) and
// must have exited on SIGTERM.
func judgeRollback(m *Migration, add adder) {
	o := m.Output
	broke := o != nil && (o.TargetAfterAbort > 0 || o.TargetBeforeApply > 0 || o.SourceAfterStop > 0)
	if broke {
		add(GradeFail, CheckRollback, PromiseRollback, o.AtFault, "%s", o.Detail)
	}
	killed := m.Rollback != nil && m.Rollback.Target == TargetKilled
	if killed {
		add(GradeTolerated, CheckRollback, PromiseRollback, "target", "%s", m.Rollback.TargetDetail)
	}
	if !broke && !killed {
		add(GradePass, CheckRollback, PromiseRollback, "", "%s", rolledBack(m))
	}
}

// rolledBack is a clean rollback in words, from its record.
func rolledBack(m *Migration) string {
	rb := m.Rollback
	if rb == nil {
		return "rolled back"
	}
	parts := []string{"rolled back"}
	if rb.TargetDetail != "" {
		parts = append(parts, rb.TargetDetail)
	}
	if rb.Source == SourceRunning {
		parts = append(parts, "the source left running")
	} else {
		parts = append(parts, rb.SourceDetail)
	}
	return strings.Join(parts, "; ")
}

// summarize orders findings worst first and names who is at fault.
func summarize(fs []Finding) Judgement {
	j := Judgement{Grade: GradePass, Findings: []Finding{}}
	var blamed []string
	for _, f := range fs {
		j.Grade = j.Grade.Worse(f.Grade)
	}
	// Worst first; among equals, the order they were checked in.
	for _, g := range []Grade{GradeFail, GradeTolerated, GradePass} {
		for _, f := range fs {
			if f.Grade != g {
				continue
			}
			if g == GradePass && j.Grade != GradePass {
				continue // a passing check says nothing beside a broken one
			}
			j.Findings = append(j.Findings, f)
			if g == j.Grade && g != GradePass {
				for _, side := range strings.Split(f.AtFault, " and ") {
					if side != "" && !containsString(blamed, side) {
						blamed = append(blamed, side)
					}
				}
			}
		}
	}
	switch {
	case containsString(blamed, "source") && containsString(blamed, "target"):
		j.AtFault = "source and target"
	case len(blamed) > 0:
		j.AtFault = blamed[0]
	}
	whys := make([]string, len(j.Findings))
	for i, f := range j.Findings {
		whys[i] = f.Detail
	}
	j.Why = strings.Join(whys, "; ")
	if j.Why == "" {
		j.Why = "nothing to judge: the migration sent no output normsim could see"
	}
	return j
}

func containsString(xs []string, s string) bool {
	for _, x := range xs {
		if x == s {
			return true
		}
	}
	return false
}
