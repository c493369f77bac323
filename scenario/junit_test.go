package scenario

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/normsim/normsim/internal/junit"
	"github.com/normsim/normsim/internal/junit/junittest"
	"github.com/normsim/normsim/sim"
)

// sampleReport has a step of every status, odd characters included.
func sampleReport() *Report {
	start := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	mig := &sim.Migration{ID: "mig-1", Strategy: sim.Handover, State: sim.MigrationAborted, Phase: "target-ready",
		Reason: "the target aborted: \"bad\" <state> & \x00\x1b[31mred\x1b[0m ]]> end",
		Source: sim.MigrationEndpoint{Instance: "counter-1", Node: "a"}, Target: sim.MigrationEndpoint{Instance: "counter-2", Node: "b"},
		StartedAt: start, Durations: sim.Durations{TotalMs: f64(31)},
		Events: []sim.MigrationEvent{{Seq: 1, At: start, Phase: "get-state", Side: "manager", Detail: "requested"},
			{Seq: 2, At: start.Add(31 * time.Millisecond), Phase: "target-ready", Side: "target", Detail: "abort \xff invalid utf-8"}}}
	ok := &sim.Migration{ID: "mig-0", Strategy: sim.Handover, State: sim.MigrationCompleted, StartedAt: start,
		Output: &sim.OutputReport{Verdict: sim.VerdictSeamless, Detail: "source stopped at 9, target continued at 10"},
		Result: sim.MigrationResult{Applied: []string{"counter"}, Failed: []sim.FailedApply{{ID: "overlay", Reason: "font missing"}}, SkewMs: f64(4)}}
	checks := Judge(&Expect{State: sim.MigrationCompleted}, Outcome{Migration: mig})
	r := &Report{StartedAt: start, Hostname: "ci-runner", Scenarios: []*ScenarioResult{{
		Name: "handover & <friends>", File: "s.yaml", Line: 1, Template: "counter", Nodes: []string{"a", "b"}, Repeat: 2,
		Status: StatusFailed, StartedAt: start, DurationMs: 1234.5, Cleanup: []string{"remove instance x: 409 CONFLICT"},
		Steps: []*StepResult{
			{Run: 1, Index: 1, Kind: KindLaunch, Name: "launch counter on a", Status: StatusPassed, DurationMs: 120, Pos: Pos{Line: 3, Column: 5}},
			{Run: 1, Index: 2, Kind: KindMigrate, Name: "migrate to b (handover)", Status: StatusPassed, DurationMs: 200, Migration: ok, Pos: Pos{Line: 4, Column: 5}},
			{Run: 1, Index: 3, Kind: KindMigrate, Name: "migrate to a", Status: StatusPassed, Refusal: &APIError{Status: 422, Code: "UNPROCESSABLE", Message: "no"}},
			{Run: 2, Index: 1, Kind: KindLaunch, Name: "launch counter on a", Status: StatusError, Message: "instance counter-3 is failed: exit 1",
				Detail: "last log lines of counter-3:\npanic: boom\n"},
			{Run: 2, Index: 2, Kind: KindMigrate, Name: "migrate to b (handover)", Status: StatusSkipped, Message: "not run: step 2.1 could not be carried out"},
			{Run: 2, Index: 3, Kind: KindMigrate, Name: "migrate to a", Status: StatusFailed, Message: FailureMessage(checks), Checks: checks, Migration: mig},
		}}}}
	r.finish(start.Add(1500 * time.Millisecond))
	return r
}

func TestJUnitReportIsValid(t *testing.T) {
	var buf bytes.Buffer
	if err := sampleReport().WriteJUnit(&buf); err != nil {
		t.Fatal(err)
	}
	data := buf.Bytes()
	junittest.RequireValid(t, data)
	doc, err := junit.Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	if doc.Tests != 6 || doc.Failures != 1 || doc.Errors != 1 || len(doc.Suites) != 1 {
		t.Fatalf("totals %+v", doc)
	}
	s := doc.Suites[0]
	if s.Name != "handover & <friends>" || s.Skipped != 1 || s.Time != "1.234" || s.Timestamp != "2025-03-01T12:00:00" || s.Hostname != "ci-runner" {
		t.Fatalf("suite %+v", s)
	}
	fail := s.Cases[5]
	if fail.Name != "run 2 step 3: migrate to a" || fail.Classname != s.Name || fail.Failure == nil || fail.Failure.Type != "expectation" {
		t.Fatalf("failing case %+v", fail)
	}
	if !strings.HasPrefix(fail.Failure.Message, "expected state completed, got aborted in phase target-ready: the target aborted: \"bad\" <state> & ") {
		t.Errorf("failure message %q", fail.Failure.Message)
	}
	for _, want := range []string{"timeline:\n", "requested\n", `abort \xff invalid utf-8`, "]]> end"} {
		if !strings.Contains(fail.Failure.Text, want) {
			t.Errorf("failure body lacks %q:\n%s", want, fail.Failure.Text)
		}
	}
	if e := s.Cases[3].Error; e == nil || e.Type != "step" || !strings.Contains(e.Text, "panic: boom") {
		t.Errorf("erroring case %+v", s.Cases[3])
	}
	if sk := s.Cases[4].Skipped; sk == nil || !strings.HasPrefix(sk.Text, "not run:") {
		t.Errorf("skipped case %+v", s.Cases[4])
	}
	if out := s.Cases[1].SystemOut; out == nil || !strings.Contains(out.Text, "output seam seamless") ||
		!strings.Contains(out.Text, "\ntarget-applied: applied counter; failed overlay (font missing); skewMs 4\n") ||
		!strings.Contains(out.Text, "\njudgement: tolerated (at fault: none): the target could not apply 1 participant: overlay (font missing)\n") {
		t.Errorf("passing migration's system-out %+v", out)
	}
	if !strings.Contains(fail.Failure.Text, "\njudgement: pass (at fault: none): rolled back") || strings.Contains(fail.Failure.Text, "target-applied:") {
		t.Errorf("a rollback's failure body shows its judgement and no result:\n%s", fail.Failure.Text)
	}
}

func TestJUnitReportOfBrokenFilesIsValid(t *testing.T) {
	_, err1 := ParseFile(filepath.Join("testdata", "broken", "unknown-key.yaml"))
	_, err2 := ParseFile(filepath.Join("testdata", "broken", "syntax.yaml"))
	probs := append(problems(t, err1), problems(t, err2)...)
	var buf bytes.Buffer
	r := ProblemsReport(time.Now(), probs)
	if r.Passed {
		t.Fatal("a report with problems passed")
	}
	if err := r.WriteJUnit(&buf); err != nil {
		t.Fatal(err)
	}
	junittest.RequireValid(t, buf.Bytes())
	doc, _ := junit.Parse(buf.Bytes())
	if len(doc.Suites) != 2 || doc.Errors != 2 || !strings.Contains(doc.Suites[0].Cases[0].Error.Message, "(and 1 more)") ||
		!strings.Contains(doc.Suites[1].Cases[0].Error.Text, "syntax.yaml:4: not valid YAML") {
		t.Fatalf("report %s", buf.Bytes())
	}
}
