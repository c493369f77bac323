package web_test

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/normsim/normsim/internal/testenv"
	"github.com/normsim/normsim/normsimtest"
	"github.com/normsim/normsim/sim"
	"github.com/normsim/normsim/web"
)

func TestHostCheckRefusesOtherNames(t *testing.T) {
	for _, tc := range []struct {
		addr, host string
		ok         bool
	}{
		{"127.0.0.1:7788", "127.0.0.1:7788", true},
		{"127.0.0.1:7788", "localhost:7788", true},
		{"127.0.0.1:7788", "LOCALHOST:7788", true},
		{"127.0.0.1:7788", "[::1]:7788", true},
		{"127.0.0.1:7788", "localhost", true},
		{"127.0.0.1:7788", "evil.example:7788", false}, // DNS rebinding
		{"127.0.0.1:7788", "127.0.0.1.nip.io:7788", false},
		{"127.0.0.1:7788", "192.168.1.5:7788", false},
		{"127.0.0.1:7788", "", false},
		{"192.168.1.5:7788", "192.168.1.5:7788", true}, // bound there on purpose
		{"192.168.1.5:7788", "evil.example:7788", false},
		{"0.0.0.0:7788", "10.1.2.3:7788", true},    // every interface: addresses yes,
		{"0.0.0.0:7788", "devbox.lan:7788", false}, // names no
		// Issue 34 round 6 (F8): a port is digits; any port, as a port
		// forward may change it.
		{"127.0.0.1:7788", "127.0.0.1:7788.evil.com", false},
		{"127.0.0.1:7788", "localhost:+7788", false},
		{"127.0.0.1:7788", "localhost:99999", false},
		{"127.0.0.1:7788", "localhost:17788", true},
	} {
		s := web.New(web.Config{Service: newFake(), Addr: tc.addr})
		for _, path := range []string{"/", "/api/v1/nodes"} {
			req := httptest.NewRequest(http.MethodGet, path, nil)
			req.Host = tc.host
			rec := httptest.NewRecorder()
			s.ServeHTTP(rec, req)
			r := response{Status: rec.Code, Header: rec.Header(), Body: rec.Body.String()}
			if tc.ok {
				if r.Status != http.StatusOK {
					t.Errorf("bound %s, Host %q, GET %s = %d, want 200", tc.addr, tc.host, path, r.Status)
				}
				continue
			}
			if r.Status != http.StatusForbidden {
				t.Errorf("bound %s, Host %q, GET %s = %d, want 403", tc.addr, tc.host, path, r.Status)
				continue
			}
			if path == "/" {
				// A page for the browser, with no CSRF token: whoever made
				// the request may read the answer.
				mustContain(t, r, "HOST_REFUSED", "is not this normsim's address", "DNS")
				mustNotContain(t, r, `name="csrf-token"`, `name="csrf"`)
			} else if code, msg := apiError(t, r); code != "HOST_REFUSED" || !strings.Contains(msg, "use localhost or "+tc.addr) {
				t.Errorf("API refusal = %s %q", code, msg)
			}
		}
	}
}

func TestFormsNeedSameOriginAndACSRFToken(t *testing.T) {
	f := newFake()
	f.add(sim.Instance{ID: "i1", Node: "a", Template: "counter", Runtime: sim.RuntimeProcess, State: sim.InstanceRunning, Connected: true})
	s := newServer(t, f, nil)
	good := csrfToken(t, s, "/")
	other := web.New(web.Config{Service: f, Addr: host})
	foreign := csrfToken(t, other, "/") // signed by another run's key

	send := func(path string, form url.Values, hdr map[string]string) response {
		req := httptest.NewRequest(http.MethodPost, path, strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		return do(t, s, req)
	}
	same := map[string]string{"Origin": "http://" + host, "Sec-Fetch-Site": "same-origin"}
	launch := url.Values{"template": {"counter"}, "node": {"a"}}
	with := func(tok string) url.Values {
		v := url.Values{"csrf": {tok}}
		for k, vs := range launch {
			v[k] = vs
		}
		return v
	}
	for _, tc := range []struct {
		name string
		path string
		form url.Values
		hdr  map[string]string
		code string
		says string
	}{
		{"no Origin", "/ui/instances", with(good), map[string]string{}, "ORIGIN_REFUSED", "the request has no Origin header"},
		{"foreign Origin", "/ui/instances", with(good), map[string]string{"Origin": "http://evil.example"}, "ORIGIN_REFUSED", "origin http://evil.example may not change this normsim"},
		{"Origin of another port", "/ui/instances", with(good), map[string]string{"Origin": "http://127.0.0.1:9999"}, "ORIGIN_REFUSED", "may not change this normsim"},
		{"null Origin", "/ui/instances", with(good), map[string]string{"Origin": "null"}, "ORIGIN_REFUSED", "origin null"},
		{"cross-site fetch", "/ui/instances", with(good), map[string]string{"Origin": "http://" + host, "Sec-Fetch-Site": "cross-site"}, "ORIGIN_REFUSED", "cross-site requests"},
		{"no token", "/ui/instances", launch, same, "CSRF_REFUSED", "the form carries no CSRF token"},
		{"garbage token", "/ui/instances", with("abc"), same, "CSRF_REFUSED", "invalid or expired"},
		{"forged signature", "/ui/instances", with(strings.Split(good, ".")[0] + ".AAAA"), same, "CSRF_REFUSED", "invalid or expired"},
		{"token of another run", "/ui/instances", with(foreign), same, "CSRF_REFUSED", "normsim may have restarted"},
		{"migrate without token", "/ui/instances/i1/migrate", url.Values{"strategy": {"handover"}}, same, "CSRF_REFUSED", "no CSRF token"},
		{"stop from another origin", "/ui/instances/i1/stop", url.Values{"csrf": {good}}, map[string]string{"Origin": "http://evil.example"}, "ORIGIN_REFUSED", "may not change"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := send(tc.path, tc.form, tc.hdr)
			if r.Status != http.StatusForbidden {
				t.Fatalf("status %d, want 403\n%s", r.Status, r.Body)
			}
			mustContain(t, r, tc.code, tc.says)
			mustNotContain(t, r, `name="csrf"`)
		})
	}
	if len(f.launched)+len(f.migrated)+len(f.stopped) != 0 {
		t.Fatalf("a refused request reached the service: %v %v %v", f.launched, f.migrated, f.stopped)
	}

	// The same requests with a valid token from this server pass.
	if r := send("/ui/instances", with(good), same); r.Status != http.StatusSeeOther {
		t.Fatalf("valid launch = %d\n%s", r.Status, r.Body)
	}
	if r := send("/ui/instances/i1/migrate", url.Values{"csrf": {good}, "strategy": {"handover"}}, same); r.Status != http.StatusSeeOther {
		t.Fatalf("valid migrate = %d\n%s", r.Status, r.Body)
	}
	// Origin alone suffices (Sec-Fetch-Site is optional).
	if r := send("/ui/instances/i1/stop", url.Values{"csrf": {good}}, map[string]string{"Origin": "http://" + host}); r.Status != http.StatusSeeOther {
		t.Fatalf("valid stop = %d\n%s", r.Status, r.Body)
	}
}

