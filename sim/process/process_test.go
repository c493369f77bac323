//go:build unix && !aix

package process

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/normsim/normsim/sim"
)

// waitLimit bounds every wait in these tests; it is a hang guard, not a
// timing assertion.
const waitLimit = 15 * time.Second

var testNow = time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)

// recorder keeps the events a Runtime reports.
type recorder struct {
	mu     sync.Mutex
	events []sim.RuntimeEvent
}

func (rec *recorder) observe(ev sim.RuntimeEvent) {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	rec.events = append(rec.events, ev)
}

func (rec *recorder) all() []sim.RuntimeEvent {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return slices.Clone(rec.events)
}

func (rec *recorder) of(kind sim.RuntimeEventKind) []sim.RuntimeEvent {
	var out []sim.RuntimeEvent
	for _, ev := range rec.all() {
		if ev.Kind == kind {
			out = append(out, ev)
		}
	}
	return out
}

// waitFor returns the first event of kind for service, waiting for it.
func (rec *recorder) waitFor(tb testing.TB, kind sim.RuntimeEventKind, service string) sim.RuntimeEvent {
	tb.Helper()
	deadline := time.Now().Add(waitLimit)
	for {
		for _, ev := range rec.of(kind) {
			if ev.Service == service {
				return ev
			}
		}
		if time.Now().After(deadline) {
			tb.Fatalf("no %s event for service %s; events: %+v", kind, service, rec.all())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// MustRuntime returns a Runtime whose log directories live in a test
// directory and which is closed when the test ends.
func MustRuntime(tb testing.TB) (*Runtime, *recorder) {
	tb.Helper()
	tb.Setenv("TMPDIR", tb.TempDir())
	rec := &recorder{}
	r := New(Config{
		Observer: rec.observe,
		Logger:   slog.New(slog.NewTextHandler(tb.Output(), &slog.HandlerOptions{Level: slog.LevelDebug})),
		Now:      func() time.Time { return testNow },
	})
	r.closeGrace = 300 * time.Millisecond
	tb.Cleanup(func() {
		if err := r.Close(context.Background(), false); err != nil {
			tb.Errorf("close: %v", err)
		}
	})
	return r, rec
}

// helper is a service that runs this test binary in the given helper mode.
func helper(name, mode string, args ...string) sim.ServiceSpec {
	return sim.ServiceSpec{
		Name: name,
		// A -race binary sleeps a second on exit unless told otherwise.
		Env:     map[string]string{helperEnv: mode, "GORACE": "atexit_sleep_ms=0"},
		Process: &sim.ProcessSpec{Command: append([]string{os.Args[0]}, args...)},
	}
}

func dependsOn(s sim.ServiceSpec, deps ...sim.Dependency) sim.ServiceSpec {
	s.DependsOn = deps
	return s
}

// MustLaunch prepares and starts an instance.
func MustLaunch(tb testing.TB, r *Runtime, id string, services ...sim.ServiceSpec) {
	tb.Helper()
	if err := r.Prepare(context.Background(), &sim.LaunchSpec{InstanceID: id, Services: services}); err != nil {
		tb.Fatalf("prepare %s: %v", id, err)
	}
	if err := r.Start(context.Background(), id); err != nil {
		tb.Fatalf("start %s: %v", id, err)
	}
}

// matchWriter collects followed logs and ends the follow once want shows.
type matchWriter struct {
	want   string
	cancel context.CancelFunc
	buf    bytes.Buffer
	found  bool
}

func (w *matchWriter) Write(p []byte) (int, error) {
	w.buf.Write(p)
	if !w.found && strings.Contains(w.buf.String(), w.want) {
		w.found = true
		w.cancel()
	}
	return len(p), nil
}

// waitLog follows the instance's logs until want shows and returns them.
func waitLog(tb testing.TB, r *Runtime, id, want string) string {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	w := &matchWriter{want: want, cancel: cancel}
	if err := r.Logs(ctx, id, true, w); err != nil {
		tb.Fatalf("logs of %s: %v", id, err)
	}
	if !w.found {
		tb.Fatalf("logs of %s never showed %q; got:\n%s", id, want, w.buf.String())
	}
	return w.buf.String()
}

// logsNow returns the instance's buffered logs.
func logsNow(tb testing.TB, r *Runtime, id string) string {
	tb.Helper()
	var buf bytes.Buffer
	if err := r.Logs(context.Background(), id, false, &buf); err != nil {
		tb.Fatalf("logs of %s: %v", id, err)
	}
	return buf.String()
}

// alive reports whether pid is a process that is not a zombie.
func alive(pid int) bool {
	if syscall.Kill(pid, 0) == syscall.ESRCH {
		return false
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return runtime.GOOS != "linux"
	}
	f := bytes.Fields(b[bytes.LastIndexByte(b, ')')+1:])
	return string(f[0]) != "Z" && string(f[0]) != "X"
}

func wantCode(tb testing.TB, err error, code string) {
	tb.Helper()
	if err == nil {
		tb.Fatalf("err = nil, want code %s", code)
	}
	if got := sim.ErrorCode(err); got != code {
		tb.Fatalf("error code = %s, want %s (err: %v)", got, code, err)
	}
}

func TestName(t *testing.T) {
	if got := New(Config{}).Name(); got != sim.RuntimeProcess {
		t.Fatalf("Name() = %q, want %q", got, sim.RuntimeProcess)
	}
}

func TestPrepareRefuses(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, []byte("not a program"), 0o644); err != nil {
		t.Fatal(err)
	}
	proc := func(name string, cmd ...string) sim.ServiceSpec {
		return sim.ServiceSpec{Name: name, Process: &sim.ProcessSpec{Command: cmd}}
	}
	tests := []struct {
		name     string
		services []sim.ServiceSpec
		want     string // substring of the message
	}{
		{"no x-normsim", []sim.ServiceSpec{{Name: "api", Image: "api:1"}},
			`service "api" has no x-normsim command, so it cannot run as a host process; add x-normsim: {command: [...]} to it or use --runtime docker`},
		{"empty command", []sim.ServiceSpec{{Name: "api", Process: &sim.ProcessSpec{Dir: dir}}}, `service "api" has no x-normsim command`},
		{"empty argv0", []sim.ServiceSpec{proc("api", "", "x")}, `service "api" has no x-normsim command`},
		{"not in PATH", []sim.ServiceSpec{proc("api", "normsim-no-such-program")}, "no executable named normsim-no-such-program in $PATH"},
		{"missing relative to dir", []sim.ServiceSpec{{Name: "api", Process: &sim.ProcessSpec{Command: []string{"./bin/api"}, Dir: dir}}},
			filepath.Join(dir, "bin/api") + " does not exist"},
		{"not executable", []sim.ServiceSpec{proc("api", file)}, file + " is not an executable file"},
		{"missing dir", []sim.ServiceSpec{{Name: "api", Process: &sim.ProcessSpec{Command: []string{"sh"}, Dir: filepath.Join(dir, "nope")}}}, "does not exist"},
		{"dir is a file", []sim.ServiceSpec{{Name: "api", Process: &sim.ProcessSpec{Command: []string{"sh"}, Dir: file}}}, "is not a directory"},
		{"unknown dependency", []sim.ServiceSpec{dependsOn(helper("api", "sleep"), sim.Dependency{Service: "db"})}, `service "api" depends on "db", which is not in the launch spec`},
		{"cycle", []sim.ServiceSpec{
			dependsOn(helper("a", "sleep"), sim.Dependency{Service: "b"}),
			dependsOn(helper("b", "sleep"), sim.Dependency{Service: "c"}),
			dependsOn(helper("c", "sleep"), sim.Dependency{Service: "a"}),
		}, "depends_on has a cycle: a → b → c → a"},
		{"duplicate", []sim.ServiceSpec{helper("a", "sleep"), helper("a", "sleep")}, `service "a" appears twice`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, _ := MustRuntime(t)
			err := r.Prepare(context.Background(), &sim.LaunchSpec{InstanceID: "i1", Services: tt.services})
			wantCode(t, err, sim.EUnprocessable)
			if !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %q does not contain %q", err, tt.want)
			}
			// Nothing is left behind: the id is free.
			if err := r.Prepare(context.Background(), &sim.LaunchSpec{InstanceID: "i1"}); err != nil {
				t.Fatalf("prepare after a refusal: %v", err)
			}
		})
	}
}

