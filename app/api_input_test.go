package app_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/normsim/normsim/app"
	"github.com/normsim/normsim/sim"
)

// apiState is everything a request could change, as the API and the store
// show it.
type apiState struct {
	Instances  []sim.Instance
	Migrations []*sim.Migration
	Events     int
}

func snapshotState(t *testing.T, m *app.Main) apiState {
	t.Helper()
	var st apiState
	getJSON(t, m.URL()+"/api/v1/instances", &st.Instances)
	getJSON(t, m.URL()+"/api/v1/migrations", &st.Migrations)
	m.Manager.Flush()
	evs, err := m.Store.ListEvents(context.Background(), sim.EventFilter{})
	if err != nil {
		t.Fatal(err)
	}
	st.Events = len(evs)
	return st
}

// TestHostileAPIInput sends the API what a broken or hostile client would:
// malformed JSON, unknown fields, the wrong types, trailing data, bodies
// over the 1 MiB limit, JSON nested past any sense, and IDs that name
// nothing or are not IDs at all. Each gets a clear 4xx with a JSON error
// naming the problem, and nothing in the sim changes.
func TestHostileAPIInput(t *testing.T) {
	// Something to change: an instance that could be stopped or migrated.
	m, in := openWithExternalCounter(t)
	// A launch answers while the instance is still starting; the state to
	// keep is the one it settles in.
	for deadline := time.Now().Add(10 * time.Second); in.State != sim.InstanceRunning; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the external instance stayed %s", in.State)
		}
		getJSON(t, m.URL()+"/api/v1/instances/"+url.PathEscape(in.ID), &in)
	}
	before := snapshotState(t, m)

	huge := `{"template":"` + strings.Repeat("x", 2<<20) + `","node":"a"}`
	nested := strings.Repeat("[", 100000) + strings.Repeat("]", 100000)
	inst := "/api/v1/instances/" + url.PathEscape(in.ID)
	tests := []struct {
		name, method, path, body string
		status                   int
		says                     string
	}{
		// Launch.
		{"launch: not JSON", "POST", "/api/v1/instances", `template=counter`, 400, "request body"},
		{"launch: truncated JSON", "POST", "/api/v1/instances", `{"template":"counter"`, 400, "request body"},
		{"launch: empty body", "POST", "/api/v1/instances", ``, 400, "empty"},
		{"launch: an array", "POST", "/api/v1/instances", `[]`, 400, "request body"},
		{"launch: null", "POST", "/api/v1/instances", `null`, 400, ""},
		{"launch: wrong type", "POST", "/api/v1/instances", `{"template":1,"node":"a"}`, 400, "template"},
		{"launch: unknown field", "POST", "/api/v1/instances", `{"template":"counter","node":"a","nodes":"b"}`, 400, `unknown field "nodes"`},
		{"launch: trailing data", "POST", "/api/v1/instances", `{"template":"counter","node":"a"} {}`, 400, "one JSON object"},
		{"launch: over 1 MiB", "POST", "/api/v1/instances", huge, 413, "larger than 1048576 bytes"},
		{"launch: nested past sense", "POST", "/api/v1/instances", nested, 400, "request body"},
		{"launch: params not strings", "POST", "/api/v1/instances", `{"template":"counter","node":"a","params":{"RATE":5}}`, 400, "params"},
		{"launch: unknown template", "POST", "/api/v1/instances", `{"template":"nope","node":"a"}`, 404, "nope"},
		{"launch: unknown node", "POST", "/api/v1/instances", `{"template":"counter","node":"zz"}`, 404, `node "zz"`},
		{"launch: unknown runtime", "POST", "/api/v1/instances", `{"template":"counter","node":"a","runtime":"vm"}`, 422, `runtime "vm"`},
		{"launch: bad parameter", "POST", "/api/v1/instances", `{"template":"counter","node":"a","params":{"RATE":"fast"}}`, 422, "RATE"},
		// Issue 34 round 6 (F5): the last of two was taken silently.
		{"launch: a key twice", "POST", "/api/v1/instances", `{"template":"counter","template":"plain","node":"a"}`, 400, `key "template" appears twice in the body`},
		{"launch: a key twice, spelt apart", "POST", "/api/v1/instances", `{"template":"counter","node":"a","params":{"RATE":"5","R\u0041TE":"9"}}`, 400, `key "RATE" appears twice in params`},

		// Migrate.
		{"migrate: not JSON", "POST", inst + "/migrate", `{to:b}`, 400, "request body"},
		{"migrate: unknown field", "POST", inst + "/migrate", `{"to":"b","strategy":"handover","force":true}`, 400, `unknown field "force"`},
		{"migrate: unknown timeout", "POST", inst + "/migrate", `{"timeouts":{"forever":1}}`, 400, "forever"},
		// Attack round 9 (left open): the refusal named the value, not the field.
		{"migrate: bad timeout", "POST", inst + "/migrate", `{"timeouts":{"state":"10s","stop":"soon"}}`, 400, `timeouts.stop: duration must be milliseconds or a string like "5s"; got "soon"`},
		{"migrate: negative timeout", "POST", inst + "/migrate", `{"timeouts":{"apply":-5}}`, 400, "timeouts.apply: duration must not be negative"},
		{"migrate: bad fault delay", "POST", inst + "/migrate", `{"strategy":"stopThenStart","faults":[{"kind":"stop","side":"source"},{"kind":"pause","side":"source","delay":"a while"}]}`, 400, `faults[1].delay: duration must be`},
		{"migrate: over 1 MiB", "POST", inst + "/migrate", `{"to":"` + strings.Repeat("b", 2<<20) + `"}`, 413, "larger than"},
		{"migrate: unknown strategy", "POST", inst + "/migrate", `{"strategy":"teleport"}`, 422, "teleport"},
		{"migrate: bad fault", "POST", inst + "/migrate", `{"strategy":"stopThenStart","faults":[{"kind":"meteor"}]}`, 422, "faults[0]"},
		{"migrate: a fault's key twice", "POST", inst + "/migrate", `{"strategy":"stopThenStart","faults":[{"kind":"stop","side":"source"},{"kind":"kill","side":"source","kind":"stop"}]}`, 400, `key "kind" appears twice in faults[1]`},
		{"migrate: not connected", "POST", inst + "/migrate", `{}`, 422, "not connected"},
		{"migrate: unknown instance", "POST", "/api/v1/instances/nope/migrate", `{}`, 404, `"nope"`},

		// IDs.
		{"get: unknown instance", "GET", "/api/v1/instances/nope", ``, 404, `"nope"`},
		{"get: escaped slash", "GET", "/api/v1/instances/a%2Fb", ``, 404, ""},
		{"get: NUL in the id", "GET", "/api/v1/instances/a%00b", ``, 404, ""},
		{"get: 10 kB id", "GET", "/api/v1/instances/" + strings.Repeat("i", 10000), ``, 404, ""},
		{"get: traversal", "GET", "/api/v1/instances/..%2F..%2Fetc%2Fpasswd", ``, 404, ""},
		{"stop: unknown instance", "DELETE", "/api/v1/instances/nope", ``, 404, `"nope"`},
		{"logs: unknown instance", "GET", "/api/v1/instances/nope/logs", ``, 404, `"nope"`},
		{"get: unknown migration", "GET", "/api/v1/migrations/mig-nope", ``, 404, ""},
		{"get: unknown template", "GET", "/api/v1/templates/..", ``, 404, ""},
		{"list: bad limit", "GET", "/api/v1/migrations?limit=-1", ``, 400, "limit"},
		{"list: limit not a number", "GET", "/api/v1/migrations?limit=ten", ``, 400, "limit"},
		{"get: logs neither true nor false", "GET", "/api/v1/migrations/mig-nope?logs=maybe", ``, 400, "logs"},
		{"stats: gc neither true nor false", "GET", "/api/v1/stats?gc=maybe", ``, 400, "gc"},
		// Issue 34 round 5c: given empty, they were read as absent.
		{"get: logs given empty", "GET", "/api/v1/migrations/mig-nope?logs=", ``, 400, "logs"},
		{"get: events given empty", "GET", "/api/v1/migrations/mig-nope?events=", ``, 400, "events"},
		{"list: bad offset", "GET", "/api/v1/migrations?offset=-5", ``, 400, "offset: must be a non-negative integer"},
		{"list: unknown state", "GET", "/api/v1/migrations?state=done", ``, 400, `state: must be one of running, completed, refused, aborted, failed; got "done"`},
		{"instances: bad limit", "GET", "/api/v1/instances?limit=1.5", ``, 400, "limit: must be a non-negative integer"},
		{"instances: offset too large", "GET", "/api/v1/instances?offset=99999999999999999999", ``, 400, "offset: 99999999999999999999 is too large"},

		// Methods and routes.
		{"unknown endpoint", "GET", "/api/v1/nope", ``, 404, "no API endpoint"},
		{"wrong method", "PUT", inst, `{}`, 405, "PUT"},
	}
	client := &http.Client{Timeout: 30 * time.Second}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var body io.Reader
			if tt.body != "" {
				body = strings.NewReader(tt.body)
			}
			req, err := http.NewRequest(tt.method, m.URL()+tt.path, body)
			if err != nil {
				t.Fatal(err)
			}
			if tt.body != "" {
				req.Header.Set("Content-Type", "application/json")
			}
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
			var eb struct {
				Error struct{ Code, Message string } `json:"error"`
			}
			if err := json.Unmarshal(data, &eb); err != nil || eb.Error.Code == "" || eb.Error.Message == "" {
				t.Fatalf("%d with a body that is not a JSON error: %.300s", resp.StatusCode, data)
			}
			if resp.StatusCode != tt.status {
				t.Fatalf("status %d (%s: %s), want %d", resp.StatusCode, eb.Error.Code, eb.Error.Message, tt.status)
			}
			if !strings.Contains(eb.Error.Message, tt.says) {
				t.Fatalf("message %q does not say %q", eb.Error.Message, tt.says)
			}
			// A message may quote what was wrong, but never amplify it.
			if len(eb.Error.Message) > 300+len(tt.path) {
				t.Fatalf("a %d-byte message for a %d-byte path and %d-byte body", len(eb.Error.Message), len(tt.path), len(tt.body))
			}
		})
	}

	after := snapshotState(t, m)
	if !reflect.DeepEqual(before, after) {
		t.Fatalf("state changed:\nbefore %+v\nafter  %+v", before, after)
	}
}

