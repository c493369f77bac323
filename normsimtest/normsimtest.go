// Package normsimtest runs a normsim simulator inside a Go test, the way
// temporaltest runs a Temporal server: on free ports, with an in-memory
// store, cleaned up when the test ends. Job authors use it from their own
// `go test` to launch their template (or play the job themselves on the
// external runtime), migrate it, and assert on the outcome and the seam.
// Jobs end with the test binary even where its cleanups do not run (`go
// test -timeout`, a panic in a goroutine): a reaper process ends the host
// processes, and with normsimdocker another removes the containers
// (docs/contract-choices.md).
//
//	s := normsimtest.Start(t, normsimtest.Options{Templates: []string{"./templates"}})
//	in := s.Launch(t, sim.LaunchRequest{Template: "counter", Node: "a"})
//	s.WaitConnected(t, in.ID)
//	m := s.MigrateAndWait(t, in.ID, sim.MigrateRequest{Strategy: "handover"})
//	normsimtest.RequireCompleted(t, m)
//	normsimtest.RequireSeamless(t, m)
//
// It links no Docker and no SQLite, so a job author's test builds small and
// fast: containers come with normsimtest/normsimdocker, a store file with
// normsimtest/normsimsqlite. The in-memory store keeps the same records as
// normsim's SQLite store; sim/storetest holds both to one contract.
package normsimtest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/normsim/normsim/apiclient"
	"github.com/normsim/normsim/app"
	"github.com/normsim/normsim/sim"
)

// Options configure the simulator. Zero values give two nodes a and b on
// free ports, an in-memory store, and the process runtime as default.
type Options struct {
	// Templates are the template directories to load (required to launch
	// anything but a template you never run).
	Templates []string
	// Runtime is the default runtime: process (default), external, or
	// one of Runtimes (docker: start with normsimdocker.Start).
	Runtime string
	// Runtimes are runtimes linked in beside process and external, such
	// as normsimdocker.Runtime(): normsimtest alone links no Docker code.
	Runtimes    []app.RuntimeFactory
	Nodes       []string
	NoJobSocket []string
	// DB is the store path; default in memory. A store file is SQLite's:
	// give Store too (normsimsqlite.Store()).
	DB string
	// Store opens the store at DB, such as normsimsqlite.Store(). Nil keeps
	// the records in memory with a store of normsimtest's own, which links
	// no SQLite (the same records as normsim's, one contract test checks
	// both).
	Store app.StoreOpener
	// Logger receives the sim's logs; default discards them.
	Logger *slog.Logger
	// BindAddress replaces the check that a node's own address (127.0.1.1,
	// …) binds on this host; a func that fails simulates a host without
	// those addresses (macOS without loopback aliases), where the nodes
	// share 127.0.0.1. Nil checks by binding.
	BindAddress func(ip string) error
	// Timeouts are the run's per-phase migration timeouts (as normsim up
	// --timeouts): a request's own fields win, zero fields take
	// sim.DefaultTimeouts.
	Timeouts sim.Timeouts
}

// Sim is a running simulator.
type Sim struct {
	Main *app.Main
	// URL is the API/dashboard base URL.
	URL string
	// Client is an API client of the simulator.
	Client *apiclient.Client
}

// Start runs a simulator for the rest of the test.
func Start(tb testing.TB, o Options) *Sim {
	tb.Helper()
	opts := app.DefaultOptions()
	opts.SocketPort = 0
	opts.SocketHost = "0.0.0.0"
	opts.Addr = "127.0.0.1:0"
	opts.DB = app.Memory
	if o.DB != "" {
		opts.DB = o.DB
	}
	opts.OpenStore = o.Store
	if opts.DB != app.Memory && opts.OpenStore == nil {
		tb.Fatalf("normsimtest: Options.DB %q is a store file, and normsimtest alone keeps its records in memory: add Store: normsimsqlite.Store() "+
			"(import github.com/normsim/normsim/normsimtest/normsimsqlite), or leave DB empty", opts.DB)
		return nil
	}
	if len(o.Nodes) > 0 {
		opts.Nodes = o.Nodes
	}
	opts.NoJobSocket = o.NoJobSocket
	opts.Timeouts = o.Timeouts
	opts.Templates = o.Templates
	opts.Runtime = o.Runtime
	if opts.Runtime == "" {
		opts.Runtime = sim.RuntimeProcess
	}
	opts.Runtimes = append(append([]app.RuntimeFactory{}, o.Runtimes...), app.ProcessRuntime())
	if !linked(opts.Runtimes, opts.Runtime) {
		if opts.Runtime == sim.RuntimeDocker {
			tb.Fatalf("normsimtest: the docker runtime is not linked into this test: start with normsimdocker.Start(t, opts) " +
				"(import github.com/normsim/normsim/normsimtest/normsimdocker) or add normsimdocker.Runtime() to Options.Runtimes")
			return nil
		}
		tb.Fatalf("normsimtest: Options.Runtime %q is not a runtime: use process, external, or docker through normsimdocker.Start", opts.Runtime)
		return nil
	}
	opts.Logger = o.Logger
	opts.BindAddress = o.BindAddress
	m := app.New(opts)
	if err := m.Open(context.Background()); err != nil {
		tb.Fatalf("normsimtest: start the simulator: %v", err)
	}
	tb.Cleanup(func() { m.Close() })
	return &Sim{Main: m, URL: m.URL(), Client: apiclient.New(m.URL(), &http.Client{Timeout: 30 * time.Second})}
}

