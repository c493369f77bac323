package conform_test

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/normsim/normsim/conform"
	"github.com/normsim/normsim/internal/testenv"
	"github.com/normsim/normsim/normsimtest"
	"github.com/normsim/normsim/sim"
)

var updateTable = flag.Bool("update-table", false, "rewrite the grade table in docs/conform.md from this run (cells marked ~ are kept)")

// tableJobs are the columns of the grade table in docs/conform.md: the
// counter example and each misbehaving example.
var tableJobs = []string{"counter", "refuser", "never-ready", "crash-on-apply", "wrong-position", "keeps-running"}

const docsPath = "../docs/conform.md"

func startSim(t *testing.T) *normsimtest.Sim {
	t.Helper()
	return normsimtest.Start(t, normsimtest.Options{Runtime: sim.RuntimeProcess,
		Templates: []string{filepath.Join("..", "templates"), filepath.Join("..", "examples", "templates")}})
}

// runMatrix runs a template's whole matrix on the process runtime, nil
// (with the test failed) when it cannot.
func runMatrix(t *testing.T, s *normsimtest.Sim, template string, parallel int) *conform.Report {
	r := conform.New(conform.Config{URL: s.URL, Template: template, Params: map[string]string{"RATE": "100"}, Parallel: parallel})
	cases, err := r.Cases(context.Background())
	if err != nil {
		t.Errorf("%s: %v", template, err)
		return nil
	}
	return r.Run(context.Background(), cases, nil)
}

// TestTheGradeTableHolds runs the matrix of the counter example and of
// every misbehaving example, and checks each grade against the table in
// docs/conform.md: the counter passes every case it is graded on, and each
// misbehaving job fails exactly the cases the table says its bug fails.
func TestTheGradeTableHolds(t *testing.T) {
	if testing.Short() {
		t.Skip("runs six matrices of real processes")
	}
	table, err := readTable(docsPath)
	if err != nil {
		t.Fatal(err)
	}
	s := startSim(t)
	// One matrix at a time, two cases at once: side by side they took no
	// less time (the work is CPU), and the load they made stamped a
	// correct source's last packets past the seam's in-flight allowance.
	reports := make([]*conform.Report, len(tableJobs))
	for i, job := range tableJobs {
		reports[i] = runMatrix(t, s, job, 2)
	}
	got := map[string]map[string]conform.Grade{}
	var order []string
	for i, job := range tableJobs {
		rep := reports[i]
		if rep == nil {
			t.FailNow()
		}
		got[job] = map[string]conform.Grade{}
		for _, res := range rep.Results {
			got[job][res.ID] = res.Grade
			if job == tableJobs[0] {
				order = append(order, res.ID+" "+res.Name)
			}
			want := table.cell(res.ID, job)
			switch {
			case res.Grade == conform.GradeError:
				t.Errorf("%s %s %s: normsim could not carry it out: %s", job, res.ID, res.Name, res.Why)
			case want == "~":
			case want == "" && !*updateTable:
				t.Errorf("%s %s %s: not in docs/conform.md's table (go test ./conform -run TestTheGradeTableHolds -update-table)", job, res.ID, res.Name)
			case want != string(res.Grade) && !*updateTable:
				// Run alone, the case is asked again: a grade the table
				// names must be what the job gets, but a race the table
				// does not mark yet (~) is logged, not a failure, once
				// the table's grade shows.
				again := rerun(t, s, job, res.Case, conform.Grade(want))
				got[job][res.ID] = again
				if again != conform.Grade(want) {
					t.Errorf("%s %s %s: graded %s, and %s run alone, the table says %s: %s", job, res.ID, res.Name, res.Grade, again, want, res.Why)
				} else {
					t.Logf("%s %s %s: graded %s beside the other matrices and %s alone; its grade races (mark it ~ in docs/conform.md if it recurs): %s",
						job, res.ID, res.Name, res.Grade, want, res.Why)
				}
			}
		}
	}
	if *updateTable {
		if err := writeTable(docsPath, table, order, got); err != nil {
			t.Fatal(err)
		}
		t.Logf("rewrote the grade table in %s", docsPath)
	}
	for _, res := range order {
		id, _, _ := strings.Cut(res, " ")
		if g := got["counter"][id]; g != conform.GradePass && g != conform.GradeNotApplicable {
			t.Errorf("counter %s: graded %s; the counter must pass every case it is graded on", res, g)
		}
	}
}