func TestPrepareConflictsAndInvalid(t *testing.T) {
	r, _ := MustRuntime(t)
	wantCode(t, r.Prepare(context.Background(), nil), sim.EInvalid)
	spec := &sim.LaunchSpec{InstanceID: "i1", Services: []sim.ServiceSpec{helper("a", "sleep")}}
	if err := r.Prepare(context.Background(), spec); err != nil {
		t.Fatal(err)
	}
	wantCode(t, r.Prepare(context.Background(), spec), sim.EConflict)
}

func TestCommandRelativeToDir(t *testing.T) {
	r, _ := MustRuntime(t)
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	script := "#!/bin/sh\necho \"tool in $(pwd -P) with $1\"\n"
	if err := os.WriteFile(filepath.Join(dir, "bin", "tool"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	MustLaunch(t, r, "i1", sim.ServiceSpec{Name: "tool", Process: &sim.ProcessSpec{Command: []string{"./bin/tool", "an arg"}, Dir: dir}})
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		t.Fatal(err)
	}
	waitLog(t, r, "i1", "tool | tool in "+real+" with an arg")
}

func TestEnv(t *testing.T) {
	r, _ := MustRuntime(t)
	t.Setenv("NORSK_INHERITED", "leak")
	t.Setenv("NORMSIM_INHERITED", "leak")
	t.Setenv("SPEC_OVERRIDDEN", "inherited")
	t.Setenv("SPEC_INHERITED", "kept")
	s := helper("job", "env")
	s.Env["NORSK_TOKEN"] = "abc"
	s.Env["SPEC_OVERRIDDEN"] = "from spec"
	s.Process.Dir = t.TempDir()
	MustLaunch(t, r, "i1", s)
	logs := waitLog(t, r, "i1", "job | env done")
	for _, want := range []string{"job | env NORSK_TOKEN=abc\n", "job | env SPEC_OVERRIDDEN=from spec\n", "job | env SPEC_INHERITED=kept\n"} {
		if !strings.Contains(logs, want) {
			t.Errorf("logs lack %q:\n%s", want, logs)
		}
	}
	for _, leak := range []string{"NORSK_INHERITED", "NORMSIM_INHERITED", "SPEC_OVERRIDDEN=inherited"} {
		if strings.Contains(logs, leak) {
			t.Errorf("logs show %q, which must not reach the process:\n%s", leak, logs)
		}
	}
	real, _ := filepath.EvalSymlinks(s.Process.Dir)
	if !strings.Contains(logs, "job | wd "+real+"\n") && !strings.Contains(logs, "job | wd "+s.Process.Dir+"\n") {
		t.Errorf("process did not run in %s:\n%s", s.Process.Dir, logs)
	}
}

func TestBuildEnv(t *testing.T) {
	tests := []struct {
		name    string
		environ []string
		spec    map[string]string
		want    []string
	}{
		{"empty", nil, nil, []string{}},
		{"drops NORSK_ and NORMSIM_", []string{"HOME=/h", "NORSK_URL=x", "NORMSIM_DB=y", "NORSKY=z"}, nil, []string{"HOME=/h", "NORSKY=z"}},
		{"spec wins, sorted after", []string{"A=1", "B=2"}, map[string]string{"B": "spec", "NORSK_TOKEN": "t", "0": "z"}, []string{"A=1", "0=z", "B=spec", "NORSK_TOKEN=t"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := buildEnv(tt.environ, tt.spec); !slices.Equal(got, tt.want) {
				t.Fatalf("buildEnv = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestLogsPrefixAndFollow(t *testing.T) {
	r, _ := MustRuntime(t)
	if err := r.Prepare(context.Background(), &sim.LaunchSpec{InstanceID: "i1", Services: []sim.ServiceSpec{helper("app", "tick")}}); err != nil {
		t.Fatal(err)
	}
	// A follower from before the start sees the lines as they come.
	type result struct {
		out string
		err error
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	done := make(chan result, 1)
	go func() {
		w := &matchWriter{want: "app | tick 30\n", cancel: cancel}
		err := r.Logs(ctx, "i1", true, w)
		done <- result{w.buf.String(), err}
	}()
	if err := r.Start(context.Background(), "i1"); err != nil {
		t.Fatal(err)
	}
	res := <-done
	if res.err != nil {
		t.Fatalf("follow: %v", res.err)
	}
	if !strings.Contains(res.out, "app | tick 30\n") {
		t.Fatalf("follow ended without tick 30:\n%s", res.out)
	}
	for i, line := range strings.Split(strings.TrimSuffix(logsNow(t, r, "i1"), "\n"), "\n") {
		if want := "app | tick " + strconv.Itoa(i); line != want {
			t.Fatalf("line %d = %q, want %q", i, line, want)
		}
	}

	// A follower ends when the instance stops.
	follow := make(chan error, 1)
	go func() { follow <- r.Logs(context.Background(), "i1", true, &bytes.Buffer{}) }()
	if _, err := r.Stop(context.Background(), "i1", 5*time.Second); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-follow:
		if err != nil {
			t.Fatalf("follow: %v", err)
		}
	case <-time.After(waitLimit):
		t.Fatal("follow did not end when the instance stopped")
	}
	// The logs of a stopped instance stay readable.
	if logs := logsNow(t, r, "i1"); !strings.HasPrefix(logs, "app | tick 0\n") {
		t.Fatalf("logs after stop:\n%s", logs)
	}
}

func TestServiceExited(t *testing.T) {
	tests := []struct {
		name       string
		service    sim.ServiceSpec
		wantCode   int
		wantSignal int
		wantDetail string
		wantLog    string
	}{
		{"code 3", helper("job", "exit", "3"), 3, 0, "exited with code 3", "job | exiting with 3"},
		{"code 0", helper("job", "exit", "0"), 0, 0, "exited with code 0", "job | exiting with 0"},
		{"signal", helper("job", "selfkill"), 137, 9, "killed by signal 9", "job | killing myself"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, rec := MustRuntime(t)
			MustLaunch(t, r, "i1", tt.service, helper("other", "sleep"))
			ev := rec.waitFor(t, sim.ServiceExited, "job")
			// other runs on: the event says so.
			want := sim.RuntimeEvent{Instance: "i1", Service: "job", Kind: sim.ServiceExited, ExitCode: tt.wantCode, Signal: tt.wantSignal, Detail: tt.wantDetail, At: testNow, OthersRun: true}
			if ev != want {
				t.Fatalf("event = %+v, want %+v", ev, want)
			}
			// The output is read before the exit is reported.
			logs := logsNow(t, r, "i1")
			if !strings.Contains(logs, tt.wantLog) {
				t.Fatalf("logs lack %q:\n%s", tt.wantLog, logs)
			}
			if tt.name != "signal" && !strings.Contains(logs, "job | to stderr\n") {
				t.Fatalf("stderr not captured:\n%s", logs)
			}
			if _, ok := r.Pids("i1")["job"]; ok {
				t.Fatalf("Pids still lists the exited service: %v", r.Pids("i1"))
			}
			if _, ok := r.Pids("i1")["other"]; !ok {
				t.Fatalf("Pids lacks the running service: %v", r.Pids("i1"))
			}
			// The exit came after the start, and only once.
			var kinds []sim.RuntimeEventKind
			for _, ev := range rec.all() {
				if ev.Service == "job" {
					kinds = append(kinds, ev.Kind)
				}
			}
			if !slices.Equal(kinds, []sim.RuntimeEventKind{sim.ServiceStarted, sim.ServiceExited}) {
				t.Fatalf("events of job = %v", kinds)
			}
			if _, err := r.Stop(context.Background(), "i1", 5*time.Second); err != nil {
				t.Fatal(err)
			}
			if n := len(rec.of(sim.ServiceExited)); n != 1 {
				t.Fatalf("%d exited events after stop, want 1: %+v", n, rec.all())
			}
		})
	}
}

func TestStopSendsSIGTERM(t *testing.T) {
	r, rec := MustRuntime(t)
	MustLaunch(t, r, "i1", helper("app", "graceful"))
	waitLog(t, r, "i1", "app | ready")
	pid := r.Pids("i1")["app"]
	if pid == 0 {
		t.Fatalf("no pid: %v", r.Pids("i1"))
	}
	rep, err := r.Stop(context.Background(), "i1", waitLimit)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Killed) != 0 {
		t.Errorf("a job that exited on SIGTERM is reported killed: %+v", rep)
	}
	if alive(pid) {
		t.Fatalf("pid %d still alive after stop", pid)
	}
	if logs := logsNow(t, r, "i1"); !strings.Contains(logs, "app | got SIGTERM, exiting\n") {
		t.Fatalf("process did not get SIGTERM:\n%s", logs)
	}
	if evs := rec.of(sim.ServiceExited); len(evs) != 0 {
		t.Fatalf("stop reported exits: %+v", evs)
	}
	if pids := r.Pids("i1"); pids != nil {
		t.Fatalf("stopped instance still has pids %v", pids)
	}
}

func TestStopKillsAfterGrace(t *testing.T) {
	r, _ := MustRuntime(t)
	MustLaunch(t, r, "i1", helper("app", "stubborn"))
	waitLog(t, r, "i1", "app | ready")
	pid := r.Pids("i1")["app"]
	rep, err := r.Stop(context.Background(), "i1", 100*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	// A rollback's record says the target ignored SIGTERM (issue 29 item 1).
	if len(rep.Killed) != 1 || rep.Killed[0] != "app" {
		t.Errorf("stop report %+v, want app killed after the grace", rep)
	}
	if alive(pid) {
		t.Fatalf("pid %d still alive after stop", pid)
	}
	if logs := logsNow(t, r, "i1"); !strings.Contains(logs, "app | ignoring SIGTERM\n") {
		t.Fatalf("process did not get SIGTERM first:\n%s", logs)
	}
}

func TestStopSignalsProcessGroup(t *testing.T) {
	tests := []struct {
		name       string
		grandchild string
		grace      time.Duration
		wantLog    string
	}{
		// The leader dies of SIGTERM at once, like the go tool under
		// `go run`; the stop still waits for its child's graceful exit.
		{"graceful child", "slowstop", waitLimit, "app | grandchild stopped\n"},
		{"stubborn child", "stubborn", 100 * time.Millisecond, "app | ignoring SIGTERM\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, _ := MustRuntime(t)
			MustLaunch(t, r, "i1", helper("app", "parent", tt.grandchild))
			logs := waitLog(t, r, "i1", "app | ready")
			_, rest, _ := strings.Cut(logs, "app | grandchild ")
			gpid, err := strconv.Atoi(strings.Fields(rest)[0])
			if err != nil {
				t.Fatalf("no grandchild pid in logs:\n%s", logs)
			}
			pid := r.Pids("i1")["app"]
			if _, err := r.Stop(context.Background(), "i1", tt.grace); err != nil {
				t.Fatal(err)
			}
			if alive(pid) || alive(gpid) {
				t.Fatalf("after stop: leader %d alive %v, grandchild %d alive %v", pid, alive(pid), gpid, alive(gpid))
			}
			if logs := logsNow(t, r, "i1"); !strings.Contains(logs, tt.wantLog) {
				t.Fatalf("logs lack %q:\n%s", tt.wantLog, logs)
			}
		})
	}
}

func TestDependsOnOrder(t *testing.T) {
	r, rec := MustRuntime(t)
	// Listed backwards so spec order cannot pass for dependency order.
	MustLaunch(t, r, "i1",
		dependsOn(helper("web", "sleep"), sim.Dependency{Service: "api", Condition: "service_started"}),
		dependsOn(helper("api", "sleep"),
			sim.Dependency{Service: "init", Condition: "service_completed_successfully"},
			sim.Dependency{Service: "db", Condition: "service_healthy"}),
		dependsOn(helper("init", "exit", "0"), sim.Dependency{Service: "db", Condition: "service_healthy"}),
		helper("db", "sleep"),
	)
	var order []string
	for _, ev := range rec.of(sim.ServiceStarted) {
		order = append(order, ev.Service)
	}
	if want := []string{"db", "init", "api", "web"}; !slices.Equal(order, want) {
		t.Fatalf("start order = %v, want %v", order, want)
	}
	if pids := r.Pids("i1"); len(pids) != 3 {
		t.Fatalf("pids = %v, want db, api and web", pids)
	}
}

func TestDependsOnFailedCompletion(t *testing.T) {
	r, rec := MustRuntime(t)
	err := r.Prepare(context.Background(), &sim.LaunchSpec{InstanceID: "i1", Services: []sim.ServiceSpec{
		helper("db", "sleep"),
		dependsOn(helper("init", "exit", "1"), sim.Dependency{Service: "db"}),
		dependsOn(helper("api", "sleep"), sim.Dependency{Service: "init", Condition: "service_completed_successfully"}),
	}})
	if err != nil {
		t.Fatal(err)
	}
	err = r.Start(context.Background(), "i1")
	wantCode(t, err, sim.EUnprocessable)
	if want := `service "api" depends on "init" completing successfully, but init exited with code 1`; err.Error() != want {
		t.Fatalf("error = %q, want %q", err, want)
	}
	for _, ev := range rec.of(sim.ServiceStarted) {
		if ev.Service == "api" {
			t.Fatal("api started although init failed")
		}
	}
	if pids := r.Pids("i1"); len(pids) != 0 {
		t.Fatalf("a failed start left processes: %v", pids)
	}
	// What the failed run printed is readable, also after the stop.
	if logs := logsNow(t, r, "i1"); !strings.Contains(logs, "init | exiting with 1") {
		t.Fatalf("logs:\n%s", logs)
	}
	if _, err := r.Stop(context.Background(), "i1", time.Second); err != nil {
		t.Fatal(err)
	}
	if logs := logsNow(t, r, "i1"); !strings.Contains(logs, "init | exiting with 1") {
		t.Fatalf("logs after stop:\n%s", logs)
	}
}

func TestUnknownAndPreparedInstances(t *testing.T) {
	r, _ := MustRuntime(t)
	ctx := context.Background()
	if _, err := r.Stop(ctx, "nope", time.Second); err != nil {
		t.Fatalf("stop unknown: %v", err)
	}
	wantCode(t, r.Logs(ctx, "nope", false, &bytes.Buffer{}), sim.ENotFound)
	wantCode(t, r.Start(ctx, "nope"), sim.ENotFound)
	if r.Pids("nope") != nil {
		t.Fatal("pids of an unknown instance")
	}

	if err := r.Prepare(ctx, &sim.LaunchSpec{InstanceID: "i1", Services: []sim.ServiceSpec{helper("a", "sleep")}}); err != nil {
		t.Fatal(err)
	}
	if logs := logsNow(t, r, "i1"); logs != "" {
		t.Fatalf("logs of a prepared instance: %q", logs)
	}
	if _, err := r.Stop(ctx, "i1", time.Second); err != nil {
		t.Fatalf("stop prepared: %v", err)
	}
	wantCode(t, r.Start(ctx, "i1"), sim.ENotFound)
	wantCode(t, r.Logs(ctx, "i1", false, &bytes.Buffer{}), sim.ENotFound)

	MustLaunch(t, r, "i2", helper("a", "sleep"))
	wantCode(t, r.Start(ctx, "i2"), sim.EConflict)
}

// waitGoroutines waits until no more than n goroutines run.
func waitGoroutines(tb testing.TB, n int) {
	tb.Helper()
	deadline := time.Now().Add(waitLimit)
	for runtime.NumGoroutine() > n {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			tb.Fatalf("%d goroutines, want at most %d:\n%s", runtime.NumGoroutine(), n, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestCloseStopsEverything(t *testing.T) {
	before := runtime.NumGoroutine()
	r, rec := MustRuntime(t)
	MustLaunch(t, r, "i1", helper("app", "graceful"), helper("stubborn", "stubborn"), helper("parent", "parent", "stubborn"))
	MustLaunch(t, r, "i2", helper("tick", "tick"), helper("quick", "exit", "0"))
	if err := r.Prepare(context.Background(), &sim.LaunchSpec{InstanceID: "i3", Services: []sim.ServiceSpec{helper("a", "sleep")}}); err != nil {
		t.Fatal(err)
	}
	waitLog(t, r, "i1", "stubborn | ready")
	logs := waitLog(t, r, "i1", "parent | ready")
	_, rest, _ := strings.Cut(logs, "parent | grandchild ")
	gpid, _ := strconv.Atoi(strings.Fields(rest)[0])
	rec.waitFor(t, sim.ServiceExited, "quick")
	var pids []int
	for _, id := range []string{"i1", "i2"} {
		for _, pid := range r.Pids(id) {
			pids = append(pids, pid)
		}
	}
	pids = append(pids, gpid)
	follow := make(chan error, 1)
	go func() { follow <- r.Logs(context.Background(), "i2", true, &bytes.Buffer{}) }()

	if err := r.Close(context.Background(), false); err != nil {
		t.Fatal(err)
	}
	for _, pid := range pids {
		if alive(pid) {
			t.Errorf("pid %d alive after close", pid)
		}
	}
	if err := <-follow; err != nil {
		t.Fatalf("follow: %v", err)
	}
	waitGoroutines(t, before)
	wantCode(t, r.Prepare(context.Background(), &sim.LaunchSpec{InstanceID: "i4"}), sim.EUnavailable)
	wantCode(t, r.Start(context.Background(), "i3"), sim.EUnavailable)
	if err := r.Close(context.Background(), false); err != nil {
		t.Fatalf("second close: %v", err)
	}
}

func TestCloseKeepLeavesProcessesRunning(t *testing.T) {
	before := runtime.NumGoroutine()
	r, _ := MustRuntime(t)
	MustLaunch(t, r, "i1", helper("app", "tick"))
	waitLog(t, r, "i1", "app | tick 3\n")
	pid := r.Pids("i1")["app"]
	t.Cleanup(func() {
		syscall.Kill(-pid, syscall.SIGKILL)
		var ws syscall.WaitStatus
		syscall.Wait4(pid, &ws, 0, nil)
	})
	if err := r.Close(context.Background(), true); err != nil {
		t.Fatal(err)
	}
	waitGoroutines(t, before)
	// Still running and still able to write its output (no SIGPIPE).
	time.Sleep(100 * time.Millisecond)
	if !alive(pid) {
		t.Fatalf("pid %d died although Close kept it", pid)
	}
}

// TestAServiceThatExitsAtOnceLeavesTheOthersStarting (issue 34 round 8):
// a sidecar that exits 0 at once, before a service that waits for it to
// start has a process, made its exit look like the instance's last one;
// the stray sweep then killed that service as it started.
func TestAServiceThatExitsAtOnceLeavesTheOthersStarting(t *testing.T) {
	r, rec := MustRuntime(t)
	MustLaunch(t, r, "i1",
		helper("side", "exit", "0"),
		dependsOn(helper("app", "sleep"), sim.Dependency{Service: "side"}))
	time.Sleep(500 * time.Millisecond)
	for _, ev := range rec.of(sim.ServiceExited) {
		if ev.Service == "app" {
			t.Fatalf("app exited (%s) when side ended its work", ev.Detail)
		}
	}
	if pid, ok := r.Pids("i1")["app"]; !ok || !alive(pid) {
		t.Fatalf("app is not running: pids %v", r.Pids("i1"))
	}
}

// The rule under that test, without its race: while Start starts the
// services, one without a process yet is live.
func TestAServiceNotStartedYetIsLiveWhileStarting(t *testing.T) {
	exited := &proc{decided: true}
	side, app := &service{name: "side"}, &service{name: "app"}
	side.p.Store(exited)
	inst := &instance{services: []*service{side, app}}
	if othersLive(inst, exited) {
		t.Fatal("othersLive with nothing else started and the start over")
	}
	inst.starting.Store(true)
	if !othersLive(inst, exited) {
		t.Fatal("a service about to be started is not live while the instance starts")
	}
}
