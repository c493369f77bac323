package apiclient_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/normsim/normsim/apiclient"
	"github.com/normsim/normsim/sim"
)

// fakeSim is a scripted normsim API: each route answers with its func,
// and every request is logged as "METHOD path?query" with the time it
// came.
type fakeSim struct {
	t  *testing.T
	mu sync.Mutex
	// log is every request, in order; at the time each came.
	log []string
	at  []time.Time
	// migrate answers the n-th (from 1) POST .../migrate: a migration,
	// or a refusal as status and code.
	migrate func(n int) (status int, code string, m *sim.Migration)
	// instance answers GET /api/v1/instances/{id}, with the query.
	instance func(n int, q string) sim.Instance
	// migration answers GET /api/v1/migrations/{id}; nil: never there.
	migration func(n int, q string) sim.Migration
	// running lists the running migrations (GET /api/v1/migrations).
	running []sim.Migration
	// remove answers the n-th DELETE: a status and code (0: 204).
	remove func(n int, q string) (int, string)
	nodes  []sim.NodeView
	counts map[string]int
	// message is every refusal's message; default "refused".
	message string
}

func newFakeSim(t *testing.T) (*fakeSim, apiclient.Driver) {
	f := &fakeSim{t: t, counts: map[string]int{},
		nodes: []sim.NodeView{{Name: "a", Socket: &sim.SocketView{URL: "ws://127.0.0.1:1"}}, {Name: "b"}}}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	return f, apiclient.Driver{C: apiclient.New(srv.URL, nil)}
}

func refuse(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]any{"error": map[string]string{"code": code, "message": msg}})
}

func (f *fakeSim) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	line := r.Method + " " + r.URL.Path
	if r.URL.RawQuery != "" {
		line += "?" + r.URL.RawQuery
	}
	f.log = append(f.log, line)
	f.at = append(f.at, time.Now())
	route := r.Method + " " + r.URL.Path
	switch {
	case strings.HasSuffix(r.URL.Path, "/migrate"):
		route = "migrate"
	case r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/api/v1/instances/"):
		route = "instance"
	case r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/api/v1/migrations/"):
		route = "migration"
	case r.Method == http.MethodDelete:
		route = "delete"
	}
	f.counts[route]++
	n := f.counts[route]
	f.mu.Unlock()
	q := r.URL.RawQuery
	enc := json.NewEncoder(w)
	switch route {
	case "POST /api/v1/instances":
		var req sim.LaunchRequest
		json.NewDecoder(r.Body).Decode(&req)
		w.WriteHeader(http.StatusCreated)
		enc.Encode(sim.Instance{ID: "i1", JobID: "job-1", Node: req.Node, State: sim.InstanceStarting})
	case "GET /api/v1/nodes":
		enc.Encode(f.nodes)
	case "migrate":
		status, code, m := f.migrate(n)
		if status >= 300 {
			msg := f.message
			if msg == "" {
				msg = "refused"
			}
			refuse(w, status, code, msg)
			return
		}
		w.WriteHeader(status)
		enc.Encode(m)
	case "instance":
		if f.instance == nil {
			refuse(w, http.StatusNotFound, sim.ENotFound, `instance "i1" not found`)
			return
		}
		in := f.instance(n, q)
		if strings.Contains(q, "wait=") {
			// A server that waits: it answers at once when until holds,
			// else after (a share of) the wait asked for.
			wait, _ := time.ParseDuration(r.URL.Query().Get("wait"))
			if !sim.Until(r.URL.Query().Get("until")).Holds(in) && !in.State.Terminal() {
				time.Sleep(min(wait, 30*time.Millisecond))
			}
		}
		enc.Encode(in)
	case "migration":
		if f.migration == nil {
			refuse(w, http.StatusNotFound, sim.ENotFound, "migration not found")
			return
		}
		m := f.migration(n, q)
		if wait, _ := time.ParseDuration(r.URL.Query().Get("wait")); wait > 0 && !m.State.Ended() {
			time.Sleep(min(wait, 30*time.Millisecond))
		}
		enc.Encode(m)
	case "GET /api/v1/migrations":
		enc.Encode(f.running)
	case "delete":
		status, code := http.StatusNoContent, ""
		if f.remove != nil {
			if s, c := f.remove(n, q); s != 0 {
				status, code = s, c
			}
		}
		if status >= 300 {
			refuse(w, status, code, "refused")
			return
		}
		w.WriteHeader(status)
	default:
		http.NotFound(w, r)
	}
}

