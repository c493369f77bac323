package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/normsim/normsim/apiclient"
	"github.com/normsim/normsim/sim"
)

func TestPortsColumn(t *testing.T) {
	in := sim.Instance{Published: []sim.PublishedPort{
		{Service: "ingest", ContainerPort: 1935, Protocol: "tcp", HostIP: "127.0.1.2", HostPort: 19350},
		{Service: "ingest", ContainerPort: 9000, Protocol: "udp", HostIP: "127.0.1.2"},
	}}
	if got, want := portsColumn(in), "127.0.1.2:19350->1935/tcp, 127.0.1.2:?->9000/udp"; got != want {
		t.Errorf("ports column %q, want %q", got, want)
	}
	if got := portsColumn(sim.Instance{}); got != "-" {
		t.Errorf("no ports: %q", got)
	}
}

func TestShellQuoteAndWaitText(t *testing.T) {
	for in, want := range map[string]string{
		"50": "50", "ws://127.0.0.1:1/instances/j/i": "ws://127.0.0.1:1/instances/j/i", "": "''",
		"a b": "'a b'", "it's": `'it'\''s'`, "$HOME": "'$HOME'",
	} {
		if got := shellQuote(in); got != want {
			t.Errorf("shellQuote(%q) = %s, want %s", in, got, want)
		}
	}
	for d, want := range map[time.Duration]string{
		10 * time.Second: "10s", time.Minute: "1m", 90 * time.Second: "1m30s", time.Hour: "1h", 61 * time.Minute: "1h1m", 0: "0s",
	} {
		if got := waitText(d); got != want {
			t.Errorf("waitText(%s) = %s, want %s", d, got, want)
		}
	}
}