// rerun runs one case alone up to twice, until it gets want, and returns
// the last grade.
func rerun(t *testing.T, s *normsimtest.Sim, template string, c conform.Case, want conform.Grade) conform.Grade {
	r := conform.New(conform.Config{URL: s.URL, Template: template, Params: map[string]string{"RATE": "100"}})
	var g conform.Grade
	for range 2 {
		if g = r.RunCase(context.Background(), c).Grade; g == want {
			break
		}
	}
	return g
}

// gradeTable is the table in docs/conform.md: case ID → job → cell.
type gradeTable struct{ cells map[string]map[string]string }

func (g gradeTable) cell(id, job string) string { return g.cells[id][job] }

const (
	tableBegin = "<!-- grade table: go test ./conform -run TestTheGradeTableHolds -update-table -->"
	tableEnd   = "<!-- end of grade table -->"
)

var rowID = regexp.MustCompile(`^\| ([0-9]+\.[0-9]+) `)

func readTable(path string) (gradeTable, error) {
	t := gradeTable{cells: map[string]map[string]string{}}
	b, err := os.ReadFile(path)
	if err != nil {
		return t, err
	}
	s := string(b)
	i, j := strings.Index(s, tableBegin), strings.Index(s, tableEnd)
	if i < 0 || j < i {
		return t, fmt.Errorf("%s: no grade table between %q and %q", path, tableBegin, tableEnd)
	}
	for _, line := range strings.Split(s[i:j], "\n") {
		m := rowID.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		cols := strings.Split(strings.Trim(line, "| "), "|")
		if len(cols) != 1+len(tableJobs) {
			return t, fmt.Errorf("%s: row %s has %d columns, want %d", path, m[1], len(cols), 1+len(tableJobs))
		}
		t.cells[m[1]] = map[string]string{}
		for k, job := range tableJobs {
			t.cells[m[1]][job] = strings.Trim(strings.TrimSpace(cols[1+k]), "*")
		}
	}
	return t, nil
}

func writeTable(path string, old gradeTable, order []string, got map[string]map[string]conform.Grade) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	s := string(b)
	i, j := strings.Index(s, tableBegin), strings.Index(s, tableEnd)
	if i < 0 || j < i {
		return fmt.Errorf("%s: no grade table markers", path)
	}
	var w strings.Builder
	w.WriteString(tableBegin + "\n\n| case | " + strings.Join(tableJobs, " | ") + " |\n|---" + strings.Repeat("|---", len(tableJobs)) + "|\n")
	for _, row := range order {
		id, _, _ := strings.Cut(row, " ")
		w.WriteString("| " + row)
		for _, job := range tableJobs {
			cell := string(got[job][id])
			if old.cell(id, job) == "~" {
				cell = "~"
			}
			if cell == string(conform.GradeFail) {
				cell = "**fail**"
			}
			w.WriteString(" | " + cell)
		}
		w.WriteString(" |\n")
	}
	w.WriteString("\n")
	return os.WriteFile(path, []byte(s[:i]+w.String()+s[j:]), 0o644)
}

// TestChaosFindsNothingInTheCounter: 200 chaos runs against the counter
// example hold every invariant.
func TestChaosFindsNothingInTheCounter(t *testing.T) {
	if testing.Short() {
		t.Skip("makes 200 chaos runs of real processes")
	}
	s := startSim(t)
	r := conform.New(conform.Config{URL: s.URL, Template: "counter", Params: map[string]string{"RATE": "100"}, Parallel: 4})
	rep := r.Chaos(context.Background(), conform.ChaosConfig{Seed: 2026, Runs: 200, Only: -1}, nil)
	if len(rep.Trials) != 200 {
		t.Fatalf("%d runs made, want 200", len(rep.Trials))
	}
	for _, v := range rep.Violations {
		t.Errorf("run %d broke %q: %s\n  schedule: %s\n  minimised: %s", v.Run, v.Invariant, v.Detail, v.Schedule, v.Minimised)
	}
	for _, tr := range rep.Trials {
		if tr.Error != "" {
			t.Errorf("run %d could not be carried out: %s (schedule %s)", tr.Run, tr.Error, tr.Schedule)
		}
	}
}