// linked says whether name is a runtime the simulator will have.
func linked(rts []app.RuntimeFactory, name string) bool {
	if name == sim.RuntimeExternal {
		return true
	}
	for _, f := range rts {
		if f.Name == name {
			return true
		}
	}
	return false
}

// APIError is an error response of the API.
type APIError = apiclient.Error

// Do calls the API; a non-2xx answer is an *APIError.
func (s *Sim) Do(method, path string, body, out any) error {
	return s.Client.Do(context.Background(), method, path, body, out)
}

// driver drives the sim's jobs as every client of this module does
// (apiclient.Driver): a migrate refused NOT_CONNECTED is asked again once
// the source's job is connected (apiclient.DefaultRetry).
func (s *Sim) driver() apiclient.Driver {
	return apiclient.Driver{C: s.Client, Retry: apiclient.DefaultRetry}
}

// Launch places a template and fails the test on error.
func (s *Sim) Launch(tb testing.TB, req sim.LaunchRequest) sim.Instance {
	tb.Helper()
	in, err := s.driver().LaunchUp(context.Background(), req, "")
	if err != nil {
		tb.Fatalf("normsimtest: launch %s on %s: %v", req.Template, req.Node, err)
		return sim.Instance{}
	}
	return *in
}

// Instance fetches an instance.
func (s *Sim) Instance(tb testing.TB, id string) sim.Instance {
	tb.Helper()
	var in sim.Instance
	if err := s.Do(http.MethodGet, "/api/v1/instances/"+url.PathEscape(id), nil, &in); err != nil {
		tb.Fatalf("normsimtest: get instance %s: %v", id, err)
	}
	return in
}

