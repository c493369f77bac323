package scenario

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/normsim/normsim/apiclient"
	"github.com/normsim/normsim/sim"
)

// Pos is a position in a scenario file, 1-based. Column 0 means the YAML
// parser only knew the line.
type Pos struct {
	Line   int `json:"line"`
	Column int `json:"column"`
}

func (p Pos) String() string {
	if p.Column == 0 {
		return fmt.Sprint(p.Line)
	}
	return fmt.Sprintf("%d:%d", p.Line, p.Column)
}

// Scenario is one parsed and validated scenario: a template, how to run it,
// and the steps to take, Repeat times.
type Scenario struct {
	// File is the path the scenario was read from; Pos where it starts.
	File        string
	Pos         Pos
	Name        string
	Description string
	Template    string
	TemplatePos Pos
	Params      map[string]string
	// Runtime is process or docker; "" leaves it to the simulator's default
	// (normsim ci --runtime).
	Runtime string
	// Nodes are the nodes the scenario uses (default a, b).
	Nodes  []string
	Repeat int
	// Timeouts are the scenario's per-phase timeouts, under every migrate
	// step's own (already merged into each step's Migrate.Timeouts).
	Timeouts sim.Timeouts
	Steps    []Step
	// TemplateDirs are the template directories the scenario names
	// (templates:), relative to its file: normsim ci loads them besides
	// --templates, so a scenario next to its templates runs as written.
	TemplateDirs []string
}

// Location is "file:line:column" of p in the scenario's file.
func (s *Scenario) Location(p Pos) string { return s.File + ":" + p.String() }

// Templates lists the templates the scenario launches, each with where it
// is named.
func (s *Scenario) Templates() map[string]Pos {
	out := map[string]Pos{s.Template: s.TemplatePos}
	for _, st := range s.Steps {
		if st.Launch != nil && st.Launch.Template != "" {
			if _, ok := out[st.Launch.Template]; !ok {
				out[st.Launch.Template] = st.Launch.TemplatePos
			}
		}
	}
	return out
}

// Step kinds.
const (
	KindLaunch  = "launch"
	KindWait    = "wait"
	KindMigrate = "migrate"
)

// Step is one thing a scenario does. Exactly one of Launch, Wait and
// Migrate is set.
type Step struct {
	Pos Pos
	// Name is the step's name in reports: the one given, or one derived
	// from what it does ("migrate to b (handover)").
	Name    string
	Launch  *Launch
	Wait    *Wait
	Migrate *Migrate
	// Expect is what a migrate step must end with; never nil on a migrate
	// step (the default is state completed).
	Expect *Expect
}

// Kind is launch, wait or migrate.
func (s Step) Kind() string {
	switch {
	case s.Launch != nil:
		return KindLaunch
	case s.Wait != nil:
		return KindWait
	}
	return KindMigrate
}

// Readiness a launch step waits for.
const (
	UntilConnected = "connected" // running, and the job said hello on its socket
	UntilRunning   = "running"   // running (and healthy where there is a healthcheck)
	UntilNone      = "none"      // the API accepted the launch
)

// Launch places the template on a node and, by default, waits until the
// job is connected to its job socket.
type Launch struct {
	Node string
	// As names the job for later steps; it follows the job from instance to
	// instance as migrations complete.
	As          string
	asGiven     bool
	Template    string // "" is the scenario's
	TemplatePos Pos
	Runtime     string            // "" is the scenario's
	Params      map[string]string // merged over the scenario's
	Until       string
	Timeout     time.Duration
}

// Wait sleeps for Sleep, or waits until the job's current instance is
// connected (or running).
type Wait struct {
	Sleep     time.Duration
	Job       string
	Connected bool
	Running   bool
	Timeout   time.Duration
}

// Migrate asks the API to migrate the job's current instance.
type Migrate struct {
	Job      string
	jobGiven bool
	To       string
	Strategy string
	Runtime  string
	Timeouts sim.Timeouts
	// Faults are passed to the API exactly as written (as JSON objects), so
	// new fault kinds need no change here.
	Faults []json.RawMessage
	// Timeout bounds how long ci waits for the migration to end; 0 means the
	// sum of its phase timeouts plus 30 s.
	Timeout time.Duration
}

// WaitTimeout is how long to wait for the migration to end, given the
// timeouts the simulator applies to it (the migration record's: the run's
// under the step's).
func (m *Migrate) WaitTimeout(applied sim.Timeouts) time.Duration {
	if m.Timeout > 0 {
		return m.Timeout
	}
	return apiclient.MigrationWait(m.Timeouts.Over(applied))
}

