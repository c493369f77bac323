package scenario

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/normsim/normsim/sim"
)

// exampleFiles are the good-behaviour scenarios shipped in
// examples/scenarios.
var exampleFiles = []string{
	"counter-handover.yaml",
	"counter-stop-then-start.yaml",
	"relay-overlap.yaml",
	"counter-refuses-overlap.yaml",
	"plain-repeat.yaml",
}

// misbehavingFiles are the scenarios in examples/scenarios that prove
// normsim catches a misbehaving example job (examples/templates).
var misbehavingFiles = []string{
	"misbehaving-apply-fails.yaml",
	"misbehaving-crash-on-apply.yaml",
	"misbehaving-ignores-abort.yaml",
	"misbehaving-keeps-running.yaml",
	"misbehaving-never-ready.yaml",
	"misbehaving-refuser.yaml",
	"misbehaving-restarts-at-zero.yaml",
	"misbehaving-skips-to-live.yaml",
	"misbehaving-wrong-position.yaml",
	"faults-kill-target.yaml",
}

// videoFiles are the scenarios of the video examples: real H.264 in
// MPEG-TS (or RTP), judged by normsim's media seam and refereed by ffmpeg
// (TestVideoExamplesAgreeWithADecoder).
var videoFiles = []string{
	"video-handover.yaml",
	"video-rtp-handover.yaml",
	"misbehaving-video-mid-gop.yaml",
	"misbehaving-video-pts-restart.yaml",
	"misbehaving-video-cc-restart.yaml",
	"misbehaving-video-no-psi.yaml",
	"misbehaving-video-rtp-new-ssrc.yaml",
}

func examplePath(name string) string { return filepath.Join("..", "examples", "scenarios", name) }

func mustParse(tb testing.TB, src string) []*Scenario {
	tb.Helper()
	ss, err := Parse("test.yaml", []byte(src))
	if err != nil {
		tb.Fatalf("parse:\n%s\n%v", src, err)
	}
	return ss
}

func problems(tb testing.TB, err error) Problems {
	tb.Helper()
	var ps Problems
	if !errors.As(err, &ps) || len(ps) == 0 {
		tb.Fatalf("error %v (%T), want Problems", err, err)
	}
	return ps
}