func postJSON(t *testing.T, url, body string, out any) int {
	t.Helper()
	resp, err := http.Post(url, "application/json", bytes.NewReader([]byte(body)))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if out != nil {
		json.NewDecoder(resp.Body).Decode(out)
	}
	return resp.StatusCode
}

// TestAPIFieldNamesAreCaseSensitive: the job socket's keys are case
// sensitive (contract §1) and so are the API's, although encoding/json
// alone would match {"Template": ...} to "template".
// Issue 34 round 5c: HEAD answered 405 where GET answers (RFC 9110
// 9.3.2 asks for HEAD wherever GET is): the same status and headers, no
// body.
func TestHeadWhereGetIs(t *testing.T) {
	m := openApp(t, testOptions(t))
	for _, path := range []string{"/api/v1/nodes", "/api/v1/templates", "/api/v1/instances", "/readyz"} {
		get, err := http.Get(m.URL() + path)
		if err != nil {
			t.Fatal(err)
		}
		get.Body.Close()
		head, err := http.Head(m.URL() + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(head.Body)
		head.Body.Close()
		if head.StatusCode != get.StatusCode || head.Header.Get("Content-Type") != get.Header.Get("Content-Type") || len(body) > 0 {
			t.Errorf("HEAD %s: %d %q with %d bytes; GET: %d %q", path, head.StatusCode, head.Header.Get("Content-Type"), len(body), get.StatusCode, get.Header.Get("Content-Type"))
		}
	}
}

func TestAPIFieldNamesAreCaseSensitive(t *testing.T) {
	opts := testOptions(t)
	opts.Runtime = sim.RuntimeExternal
	m := openApp(t, opts)
	if code := postJSON(t, m.URL()+"/api/v1/instances", `{"Template":"counter","Node":"a"}`, nil); code != http.StatusBadRequest {
		t.Fatalf("status %d, want 400 for keys spelled in another case", code)
	}
	var in sim.Instance
	if code := postJSON(t, m.URL()+"/api/v1/instances", `{"template":"counter","node":"a"}`, &in); code != http.StatusCreated {
		t.Fatalf("status %d for a well-spelled launch", code)
	}
	if code := postJSON(t, m.URL()+"/api/v1/instances/"+in.ID+"/migrate", `{"faults":[{"Kind":"kill"}]}`, nil); code != http.StatusBadRequest {
		t.Fatalf("status %d, want 400 for a nested key spelled in another case", code)
	}
}

// A removed instance's record is gone and its history is not: GET of it
// says so and where the history is, as its dashboard page does (issue 34
// round 6, F7: a bare "instance not found" beside logs, events and frames
// that answer 200).
func TestGetOfARemovedInstanceSaysWhereItsHistoryIs(t *testing.T) {
	m, in := openWithExternalCounter(t)
	path := m.URL() + "/api/v1/instances/" + url.PathEscape(in.ID)
	req, _ := http.NewRequest(http.MethodDelete, path, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusNoContent {
		t.Fatalf("DELETE: %v %v", resp, err)
	}
	resp.Body.Close()
	resp, err = http.Get(path)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound || !strings.Contains(string(body), "was removed") || !strings.Contains(string(body), "/events") {
		t.Fatalf("GET of the removed instance = %d %s", resp.StatusCode, body)
	}
	if code := getJSON(t, m.URL()+"/api/v1/instances/nope-123", nil); code != http.StatusNotFound {
		t.Fatalf("GET of an instance that never was = %d", code)
	}
}

// openWithExternalCounter opens a sim on the external runtime with a
// counter launched on node a.
func openWithExternalCounter(t *testing.T) (*app.Main, sim.Instance) {
	t.Helper()
	opts := testOptions(t)
	opts.Runtime = sim.RuntimeExternal
	m := openApp(t, opts)
	var in sim.Instance
	if code := postJSON(t, m.URL()+"/api/v1/instances", `{"template":"counter","node":"a","runtime":"external"}`, &in); code != http.StatusCreated {
		t.Fatalf("launch: %d", code)
	}
	return m, in
}
