package scenario

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/normsim/normsim/apiclient"
	"github.com/normsim/normsim/internal/junit/junittest"
	"github.com/normsim/normsim/internal/testenv"
	"github.com/normsim/normsim/normsimtest"
	"github.com/normsim/normsim/normsimtest/normsimdocker"
	"github.com/normsim/normsim/sim"
)

var templatesDir = filepath.Join("..", "templates")

// startSim runs a simulator on free ports with the repository's templates.
func startSim(t *testing.T, runtime string) *normsimtest.Sim {
	t.Helper()
	if testing.Short() {
		t.Skip("runs real jobs")
	}
	o := normsimtest.Options{Templates: []string{templatesDir}, Runtime: runtime}
	if runtime == sim.RuntimeDocker {
		return normsimdocker.Start(t, o)
	}
	return normsimtest.Start(t, o)
}

func parseAll(t *testing.T, paths ...string) []*Scenario {
	t.Helper()
	var out []*Scenario
	for _, p := range paths {
		out = append(out, mustParseFile(t, p)...)
	}
	return out
}

// runAll runs scenarios on s and checks the run left no instance behind.
func runAll(t *testing.T, s *normsimtest.Sim, ctx context.Context, scenarios []*Scenario) (*Report, string) {
	t.Helper()
	var out bytes.Buffer
	r := NewRunner(Config{URL: s.URL, Out: &out})
	if probs, err := r.Check(ctx, scenarios); err != nil || len(probs) > 0 {
		t.Fatalf("check: %v %v", err, probs)
	}
	rep := r.Run(ctx, scenarios)
	t.Logf("progress:\n%s", out.String())
	var left []sim.Instance
	if err := s.Do("GET", "/api/v1/instances", nil, &left); err != nil {
		t.Fatal(err)
	}
	if len(left) > 0 {
		t.Errorf("instances left after the run: %+v", left)
	}
	return rep, out.String()
}

// TestExamplesPass runs the good-behaviour examples on the process runtime:
// every expectation holds, and the reports say so.
func TestExamplesPass(t *testing.T) {
	testExamplesPass(t, sim.RuntimeProcess)
}

// TestExamplesPassOnDocker runs the same examples as containers.
func TestExamplesPassOnDocker(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real containers")
	}
	testenv.RequireDocker(t)
	normsimdocker.BuildSourceImage(t, "normsim/counter", filepath.Join("..", "examples", "jobs", "counter"))
	testExamplesPass(t, sim.RuntimeDocker)
}

func testExamplesPass(t *testing.T, runtime string) {
	s := startSim(t, runtime)
	var paths []string
	for _, name := range exampleFiles {
		paths = append(paths, examplePath(name))
	}
	rep, out := runAll(t, s, context.Background(), parseAll(t, paths...))
	if !rep.Passed {
		t.Fatalf("the examples failed on %s:\n%s", runtime, out)
	}
	// counter-handover 4 steps, counter-stop-then-start 3, relay-overlap 3,
	// counter-refuses-overlap 3, plain-repeat 3 runs of 4.
	if c := rep.Counts; c.Scenarios != 5 || c.Steps != 25 || c.Passed != 25 {
		t.Fatalf("counts %+v", c)
	}
	for _, sc := range rep.Scenarios {
		for _, st := range sc.Steps {
			if st.Kind == KindLaunch && !strings.Contains(st.note, "("+runtime+")") {
				t.Errorf("%s: launched %q, want the %s runtime", sc.Name, st.note, runtime)
			}
			if st.Kind != KindMigrate {
				continue
			}
			if st.Refusal == nil && (st.Migration == nil || len(st.Migration.Events) == 0 || !st.Migration.State.Ended()) {
				t.Errorf("%s step %d: migration without its timeline: %+v", sc.Name, st.Index, st.Migration)
			}
		}
	}
	// The job moves on: the second migrate of counter-handover moves the
	// instance the first created.
	h := rep.Scenarios[0].Steps
	if h[3].Migration.Source.Instance != h[2].Migration.Target.Instance || h[3].Migration.Target.Node != "a" {
		t.Errorf("second migration from %s, want the first's target %s", h[3].Migration.Source.Instance, h[2].Migration.Target.Instance)
	}
	var junit, js bytes.Buffer
	if err := rep.WriteJUnit(&junit); err != nil {
		t.Fatal(err)
	}
	junittest.RequireValid(t, junit.Bytes())
	if err := rep.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(js.Bytes(), &back); err != nil || !back.Passed || len(back.Scenarios) != 5 {
		t.Fatalf("JSON report does not read back: %v", err)
	}
}

