package normsimtest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/normsim/normsim/sim"
)

// fakeTB records what a helper reports instead of failing the test.
// Methods it does not define panic through the nil testing.TB.
type fakeTB struct {
	testing.TB
	deadline time.Time
	failures []string
}

func (f *fakeTB) Helper() {}
func (f *fakeTB) Fatalf(format string, args ...any) {
	f.failures = append(f.failures, fmt.Sprintf(format, args...))
}
func (f *fakeTB) Errorf(format string, args ...any) {
	f.failures = append(f.failures, fmt.Sprintf(format, args...))
}
func (f *fakeTB) Deadline() (time.Time, bool) { return f.deadline, !f.deadline.IsZero() }

func TestRequireSeamlessPrintsTheNumbers(t *testing.T) {
	i := func(v int64) *int64 { return &v }
	f := func(v float64) *float64 { return &v }
	tests := []struct {
		name    string
		out     *sim.OutputReport
		want    []string
		notWant []string
	}{
		{"one lost", &sim.OutputReport{Verdict: sim.VerdictGap, LastSource: i(41), FirstTarget: i(43), GapMs: f(25), Lost: 1},
			[]string{"verdict gap", "last source packet 41", "first target packet 43", "1 packet lost", "the target's first packet 25.0 ms after the source's last"}, []string{"1 packets", "0x", "overlap", "gap 25"}},
		{"two lost", &sim.OutputReport{Verdict: sim.VerdictGap, LastSource: i(40), FirstTarget: i(43), Lost: 2},
			[]string{"2 packets lost"}, []string{"0x", "duplicated"}},
		{"one duplicated", &sim.OutputReport{Verdict: sim.VerdictOverlap, LastSource: i(50), FirstTarget: i(50), OverlapMs: f(12.5), Duplicated: 1},
			[]string{"verdict overlap", "1 packet duplicated", "overlap 12.5 ms"}, []string{"1 packets", "0x", "lost"}},
		{"unknown with detail", &sim.OutputReport{Verdict: "unknown", Detail: "no target packets within 2s"},
			[]string{"verdict unknown", "no target packets within 2s"}, []string{"0x", "<nil>", "last source"}},
		{"no report", nil, []string{"no output report"}, []string{"<nil>"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tb := &fakeTB{}
			RequireSeamless(tb, &sim.Migration{ID: "mig-1", Output: tt.out})
			if len(tb.failures) != 1 {
				t.Fatalf("failures = %q, want one", tb.failures)
			}
			msg := tb.failures[0]
			for _, w := range tt.want {
				if !strings.Contains(msg, w) {
					t.Errorf("message %q does not say %q", msg, w)
				}
			}
			for _, w := range tt.notWant {
				if strings.Contains(msg, w) {
					t.Errorf("message %q says %q", msg, w)
				}
			}
		})
	}
	tb := &fakeTB{}
	RequireSeamless(tb, &sim.Migration{ID: "mig-1", Output: &sim.OutputReport{Verdict: sim.VerdictSeamless, LastSource: i(41), FirstTarget: i(42)}})
	if len(tb.failures) != 0 {
		t.Errorf("a seamless seam failed: %q", tb.failures)
	}
}

func TestMigrationWait(t *testing.T) {
	ms := func(n int) sim.Duration { return sim.Duration(time.Duration(n) * time.Millisecond) }
	long := sim.Timeouts{TargetStart: sim.Duration(10 * time.Minute)}
	short := sim.Timeouts{State: ms(100), TargetStart: ms(100), TargetReady: ms(100), Stop: ms(100), Apply: ms(100), StopGrace: ms(100), Linger: ms(100)}
	tests := []struct {
		name string
		in   sim.Timeouts
		want time.Duration
	}{
		// 10 + 60 + 30 + 10 + 10 + linger 0.25 + stopGrace 10 + margin 30
		{"defaults", sim.Timeouts{}, 160250 * time.Millisecond},
		{"a long targetStart", long, 10*time.Minute + 100250*time.Millisecond},
		{"short everything", short, 700*time.Millisecond + 30*time.Second},
		{"only stopGrace set", sim.Timeouts{StopGrace: sim.Duration(time.Minute)}, 210250 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := MigrationWait(tt.in); got != tt.want {
				t.Errorf("MigrationWait(%+v) = %v, want %v", tt.in, got, tt.want)
			}
		})
	}
	// The old fixed wait, against which the request's timeouts now count.
	if MigrationWait(long) <= 2*time.Minute || MigrationWait(short) >= 2*time.Minute {
		t.Error("long timeouts must wait longer than 2 min and short ones shorter")
	}
}

func TestCapToDeadline(t *testing.T) {
	tests := []struct {
		name          string
		timeout, left time.Duration
		want          time.Duration
		capped        bool
	}{
		{"deadline far off", time.Minute, time.Hour, time.Minute, false},
		{"deadline sooner", 10 * time.Minute, time.Minute, 55 * time.Second, true},
		{"just enough room", 55 * time.Second, time.Minute, 55 * time.Second, false},
		{"little left: half of it", time.Minute, 6 * time.Second, 3 * time.Second, true},
		{"deadline passed", time.Minute, -time.Second, 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, capped := capToDeadline(tt.timeout, tt.left)
			if got != tt.want || capped != tt.capped {
				t.Errorf("capToDeadline(%v, %v) = %v, %v; want %v, %v", tt.timeout, tt.left, got, capped, tt.want, tt.capped)
			}
		})
	}
}