// requests are the logged requests that start with prefix.
func (f *fakeSim) requests(prefix string) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, l := range f.log {
		if strings.HasPrefix(l, prefix) {
			out = append(out, l)
		}
	}
	return out
}

var started = &sim.Migration{ID: "m1", State: sim.MigrationRunning, Phase: "get-state"}

// TestMigrateAsksAgainOnlyOnNotConnected: the retry policy is keyed on the
// code. NOT_CONNECTED is asked again once the source is connected, with
// the server waiting for that; every other refusal is the answer, whatever
// its message says, and so is a request that got no answer.
func TestMigrateAsksAgainOnlyOnNotConnected(t *testing.T) {
	t.Run("NOT_CONNECTED twice, then accepted", func(t *testing.T) {
		f, d := newFakeSim(t)
		d.Retry = apiclient.DefaultRetry
		f.migrate = func(n int) (int, string, *sim.Migration) {
			if n <= 2 {
				return http.StatusUnprocessableEntity, sim.ENotConnected, nil
			}
			return http.StatusAccepted, "", started
		}
		f.instance = func(int, string) sim.Instance {
			return sim.Instance{ID: "i1", State: sim.InstanceRunning, Connected: true}
		}
		m, err := d.Migrate(context.Background(), "i1", sim.MigrateRequest{Strategy: "handover"})
		if err != nil || m.ID != "m1" {
			t.Fatalf("Migrate = %+v, %v", m, err)
		}
		got := strings.Join(f.requests(""), "\n")
		want := strings.Join([]string{
			"POST /api/v1/instances/i1/migrate",
			"GET /api/v1/instances/i1?until=connected&wait=20s",
			"POST /api/v1/instances/i1/migrate",
			"GET /api/v1/instances/i1?until=connected&wait=20s",
			"POST /api/v1/instances/i1/migrate",
		}, "\n")
		if got != want {
			t.Fatalf("requests\n%s\nwant\n%s", got, want)
		}
		// 50 ms after the first refusal, 100 ms after the second.
		f.mu.Lock()
		var posts []time.Time
		for i, l := range f.log {
			if strings.HasPrefix(l, "POST") {
				posts = append(posts, f.at[i])
			}
		}
		f.mu.Unlock()
		if d1, d2 := posts[1].Sub(posts[0]), posts[2].Sub(posts[1]); d1 < 50*time.Millisecond || d2 < 100*time.Millisecond {
			t.Errorf("asked again after %v and %v, want at least 50 ms and 100 ms", d1, d2)
		}
	})
	for _, tt := range []struct {
		name   string
		status int
		code   string
	}{
		{"422 UNPROCESSABLE", http.StatusUnprocessableEntity, sim.EUnprocessable},
		{"409 CONFLICT", http.StatusConflict, sim.EConflict},
		{"404 NOT_FOUND", http.StatusNotFound, sim.ENotFound},
		{"503 UNAVAILABLE", http.StatusServiceUnavailable, sim.EUnavailable},
		{"400 INVALID_INPUT", http.StatusBadRequest, sim.EInvalid},
	} {
		t.Run(tt.name+" is the answer", func(t *testing.T) {
			f, d := newFakeSim(t)
			d.Retry = apiclient.DefaultRetry
			f.migrate = func(int) (int, string, *sim.Migration) { return tt.status, tt.code, nil }
			_, err := d.Migrate(context.Background(), "i1", nil)
			var e *apiclient.Error
			if !errors.As(err, &e) || e.Code != tt.code || e.Status != tt.status {
				t.Fatalf("err = %v, want the refusal", err)
			}
			var retried *apiclient.RetriedError
			if errors.As(err, &retried) {
				t.Errorf("err = %v: asked again", err)
			}
			if got := f.requests(""); len(got) != 1 {
				t.Errorf("requests %q, want the one POST", got)
			}
		})
	}
	t.Run("a message that says not connected is not the code", func(t *testing.T) {
		f, d := newFakeSim(t)
		d.Retry = apiclient.DefaultRetry
		f.migrate = func(int) (int, string, *sim.Migration) {
			return http.StatusUnprocessableEntity, sim.EUnprocessable, nil
		}
		f.message = "handover needs the source connected to its job socket; i1 is not connected"
		f.instance = func(int, string) sim.Instance {
			return sim.Instance{ID: "i1", State: sim.InstanceRunning, Connected: true}
		}
		_, err := d.Migrate(context.Background(), "i1", nil)
		var retried *apiclient.RetriedError
		if err == nil || errors.As(err, &retried) || len(f.requests("")) != 1 {
			t.Fatalf("err = %v after %q", err, f.requests(""))
		}
	})
	t.Run("no answer is not asked again", func(t *testing.T) {
		f, d := newFakeSim(t)
		d.Retry = apiclient.DefaultRetry
		f.migrate = func(int) (int, string, *sim.Migration) { panic(http.ErrAbortHandler) }
		_, err := d.Migrate(context.Background(), "i1", nil)
		var un *apiclient.UnreachableError
		if !errors.As(err, &un) || len(f.requests("POST")) != 1 {
			t.Fatalf("err = %v after %d asks, want unreachable after one", err, len(f.requests("POST")))
		}
	})
	t.Run("the zero Retry asks once", func(t *testing.T) {
		f, d := newFakeSim(t)
		f.migrate = func(int) (int, string, *sim.Migration) { return http.StatusUnprocessableEntity, sim.ENotConnected, nil }
		_, err := d.Migrate(context.Background(), "i1", nil)
		var e *apiclient.Error
		if !errors.As(err, &e) || e.Code != sim.ENotConnected || len(f.requests("")) != 1 {
			t.Fatalf("err = %v; requests %q", err, f.requests(""))
		}
	})
}