// TestChaosFindsAndMinimisesAMisbehavingJob: against keeps-running, a run
// of the first 50 breaks an invariant, its schedule is minimised to at most
// two faults, and replaying the run alone breaks it again.
func TestChaosFindsAndMinimisesAMisbehavingJob(t *testing.T) {
	if testing.Short() {
		t.Skip("makes chaos runs of real processes")
	}
	s := startSim(t)
	r := conform.New(conform.Config{URL: s.URL, Template: "keeps-running", Params: map[string]string{"RATE": "100"}, Parallel: 4})
	rep := r.Chaos(context.Background(), conform.ChaosConfig{Seed: 7, Runs: 50, Only: -1,
		Replay: func(seed uint64, run int) string { return fmt.Sprintf("--seed %d --run %d", seed, run) }}, nil)
	if len(rep.Violations) == 0 {
		t.Fatal("50 chaos runs against keeps-running found nothing")
	}
	var v *conform.Violation
	for _, x := range rep.Violations {
		if x.Note == "" {
			v = x
			break
		}
	}
	if v == nil {
		t.Fatalf("no violation was minimised: %+v", rep.Violations[0])
	}
	if n := v.Minimised.Faults(); n > 2 {
		t.Errorf("run %d minimised to %d faults (%s), want at most 2", v.Run, n, v.Minimised)
	}
	if v.Replay != fmt.Sprintf("--seed 7 --run %d", v.Run) {
		t.Errorf("replay %q", v.Replay)
	}
	again := r.Chaos(context.Background(), conform.ChaosConfig{Seed: 7, Runs: 50, Only: v.Run}, nil)
	if len(again.Trials) != 1 || again.Trials[0].Schedule.String() != v.Schedule.String() {
		t.Fatalf("replaying run %d drew %+v, want the schedule %s", v.Run, again.Trials, v.Schedule)
	}
	if len(again.Violations) == 0 {
		t.Errorf("replaying run %d alone held every invariant; it broke %q before", v.Run, v.Invariant)
	}
	t.Logf("run %d broke %q: %s; minimised to %s", v.Run, v.Invariant, v.Detail, v.Minimised)
}

// TestMovingStrategiesHaveTheirMatrix runs the matrix of a stopThenStart
// and an overlap template: every case passes.
func TestMovingStrategiesHaveTheirMatrix(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes")
	}
	s := startSim(t)
	for _, tpl := range []string{"plain", "relay-overlap"} {
		rep := runMatrix(t, s, tpl, 2)
		if rep == nil {
			continue
		}
		if len(rep.Results) != 3 {
			t.Errorf("%s: %d cases, want 3", tpl, len(rep.Results))
		}
		for _, res := range rep.Results {
			if res.Grade != conform.GradePass {
				t.Errorf("%s %s %s: %s: %s", tpl, res.ID, res.Name, res.Grade, res.Why)
			}
		}
	}
}

// TestConformCatchesEachBugOfIssue29 runs, for a job with exactly one bug
// each, the case that reaches it: conform passed or tolerated all three
// before (issue 29 items 1, 2 and 3).
func TestConformCatchesEachBugOfIssue29(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes")
	}
	s := startSim(t)
	for _, tt := range []struct {
		item, template, caseID, why string
	}{
		// Item 1: a rolled-back target that goes on producing after abort.
		{"1", "ignores-abort", "5.9", "after it was told abort"},
		// Item 2: a failure past the point of no return whose record says
		// the source kept producing.
		{"2", "keeps-running", "7.9", "after source-stopped-output"},
		// Item 3: numbers lost at a handover seam.
		{"3", "skips-to-live", "1.1", "numbers lost"},
	} {
		t.Run("item "+tt.item+" "+tt.template, func(t *testing.T) {
			t.Parallel()
			r := conform.New(conform.Config{URL: s.URL, Template: tt.template, Params: map[string]string{"RATE": "100"}, Parallel: 1})
			cases, err := r.Cases(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			cases = conform.Select(cases, tt.caseID)
			if len(cases) != 1 {
				t.Fatalf("case %s: %d cases", tt.caseID, len(cases))
			}
			rep := r.Run(context.Background(), cases, nil)
			res := rep.Results[0]
			if res.Grade != conform.GradeFail || !strings.Contains(res.Why, tt.why) {
				t.Fatalf("%s %s graded %s: %s; want fail with %q", tt.template, tt.caseID, res.Grade, res.Why, tt.why)
			}
		})
	}
}