// TestMisbehavingExamplesPass runs every scenario of examples/scenarios
// that is not in exampleFiles on the process runtime: each states what
// normsim finds in its misbehaving job, and all of it holds.
// misbehaving-apply-fails proves target-applied's failures are reported
// and expected: the result whole, the judgement tolerated.
func TestMisbehavingExamplesPass(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real jobs")
	}
	all, err := filepath.Glob(filepath.Join("..", "examples", "scenarios", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, p := range all {
		name := filepath.Base(p)
		switch {
		case slices.Contains(exampleFiles, name), slices.Contains(videoFiles, name):
		case slices.Contains(misbehavingFiles, name):
			paths = append(paths, p)
		default:
			t.Errorf("%s is in none of exampleFiles, videoFiles and misbehavingFiles", p)
		}
	}
	s := normsimtest.Start(t, normsimtest.Options{Runtime: sim.RuntimeProcess,
		Templates: []string{templatesDir, filepath.Join("..", "examples", "templates")}})
	rep, out := runAll(t, s, context.Background(), parseAll(t, paths...))
	if !rep.Passed || rep.Counts.Scenarios != len(misbehavingFiles) {
		t.Fatalf("the misbehaving examples failed (counts %+v):\n%s", rep.Counts, out)
	}
	var apply *StepResult
	for _, sc := range rep.Scenarios {
		if sc.Template == "apply-fails" {
			apply = sc.Steps[2]
		}
	}
	m := apply.Migration
	if m == nil || m.Judgement == nil || m.Judgement.Grade != sim.GradeTolerated || len(m.Result.Failed) != 1 || m.Result.Failed[0].ID != "overlay" ||
		m.Result.SkewMs == nil || *m.Result.SkewMs != 4 {
		t.Fatalf("apply-fails migration %+v", m)
	}
	for _, want := range []string{
		"target-applied: applied counter; failed overlay (font /fonts/lower-third.ttf is missing on this node); skewMs 4; judgement tolerated (at fault: none): the target could not apply 1 participant: overlay (font",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("progress lacks %q", want)
		}
	}
	var keys []string
	for _, c := range apply.Checks {
		keys = append(keys, c.Expect+"="+c.Got)
	}
	if want := "state=completed seam=seamless applied=[counter] failed=[overlay] atFault=none judgement=tolerated"; strings.Join(keys, " ") != want {
		t.Errorf("checks %s, want %s", strings.Join(keys, " "), want)
	}
}

// TestWrongExpectationsFail runs scenarios that expect the wrong thing: they
// fail, and the messages say what happened instead.
func TestWrongExpectationsFail(t *testing.T) {
	s := startSim(t, sim.RuntimeProcess)
	rep, out := runAll(t, s, context.Background(), parseAll(t,
		filepath.Join("testdata", "wrong", "handover-expects-gap.yaml"),
		filepath.Join("testdata", "wrong", "fail-start-expects-completed.yaml")))
	if rep.Passed || rep.Counts.ScenariosFailed != 2 || rep.Counts.Failed != 2 || rep.Counts.Errors != 0 {
		t.Fatalf("report %+v\n%s", rep.Counts, out)
	}
	gap := rep.Scenarios[0]
	if st := gap.Steps[2]; st.Status != StatusFailed || !strings.HasPrefix(st.Message, "expected seam gap, got seamless (source stopped at ") {
		t.Errorf("handover expected to gap: %s %q", st.Status, st.Message)
	}
	if st := gap.Steps[3]; st.Status != StatusPassed {
		t.Errorf("a failed expectation must not stop the run; next step %s %q", st.Status, st.Message)
	}
	fs := rep.Scenarios[1].Steps[1]
	if fs.Status != StatusFailed || fs.Message != "expected state completed, got aborted in phase place-target: the target failed to start: injected fault" {
		t.Errorf("target-fail-start expected to complete: %s %q", fs.Status, fs.Message)
	}
	// The progress output shows the failure with where it is and the
	// timeline.
	for _, want := range []string{
		"FAIL  3     migrate to b (handover)",
		"at " + filepath.Join("testdata", "wrong", "handover-expects-gap.yaml") + ":9:5",
		"cutover-apply  manager  point of no return",
		"fault: the target fails to start",
		"--- FAIL handover expected to leave a gap",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("progress lacks %q", want)
		}
	}
	var junit bytes.Buffer
	rep.WriteJUnit(&junit)
	junittest.RequireValid(t, junit.Bytes())
	if !strings.Contains(junit.String(), `message="expected seam gap, got seamless (source stopped at`) ||
		!strings.Contains(junit.String(), "timeline:\n") {
		t.Errorf("JUnit failure lacks the message or the timeline:\n%s", junit.String())
	}
}

