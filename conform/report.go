package conform

import (
	"encoding/json"
	"io"
	"time"

	"github.com/normsim/normsim/sim"
)

// Grade is what a case found, as Autobahn grades a WebSocket case.
type Grade string

// Grades, best first.
const (
	// GradePass: the job did what the contract requires.
	GradePass Grade = "pass"
	// GradeTolerated: the outcome is allowed but costly (the job recovered
	// only after a reconnect; the seam had a gap where none was needed).
	GradeTolerated Grade = "tolerated"
	// GradeFail: the job broke the contract (stayed silent, stopped
	// producing after a rollback, mis-reported its position, crashed).
	GradeFail Grade = "fail"
	// GradeNotApplicable: the case does not apply to this job (the
	// refusal case of a job that never refuses); it is not graded.
	GradeNotApplicable Grade = "n/a"
	// GradeError: normsim could not carry the case out (the template did
	// not launch, the API failed); nothing is said about the job.
	GradeError Grade = "error"
)

// Grades lists every grade in report order.
var Grades = []Grade{GradePass, GradeTolerated, GradeFail, GradeNotApplicable, GradeError}

// Case is one cell of the matrix: what is done to the job, and what the
// contract prescribes.
type Case struct {
	// ID orders and names the case, Autobahn style: "1.1", "3.4.2".
	ID string `json:"id"`
	// Group is the section the case belongs to ("faults at get-state").
	Group string `json:"group"`
	// Name says what is done, in words ("kill the source on get-state").
	Name string `json:"name"`
	// Kind is how the case is judged: handover, chain, refusal, fault
	// (handover templates); move, chain, fault (overlap, stopThenStart).
	Kind     string       `json:"kind"`
	Strategy sim.Strategy `json:"strategy"`
	// Step is the protocol step the fault strikes at (get-state, target
	// placed, initial-state, target-ready, source-stopped-output,
	// target-applied), or "" for a case without one.
	Step string `json:"step,omitempty"`
	// Moves are the migrations in a row, a→b→a…, each with the faults it
	// arms (most cases: one move).
	Moves []Move `json:"moves"`
	// Expect is the outcome the contract prescribes, in words.
	Expect string `json:"expect"`
}

// Move is one migration of a case and the faults it arms.
type Move struct {
	Faults []sim.Fault `json:"faults,omitempty"`
}

// Result is one case run and judged.
type Result struct {
	Case
	Grade Grade `json:"grade"`
	// Rule is the rule of the contract the case was judged by.
	Rule string `json:"rule"`
	// Why is what decided the grade, in words.
	Why string `json:"why"`
	// Observed is what happened, as the grade was decided from it.
	Observed Observed `json:"observed"`
	// Migrations are the case's migrations with their timelines, the
	// follow-up handover last.
	Migrations []*sim.Migration `json:"migrations"`
	// Logs are the job's lines printed during the case, every instance.
	Logs []sim.LogLine `json:"logs"`
	// LogsOmitted counts lines past MaxCaseLogLines, the earliest dropped.
	LogsOmitted int       `json:"logsOmitted,omitempty"`
	StartedAt   time.Time `json:"startedAt"`
	DurationMs  float64   `json:"durationMs"`
}

// MaxCaseLogLines caps the log lines a result keeps, the last ones.
const MaxCaseLogLines = 400

// Observed is what a case saw.
type Observed struct {
	// States is each move's end: "completed", "aborted in target-ready".
	States []string `json:"states"`
	// Seam is the last move's output verdict, when it judged one.
	Seam string `json:"seam,omitempty"`
	// Result is what the last move's target reported in target-applied
	// (applied, failed with reasons, skewMs); nil when it sent none.
	Result *sim.MigrationResult `json:"result,omitempty"`
	// Judgement and AtFault are normsim's judgement of the last move
	// (sim.Judge, as every tool prints it): its grade and the side blamed.
	Judgement sim.Grade `json:"judgement,omitempty"`
	AtFault   string    `json:"atFault,omitempty"`
	// PastPointOfNoReturn says the last move passed it.
	PastPointOfNoReturn bool `json:"pastPointOfNoReturn"`
	// Fired lists the faults that fired, as the timeline recorded them.
	Fired []string `json:"fired,omitempty"`
	// Producing says whether the instance left running kept sending
	// output after the case's moves; nil when the job sends none.
	Producing *bool `json:"producing,omitempty"`
	// Running are the job's instances left running, by node.
	Running []string `json:"running"`
	// Reconnects is 1 when the instance left running lost its socket
	// during the moves and is connected again, else 0.
	Reconnects int `json:"reconnects"`
	// FollowUp is how the clean handover after the case ended, "" when
	// none was attempted.
	FollowUp string `json:"followUp,omitempty"`
}