// TestMigrateGivesUp: the asks run out, or the source does not connect
// again within the policy's bound, or it ends: the last refusal is
// returned with why the driver stopped.
func TestMigrateGivesUp(t *testing.T) {
	notConnected := func(int) (int, string, *sim.Migration) {
		return http.StatusUnprocessableEntity, sim.ENotConnected, nil
	}
	t.Run("asks run out", func(t *testing.T) {
		f, d := newFakeSim(t)
		d.Retry = apiclient.DefaultRetry
		f.migrate = notConnected
		f.instance = func(int, string) sim.Instance {
			return sim.Instance{ID: "i1", State: sim.InstanceRunning, Connected: true}
		}
		_, err := d.Migrate(context.Background(), "i1", nil)
		var retried *apiclient.RetriedError
		var e *apiclient.Error
		if !errors.As(err, &retried) || retried.Asks != 4 || retried.Why != nil || !errors.As(err, &e) || e.Code != sim.ENotConnected {
			t.Fatalf("err = %v", err)
		}
		if n := len(f.requests("POST")); n != 4 {
			t.Errorf("%d asks, want 4", n)
		}
	})
	t.Run("the source does not connect within the bound", func(t *testing.T) {
		f, d := newFakeSim(t)
		d.Retry = apiclient.Retry{Asks: 4, Within: 300 * time.Millisecond}
		f.migrate = notConnected
		f.instance = func(int, string) sim.Instance { return sim.Instance{ID: "i1", Node: "a", State: sim.InstanceRunning} }
		start := time.Now()
		_, err := d.Migrate(context.Background(), "i1", nil)
		took := time.Since(start)
		var notUp *apiclient.NotUpError
		var e *apiclient.Error
		if !errors.As(err, &notUp) || notUp.Instance == nil || notUp.Instance.State != sim.InstanceRunning || !errors.As(err, &e) || e.Code != sim.ENotConnected {
			t.Fatalf("err = %v, want the refusal and the source not connected", err)
		}
		if took < 300*time.Millisecond || took > 2*time.Second {
			t.Errorf("gave up after %v, want the 300 ms bound", took)
		}
		if n := len(f.requests("POST")); n != 1 {
			t.Errorf("%d asks, want 1", n)
		}
		// Each wait the server is asked for ends before the bound.
		for _, l := range f.requests("GET") {
			if strings.Contains(l, "wait=20s") {
				t.Errorf("asked %s: past the bound", l)
			}
		}
	})
	t.Run("the source ends", func(t *testing.T) {
		f, d := newFakeSim(t)
		d.Retry = apiclient.DefaultRetry
		f.migrate = notConnected
		f.instance = func(int, string) sim.Instance {
			return sim.Instance{ID: "i1", Node: "a", State: sim.InstanceFailed, Error: "exit status 1"}
		}
		_, err := d.Migrate(context.Background(), "i1", nil)
		var ended *apiclient.EndedError
		if !errors.As(err, &ended) || !strings.Contains(err.Error(), "(asked 1 time; then the source did not connect again: instance i1 on a ended (failed) before it was connected: exit status 1)") {
			t.Fatalf("err = %v", err)
		}
	})
}