// TestConformJudgesVideoJobsByTheirMedia: a video job that sends only
// MPEG-TS is graded by its media seam (issue 30): the example hands over
// and is seen producing afterwards; a target that joins mid-GOP, or
// restarts its continuity counters, fails the plain handover.
func TestConformJudgesVideoJobsByTheirMedia(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real video jobs")
	}
	s := startSim(t)
	for _, tt := range []struct {
		template string
		grade    conform.Grade
		why      string
	}{
		{"video", conform.GradePass, "seamless"},
		{"video-mid-gop", conform.GradeFail, "glitches at the seam"},
		{"video-cc-restart", conform.GradeFail, "without the discontinuity indicator (TR 101 290 1.4)"},
	} {
		t.Run(tt.template, func(t *testing.T) {
			t.Parallel()
			r := conform.New(conform.Config{URL: s.URL, Template: tt.template, Parallel: 1})
			cases, err := r.Cases(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			cases = conform.Select(cases, "1.1")
			if len(cases) != 1 {
				t.Fatalf("case 1.1: %d cases", len(cases))
			}
			rep := r.Run(context.Background(), cases, nil)
			res := rep.Results[0]
			if res.Grade != tt.grade || !strings.Contains(res.Why, tt.why) {
				t.Fatalf("%s 1.1 graded %s: %s; want %s with %q", tt.template, res.Grade, res.Why, tt.grade, tt.why)
			}
			if p := res.Observed.Producing; p == nil || !*p {
				t.Errorf("%s: conform did not see the job produce after the handover (observed producing %v)", tt.template, p)
			}
		})
	}
}

