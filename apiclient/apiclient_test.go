package apiclient_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/normsim/normsim/apiclient"
	"github.com/normsim/normsim/sim"
)

// migrationServer answers GET /api/v1/migrations/m1 with running until it
// has been asked endAfter times, then completed (never, for endAfter 0).
func migrationServer(t *testing.T, endAfter int64) (*apiclient.Client, *atomic.Int64) {
	var asked atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/v1/migrations/m1" {
			http.NotFound(w, r)
			return
		}
		m := sim.Migration{ID: "m1", State: sim.MigrationRunning, Phase: "get-state"}
		if n := asked.Add(1); endAfter > 0 && n >= endAfter {
			m.State = sim.MigrationCompleted
		}
		json.NewEncoder(w).Encode(m)
	}))
	t.Cleanup(srv.Close)
	return apiclient.New(srv.URL, nil), &asked
}

func TestWaitMigrationUntilItEnds(t *testing.T) {
	c, asked := migrationServer(t, 3)
	var seen []sim.MigrationState
	m, err := c.WaitMigration(context.Background(), "m1", func(m *sim.Migration) { seen = append(seen, m.State) })
	if err != nil || m.State != sim.MigrationCompleted {
		t.Fatalf("WaitMigration = %+v, %v", m, err)
	}
	if len(seen) != 3 || seen[2] != sim.MigrationCompleted || asked.Load() != 3 {
		t.Fatalf("each saw %v after %d requests, want running, running, completed", seen, asked.Load())
	}
}

func TestWaitMigrationGivesUpWithTheLastState(t *testing.T) {
	c, _ := migrationServer(t, 0)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	m, err := c.WaitMigration(ctx, "m1", nil)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want the context's deadline", err)
	}
	if m == nil || m.State != sim.MigrationRunning || m.Phase != "get-state" {
		t.Fatalf("last state = %+v, want the running migration", m)
	}
}

// TestWaitMigrationAsksTheServerToWait: following a migration asks the
// server to answer at its next step (?wait&after, the last seq seen); a
// wait for the end alone asks for the end (?wait without after).
func TestWaitMigrationAsksTheServerToWait(t *testing.T) {
	var asked queryLog
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := asked.add(r)
		m := sim.Migration{ID: "m1", State: sim.MigrationRunning}
		for i := range n {
			m.Events = append(m.Events, sim.MigrationEvent{Seq: i + 1})
		}
		if n%3 == 0 {
			m.State = sim.MigrationCompleted
		}
		json.NewEncoder(w).Encode(m)
	}))
	t.Cleanup(srv.Close)
	c := apiclient.New(srv.URL, nil)
	if _, err := c.WaitMigration(context.Background(), "m1", func(*sim.Migration) {}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.WaitMigrationState(context.Background(), "m1"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.WaitMigrationSummary(context.Background(), "m1"); err != nil {
		t.Fatal(err)
	}
	queries := asked.all()
	want := []string{"after=0&wait=1s", "after=1&wait=1s", "after=2&wait=1s", "logs=false&wait=20s", "logs=false&wait=20s", "logs=false&wait=20s",
		"events=false&logs=false&wait=20s", "events=false&logs=false&wait=20s", "events=false&logs=false&wait=20s"}
	if strings.Join(queries, " ") != strings.Join(want, " ") {
		t.Fatalf("asked\n%q\nwant\n%q", queries, want)
	}
}

func TestWaitMigrationUnknown(t *testing.T) {
	c, _ := migrationServer(t, 0)
	_, err := c.WaitMigration(context.Background(), "nope", nil)
	var apiErr *apiclient.Error
	if !errors.As(err, &apiErr) || apiErr.Status != http.StatusNotFound {
		t.Fatalf("err = %v, want a 404 *apiclient.Error", err)
	}
}

// TestPagesSendTheirQueryAndReadTheTotal: InstancePage and MigrationPage
// ask for the page they are given and read the list's length from
// X-Total-Count; an answer without one is an error that says so.
func TestPagesSendTheirQueryAndReadTheTotal(t *testing.T) {
	var asked []string
	total := "12"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked = append(asked, r.URL.RequestURI())
		if total != "" {
			w.Header().Set("X-Total-Count", total)
		}
		switch r.URL.Path {
		case "/api/v1/instances":
			json.NewEncoder(w).Encode([]sim.Instance{{ID: "i1"}, {ID: "i2"}})
		default:
			json.NewEncoder(w).Encode([]sim.Migration{{ID: "m1"}})
		}
	}))
	defer srv.Close()
	c := apiclient.New(srv.URL, nil)
	ctx := context.Background()
	ip, err := c.InstancePage(ctx, sim.InstanceFilter{Node: "b", Limit: 2, Offset: 4})
	if err != nil || ip.Total != 12 || len(ip.Items) != 2 || ip.Items[1].ID != "i2" {
		t.Fatalf("InstancePage = %+v, %v", ip, err)
	}
	mp, err := c.MigrationPage(ctx, sim.MigrationFilter{JobID: "job-1", State: sim.MigrationCompleted, Limit: 1, Offset: 3})
	if err != nil || mp.Total != 12 || len(mp.Items) != 1 {
		t.Fatalf("MigrationPage = %+v, %v", mp, err)
	}
	if _, err := c.Migrations(ctx, sim.MigrationFilter{Offset: 5}); err != nil {
		t.Fatal(err)
	}
	want := []string{"/api/v1/instances?limit=2&node=b&offset=4", "/api/v1/migrations?job=job-1&limit=1&offset=3&state=completed", "/api/v1/migrations?offset=5"}
	if len(asked) != len(want) {
		t.Fatalf("asked %q, want %q", asked, want)
	}
	for i := range want {
		if asked[i] != want[i] {
			t.Errorf("request %d asked %q, want %q", i, asked[i], want[i])
		}
	}
	total = ""
	if _, err := c.InstancePage(ctx, sim.InstanceFilter{}); err == nil || !strings.Contains(err.Error(), "X-Total-Count") {
		t.Errorf("an answer without X-Total-Count: %v", err)
	}
}