// TestWaitEnd: the end is waited for up to EndWait, and the last answer
// comes before that (the server is asked to wait no longer), so the
// error says where the migration was.
func TestWaitEnd(t *testing.T) {
	t.Run("still running at the bound", func(t *testing.T) {
		f, d := newFakeSim(t)
		d.EndWait = 300 * time.Millisecond
		f.migration = func(int, string) sim.Migration {
			return sim.Migration{ID: "m1", State: sim.MigrationRunning, Phase: "target-ready"}
		}
		m, err := d.WaitEnd(context.Background(), started, nil)
		var unended *apiclient.UnendedError
		if !errors.As(err, &unended) || m.Phase != "target-ready" || unended.Wait != 300*time.Millisecond ||
			err.Error() != "migration m1 still running in phase target-ready after 300ms" {
			t.Fatalf("WaitEnd = %+v, %v", m, err)
		}
		for _, l := range f.requests("GET") {
			if !strings.Contains(l, "wait=") || strings.Contains(l, "wait=20s") {
				t.Errorf("asked %s, want a wait that ends before the bound", l)
			}
		}
	})
	t.Run("the caller's ctx ends first", func(t *testing.T) {
		f, d := newFakeSim(t)
		f.migration = func(int, string) sim.Migration { return sim.Migration{ID: "m1", State: sim.MigrationRunning} }
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		m, err := d.WaitEnd(ctx, started, nil)
		if !errors.Is(err, context.DeadlineExceeded) || m == nil {
			t.Fatalf("WaitEnd = %+v, %v; want the ctx's error with the migration", m, err)
		}
	})
	t.Run("Fetch says what is asked for", func(t *testing.T) {
		f, d := newFakeSim(t)
		f.migration = func(n int, _ string) sim.Migration {
			m := sim.Migration{ID: "m1", State: sim.MigrationRunning, Events: []sim.MigrationEvent{{Seq: n}}}
			if n%2 == 0 {
				m.State = sim.MigrationCompleted
			}
			return m
		}
		for _, fetch := range []apiclient.Fetch{apiclient.FetchAll, apiclient.FetchTimeline, apiclient.FetchSummary} {
			d.Fetch = fetch
			if _, err := d.WaitEnd(context.Background(), started, nil); err != nil {
				t.Fatal(err)
			}
		}
		d.Fetch = apiclient.FetchSummary
		var seen int
		if _, err := d.WaitEnd(context.Background(), started, func(*sim.Migration) { seen++ }); err != nil || seen != 2 {
			t.Fatalf("each saw %d states: %v", seen, err)
		}
		var qs []string
		for _, l := range f.requests("GET") {
			_, q, _ := strings.Cut(l, "?")
			qs = append(qs, q)
		}
		// The default bound, 2m40.25s, is far off: the server waits its 20 s.
		want := []string{"wait=20s", "wait=20s", "logs=false&wait=20s", "logs=false&wait=20s",
			"events=false&logs=false&wait=20s", "events=false&logs=false&wait=20s",
			"after=0&logs=false&wait=1s", "after=7&logs=false&wait=1s"}
		if strings.Join(qs, " ") != strings.Join(want, " ") {
			t.Errorf("asked\n%q\nwant\n%q", qs, want)
		}
	})
	if got := apiclient.MigrationWait(sim.Timeouts{}); got != 160250*time.Millisecond {
		t.Errorf("MigrationWait of the defaults = %v", got)
	}
}