// TestBrokenFiles checks every file under testdata/broken is refused with
// the problem at the right line and column.
func TestBrokenFiles(t *testing.T) {
	want := map[string][]string{
		"bad-applied.yaml": {`6:16: steps[1].expect.applied: must be a list of participant ids, e.g. [overlay], or [] for none; got "counter"`,
			`7:25: steps[1].expect.failed[1]: must not be empty`, `7:29: steps[1].expect.failed[2]: "overlay" is listed twice; the ids are a set`},
		"bad-duration.yaml": {`4:11: steps[1].wait: must be a positive duration like "5s"`},
		"bad-judgement.yaml": {`5:25: steps[1].expect.judgement: must be one of pass, tolerated, fail; got "tolerable"`,
			`5:45: steps[1].expect.atFault: must be one of source, target, source and target, none; got "both"`},
		"failed-on-aborted.yaml":  {`5:30: steps[1].expect.failed: an aborted migration ends before the point of no return, so its target never sends target-applied`},
		"nodes-not-a-list.yaml":   {`2:8: nodes: must be a non-empty list of node names, e.g. [a, b]; got`},
		"applied-on-refused.yaml": {`5:30: steps[1].expect.applied: a refused migration ends before the point of no return`},
		"bad-media-defects.yaml": {`5:29: steps[1].expect.mediaDefects[0]: must be one of format change, Sync_byte_error`,
			`5:63: steps[1].expect.mediaDefects[2]: "PAT_error" is listed twice`,
			`7:28: steps[2].expect.mediaDefects: must be a list of one or more media checks, e.g. [Continuity_count_error]`},
		"bad-state.yaml":             {`5:21: steps[1].expect.state: must be one of completed, aborted, failed, refused; got "complete" (did you mean "completed"?)`},
		"bad-timeouts.yaml":          {`6:18: steps[1].migrate.timeouts: unknown key "ready"`, `6:35: steps[1].migrate.timeouts.stop: must be a positive duration`},
		"duplicate-alias.yaml":       {`4:27: steps[1].launch.as: "src" already names the job launched at line 3`},
		"duplicate-key.yaml":         {`4:1: scenario: key "template" is repeated (first at line 1)`},
		"duplicate-names.yaml":       {`6:1: name: "same" is already the name of the scenario at line 1`},
		"empty.yaml":                 {`1:1: no scenario in the file`},
		"error-with-state.yaml":      {`7:7: steps[1].expect.state: with error the request is refused and no migration runs`},
		"expect-on-wait.yaml":        {`5:5: steps[1].expect: expectations belong to a migrate step; this step is a wait`},
		"external-runtime.yaml":      {`2:10: runtime: external is not for ci`},
		"fault-without-kind.yaml":    {`7:11: steps[1].migrate.faults[0]: kind is required`},
		"migrate-before-launch.yaml": {`3:14: steps[0].migrate: there is no instance yet; put a launch step before it`},
		"min-overlap-on-gap.yaml":    {`5:25: steps[1].expect.minOverlapMs: only an overlap seam has an overlap; seam is gap`},
		"missing-steps.yaml":         {`1:1: scenario: steps is required`},
		"not-a-mapping.yaml":         {`1:1: scenario: must be a mapping of name, description, template`},
		"phase-with-completed.yaml":  {`5:14: steps[1].expect.phase: is where an aborted, failed or refused migration ended`},
		"repeat-zero.yaml":           {`2:9: repeat: must be between 1 and 1000; got 0`},
		"seam-on-aborted.yaml":       {`5:30: steps[1].expect.seam: an aborted migration has a seam only when its target produced beside the source (overlap)`},
		"syntax.yaml":                {`4: not valid YAML: did not find expected '-' indicator`},
		"two-actions.yaml":           {`4:5: steps[0]: a step does one thing; this one has both launch and migrate`},
		"unknown-instance.yaml":      {`4:25: steps[1].migrate.instance: no earlier launch step is named "source" (as: source); launched so far: src`},
		"unknown-key.yaml":           {`1:1: scenario: template is required`, `2:1: scenario: unknown key "templat" (did you mean "template"?)`},
		"unknown-migrate-key.yaml":   {`4:22: steps[1].migrate: unknown key "stratgy" (did you mean "strategy"?); allowed: instance, to, strategy`},
		"unknown-node.yaml":          {`5:19: steps[1].migrate.to: node "c" is not one of the scenario's nodes (a, b)`},
		"wait-connected-false.yaml":  {`4:23: steps[1].wait.connected: only true makes sense`},
	}
	files, err := filepath.Glob(filepath.Join("testdata", "broken", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no broken files: %v", err)
	}
	for _, f := range files {
		name := filepath.Base(f)
		t.Run(name, func(t *testing.T) {
			wants, ok := want[name]
			if !ok {
				t.Fatalf("testdata/broken/%s has no expectation in this table", name)
			}
			ss, err := ParseFile(f)
			if ss != nil {
				t.Fatalf("parsed %d scenarios from a broken file", len(ss))
			}
			ps := problems(t, err)
			if len(ps) != len(wants) {
				t.Fatalf("%d problems, want %d:\n%v", len(ps), len(wants), err)
			}
			for i, w := range wants {
				if got := ps[i].Error(); got != f+":"+w && !strings.HasPrefix(got, f+":"+w) {
					t.Errorf("problem %d:\n got %s\nwant %s:%s...", i, got, f, w)
				}
				if ps[i].File != f || ps[i].Line < 1 {
					t.Errorf("problem %d has no position: %+v", i, ps[i])
				}
			}
		})
	}
	for name := range want {
		if _, err := os.Stat(filepath.Join("testdata", "broken", name)); err != nil {
			t.Errorf("table names %s, which is not in testdata/broken", name)
		}
	}
}

func TestParseExamples(t *testing.T) {
	for _, name := range exampleFiles {
		ss, err := ParseFile(examplePath(name))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(ss) != 1 || ss[0].Runtime != "" {
			t.Fatalf("%s: %d scenarios, runtime %q; the examples leave the runtime to --runtime", name, len(ss), ss[0].Runtime)
		}
	}
	s := mustParseFile(t, examplePath("counter-handover.yaml"))[0]
	if s.Name != "counter hands over seamlessly a→b→a" || s.Template != "counter" || s.Params["RATE"] != "100" || s.Repeat != 1 ||
		!reflect.DeepEqual(s.Nodes, []string{"a", "b"}) || len(s.Steps) != 4 {
		t.Fatalf("scenario %+v", s)
	}
	if s.TemplatePos != (Pos{Line: 7, Column: 11}) {
		t.Errorf("template at %v", s.TemplatePos)
	}
	l := s.Steps[0].Launch
	if l == nil || l.Node != "a" || l.As != "job" || l.Until != UntilConnected || l.Timeout != time.Minute {
		t.Fatalf("launch %+v", l)
	}
	if w := s.Steps[1].Wait; w == nil || w.Sleep != 500*time.Millisecond {
		t.Fatalf("wait %+v", w)
	}
	m := s.Steps[2]
	if m.Migrate == nil || m.Migrate.To != "b" || m.Migrate.Strategy != "handover" || m.Migrate.Job != "job" ||
		m.Expect.State != sim.MigrationCompleted || m.Expect.Seam != sim.VerdictSeamless || m.Name != "migrate to b (handover)" {
		t.Fatalf("migrate step %+v %+v %+v", m, m.Migrate, m.Expect)
	}
	if m.Pos != (Pos{Line: 12, Column: 5}) {
		t.Errorf("step at %v", m.Pos)
	}
}

func mustParseFile(tb testing.TB, path string) []*Scenario {
	tb.Helper()
	ss, err := ParseFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	return ss
}

func TestParseDefaultsAndForms(t *testing.T) {
	ss := mustParse(t, `
template: counter
nodes: [x, y, z]
params: {RATE: 100, ON: true, NAME: n}
steps:
  - launch:
  - launch: {node: z, template: plain, runtime: docker, params: {RATE: 5}, until: running, timeout: 1500}
  - wait: {instance: job, connected: true, timeout: 2s}
  - wait: 250
  - migrate:
  - name: explicit
    migrate:
      instance: job2
      to: y
      runtime: process
      timeouts: {state: 1s, targetStart: 2000, targetReady: 3s, stop: 4s, apply: 5s, stopGrace: 6s}
      faults:
        - {kind: drop-frame, frame: cutover-apply, direction: out, delay: 1s, extra: {n: [1, 2.5, null, yes]}}
      timeout: 10s
    expect: {state: aborted, phase: cutover-ready, reason: the target, maxTotalMs: 5000}
  - migrate: {to: x}
    expect: {error: 409}
`)
	s := ss[0]
	if s.Name != "test" || s.Params["RATE"] != "100" || s.Params["ON"] != "true" || s.Params["NAME"] != "n" {
		t.Fatalf("scenario %+v", s)
	}
	if l := s.Steps[0].Launch; l.Node != "x" || l.As != "job" || l.Template != "" || s.Steps[0].Name != "launch counter on x" {
		t.Fatalf("launch with defaults %+v, name %q", l, s.Steps[0].Name)
	}
	l := s.Steps[1].Launch
	if l.Node != "z" || l.As != "job2" || l.Template != "plain" || l.Runtime != "docker" || l.Params["RATE"] != "5" ||
		l.Until != UntilRunning || l.Timeout != 1500*time.Millisecond || l.TemplatePos.Line != 7 {
		t.Fatalf("launch %+v", l)
	}
	if got := s.Templates(); len(got) != 2 || got["plain"].Line != 7 {
		t.Fatalf("templates %v", got)
	}
	if w := s.Steps[2].Wait; w.Job != "job" || !w.Connected || w.Timeout != 2*time.Second {
		t.Fatalf("wait %+v", w)
	}
	if w := s.Steps[3].Wait; w.Sleep != 250*time.Millisecond {
		t.Fatalf("wait %+v", w)
	}
	if st := s.Steps[4]; st.Migrate.Job != "job2" || st.Expect.State != sim.MigrationCompleted || st.Name != "migrate" {
		t.Fatalf("bare migrate %+v %+v name %q", st.Migrate, st.Expect, st.Name)
	}
	st := s.Steps[5]
	mg := st.Migrate
	wantT := sim.Timeouts{State: sim.Duration(time.Second), TargetStart: sim.Duration(2 * time.Second), TargetReady: sim.Duration(3 * time.Second),
		Stop: sim.Duration(4 * time.Second), Apply: sim.Duration(5 * time.Second), StopGrace: sim.Duration(6 * time.Second)}
	if st.Name != "explicit" || mg.Job != "job2" || mg.To != "y" || mg.Runtime != "process" || mg.Timeouts != wantT || mg.WaitTimeout(sim.DefaultTimeouts) != 10*time.Second {
		t.Fatalf("migrate %+v", mg)
	}
	var fault map[string]any
	if len(mg.Faults) != 1 || json.Unmarshal(mg.Faults[0], &fault) != nil {
		t.Fatalf("faults %s", mg.Faults)
	}
	wantFault := map[string]any{"kind": "drop-frame", "frame": "cutover-apply", "direction": "out", "delay": "1s",
		"extra": map[string]any{"n": []any{1.0, 2.5, nil, "yes"}}}
	if !reflect.DeepEqual(fault, wantFault) {
		t.Fatalf("fault passed through as %s", mg.Faults[0])
	}
	body, _ := json.Marshal(mg.Request())
	if !strings.Contains(string(body), `"timeouts":{"state":1000,"targetStart":2000,"targetReady":3000,"stop":4000,"apply":5000,"stopGrace":6000}`) ||
		!strings.Contains(string(body), `"faults":[{"delay":"1s"`) {
		t.Fatalf("request body %s", body)
	}
	if e := st.Expect; e.State != sim.MigrationAborted || e.Phase != "cutover-ready" || e.Reason != "the target" || *e.MaxTotalMs != 5000 {
		t.Fatalf("expect %+v", e)
	}
	if e := s.Steps[6].Expect; e.Error != 409 || e.State != "" {
		t.Fatalf("error expectation %+v", e)
	}
	if got := s.Steps[6].Migrate.Job; got != "job2" {
		t.Fatalf("a migrate without instance moves the job launched last; got %s", got)
	}
}

func TestParseMultipleDocumentsAndAliases(t *testing.T) {
	ss := mustParse(t, `
name: first
template: counter
steps: &steps
  - launch: {node: a}
  - migrate: &handover {to: b, strategy: handover}
---
---
name: second
template: counter
repeat: 3
steps: *steps
`)
	if len(ss) != 2 || ss[0].Name != "first" || ss[1].Name != "second" || ss[1].Repeat != 3 || len(ss[1].Steps) != 2 {
		t.Fatalf("scenarios %+v", ss)
	}
	if ss[1].Steps[1].Migrate.Strategy != "handover" || ss[1].Pos.Line != 9 {
		t.Fatalf("second %+v at %v", ss[1].Steps[1].Migrate, ss[1].Pos)
	}
	// Unnamed documents are named after the file, numbered from the second.
	ss = mustParse(t, "template: counter\nsteps: [{launch: }]\n---\ntemplate: plain\nsteps: [{launch: }]\n")
	if ss[0].Name != "test" || ss[1].Name != "test #2" {
		t.Fatalf("names %q %q", ss[0].Name, ss[1].Name)
	}
}

func TestParseProblemsAreAllReported(t *testing.T) {
	_, err := Parse("x.yaml", []byte(`
template: counter
repeat: two
runtime: kubernetes
steps:
  - launch: {node: q}
  - wait: {running: true, timeout: 0s}
  - migrate: {to: b, strategy: teleport}
    expect: {seam: wobbly, maxGapMs: -1}
  - migrate:
    expect: {error: 600}
`))
	ps := problems(t, err)
	want := []string{
		`x.yaml:3:9: repeat: must be a whole number; got "two"`,
		`x.yaml:4:10: runtime: must be process or docker; got "kubernetes"`,
		`x.yaml:6:20: steps[0].launch.node: node "q" is not one of the scenario's nodes (a, b)`,
		`x.yaml:7:36: steps[1].wait.timeout: must be a positive duration`,
		`x.yaml:8:32: steps[2].migrate.strategy: must be one of handover, stopThenStart, overlap; got "teleport"`,
		`x.yaml:9:20: steps[2].expect.seam: must be one of seamless, gap, overlap, duplicate, glitch, no-output; got "wobbly"`,
		`x.yaml:9:38: steps[2].expect.maxGapMs: must not be negative; got -1`,
		`x.yaml:11:21: steps[3].expect.error: must be between 400 and 599; got 600`,
	}
	if len(ps) != len(want) {
		t.Fatalf("%d problems, want at least %d:\n%v", len(ps), len(want), err)
	}
	got := ps.Error()
	for _, w := range want {
		if !strings.Contains(got, w) {
			t.Errorf("missing problem %s\nin:\n%s", w, got)
		}
	}
}

func TestParseHostileInputStaysBounded(t *testing.T) {
	// Aliases that expand exponentially must not blow up the faults.
	src := "template: counter\nsteps:\n  - launch:\n  - migrate:\n      faults:\n        - kind: x\n          a: &a [1,1,1,1,1,1,1,1,1,1]\n          b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a,*a]\n          c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b,*b]\n          d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c,*c]\n          e: [*d,*d,*d,*d,*d,*d,*d,*d,*d,*d]\n"
	_, err := Parse("bomb.yaml", []byte(src))
	if !strings.Contains(fmtErr(err), "too large") {
		t.Fatalf("error %v, want too large", err)
	}
}

func fmtErr(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// validAlias is the rule `^[A-Za-z][A-Za-z0-9_-]{0,62}$`, written out.
func TestValidAlias(t *testing.T) {
	rule := regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_-]{0,62}$`)
	for _, name := range []string{"", "a", "Z", "src", "a-b_c9", "9a", "-a", "_a", "a b", "a.b", "é", "aé",
		strings.Repeat("a", 63), strings.Repeat("a", 64), "a\x00", "A" + strings.Repeat("-", 62)} {
		if got, want := validAlias(name), rule.MatchString(name); got != want {
			t.Errorf("validAlias(%q) = %v, want %v", name, got, want)
		}
	}
}

// TestParseTemplateDirs: templates: names directories relative to the
// scenario file; one that is not a directory is a problem at its place.
func TestParseTemplateDirs(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "templates"), 0o755)
	file := filepath.Join(dir, "scenarios", "s.yaml")
	ss, err := Parse(file, []byte("template: counter\ntemplates: [../templates]\nsteps:\n  - launch: {node: a}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(dir, "templates"); len(ss[0].TemplateDirs) != 1 || ss[0].TemplateDirs[0] != want {
		t.Fatalf("template dirs %q, want [%s]", ss[0].TemplateDirs, want)
	}
	_, err = Parse(file, []byte("template: counter\ntemplates: [../nowhere]\nsteps:\n  - launch: {node: a}\n"))
	var probs Problems
	if !errors.As(err, &probs) || len(probs) != 1 || !strings.Contains(probs[0].Error(), "s.yaml:2:13: templates[0]: "+filepath.Join(dir, "nowhere")+" is not a directory") {
		t.Fatalf("problems %v", err)
	}
}

// A scenario's timeouts: are under every migrate step's own, and over the
// simulator's; the wait for a step is bounded by what is applied.
func TestScenarioTimeoutsAreUnderTheSteps(t *testing.T) {
	s := mustParse(t, `name: t
template: counter
timeouts: {state: 2s, targetReady: 4m}
steps:
  - launch: {node: a}
  - migrate: {}
  - migrate: {timeouts: {state: 500ms}}
`)[0]
	run, own := s.Steps[1].Migrate, s.Steps[2].Migrate
	if want := (sim.Timeouts{State: sim.Duration(2 * time.Second), TargetReady: sim.Duration(4 * time.Minute)}); run.Timeouts != want {
		t.Errorf("a step without timeouts got %+v, want the scenario's %+v", run.Timeouts, want)
	}
	if want := (sim.Timeouts{State: sim.Duration(500 * time.Millisecond), TargetReady: sim.Duration(4 * time.Minute)}); own.Timeouts != want {
		t.Errorf("a step with its own state got %+v, want %+v", own.Timeouts, want)
	}
	applied := sim.DefaultTimeouts
	applied.Apply = sim.Duration(time.Hour) // the simulator's run timeouts
	want := sim.Timeouts{State: run.Timeouts.State, TargetReady: run.Timeouts.TargetReady}.Over(applied).Longest() + 30*time.Second
	if got := run.WaitTimeout(applied); got != want || got < time.Hour {
		t.Errorf("WaitTimeout = %s, want %s (the run's hour-long apply counted)", got, want)
	}
	if _, err := Parse("x.yaml", []byte("name: t\ntemplate: counter\ntimeouts: {bogus: 1s}\nsteps: [{launch: {node: a}}]\n")); err == nil || !strings.Contains(err.Error(), "bogus") {
		t.Errorf("an unknown scenario timeout: err = %v", err)
	}
}

// TestParseTargetAppliedAndJudgement: applied and failed are id sets ([]
// is none), atFault and judgement are words, and none of them goes with
// error.
func TestParseTargetAppliedAndJudgement(t *testing.T) {
	s := mustParse(t, `
template: counter
steps:
  - launch: {node: a}
  - migrate: {to: b}
    expect: {applied: [counter], failed: [overlay], atFault: none, judgement: tolerated}
  - migrate: {to: a}
    expect: {state: failed, failed: [], atFault: source and target, judgement: fail}
  - migrate: {to: b}
`)[0]
	e := s.Steps[1].Expect
	if e.State != sim.MigrationCompleted || !reflect.DeepEqual(*e.Applied, []string{"counter"}) || !reflect.DeepEqual(*e.Failed, []string{"overlay"}) ||
		e.AtFault != "none" || e.Judgement != "tolerated" || !e.SaysSeam() {
		t.Fatalf("expect %+v", e)
	}
	if e := s.Steps[2].Expect; e.Failed == nil || len(*e.Failed) != 0 || e.Applied != nil || e.AtFault != "source and target" || e.Judgement != "fail" {
		t.Fatalf("failed: [] %+v", e)
	}
	if e := s.Steps[3].Expect; e.SaysSeam() || e.Failed != nil {
		t.Fatalf("a bare migrate says nothing of the seam: %+v", e)
	}
	b, _ := json.Marshal(s.Steps[2].Expect)
	if !strings.Contains(string(b), `"failed":[]`) || strings.Contains(string(b), `"applied"`) {
		t.Errorf("expect as JSON: %s", b)
	}

	_, err := Parse("t.yaml", []byte("template: counter\nsteps:\n  - launch: {node: a}\n  - migrate: {to: b, strategy: overlap}\n    expect: {error: 422, judgement: pass, applied: []}\n"))
	ps := problems(t, err)
	if len(ps) != 2 || !strings.HasPrefix(ps[0].Error(), "t.yaml:5:26: steps[1].expect.judgement: with error the request is refused and no migration runs") ||
		!strings.HasPrefix(ps[1].Error(), "t.yaml:5:43: steps[1].expect.applied: with error") {
		t.Errorf("problems %v", ps)
	}
}

// Issue 34 (left from round 4): a scenario accepted a wait of 292 years; a
// duration is bounded like the API's timeouts, so a typo is named at parse
// time instead of parking a CI job until someone kills it.
func TestParseRefusesDurationsLongerThanADay(t *testing.T) {
	_, err := Parse("x.yaml", []byte(`
template: counter
steps:
  - launch: {}
  - wait: 9223372036854ms
  - wait: 25h
  - wait: {running: true, timeout: 100000h}
  - migrate: {timeout: 48h, timeouts: {stop: 1000h}}
`))
	ps := problems(t, err)
	got := ps.Error()
	for _, w := range []string{
		`x.yaml:5:11: steps[1].wait: 2562047h47m16.854s is longer than normsim waits (24h0m0s); give at most 24h`,
		`x.yaml:6:11: steps[2].wait: 25h0m0s is longer than normsim waits (24h0m0s); give at most 24h`,
		`steps[3].wait.timeout: 100000h0m0s is longer`,
		`steps[4].migrate.timeout: 48h0m0s is longer`,
		`steps[4].migrate.timeouts.stop: 1000h0m0s is longer`,
	} {
		if !strings.Contains(got, w) {
			t.Errorf("missing problem %s\nin:\n%s", w, got)
		}
	}
	if _, err := Parse("x.yaml", []byte("template: counter\nsteps:\n  - launch: {}\n  - wait: 24h\n")); err != nil {
		t.Errorf("24h is the bound and is allowed: %v", err)
	}
}