// TestMigrateAndWaitStopsBeforeTheTestDeadline: a migration that does not
// end fails the test before its deadline, saying how long it waited and why.
func TestMigrateAndWaitStopsBeforeTheTestDeadline(t *testing.T) {
	running := sim.Migration{ID: "mig-1", State: sim.MigrationRunning, Phase: "get-state"}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.Method == http.MethodPost {
			w.WriteHeader(http.StatusAccepted)
		}
		json.NewEncoder(w).Encode(running)
	}))
	defer srv.Close()
	s := Connect(srv.URL)
	tb := &fakeTB{deadline: time.Now().Add(time.Second)}
	if m := s.MigrateAndWait(tb, "inst-1", sim.MigrateRequest{}); m != nil {
		t.Errorf("returned %+v", m)
	}
	if len(tb.failures) != 1 {
		t.Fatalf("failures = %q, want one", tb.failures)
	}
	for _, w := range []string{"migration mig-1 still running in phase get-state after waiting", "cut short to end before the test's deadline", "the 2m40.25s its timeouts allow"} {
		if !strings.Contains(tb.failures[0], w) {
			t.Errorf("message %q does not say %q", tb.failures[0], w)
		}
	}
}

// TestRequireSeamlessFollowsTheJudgement: a verdict that reads seamless
// fails when the judgement is fail; a tolerated one passes; the message
// has the result whole and the judgement.
func TestRequireSeamlessFollowsTheJudgement(t *testing.T) {
	i := func(v int64) *int64 { return &v }
	skew := 4.0
	late := &sim.Migration{ID: "mig-1", Strategy: sim.Handover, State: sim.MigrationCompleted,
		Output: &sim.OutputReport{Verdict: sim.VerdictSeamless, LastSource: i(41), FirstTarget: i(42), AtFault: "source", SourceAfterStop: 3,
			Detail: "the source sent 3 packets after source-stopped-output"},
		Result: sim.MigrationResult{Applied: []string{"counter"}}}
	tb := &fakeTB{}
	RequireSeamless(tb, late)
	if len(tb.failures) != 1 || !strings.Contains(tb.failures[0], "verdict seamless") ||
		!strings.Contains(tb.failures[0], "; target-applied: applied counter; failed none; skewMs not reported; judgement: fail (at fault: source): the source sent 3 packets") {
		t.Errorf("failures %q", tb.failures)
	}

	applyFails := &sim.Migration{ID: "mig-2", Strategy: sim.Handover, State: sim.MigrationCompleted,
		Output: &sim.OutputReport{Verdict: sim.VerdictSeamless, LastSource: i(41), FirstTarget: i(42)},
		Result: sim.MigrationResult{Applied: []string{"counter"}, Failed: []sim.FailedApply{{ID: "overlay", Reason: "font missing"}}, SkewMs: &skew}}
	tb = &fakeTB{}
	RequireSeamless(tb, applyFails)
	RequireJudgement(tb, applyFails, sim.GradeTolerated)
	if len(tb.failures) != 0 {
		t.Errorf("tolerated failed: %q", tb.failures)
	}
	RequireJudgement(tb, applyFails, sim.GradePass)
	if len(tb.failures) != 1 || !strings.HasPrefix(tb.failures[0], "migration mig-2 judged tolerated, want pass: verdict seamless") ||
		!strings.Contains(tb.failures[0], "target-applied: applied counter; failed overlay (font missing); skewMs 4; judgement: tolerated (at fault: none): the target could not apply 1 participant: overlay (font missing)") {
		t.Errorf("failures %q", tb.failures)
	}
}

// TestRequireSeamlessShowsWhatTheSidesPrinted: a seam that is not
// seamless, without log tails in its record (tolerated, not failed),
// fails with the lines both sides printed around the migration.
func TestRequireSeamlessShowsWhatTheSidesPrinted(t *testing.T) {
	at := time.Date(2026, 12, 4, 18, 0, 0, 0, time.UTC)
	m := &sim.Migration{ID: "m1", State: sim.MigrationCompleted, Strategy: sim.Handover,
		Output: &sim.OutputReport{Verdict: sim.VerdictUnknown, Detail: "the source sent nothing in the window"},
		Logs: &sim.MigrationLogs{Lines: []sim.MigrationLogLine{
			{Side: "source", LogLine: sim.LogLine{At: at, Service: "job", Text: "cutover-ready: output stopped"}},
			{Side: "target", LogLine: sim.LogLine{At: at.Add(time.Millisecond), Service: "job", Text: "applied at 41"}},
		}}}
	f := &fakeTB{}
	RequireSeamless(f, m)
	if len(f.failures) != 1 {
		t.Fatalf("failures = %q", f.failures)
	}
	for _, want := range []string{"the last 2 line(s) the source and the target printed around the migration:",
		"18:00:00.000 source job | cutover-ready: output stopped", "18:00:00.001 target job | applied at 41"} {
		if !strings.Contains(f.failures[0], want) {
			t.Errorf("failure lacks %q:\n%s", want, f.failures[0])
		}
	}
}