// TestLaunchUpAndWaitUp: a launch is waited for until it holds; a wait
// for connected on a node without a job socket fails at once; one that
// is not there in time says where it was; Settle catches a job that dies
// right after it got there.
func TestLaunchUpAndWaitUp(t *testing.T) {
	t.Run("connected", func(t *testing.T) {
		f, d := newFakeSim(t)
		f.instance = func(n int, _ string) sim.Instance {
			return sim.Instance{ID: "i1", Node: "a", State: sim.InstanceRunning, Connected: n > 1}
		}
		in, err := d.LaunchUp(context.Background(), sim.LaunchRequest{Template: "counter", Node: "a"}, sim.UntilConnected)
		if err != nil || !in.Connected {
			t.Fatalf("LaunchUp = %+v, %v", in, err)
		}
		want := []string{"POST /api/v1/instances", "GET /api/v1/nodes",
			"GET /api/v1/instances/i1?until=connected&wait=20s", "GET /api/v1/instances/i1?until=connected&wait=20s"}
		if got := f.requests(""); strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("requests\n%q\nwant\n%q", got, want)
		}
	})
	t.Run("no job socket", func(t *testing.T) {
		f, d := newFakeSim(t)
		f.instance = func(int, string) sim.Instance { return sim.Instance{ID: "i1", Node: "b", State: sim.InstanceRunning} }
		in, err := d.LaunchUp(context.Background(), sim.LaunchRequest{Template: "counter", Node: "b"}, sim.UntilConnected)
		var notUp *apiclient.NotUpError
		if !errors.As(err, &notUp) || notUp.NoSocket != "b" || in == nil || in.ID != "i1" {
			t.Fatalf("LaunchUp = %+v, %v", in, err)
		}
		if got := f.requests("GET /api/v1/instances/"); len(got) != 0 {
			t.Errorf("waited: %q", got)
		}
		// Running is what it gets to.
		if _, err := d.WaitUp(context.Background(), "i1", sim.UntilRunning); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("not there in time", func(t *testing.T) {
		f, d := newFakeSim(t)
		d.UpWait = 300 * time.Millisecond
		f.instance = func(int, string) sim.Instance { return sim.Instance{ID: "i1", Node: "a", State: sim.InstanceStarting} }
		in, err := d.WaitUp(context.Background(), "i1", sim.UntilRunning)
		var notUp *apiclient.NotUpError
		if !errors.As(err, &notUp) || in == nil || err.Error() != "instance i1 on a is not running after 300ms: state starting, connected false" {
			t.Fatalf("WaitUp = %+v, %v", in, err)
		}
	})
	t.Run("dies right after", func(t *testing.T) {
		f, d := newFakeSim(t)
		d.Settle = time.Second
		f.instance = func(n int, _ string) sim.Instance {
			if n > 2 {
				return sim.Instance{ID: "i1", Node: "a", State: sim.InstanceFailed, Error: "exit status 2"}
			}
			return sim.Instance{ID: "i1", Node: "a", State: sim.InstanceRunning}
		}
		_, err := d.WaitUp(context.Background(), "i1", sim.UntilRunning)
		var ended *apiclient.EndedError
		if !errors.As(err, &ended) || !ended.Settling || err.Error() != "instance i1 on a ended (failed) right after it was running: exit status 2" {
			t.Fatalf("err = %v", err)
		}
	})
}

// TestRemoveWaitsForTheMigrationThatHoldsIt: a removal refused 409
// CONFLICT waits for the running migration of the instance's job to end,
// server-side, reads the instance again and removes it once more, as it
// is now; one already gone is no error; other refusals are returned.
func TestRemoveWaitsForTheMigrationThatHoldsIt(t *testing.T) {
	f, d := newFakeSim(t)
	f.remove = func(n int, _ string) (int, string) {
		if n == 1 {
			return http.StatusConflict, sim.EConflict
		}
		return 0, ""
	}
	f.running = []sim.Migration{{ID: "m1", JobID: "job-1", State: sim.MigrationRunning}}
	f.migration = func(n int, _ string) sim.Migration {
		if n < 3 {
			return sim.Migration{ID: "m1", State: sim.MigrationRunning}
		}
		return sim.Migration{ID: "m1", State: sim.MigrationCompleted}
	}
	// The source the migration moved the job from is stopped now.
	f.instance = func(int, string) sim.Instance {
		return sim.Instance{ID: "i1", JobID: "job-1", State: sim.InstanceStopped}
	}
	if err := d.Remove(context.Background(), sim.Instance{ID: "i1", JobID: "job-1", State: sim.InstanceRunning}); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"DELETE /api/v1/instances/i1",
		"GET /api/v1/migrations?job=job-1&state=running",
		"GET /api/v1/migrations/m1?events=false&logs=false&wait=20s",
		"GET /api/v1/migrations/m1?events=false&logs=false&wait=20s",
		"GET /api/v1/migrations/m1?events=false&logs=false&wait=20s",
		"GET /api/v1/instances/i1",
		"DELETE /api/v1/instances/i1?stopped=true",
	}
	if got := f.requests(""); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("requests\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	f, d = newFakeSim(t)
	f.remove = func(int, string) (int, string) { return http.StatusNotFound, sim.ENotFound }
	if err := d.Remove(context.Background(), sim.Instance{ID: "i1"}); err != nil {
		t.Errorf("an instance already gone: %v", err)
	}
	f, d = newFakeSim(t)
	f.remove = func(int, string) (int, string) { return http.StatusInternalServerError, sim.EInternal }
	if err := d.Remove(context.Background(), sim.Instance{ID: "i1"}); !apiclient.HasCode(err, sim.EInternal) || len(f.requests("")) != 1 {
		t.Errorf("a 500: %v after %q", err, f.requests(""))
	}
}