// TestStepErrorsSkipTheRestOfTheRun: a launch the API refuses cannot be
// carried out, so the rest of its run is skipped, and the next run starts
// afresh.
func TestStepErrorsSkipTheRestOfTheRun(t *testing.T) {
	s := startSim(t, sim.RuntimeProcess)
	ss := mustParse(t, `
name: bad parameter
template: counter
repeat: 2
steps:
  - launch: {node: a, params: {RATE: 0}}
  - migrate: {to: b}
`)
	rep, out := runAll(t, s, context.Background(), ss)
	if rep.Passed || rep.Counts.Errors != 2 || rep.Counts.Skipped != 2 {
		t.Fatalf("counts %+v\n%s", rep.Counts, out)
	}
	st := rep.Scenarios[0].Steps
	if st[0].Status != StatusError || !strings.Contains(st[0].Message, "launch counter on a refused: 422") ||
		st[1].Status != StatusSkipped || st[1].Message != "not run: step 1.1 could not be carried out" || st[2].Run != 2 || st[2].Status != StatusError {
		t.Fatalf("steps %+v %+v %+v", st[0], st[1], st[2])
	}
}

// TestCheckNamesUnknownTemplates: a template that is not loaded is a
// problem of the file, at the line that names it.
func TestCheckNamesUnknownTemplates(t *testing.T) {
	s := startSim(t, sim.RuntimeProcess)
	ss := mustParse(t, "template: counter\nsteps:\n  - launch:\n  - launch: {template: nope}\n")
	probs, err := NewRunner(Config{URL: s.URL}).Check(context.Background(), ss)
	if err != nil {
		t.Fatal(err)
	}
	if len(probs) != 1 || !strings.HasPrefix(probs[0].Error(), `test.yaml:4:24: template "nope" is not loaded; loaded: counter, plain, relay-overlap`) {
		t.Fatalf("problems %v", probs)
	}
}

