package normsimtest_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/normsim/normsim/apiclient"
	"github.com/normsim/normsim/internal/testenv"
	"github.com/normsim/normsim/normsimtest"
	"github.com/normsim/normsim/normsimtest/normsimdocker"
	"github.com/normsim/normsim/normsimtest/normsimsqlite"
	"github.com/normsim/normsim/sim"
)

var repoTemplates = filepath.Join("..", "templates")

// TestLogsOutliveTheInstance (process runtime) and its Docker twin: a
// job's lines are read back after it handed over, after it was stopped
// and removed, and after normsim restarted on the same store.
func TestLogsOutliveTheInstance(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real jobs")
	}
	testLogsOutlive(t, sim.RuntimeProcess)
}

func TestLogsOutliveTheInstanceOnDocker(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real containers")
	}
	testenv.RequireDocker(t)
	normsimdocker.BuildSourceImage(t, "normsim/counter", filepath.Join("..", "examples", "jobs", "counter"))
	testLogsOutlive(t, sim.RuntimeDocker)
}

func testLogsOutlive(t *testing.T, runtime string) {
	ctx := context.Background()
	db := filepath.Join(t.TempDir(), "normsim.db")
	s := start(t, normsimtest.Options{Templates: []string{repoTemplates}, Runtime: runtime, DB: db, Store: normsimsqlite.Store()})
	in := s.Launch(t, sim.LaunchRequest{Template: "counter", Node: "a"})
	s.WaitConnected(t, in.ID)
	m := s.MigrateAndWait(t, in.ID, sim.MigrateRequest{To: "b"})
	normsimtest.RequireCompleted(t, m)
	src, tgt := m.Source.Instance, m.Target.Instance

	// The source printed "cutover-ready: output stopped" when the frame
	// came; on the record it sits on the source's side, inside the
	// migration, after the target-ready that the cutover-ready relays
	// arrived (the cutover-ready itself is stamped once its write
	// returned, which the job may beat in printing).
	var sent time.Time
	for _, ev := range m.Events {
		if ev.Side == "target" && ev.Frame != nil && ev.Frame.Type == "target-ready" {
			sent = ev.At
		}
	}
	if m.Logs == nil {
		t.Fatal("the migration record has no logs")
	}
	var line *sim.MigrationLogLine
	for i, l := range m.Logs.Lines {
		if l.Side == "source" && strings.Contains(l.Text, "cutover-ready: output stopped") {
			line = &m.Logs.Lines[i]
		}
	}
	if line == nil || sent.IsZero() {
		t.Fatalf("no cutover-ready line on the source's side (target-ready at %v): %+v", sent, m.Logs.Lines)
	}
	if line.At.Before(sent) || line.At.After(*m.EndedAt) || line.Instance != src {
		t.Errorf("the source's cutover-ready line (%v, %s) is not between target-ready (%v) and the end (%v) on the source", line.At, line.Instance, sent, *m.EndedAt)
	}
	if len(m.Logs.Tails) != 0 {
		t.Errorf("a completed migration carries tails: %+v", m.Logs.Tails)
	}
	// A client polling for the state asks for none.
	bare, err := s.Client.MigrationState(ctx, m.ID)
	if err != nil {
		t.Fatal(err)
	}
	if bare.Logs != nil || bare.State != m.State || len(bare.Events) != len(m.Events) {
		t.Errorf("?logs=false: logs %v, state %s, %d events; want no logs, %s, %d events", bare.Logs, bare.State, len(bare.Events), m.State, len(m.Events))
	}
	// One polling for where thousands are asks for no timeline either.
	sum, err := s.Client.MigrationSummary(ctx, m.ID)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Logs != nil || sum.Events != nil || sum.State != m.State || sum.Phase != m.Phase || sum.Target.Instance != m.Target.Instance {
		t.Errorf("?logs=false&events=false: logs %v, %d events, state %s, phase %s, target %s; want neither, %s, %s, %s",
			sum.Logs, len(sum.Events), sum.State, sum.Phase, sum.Target.Instance, m.State, m.Phase, m.Target.Instance)
	}
	err = s.Client.Do(ctx, http.MethodGet, "/api/v1/migrations/"+m.ID+"?events=maybe", nil, &sim.Migration{})
	if err == nil || !strings.Contains(err.Error(), "events: must be true or false") {
		t.Errorf("?events=maybe: %v, want a 400 naming the parameter", err)
	}

	// Handed over: the source is gone from the instance list, its logs
	// are not.
	requireLines(t, s.Client, src, "counter starting", "cutover-ready: output stopped")
	// Stopped and removed: what it printed while stopping is kept too.
	if err := s.Client.Stop(ctx, tgt); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Client.Instance(ctx, tgt); err == nil {
		t.Fatalf("instance %s still there after its removal", tgt)
	}
	requireLines(t, s.Client, tgt, "started as a migration target", "counter stopping")

	// Restarted on the same store.
	s.Main.Close()
	s2 := start(t, normsimtest.Options{Templates: []string{repoTemplates}, Runtime: runtime, DB: db, Store: normsimsqlite.Store()})
	requireLines(t, s2.Client, src, "counter starting", "cutover-ready: output stopped")
	all := requireLines(t, s2.Client, tgt, "counter stopping")

	// docker compose logs' flags: --tail, --timestamps, --since.
	var buf bytes.Buffer
	if err := s2.Client.Logs(ctx, tgt, apiclient.LogOptions{Tail: 2, Timestamps: true}, &buf); err != nil {
		t.Fatal(err)
	}
	got := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	if len(got) != 2 || got[1] != sim.FormatLogLine(all[len(all)-1], true) {
		t.Errorf("--tail 2 --timestamps printed %q, want its last line %q", got, sim.FormatLogLine(all[len(all)-1], true))
	}
	buf.Reset()
	since := all[len(all)-1].At.Format(time.RFC3339Nano)
	if err := s2.Client.Logs(ctx, tgt, apiclient.LogOptions{Tail: -1, Since: since}, &buf); err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(buf.String(), all[len(all)-1].Text+"\n") || strings.Contains(buf.String(), "counter starting") {
		t.Errorf("--since %s printed %q", since, buf.String())
	}
	// An instance normsim never knew is an error, not empty output.
	err = s2.Client.Logs(ctx, "counter-000000", apiclient.LogOptions{Tail: -1}, &buf)
	var apiErr *apiclient.Error
	if !errors.As(err, &apiErr) || apiErr.Status != 404 {
		t.Errorf("logs of an unknown instance: %v, want a 404", err)
	}
}

