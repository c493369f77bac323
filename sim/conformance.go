package sim

import (
	"context"
	"io"
	"time"
)

// ConformanceRequest asks for a conformance run of a template: the graded
// matrix of `normsim conform`, run by the simulator against itself.
type ConformanceRequest struct {
	Template string            `json:"template"`
	Params   map[string]string `json:"params,omitempty"`
	// Case narrows the matrix as `normsim conform --case` does: a glob
	// against the case IDs ("3.*", "1.1") or a substring of a case's
	// group or name ("kill"); "" runs every case.
	Case string `json:"case,omitempty"`
	// Parallel is how many cases run at once; 0 means 1.
	Parallel int `json:"parallel,omitempty"`
	// Runtime is the runtime the cases launch on; "" is the sim's default.
	Runtime string `json:"runtime,omitempty"`
}

// ConformanceState is where a conformance run is: running until it ends
// in one of the other states.
type ConformanceState string

// Conformance run states.
const (
	ConformanceRunning ConformanceState = "running"
	// ConformancePassed: every case ran and none failed.
	ConformancePassed ConformanceState = "passed"
	// ConformanceFailed: a case found the job breaking the contract.
	ConformanceFailed ConformanceState = "failed"
	// ConformanceError: no case failed, but normsim could not carry out
	// one or more of them, so nothing is said about the job there.
	ConformanceError ConformanceState = "error"
	// ConformanceInterrupted: the run was stopped (cancelled, or normsim
	// closed) before every case ran.
	ConformanceInterrupted ConformanceState = "interrupted"
)

// Ended reports whether the run reached an end state.
func (s ConformanceState) Ended() bool { return s != ConformanceRunning && s != "" }

// ConformanceRun is a conformance run as the API and the dashboard show
// it: its progress while it runs, its grades when it has ended.
type ConformanceRun struct {
	ID       string            `json:"id"`
	Template string            `json:"template"`
	Strategy Strategy          `json:"strategy"`
	Runtime  string            `json:"runtime"`
	Params   map[string]string `json:"params,omitempty"`
	Case     string            `json:"case,omitempty"`
	Parallel int               `json:"parallel"`
	State    ConformanceState  `json:"state"`
	// Cases is how many cases the run has; Done how many have ended.
	Cases     int        `json:"cases"`
	Done      int        `json:"done"`
	StartedAt time.Time  `json:"startedAt"`
	EndedAt   *time.Time `json:"endedAt,omitempty"`
	// Counts are the ended cases per grade (pass, tolerated, fail, n/a,
	// error).
	Counts map[string]int `json:"counts"`
	// Results are the ended cases, in the order they ended.
	Results []ConformanceResult `json:"results"`
	// HasReport says the run has ended with a report to write (every run
	// does but one whose runner broke).
	HasReport bool `json:"hasReport"`
	// Error is why the run could not go on, when it could not.
	Error string `json:"error,omitempty"`
}

// ConformanceGrades are the grades a run's Counts hold, best first, as
// conform grades a case.
var ConformanceGrades = []string{"pass", "tolerated", "fail", "n/a", "error"}

// ConformanceResult is one ended case of a run, in short: the report has
// its timelines, logs and what was observed.
type ConformanceResult struct {
	ID         string  `json:"id"`
	Group      string  `json:"group"`
	Name       string  `json:"name"`
	Grade      string  `json:"grade"`
	Why        string  `json:"why"`
	DurationMs float64 `json:"durationMs"`
}

// Conformance report formats WriteConformanceReport writes.
const (
	ReportJSON  = "json"
	ReportHTML  = "html"
	ReportJUnit = "junit"
)

// ConformanceService runs conformance matrices inside the simulator and
// keeps the runs (in memory, for the life of the process).
type ConformanceService interface {
	// StartConformance checks req and starts the run in the background:
	// an unknown template is ENotFound; params the template refuses, a
	// case pattern that matches no case, a parallel below 0 or a runtime
	// that cannot run the cases are EUnprocessable (or EParamsInvalid);
	// another run still running is EConflict.
	StartConformance(ctx context.Context, req ConformanceRequest) (ConformanceRun, error)
	// ConformanceRuns lists the runs kept, newest first.
	ConformanceRuns() []ConformanceRun
	// ConformanceDropped counts the ended runs no longer kept (the oldest
	// go first once the service keeps its limit).
	ConformanceDropped() int
	// ConformanceRun is one run, or ENotFound.
	ConformanceRun(id string) (ConformanceRun, error)
	// CancelConformance stops a running run; its report keeps the cases
	// that ended. A run that has ended is EConflict.
	CancelConformance(id string) error
	// WriteConformanceReport writes an ended run's report in format
	// (ReportJSON, ReportHTML, ReportJUnit). A run still running is
	// EConflict; an unknown format EInvalid.
	WriteConformanceReport(id, format string, w io.Writer) error
}

// EventConformanceRun: a conformance run started, a case of it ended, or
// it ended (Data: the run's id, state, done and cases).
const EventConformanceRun EventKind = "conformance.run"