// Report is a conformance run: every case and its grade.
type Report struct {
	Version  string            `json:"version,omitempty"`
	Hostname string            `json:"hostname,omitempty"`
	Template string            `json:"template"`
	Strategy sim.Strategy      `json:"strategy"`
	Runtime  string            `json:"runtime"`
	Params   map[string]string `json:"params,omitempty"`
	// Filter is the --case pattern, "" for the whole matrix.
	Filter     string        `json:"filter,omitempty"`
	Parallel   int           `json:"parallel"`
	StartedAt  time.Time     `json:"startedAt"`
	DurationMs float64       `json:"durationMs"`
	Counts     map[Grade]int `json:"counts"`
	// Interrupted says the run was stopped before every case ran.
	Interrupted bool      `json:"interrupted,omitempty"`
	Results     []*Result `json:"results"`
	// Chaos is the seeded chaos run, when --chaos asked for one.
	Chaos *ChaosReport `json:"chaos,omitempty"`
}

// Failed reports whether any case failed or could not be run, or a chaos
// run violated an invariant.
func (r *Report) Failed() bool {
	return r.Counts[GradeFail] > 0 || r.Counts[GradeError] > 0 || r.Interrupted ||
		(r.Chaos != nil && (len(r.Chaos.Violations) > 0 || r.Chaos.Errors() > 0))
}

// Errors counts the chaos runs normsim could not carry out.
func (c *ChaosReport) Errors() int {
	n := 0
	for _, t := range c.Trials {
		if t.Error != "" {
			n++
		}
	}
	return n
}

// Count fills in Counts from the results.
func (r *Report) Count() {
	r.Counts = map[Grade]int{}
	for _, g := range Grades {
		r.Counts[g] = 0
	}
	for _, res := range r.Results {
		r.Counts[res.Grade]++
	}
}

// WriteJSON writes the report as indented JSON.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// ChaosReport is a seeded chaos run: K runs of random fault schedules
// drawn from Seed, each checked against the invariants.
type ChaosReport struct {
	Seed uint64 `json:"seed"`
	Runs int    `json:"runs"`
	// Only is the run --run replayed alone, or -1.
	Only       int          `json:"only"`
	Violations []*Violation `json:"violations"`
	// Trials are the runs, in order: their schedules and whether they held.
	Trials []*Trial `json:"trials"`
}

// Schedule is one chaos run's faults: a migration after another, each
// arming its faults.
type Schedule struct {
	Moves []Move `json:"moves"`
}

// Trial is one chaos run.
type Trial struct {
	Run      int      `json:"run"`
	Schedule Schedule `json:"schedule"`
	// Broken lists the invariants it violated; empty when all held.
	Broken []string `json:"broken,omitempty"`
	// Detail says how the first of them broke.
	Detail string `json:"detail,omitempty"`
	// Error says normsim could not carry the run out (the job was not
	// judged).
	Error      string           `json:"error,omitempty"`
	Observed   Observed         `json:"observed"`
	Migrations []*sim.Migration `json:"migrations,omitempty"`
	// Logs are the job's lines printed during the run, every instance
	// (the last MaxCaseLogLines; LogsOmitted counts the rest).
	Logs        []sim.LogLine `json:"logs,omitempty"`
	LogsOmitted int           `json:"logsOmitted,omitempty"`
	DurationMs  float64       `json:"durationMs"`
}

// Violation is a chaos run that broke an invariant, with the smallest
// schedule found that still breaks it.
type Violation struct {
	Run       int      `json:"run"`
	Invariant string   `json:"invariant"`
	Detail    string   `json:"detail"`
	Schedule  Schedule `json:"schedule"`
	Minimised Schedule `json:"minimised"`
	// Note says why Minimised is the schedule as drawn, when it is.
	Note string `json:"note,omitempty"`
	// Replay is the command line that runs exactly this run again.
	Replay string `json:"replay"`
}