// requireLines reads an instance's whole log and fails unless each want
// is in it, in order.
func requireLines(t *testing.T, c *apiclient.Client, id string, want ...string) []sim.LogLine {
	t.Helper()
	p, err := c.LogPage(context.Background(), id, 0)
	if err != nil {
		t.Fatalf("logs of %s: %v", id, err)
	}
	i := 0
	for _, l := range p.Lines {
		if i < len(want) && strings.Contains(l.Text, want[i]) {
			i++
		}
	}
	if i < len(want) {
		var b strings.Builder
		for _, l := range p.Lines {
			fmt.Fprintf(&b, "  %s %s\n", l.Stream, l.Text)
		}
		t.Fatalf("logs of %s lack %q (in order %q):\n%s", id, want[i], want, b.String())
	}
	return p.Lines
}

// fatalRecorder is a testing.TB whose Fatalf records the message.
type fatalRecorder struct {
	testing.TB
	msg string
}

func (f *fatalRecorder) Helper() {}
func (f *fatalRecorder) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
}

// TestRequireCarriesTheCrashedTargetsLastLine: a target that crashes on
// cutover-apply, after the point of no return; RequireCompleted's failure
// message ends with the last lines of each side, the target's last one
// among them.
func TestRequireCarriesTheCrashedTargetsLastLine(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real jobs")
	}
	s := normsimtest.Start(t, normsimtest.Options{Templates: []string{repoTemplates, filepath.Join("..", "examples", "templates")}})
	in := s.Launch(t, sim.LaunchRequest{Template: "crash-on-apply", Node: "a"})
	s.WaitConnected(t, in.ID)
	m := s.MigrateAndWait(t, in.ID, sim.MigrateRequest{To: "b"})
	rec := &fatalRecorder{TB: t}
	normsimtest.RequireCompleted(rec, m)
	if m.State != sim.MigrationFailed {
		t.Fatalf("migration %s, want failed", m.State)
	}
	for _, want := range []string{"last ", "of the target, " + m.Target.Instance, "crashing on cutover-apply", "of the source, " + m.Source.Instance} {
		if !strings.Contains(rec.msg, want) {
			t.Errorf("RequireCompleted's message lacks %q:\n%s", want, rec.msg)
		}
	}
}

// start runs a simulator on the options' runtime, linking Docker's only
// when the test runs on it.
func start(t *testing.T, o normsimtest.Options) *normsimtest.Sim {
	t.Helper()
	if o.Runtime == sim.RuntimeDocker {
		return normsimdocker.Start(t, o)
	}
	return normsimtest.Start(t, o)
}