// TestInterruptCleansUp: when ctx ends mid-migration the step stops, the
// rest is skipped, the instances are removed, and the report says it was
// interrupted.
func TestInterruptCleansUp(t *testing.T) {
	s := startSim(t, sim.RuntimeProcess)
	ss := mustParse(t, `
template: counter
steps:
  - launch: {node: a}
  - wait: 10s
  - migrate: {to: b}
---
template: counter
steps:
  - launch: {node: a}
`)
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		// Cancel once the first launch is connected and the wait began.
		for {
			var list []sim.Instance
			if s.Do("GET", "/api/v1/instances", nil, &list) == nil && len(list) == 1 && list[0].Connected {
				time.Sleep(200 * time.Millisecond)
				cancel()
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	start := time.Now()
	rep, out := runAll(t, s, ctx, ss)
	if time.Since(start) > 8*time.Second {
		t.Errorf("the run took %v after the interrupt", time.Since(start))
	}
	if !rep.Interrupted || rep.Passed || len(rep.Scenarios) != 1 {
		t.Fatalf("report interrupted=%v passed=%v scenarios=%d\n%s", rep.Interrupted, rep.Passed, len(rep.Scenarios), out)
	}
	st := rep.Scenarios[0].Steps
	if st[0].Status != StatusPassed || st[1].Status != StatusError || st[1].Message != "interrupted" || st[2].Status != StatusSkipped {
		t.Fatalf("steps %+v %+v %+v", st[0], st[1], st[2])
	}
}

// TestCrashAfterPointOfNoReturnCarriesTheLogs: a target that crashes on
// cutover-apply fails the migration; the line it printed before crashing
// is in the migration record (on its timeline and in its tail), the
// progress text, the JUnit failure and <system-out>, and the JSON report.
func TestCrashAfterPointOfNoReturnCarriesTheLogs(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real jobs")
	}
	s := normsimtest.Start(t, normsimtest.Options{Runtime: sim.RuntimeProcess,
		Templates: []string{templatesDir, filepath.Join("..", "examples", "templates")}})
	file := filepath.Join("testdata", "wrong", "crash-on-apply-expects-completed.yaml")
	rep, out := runAll(t, s, context.Background(), parseAll(t, file))
	const last = "crashing on cutover-apply"
	st := rep.Scenarios[0].Steps[1]
	if st.Status != StatusFailed || st.Migration == nil || st.Migration.State != sim.MigrationFailed {
		t.Fatalf("step %s %q, migration %+v\n%s", st.Status, st.Message, st.Migration, out)
	}
	logs := st.Migration.Logs
	if logs == nil {
		t.Fatal("the failed migration carries no logs")
	}
	var onTimeline bool
	for _, l := range logs.Lines {
		if l.Side == "target" && strings.Contains(l.Text, last) {
			onTimeline = true
			if l.At.Before(st.Migration.StartedAt) || st.Migration.EndedAt == nil || l.At.After(st.Migration.EndedAt.Add(sim.LogTrail)) {
				t.Errorf("line at %v outside the migration %v–%v", l.At, st.Migration.StartedAt, st.Migration.EndedAt)
			}
		}
	}
	if !onTimeline {
		t.Errorf("the target's %q is not among the migration's lines: %+v", last, logs.Lines)
	}
	var tail *sim.LogTail
	for i := range logs.Tails {
		if logs.Tails[i].Side == "target" {
			tail = &logs.Tails[i]
		}
	}
	if tail == nil || len(tail.Lines) == 0 || !strings.Contains(tail.Lines[len(tail.Lines)-1].Text, last) {
		t.Fatalf("the target's tail does not end with %q: %+v", last, tail)
	}
	if !strings.Contains(out, last) || !strings.Contains(out, "last ") {
		t.Errorf("the progress text lacks the target's last line:\n%s", out)
	}
	var junit, js bytes.Buffer
	if err := rep.WriteJUnit(&junit); err != nil {
		t.Fatal(err)
	}
	junittest.RequireValid(t, junit.Bytes())
	j := junit.String()
	failure := j[strings.Index(j, "<failure"):strings.Index(j, "</failure>")]
	sysout := j[strings.Index(j, "</failure>"):]
	if !strings.Contains(failure, last) || !strings.Contains(sysout, "<system-out>") || !strings.Contains(sysout[:strings.Index(sysout, "</system-out>")], last) {
		t.Errorf("the JUnit failure or its <system-out> lacks %q:\n%s", last, j)
	}
	if !strings.Contains(j, `file="`+file+`"`) {
		t.Errorf("the JUnit testcase has no file=%q:\n%s", file, j)
	}
	if err := rep.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(js.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	bl := back.Scenarios[0].Steps[1].Migration.Logs
	if bl == nil || len(bl.Tails) != 2 || !strings.Contains(js.String(), last) {
		t.Errorf("the JSON report lacks the tails or %q", last)
	}
}

// TestMigrationLeftRunningIsWaitedForBeforeCleanup: a migrate step that
// times out leaves its migration running, which holds its instances
// (DELETE answers 409 CONFLICT) for longer than any fixed grace; cleanup
// waits for its end on the server and then removes every instance once.
func TestMigrationLeftRunningIsWaitedForBeforeCleanup(t *testing.T) {
	s := startSim(t, sim.RuntimeProcess)
	ss := mustParse(t, `
template: counter
steps:
  - launch: {node: a}
  - migrate:
      to: b
      strategy: handover
      timeout: 300ms
      faults: [{kind: delay-frame, frame: get-state, delay: 4s}]
`)
	rep, out := runAll(t, s, context.Background(), ss)
	st := rep.Scenarios[0].Steps[1]
	if st.Status != StatusError || !strings.Contains(st.Message, "is still running in phase") {
		t.Fatalf("step %s %q\n%s", st.Status, st.Message, out)
	}
	if c := rep.Scenarios[0].Cleanup; len(c) != 0 {
		t.Errorf("cleanup problems %q\n%s", c, out)
	}
}

// TestRemoveDuringAMigrationWaitsForItsEnd: normsim still refuses to
// remove an instance a running migration holds (409 CONFLICT, however
// long the migration takes); the driver's Remove waits for the
// migration's end on the server, then removes the instance as it is now
// (the source it moved the job from, stopped).
func TestRemoveDuringAMigrationWaitsForItsEnd(t *testing.T) {
	s := startSim(t, sim.RuntimeProcess)
	ctx := context.Background()
	in := s.Launch(t, sim.LaunchRequest{Template: "counter", Node: "a"})
	s.WaitConnected(t, in.ID)
	var m sim.Migration
	body := map[string]any{"to": "b", "strategy": "handover", "faults": []map[string]string{{"kind": "delay-frame", "frame": "get-state", "delay": "4s"}}}
	if err := s.Do("POST", "/api/v1/instances/"+in.ID+"/migrate", body, &m); err != nil {
		t.Fatal(err)
	}
	err := s.Client.Remove(ctx, in)
	if !apiclient.HasCode(err, sim.EConflict) {
		t.Fatalf("DELETE during the migration: %v, want 409 CONFLICT", err)
	}
	start := time.Now()
	if err := (apiclient.Driver{C: s.Client}).Remove(ctx, in); err != nil {
		t.Fatal(err)
	}
	t.Logf("removed %v after the 409, once the migration ended", time.Since(start))
	done := s.Migration(t, m.ID)
	if !done.State.Ended() || done.EndedAt == nil || done.EndedAt.Before(start) {
		t.Fatalf("migration %s %s, ended at %v: removed before it ended", m.ID, done.State, done.EndedAt)
	}
	if err := s.Do("GET", "/api/v1/instances/"+in.ID, nil, nil); !apiclient.HasCode(err, sim.ENotFound) {
		t.Fatalf("the source after Remove: %v, want 404", err)
	}
	if done.State == sim.MigrationCompleted {
		if err := s.Client.Stop(ctx, done.Target.Instance); err != nil {
			t.Fatal(err)
		}
	}
}