// Request is the body of the migrate request.
func (m *Migrate) Request() MigrateBody {
	b := MigrateBody{To: m.To, Strategy: m.Strategy, Runtime: m.Runtime, Faults: m.Faults}
	if m.Timeouts != (sim.Timeouts{}) {
		t := m.Timeouts
		b.Timeouts = &t
	}
	return b
}

// MigrateBody is sim.MigrateRequest with the faults kept raw.
type MigrateBody struct {
	To       string            `json:"to,omitempty"`
	Strategy string            `json:"strategy,omitempty"`
	Runtime  string            `json:"runtime,omitempty"`
	Timeouts *sim.Timeouts     `json:"timeouts,omitempty"`
	Faults   []json.RawMessage `json:"faults,omitempty"`
}

// Expect is what a migrate step must end with. State is set unless Error
// is.
type Expect struct {
	// State is the end state: completed, aborted, failed or refused.
	State sim.MigrationState `json:"state,omitempty"`
	// Phase is where an aborted, failed or refused migration ended.
	Phase string `json:"phase,omitempty"`
	// Reason must be contained in the migration's reason (or in the API's
	// message when Error is set).
	Reason string `json:"reason,omitempty"`
	// Seam is the output verdict: seamless, gap, overlap, duplicate,
	// glitch (media), no-output.
	Seam         string   `json:"seam,omitempty"`
	MaxGapMs     *float64 `json:"maxGapMs,omitempty"`
	MinOverlapMs *float64 `json:"minOverlapMs,omitempty"`
	MaxTotalMs   *float64 `json:"maxTotalMs,omitempty"`
	// Applied and Failed are the participant ids the target must report
	// in target-applied, as exact sets; nil expects nothing, an empty
	// list none.
	Applied *[]string `json:"applied,omitempty"`
	Failed  *[]string `json:"failed,omitempty"`
	// KeyframeAtJoin is whether the target's first video frame must be a
	// random-access point (the media seam, docs/media.md).
	KeyframeAtJoin *bool `json:"keyframeAtJoin,omitempty"`
	// MediaDefects are checks of the media seam (sim.MediaChecks) that
	// must each have found a defect: what a step proving one media bug
	// names, so that a glitch of another kind does not pass it.
	MediaDefects []string `json:"mediaDefects,omitempty"`
	// AtFault is the side the judgement must blame: source, target,
	// "source and target", or none.
	AtFault string `json:"atFault,omitempty"`
	// Judgement is the grade normsim's judgement must give: pass,
	// tolerated or fail.
	Judgement string `json:"judgement,omitempty"`
	// Error is the HTTP status the request itself must be refused with; no
	// migration starts.
	Error int `json:"error,omitempty"`
}

// String is the expectation in a few words, for progress lines.
func (e *Expect) String() string {
	if e.Error != 0 {
		return fmt.Sprintf("request refused with %d", e.Error)
	}
	parts := []string{string(e.State)}
	if e.Phase != "" {
		parts = append(parts, "in "+e.Phase)
	}
	if e.Seam != "" {
		parts = append(parts, "seam "+e.Seam)
	}
	if e.Judgement != "" {
		parts = append(parts, "judgement "+e.Judgement)
	}
	return strings.Join(parts, ", ")
}

// SaysSeam reports whether the expectation names the seam's verdict, the
// judgement, the side at fault, a missing keyframe or a media defect: what
// a step that means to prove a broken promise says. When it does not, a
// judgement of fail fails the step (Judge), so no broken promise passes
// unasked. A limit in time (maxGapMs, minOverlapMs) is not enough: numbers
// lost at a handover seam fail however short the gap.
func (e *Expect) SaysSeam() bool {
	return e.Seam != "" || e.AtFault != "" || e.Judgement != "" || (e.KeyframeAtJoin != nil && !*e.KeyframeAtJoin) || len(e.MediaDefects) > 0
}

// Seams are the output verdicts expect.seam may name.
var Seams = []string{sim.VerdictSeamless, sim.VerdictGap, sim.VerdictOverlap, sim.VerdictDuplicate, sim.VerdictGlitch, sim.VerdictNoOutput}

// Grades are the judgements expect.judgement may name.
var Grades = []string{string(sim.GradePass), string(sim.GradeTolerated), string(sim.GradeFail)}

// Sides are the values expect.atFault may name ("none": no side blamed).
var Sides = []string{"source", "target", "source and target", "none"}

// States are the end states expect.state may name.
var States = []string{string(sim.MigrationCompleted), string(sim.MigrationAborted), string(sim.MigrationFailed), string(sim.MigrationRefused)}

// Runtimes are the runtimes a scenario may run on. The external runtime
// waits for a job the developer starts, which ci cannot do.
var Runtimes = []string{sim.RuntimeProcess, sim.RuntimeDocker}
