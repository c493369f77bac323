package web_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/normsim/normsim/web"
)

// TestAQueryParameterAnEndpointDoesNotReadIsRefused (round 12): a
// misspelt parameter (?limt=5) was ignored, so the answer was the whole
// list and looked right; a parameter given twice took the first. Both are
// now a 400 that names the parameter and what the endpoint takes, and the
// parameters an endpoint does read still work.
func TestAQueryParameterAnEndpointDoesNotReadIsRefused(t *testing.T) {
	srv := httptest.NewServer(web.New(web.Config{Service: newFake(), Addr: host}))
	defer srv.Close()
	for _, c := range []struct{ method, target, want string }{
		{"GET", "/api/v1/instances?limt=5", `GET /api/v1/instances has no query parameter \"limt\"; it takes node, limit, offset`},
		{"GET", "/api/v1/instances?limit=5&limit=6", `limit: given 2 times; give it once`},
		{"GET", "/api/v1/nodes?verbose=1", `GET /api/v1/nodes has no query parameter \"verbose\"; it takes no query parameters`},
		{"GET", "/api/v1/migrations?State=failed", `has no query parameter \"State\"; it takes job, state, limit, offset`},
		{"DELETE", "/api/v1/instances/x?force=true", `has no query parameter \"force\"; it takes stopped`},
		{"GET", "/api/v1/instances?node=%zz", `is not a URL query`},
	} {
		req, _ := http.NewRequest(c.method, srv.URL+c.target, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), c.want) || !json.Valid(body) {
			t.Errorf("%s %s: %d %s; want 400 with %s", c.method, c.target, resp.StatusCode, body, c.want)
		}
	}
	for _, target := range []string{
		"/api/v1/instances?node=a&limit=5&offset=0",
		"/api/v1/instances?",
		"/api/v1/migrations?state=failed&limit=1",
		"/api/v1/nodes",
	} {
		resp, err := http.Get(srv.URL + target)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s: %d; want 200", target, resp.StatusCode)
		}
	}
}