// TestAJobThatDiesAtStartSaysWhy: a job whose process exits at once (a
// missing interpreter, say) makes every case an error; the error carries
// the job's own last log line, since its exit code says nothing of why.
func TestAJobThatDiesAtStartSaysWhy(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a simulator")
	}
	dir := t.TempDir()
	tdir := filepath.Join(dir, "dies-at-start")
	if err := os.MkdirAll(tdir, 0o755); err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"manifest.json": `{"productTemplateSchemaVersion": 1, "productName": "Dies at start", "productVersion": "0.1.0",
  "generatedAt": "2026-12-06T00:00:00Z", "target": "docker-compose", "migration": {"strategy": "handover"}}`,
		"compose.yml": `services:
  job:
    image: normsim/none:dev
    x-normsim:
      command: ["sh", "-c", "echo 'dies-at-start: no interpreter here' >&2; exit 1"]
`,
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(tdir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	s := normsimtest.Start(t, normsimtest.Options{Runtime: sim.RuntimeProcess, Templates: []string{dir}})
	r := conform.New(conform.Config{URL: s.URL, Template: "dies-at-start"})
	cases, err := r.Cases(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	rep := r.Run(context.Background(), conform.Select(cases, "1.1"), nil)
	if len(rep.Results) != 1 {
		t.Fatalf("%d results, want case 1.1's", len(rep.Results))
	}
	res := rep.Results[0]
	if res.Grade != conform.GradeError || !strings.Contains(res.Why, "dies-at-start: no interpreter here") {
		t.Fatalf("case 1.1: %s, %q; want an error that quotes the job's last log line", res.Grade, res.Why)
	}
}

// TestTheCounterInOtherLanguagesPassesEveryCase (issue 29: the
// well-behaved examples pass every case): the Python and Node counters
// are graded as the Go counter is, pass wherever the grade table says
// the counter passes and n/a where it does not apply. A case graded
// otherwise beside the others is asked again alone, as the grade table's
// are.
func TestTheCounterInOtherLanguagesPassesEveryCase(t *testing.T) {
	if testing.Short() {
		t.Skip("runs two matrices of real processes")
	}
	table, err := readTable(docsPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ template, script string }{
		{"python-counter", "run-python-job"},
		{"node-counter", "run-node-job"},
	} {
		t.Run(tc.template, func(t *testing.T) {
			testenv.RequireJobLanguage(t, "..", tc.script)
			s := startSim(t)
			rep := runMatrix(t, s, tc.template, 2)
			if rep == nil {
				t.FailNow()
			}
			for _, res := range rep.Results {
				want := conform.GradePass
				if table.cell(res.ID, "counter") == string(conform.GradeNotApplicable) {
					want = conform.GradeNotApplicable
				}
				if res.Grade == want {
					continue
				}
				if again := rerun(t, s, tc.template, res.Case, want); again != want {
					t.Errorf("%s %s %s: graded %s, and %s run alone; the counter's grade is %s: %s", tc.template, res.ID, res.Name, res.Grade, again, want, res.Why)
				} else {
					t.Logf("%s %s %s: graded %s beside the others and %s alone: %s", tc.template, res.ID, res.Name, res.Grade, want, res.Why)
				}
			}
		})
	}
}

// A run cancelled while a case checks that the job produces after its
// follow-up handover proves nothing against the job: the case is an
// error, "interrupted", never a fail. Issue 34 round 6 (F1): the counter,
// which passes every case, was graded fail, "the job does not produce
// after the follow-up handover", in 3 runs of 3.
func TestACancelledCaseIsNeverHeldAgainstTheJob(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes")
	}
	s := startSim(t)
	// One packet a second: the check after the follow-up waits up to a
	// second for the first.
	r := conform.New(conform.Config{URL: s.URL, Template: "counter", Params: map[string]string{"RATE": "1"}, Parallel: 1})
	cases, err := r.Cases(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	cases = conform.Select(cases, "2.5")
	if len(cases) != 1 {
		t.Fatalf("case 2.5: %d cases", len(cases))
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		// Cancel just after the follow-up (the second migration) ends.
		for ctx.Err() == nil {
			var ms []sim.Migration
			if err := s.Do(http.MethodGet, "/api/v1/migrations", nil, &ms); err == nil {
				ended := 0
				for _, m := range ms {
					if m.State == sim.MigrationCompleted || m.State == sim.MigrationAborted || m.State == sim.MigrationFailed {
						ended++
					}
				}
				if ended >= 2 {
					// Once conform has seen it end too, and waits for
					// output (up to a second at this rate).
					time.Sleep(200 * time.Millisecond)
					cancel()
					return
				}
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	rep := r.Run(ctx, cases, nil)
	res := rep.Results[0]
	if res.Grade == conform.GradeFail {
		t.Fatalf("cancelled case graded %s: %s; want error (interrupted) or a grade that does not blame the job", res.Grade, res.Why)
	}
	t.Logf("%s: %s", res.Grade, res.Why)
}

// A job that breaks the position is named where the handed-over position
// proves which side did (issue 34 round 6, F2): a source that reports a
// number behind what it sent, a target that skips ahead of, or restarts
// below, the position it was handed.
func TestPositionBugsNameTheSideThatBrokeThePosition(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes")
	}
	s := startSim(t)
	for _, tt := range []struct{ template, atFault string }{
		{"wrong-position", "source"},
		{"skips-to-live", "target"},
		{"restarts-at-zero", "target"},
	} {
		t.Run(tt.template, func(t *testing.T) {
			t.Parallel()
			r := conform.New(conform.Config{URL: s.URL, Template: tt.template, Params: map[string]string{"RATE": "100"}, Parallel: 1})
			cases, err := r.Cases(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			rep := r.Run(context.Background(), conform.Select(cases, "1.1"), nil)
			res := rep.Results[0]
			if res.Grade != conform.GradeFail || res.Observed.Judgement != sim.GradeFail || res.Observed.AtFault != tt.atFault {
				t.Fatalf("%s 1.1: graded %s, judgement %s at fault %q: %s; want fail with the %s at fault", tt.template, res.Grade, res.Observed.Judgement, res.Observed.AtFault, res.Why, tt.atFault)
			}
		})
	}
}