// WaitInstance polls until cond holds for the instance or the timeout passes.
func (s *Sim) WaitInstance(tb testing.TB, id string, timeout time.Duration, what string, cond func(sim.Instance) bool) sim.Instance {
	tb.Helper()
	deadline := time.Now().Add(timeout)
	for {
		in := s.Instance(tb, id)
		if cond(in) {
			return in
		}
		if time.Now().After(deadline) {
			tb.Fatalf("normsimtest: instance %s not %s after %v: state %s, connected %v, error %q", id, what, timeout, in.State, in.Connected, in.Error)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// WaitConnected waits until the instance runs and its job said hello; the
// server answers the moment it has. An instance that stops or fails first,
// or 60 s without it, fails the test with the instance's state, and so
// does one on a node without a job socket (Options.NoJobSocket), at once.
func (s *Sim) WaitConnected(tb testing.TB, id string) sim.Instance {
	tb.Helper()
	const timeout = 60 * time.Second
	d := s.driver()
	d.UpWait = timeout
	in, err := d.WaitUp(context.Background(), id, sim.UntilConnected)
	if err != nil {
		if in == nil {
			tb.Fatalf("normsimtest: wait for instance %s to connect: %v", id, err)
			return sim.Instance{}
		}
		tb.Fatalf("normsimtest: instance %s not running and connected after %v: state %s, connected %v, error %q (%v)", id, timeout, in.State, in.Connected, in.Error, err)
	}
	return *in
}

// Migrate starts a migration; the error is the API's refusal, if any.
func (s *Sim) Migrate(id string, req sim.MigrateRequest) (*sim.Migration, error) {
	var m sim.Migration
	if err := s.Do(http.MethodPost, "/api/v1/instances/"+url.PathEscape(id)+"/migrate", req, &m); err != nil {
		return nil, err
	}
	return &m, nil
}

// Abort asks a running migration to roll back, as its user would (normsim
// abort): a test drives its job to a phase, aborts there, and checks the
// job resumes as a rollback requires. The error is the API's refusal (409
// past the point of no return), if any; the migration ends aborted a
// moment later (WaitMigration).
func (s *Sim) Abort(migrationID, why string) (*sim.Migration, error) {
	return s.Client.AbortMigration(context.Background(), migrationID, why)
}

// Migration fetches a migration with its timeline.
func (s *Sim) Migration(tb testing.TB, id string) *sim.Migration {
	tb.Helper()
	var m sim.Migration
	if err := s.Do(http.MethodGet, "/api/v1/migrations/"+url.PathEscape(id), nil, &m); err != nil {
		tb.Fatalf("normsimtest: get migration %s: %v", id, err)
	}
	return &m
}

// WaitMigration waits until the migration ends, at most timeout, and never
// past a point shortly before the test's deadline (go test -timeout), so
// a migration that hangs fails the test with its timeline instead of
// panicking the test binary.
func (s *Sim) WaitMigration(tb testing.TB, id string, timeout time.Duration) *sim.Migration {
	tb.Helper()
	return s.waitMigration(tb, &sim.Migration{ID: id}, timeout, fmt.Sprintf("the %v asked for", timeout))
}

// waitMigration follows the started migration m to its end, at most
// timeout, capped to the test's deadline.
func (s *Sim) waitMigration(tb testing.TB, m *sim.Migration, timeout time.Duration, why string) *sim.Migration {
	tb.Helper()
	if d, ok := tb.(interface{ Deadline() (time.Time, bool) }); ok {
		if deadline, set := d.Deadline(); set {
			if capped, ok := capToDeadline(timeout, time.Until(deadline)); ok {
				timeout, why = capped, "cut short to end before the test's deadline (go test -timeout), which comes sooner than "+why
			}
		}
	}
	id := m.ID
	d := s.driver()
	d.EndWait = max(timeout, time.Nanosecond) // a deadline already past: no wait
	m, err := d.WaitEnd(context.Background(), m, nil)
	var unended *apiclient.UnendedError
	switch {
	case err == nil:
		return m
	case errors.As(err, &unended) && m.State != "":
		tb.Fatalf("normsimtest: migration %s still %s in phase %s after waiting %v for it to end (%s)\n%s", id, m.State, m.Phase, timeout, why, Timeline(m))
	default:
		tb.Fatalf("normsimtest: wait for migration %s: %v", id, err)
	}
	return nil
}

// deadlineReserve is kept free before a test's deadline, so a failure can
// be reported and the simulator closed before go test panics.
const deadlineReserve = 5 * time.Second

// capToDeadline shortens timeout to end deadlineReserve before a deadline
// left from now (half of what is left, when that is less than twice the
// reserve); ok says whether it did.
func capToDeadline(timeout, left time.Duration) (time.Duration, bool) {
	reserve := deadlineReserve
	if left < 2*reserve {
		reserve = left / 2
	}
	if limit := left - reserve; limit < timeout {
		return max(limit, 0), true
	}
	return timeout, false
}

// MigrationWait is how long MigrateAndWait waits for a migration with
// these timeouts (zero fields take sim.DefaultTimeouts) to end:
// t.Longest() (every phase timeout, which a handover's phases can use up
// one after another, plus the linger and stopGrace for stopping the
// source) plus 30 s for the untimed steps (apiclient.MigrationWait).
// With the defaults that is 2 min 40.25 s.
func MigrationWait(t sim.Timeouts) time.Duration {
	return apiclient.MigrationWait(t)
}

// MigrateAndWait migrates and waits for the end, failing the test if the
// request is refused or the migration has not ended after
// MigrationWait(req.Timeouts), or shortly before the test's deadline if
// that comes first. A handover refused NOT_CONNECTED (the source's job is
// not connected at that moment: its socket is coming back after a
// migration or a fault) is asked again once it is connected, up to three
// times within a minute (apiclient.DefaultRetry); Migrate asks once.
func (s *Sim) MigrateAndWait(tb testing.TB, id string, req sim.MigrateRequest) *sim.Migration {
	tb.Helper()
	m, err := s.driver().Migrate(context.Background(), id, req)
	if err != nil {
		tb.Fatalf("normsimtest: migrate %s: %v", id, err)
		return nil
	}
	wait := MigrationWait(req.Timeouts)
	return s.waitMigration(tb, m, wait, fmt.Sprintf("the %v its timeouts allow: the phases, stopGrace and %v for the untimed steps", wait, apiclient.EndMargin))
}

// Timeline renders a migration's events for a failure message
// (sim.FormatTimeline, here too for a job author's test that imports only
// this package).
func Timeline(m *sim.Migration) string { return sim.FormatTimeline(m) }

// RequireState fails the test unless the migration ended in state.
func RequireState(tb testing.TB, m *sim.Migration, state sim.MigrationState) {
	tb.Helper()
	if m.State != state {
		tb.Fatalf("migration %s ended %s (%s), want %s\n%s\n%s", m.ID, m.State, m.Reason, state, Describe(m), Timeline(m))
	}
}

// RequireCompleted fails the test unless the migration completed.
func RequireCompleted(tb testing.TB, m *sim.Migration) {
	tb.Helper()
	RequireState(tb, m, sim.MigrationCompleted)
}

// RequireSeamless fails the test unless the output continued with no gap
// and no duplicate across the cutover, and normsim's judgement of the
// job's promises is not fail (a seam that reads seamless with the source
// producing after its stop is not). tolerated passes: Describe says why.
func RequireSeamless(tb testing.TB, m *sim.Migration) {
	tb.Helper()
	if m.Output == nil || m.Output.Verdict != sim.VerdictSeamless || m.Judged().Grade == sim.GradeFail {
		tb.Fatalf("migration %s output is not seamless: %s\n%s%s", m.ID, Describe(m), Timeline(m), windowLines(m))
	}
}

// windowLines is what the two sides printed around a migration, for a
// failure whose record carries no log tails (a seam tolerated, not
// failed): the last seamLogLines of them, "" when none were read.
func windowLines(m *sim.Migration) string {
	if m.Logs == nil || len(m.Logs.Tails) > 0 || len(m.Logs.Lines) == 0 {
		return ""
	}
	lines := m.Logs.Lines[max(0, len(m.Logs.Lines)-seamLogLines):]
	var b strings.Builder
	fmt.Fprintf(&b, "the last %d line(s) the source and the target printed around the migration:\n", len(lines))
	for _, l := range lines {
		fmt.Fprintf(&b, "  %s %-6s %s\n", l.At.UTC().Format("15:04:05.000"), l.Side, sim.FormatLogLine(l.LogLine, false))
	}
	return b.String()
}

// seamLogLines is how many of a migration's log lines a seam failure
// prints.
const seamLogLines = 40

// RequireJudgement fails the test unless normsim judged the migration's
// promises grade (sim.GradePass, GradeTolerated or GradeFail): the
// judgement normsim ci, conform, migrate --wait and the dashboard print.
func RequireJudgement(tb testing.TB, m *sim.Migration, grade sim.Grade) {
	tb.Helper()
	if g := m.Judged().Grade; g != grade {
		tb.Fatalf("migration %s judged %s, want %s: %s\n%s", m.ID, g, grade, Describe(m), Timeline(m))
	}
}

// Describe renders what a migration's verdict rests on, for a failure
// message: the output (DescribeOutput), what the target reported in
// target-applied whole, and the judgement with the side at fault and why.
func Describe(m *sim.Migration) string {
	s := DescribeOutput(m.Output)
	if sim.AppliedReported(m) {
		s += "; target-applied: " + sim.FormatResult(m.Result)
	}
	return s + "; judgement: " + sim.FormatJudgement(m.Judged())
}

// DescribeOutput renders an output report for a failure message, with the
// numbers behind its pointers ("last source packet 41, first target packet
// 43, 1 packet lost, the target's first packet 25.0 ms after the source's
// last"); fields that were not measured are left out. Time is said as
// time, so that it never reads as numbers lost.
func DescribeOutput(o *sim.OutputReport) string {
	if o == nil {
		return "no output report (the migration did not get to measure the seam)"
	}
	parts := []string{"verdict " + o.Verdict}
	if o.LastSource != nil {
		parts = append(parts, fmt.Sprintf("last source packet %d", *o.LastSource))
	}
	if o.FirstTarget != nil {
		parts = append(parts, fmt.Sprintf("first target packet %d", *o.FirstTarget))
	}
	if o.Lost != 0 {
		parts = append(parts, sim.Plural(o.Lost, "packet")+" lost")
	}
	if o.Duplicated != 0 {
		parts = append(parts, sim.Plural(o.Duplicated, "packet")+" duplicated")
	}
	if o.GapMs != nil {
		parts = append(parts, fmt.Sprintf("the target's first packet %.1f ms after the source's last", *o.GapMs))
	}
	if o.OverlapMs != nil {
		parts = append(parts, fmt.Sprintf("overlap %.1f ms", *o.OverlapMs))
	}
	if o.AtFault != "" {
		parts = append(parts, "at fault: "+o.AtFault)
	}
	if o.Detail != "" {
		parts = append(parts, o.Detail)
	}
	return strings.Join(parts, ", ")
}

// Connect returns a Sim that talks to a normsim already running at url
// (e.g. `normsim up` in another process); Main is nil.
func Connect(url string) *Sim {
	return &Sim{URL: url, Client: apiclient.New(url, &http.Client{Timeout: 30 * time.Second})}
}