// queryLog records the query of each request a test server answers.
type queryLog struct {
	mu sync.Mutex
	q  []string
}

// add records r's query and says how many have come, r's included.
func (l *queryLog) add(r *http.Request) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.q = append(l.q, r.URL.RawQuery)
	return len(l.q)
}

// all is what was recorded, in order.
func (l *queryLog) all() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.q)
}

// instanceServer answers GET /api/v1/instances/i1 with the states in turn
// (the last one again once they run out), recording each query.
func instanceServer(t *testing.T, states ...sim.Instance) (*apiclient.Client, *[]string) {
	var mu sync.Mutex
	var queries []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/v1/instances/i1" {
			http.NotFound(w, r)
			return
		}
		mu.Lock()
		queries = append(queries, r.URL.RawQuery)
		in := states[min(len(queries), len(states))-1]
		mu.Unlock()
		json.NewEncoder(w).Encode(in)
	}))
	t.Cleanup(srv.Close)
	return apiclient.New(srv.URL, nil), &queries
}

func TestWaitInstanceAsksTheServerToWait(t *testing.T) {
	c, queries := instanceServer(t,
		sim.Instance{ID: "i1", State: sim.InstanceStarting},
		sim.Instance{ID: "i1", State: sim.InstanceRunning},
		sim.Instance{ID: "i1", State: sim.InstanceRunning, Connected: true})
	in, err := c.WaitInstance(context.Background(), "i1", sim.UntilConnected)
	if err != nil || !in.Connected {
		t.Fatalf("WaitInstance = %+v, %v", in, err)
	}
	if len(*queries) != 3 || (*queries)[0] != "until=connected&wait=20s" {
		t.Errorf("queries = %q, want three asking the server to wait until connected", *queries)
	}
}

func TestWaitInstanceThatEnds(t *testing.T) {
	c, _ := instanceServer(t, sim.Instance{ID: "i1", Node: "a", State: sim.InstanceFailed, Error: "exit status 3"})
	_, err := c.WaitInstance(context.Background(), "i1", sim.UntilRunning)
	var ended *apiclient.EndedError
	if !errors.As(err, &ended) || err.Error() != "instance i1 on a ended (failed) before it was running: exit status 3" {
		t.Fatalf("err = %v", err)
	}
}

func TestWaitInstanceGivesUpWithTheLastState(t *testing.T) {
	c, _ := instanceServer(t, sim.Instance{ID: "i1", State: sim.InstanceRunning})
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
	defer cancel()
	in, err := c.WaitInstance(ctx, "i1", sim.UntilConnected)
	if !errors.Is(err, context.DeadlineExceeded) || in == nil || in.State != sim.InstanceRunning {
		t.Fatalf("WaitInstance = %+v, %v; want the running instance and the deadline", in, err)
	}
}
