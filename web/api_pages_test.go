package web_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/normsim/normsim/sim"
)

// TestAPIListsPage: GET /api/v1/instances and /api/v1/migrations take
// limit and offset, answer a JSON array as before, say the whole list's
// length in X-Total-Count, and link the next page while there is one.
// Without them every item is listed, as before paging.
func TestAPIListsPage(t *testing.T) {
	f := newFake()
	now := time.Now()
	for i := range 7 {
		f.add(sim.Instance{ID: fmt.Sprint("i", i), Node: []string{"a", "b"}[i%2], State: sim.InstanceRunning, CreatedAt: now})
		f.addMig(&sim.Migration{ID: fmt.Sprint("m", i), JobID: fmt.Sprint("job-", i%3), State: sim.MigrationCompleted, StartedAt: now})
	}
	s := newServer(t, f, nil)
	ids := func(r response) []string {
		t.Helper()
		if r.Status != http.StatusOK {
			t.Fatalf("status %d: %s", r.Status, r.Body)
		}
		var list []struct{ ID string }
		if err := json.Unmarshal([]byte(r.Body), &list); err != nil {
			t.Fatalf("not a JSON array: %v\n%s", err, r.Body)
		}
		out := []string{}
		for _, x := range list {
			out = append(out, x.ID)
		}
		return out
	}
	for _, tc := range []struct {
		path  string
		want  []string
		total string
		next  string
	}{
		{"/api/v1/instances", []string{"i0", "i1", "i2", "i3", "i4", "i5", "i6"}, "7", ""},
		{"/api/v1/instances?limit=3", []string{"i0", "i1", "i2"}, "7", `</api/v1/instances?limit=3&offset=3>; rel="next"`},
		{"/api/v1/instances?limit=3&offset=3", []string{"i3", "i4", "i5"}, "7", `</api/v1/instances?limit=3&offset=6>; rel="next"`},
		{"/api/v1/instances?limit=3&offset=6", []string{"i6"}, "7", ""},
		{"/api/v1/instances?offset=5", []string{"i5", "i6"}, "7", ""},
		{"/api/v1/instances?offset=70", []string{}, "7", ""},
		{"/api/v1/instances?node=b&limit=2", []string{"i1", "i3"}, "3", `</api/v1/instances?limit=2&node=b&offset=2>; rel="next"`},
		{"/api/v1/instances?limit=0", []string{"i0", "i1", "i2", "i3", "i4", "i5", "i6"}, "7", ""},
		{"/api/v1/migrations", []string{"m0", "m1", "m2", "m3", "m4", "m5", "m6"}, "7", ""},
		{"/api/v1/migrations?limit=2&offset=4", []string{"m4", "m5"}, "7", `</api/v1/migrations?limit=2&offset=6>; rel="next"`},
		{"/api/v1/migrations?job=job-1&limit=1", []string{"m1"}, "2", `</api/v1/migrations?job=job-1&limit=1&offset=1>; rel="next"`},
		{"/api/v1/migrations?state=failed", []string{}, "0", ""},
	} {
		r := get(t, s, tc.path)
		if got := ids(r); !slices.Equal(got, tc.want) {
			t.Errorf("GET %s = %v, want %v", tc.path, got, tc.want)
		}
		if got := r.Header.Get("X-Total-Count"); got != tc.total {
			t.Errorf("GET %s: X-Total-Count %q, want %q", tc.path, got, tc.total)
		}
		if got := r.Header.Get("Link"); got != tc.next {
			t.Errorf("GET %s: Link %q, want %q", tc.path, got, tc.next)
		}
	}
	// The service was asked for the page, not for everything.
	last := f.filters[len(f.filters)-1]
	if last.State != sim.MigrationFailed || last.Limit != 0 {
		t.Errorf("last filter = %+v", last)
	}
	get(t, s, "/api/v1/migrations?limit=2&offset=4")
	if last := f.filters[len(f.filters)-1]; last.Limit != 2 || last.Offset != 4 {
		t.Errorf("the page was not pushed to the service: %+v", last)
	}

	for _, tc := range []struct{ path, says string }{
		{"/api/v1/instances?limit=-1", `limit: must be a non-negative integer; got "-1"`},
		{"/api/v1/instances?offset=x", `offset: must be a non-negative integer; got "x"`},
		{"/api/v1/migrations?offset=1e3", `offset: must be a non-negative integer; got "1e3"`},
		// B7 of round 14: a number too large for a page is one.
		{"/api/v1/instances?limit=99999999999999999999", `limit: 99999999999999999999 is too large; give at most 9223372036854775807`},
		{"/api/v1/migrations?state=ok", `state: must be one of running, completed, refused, aborted, failed; got "ok"`},
	} {
		r := get(t, s, tc.path)
		if code, msg := apiError(t, r); r.Status != http.StatusBadRequest || code != sim.EInvalid || msg != tc.says {
			t.Errorf("GET %s = %d %s %q, want 400 %s %q", tc.path, r.Status, code, msg, sim.EInvalid, tc.says)
		}
	}
}

// B7 of round 14: a body over the API's 1 MiB is 413 Request Entity Too
// Large, with the API's JSON error naming the bound.
func TestABodyOverTheBoundIs413(t *testing.T) {
	s := newServer(t, newFake(), nil)
	body := `{"template":"` + strings.Repeat("x", 2<<20) + `"}`
	r := postJSON(t, s, "/api/v1/instances", body)
	if code, msg := apiError(t, r); r.Status != http.StatusRequestEntityTooLarge || code != sim.EInvalid || !strings.Contains(msg, "larger than 1048576 bytes") {
		t.Fatalf("POST of 2 MiB = %d %s %q, want 413 %s naming the bound", r.Status, code, msg, sim.EInvalid)
	}
}