func TestListenAddr(t *testing.T) {
	for _, tc := range []struct{ in, want, err string }{
		{"0", "127.0.0.1:0", ""},
		{":0", "127.0.0.1:0", ""},
		{"7788", "127.0.0.1:7788", ""},
		{":7788", "127.0.0.1:7788", ""},
		{"127.0.0.1:7788", "127.0.0.1:7788", ""},
		{"0.0.0.0:80", "0.0.0.0:80", ""},
		{"[::1]:0", "[::1]:0", ""},
		{"localhost", "", `--addr: the port must be 0..65535 (0 picks a free one); got "localhost"`},
		{":70000", "", `--addr: the port must be 0..65535 (0 picks a free one); got ":70000"`},
		{"::1", "", `--addr: want HOST:PORT, PORT or :PORT; got "::1"`},
	} {
		got, err := listenAddr(tc.in)
		if tc.err != "" {
			if err == nil || !strings.HasPrefix(err.Error(), tc.err) || !isUsage(err) {
				t.Errorf("listenAddr(%q) = %q, %v; want usage error %q", tc.in, got, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("listenAddr(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}

func TestServerURL(t *testing.T) {
	for in, want := range map[string]string{
		"127.0.0.1:7788":          "http://127.0.0.1:7788",
		"http://127.0.0.1:7788":   "http://127.0.0.1:7788",
		"https://sim.example:443": "https://sim.example:443",
		" localhost:7788 ":        "http://localhost:7788",
	} {
		if got := serverURL(in); got != want {
			t.Errorf("serverURL(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestWaitExitFollowsTheJudgement: migrate --wait exits 3 exactly when a
// completed migration's judgement is fail, whatever the verdict string
// says, and 0 for tolerated.
func TestWaitExitFollowsTheJudgement(t *testing.T) {
	seq := func(v int64) *int64 { return &v }
	handover := func(o *sim.OutputReport) *sim.Migration {
		return &sim.Migration{ID: "mig-1", Strategy: sim.Handover, State: sim.MigrationCompleted, Output: o,
			Result: sim.MigrationResult{Applied: []string{"counter"}}}
	}
	seamless := &sim.OutputReport{Verdict: sim.VerdictSeamless, LastSource: seq(41), FirstTarget: seq(42), Detail: "source stopped at 41, target continued at 42"}
	applyFails := handover(seamless)
	applyFails.Result.Failed = []sim.FailedApply{{ID: "overlay", Reason: "font missing"}}
	// A verdict that reads seamless while the source kept producing.
	late := handover(&sim.OutputReport{Verdict: sim.VerdictSeamless, SourceAfterStop: 3, AtFault: "source", Detail: "the source sent 3 packets after source-stopped-output"})
	stored := handover(seamless)
	stored.Judgement = &sim.Judgement{Grade: sim.GradeFail, AtFault: "target", Why: "stored verdict"}
	aborted := &sim.Migration{ID: "mig-1", Strategy: sim.Handover, State: sim.MigrationAborted, Reason: "timed out"}
	for _, tc := range []struct {
		name   string
		m      *sim.Migration
		ignore bool
		code   int
		says   string
	}{
		{"seamless", handover(seamless), false, 0, ""},
		{"participants not applied are tolerated", applyFails, false, 0, ""},
		{"duplicate", handover(&sim.OutputReport{Verdict: sim.VerdictDuplicate, Duplicated: 5, Detail: "the target started at 78, repeating 5 packets"}), false, 3,
			"migration mig-1 completed, but its judgement is fail (at fault: none): numbers repeated at the seam: the target started at 78, repeating 5 packets (--ignore-seam accepts it)"},
		{"duplicate ignored", handover(&sim.OutputReport{Verdict: sim.VerdictDuplicate}), true, 0, ""},
		{"seamless string, source at fault", late, false, 3, "judgement is fail (at fault: source): the source sent 3 packets"},
		{"the stored judgement wins", stored, false, 3, "judgement is fail (at fault: target): stored verdict"},
		{"no output to judge", handover(nil), false, 0, ""},
		{"not completed", aborted, false, 1, "migration mig-1 aborted: timed out"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := waitExit(tc.m, tc.ignore)
			if tc.code == 0 {
				if err != nil {
					t.Fatalf("exit %v, want 0", err)
				}
				return
			}
			var ee *ExitError
			if !errors.As(err, &ee) || ee.Code != tc.code || !strings.Contains(ee.Err.Error(), tc.says) {
				t.Fatalf("exit %v, want %d saying %q", err, tc.code, tc.says)
			}
		})
	}
}

// TestPrintVerdictShowsTheResultWhole: the seam, target-applied's result
// with every failed id and reason and the skew, and the judgement.
func TestPrintVerdictShowsTheResultWhole(t *testing.T) {
	skew := 2.5
	m := &sim.Migration{ID: "mig-1", Strategy: sim.Handover, State: sim.MigrationCompleted,
		Output: &sim.OutputReport{Verdict: sim.VerdictSeamless, Detail: "source stopped at 41, target continued at 42"},
		Result: sim.MigrationResult{Applied: []string{"counter"}, Failed: []sim.FailedApply{{ID: "overlay", Reason: "font missing"}}, SkewMs: &skew}}
	var b strings.Builder
	printVerdict(&b, m)
	want := "output: seamless (source stopped at 41, target continued at 42)\n" +
		"target-applied: applied counter; failed overlay (font missing); skewMs 2.5\n" +
		"judgement: tolerated (at fault: none): the target could not apply 1 participant: overlay (font missing)\n"
	if b.String() != want {
		t.Errorf("printed\n%s\nwant\n%s", b.String(), want)
	}
	// A rollback has no result to show, but its judgement.
	b.Reset()
	printVerdict(&b, &sim.Migration{Strategy: sim.Handover, State: sim.MigrationAborted})
	if got := b.String(); strings.Contains(got, "target-applied") || !strings.HasPrefix(got, "judgement: pass (at fault: none): rolled back") {
		t.Errorf("aborted: %q", got)
	}
}

// TestShutdownLineNamesAFew (issue 34 item 10): a sim stopping with
// hundreds of instances names the first few on its line and counts the
// rest, instead of one line of 651 names.
func TestShutdownLineNamesAFew(t *testing.T) {
	var live []string
	for i := range 651 {
		live = append(live, fmt.Sprintf("counter-%03d on a", i))
	}
	got := someOf(live)
	if !strings.HasPrefix(got, "counter-000 on a, counter-001 on a") || !strings.HasSuffix(got, "counter-007 on a and 643 more (normsim ps lists them)") {
		t.Fatalf("shutdown names %q", got)
	}
	if got := someOf(live[:3]); got != "counter-000 on a, counter-001 on a, counter-002 on a" {
		t.Fatalf("a few: %q", got)
	}
}

// TestOnInstanceReadsTheListNotTheMessage: whether an ID names a job's
// running instance, and whether "ps lists the instances" helps, is read
// from the instances the API lists, whatever a NOT_FOUND's message says.
func TestOnInstanceReadsTheListNotTheMessage(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode([]sim.Instance{
			{ID: "i1", JobID: "job-1", State: sim.InstanceStopped},
			{ID: "i2", JobID: "job-1", State: sim.InstanceRunning},
		})
	}))
	defer srv.Close()
	c := apiclient.New(srv.URL, nil)
	notFound := &apiclient.Error{Status: http.StatusNotFound, Code: sim.ENotFound, Message: "no such thing"}
	var asked []string
	do := func(id string) error {
		asked = append(asked, id)
		if id == "i2" {
			return nil
		}
		return notFound
	}
	// A job's ID: its running instance.
	if err := onInstance(context.Background(), c, "job-1", do); err != nil || strings.Join(asked, " ") != "job-1 i2" {
		t.Errorf("job-1: %v after %q", err, asked)
	}
	// An instance that is there: something else was not found; no hint.
	asked = nil
	if err := onInstance(context.Background(), c, "i1", do); err != notFound || len(asked) != 1 {
		t.Errorf("i1: %v after %q", err, asked)
	}
	// Neither: the hint.
	asked = nil
	err := onInstance(context.Background(), c, "nosuch", do)
	if !apiclient.HasCode(err, sim.ENotFound) || !strings.HasSuffix(err.Error(), "no such thing; normsim ps lists the instances") || len(asked) != 1 {
		t.Errorf("nosuch: %v after %q", err, asked)
	}
}