func TestAPIRefusesForeignOriginsToo(t *testing.T) {
	s := newServer(t, newFake(), nil)
	req := httptest.NewRequest(http.MethodPost, "/api/v1/instances", strings.NewReader(`{"template":"counter","node":"a"}`))
	req.Header.Set("Origin", "http://evil.example")
	r := do(t, s, req)
	if code, _ := apiError(t, r); r.Status != http.StatusForbidden || code != "ORIGIN_REFUSED" {
		t.Fatalf("API POST from a foreign origin = %d %s", r.Status, code)
	}
	// The CLI sends no Origin and needs no token.
	req = httptest.NewRequest(http.MethodPost, "/api/v1/instances", strings.NewReader(`{"template":"counter","node":"a"}`))
	if r := do(t, s, req); r.Status != http.StatusCreated {
		t.Fatalf("API POST from the CLI = %d %s", r.Status, r.Body)
	}
}

// TestTokensNeverLeak runs the whole flow of a real sim with debug logging
// and checks a process instance's token appears in no page and no log line.
func TestTokensNeverLeak(t *testing.T) {
	var logs testenv.SyncBuffer
	s := startSim(t, normsimtest.Options{Runtime: sim.RuntimeExternal,
		Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	h := s.Main.Web
	tok := csrfToken(t, h, "/")
	r := post(t, h, "/ui/instances", url.Values{"csrf": {tok}, "template": {"counter"}, "node": {"a"}, "runtime": {"process"}})
	if r.Status != http.StatusSeeOther {
		t.Fatalf("launch = %d\n%s", r.Status, r.Body)
	}
	id := strings.TrimPrefix(r.Header.Get("Location"), "/instances/")
	full, err := s.Main.Manager.Instance(t.Context(), id)
	if err != nil || full.Token == "" {
		t.Fatalf("instance %s: %v (token %q)", id, err, full.Token)
	}
	post(t, h, "/ui/instances/"+id+"/migrate", url.Values{"csrf": {tok}, "strategy": {"overlap"}})
	pages := []string{"/", "/instances/" + id, "/migrations", "/api/v1/instances", "/api/v1/instances/" + id}
	for _, p := range pages {
		if r := get(t, h, p); strings.Contains(r.Body, full.Token) {
			t.Errorf("GET %s shows the token of a process instance", p)
		}
	}
	// An external instance is the one place the token is shown.
	ext := s.Launch(t, sim.LaunchRequest{Template: "counter", Node: "a", Runtime: sim.RuntimeExternal})
	extFull, _ := s.Main.Manager.Instance(t.Context(), ext.ID)
	if r := get(t, h, "/instances/"+ext.ID); !strings.Contains(r.Body, extFull.Token) {
		t.Errorf("the external instance's page does not show its token")
	}
	s.Main.Manager.Stop(t.Context(), id)
	time.Sleep(50 * time.Millisecond)
	for _, secret := range []string{full.Token, extFull.Token} {
		if strings.Contains(logs.String(), secret) {
			t.Errorf("a token is in the logs:\n%s", logs.String())
		}
	}
}
