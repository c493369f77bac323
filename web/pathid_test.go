package web_test

import (
	"encoding/json"
	"fmt"
	"html"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/normsim/normsim/sim"
)

// oddTemplates are template names with the characters encodeURIComponent
// and url.PathEscape treat differently, or that a path cannot hold raw.
var oddTemplates = []string{
	"a+b", "me@host", "x:y", "$&=", "c,d;e", "!'()*", "with space", "50%", "é", "q?h#f",
}

// jsEncodeURIComponent is JavaScript's encodeURIComponent for valid
// UTF-8: everything but A-Z a-z 0-9 - _ . ! ~ * ' ( ) is percent-encoded
// byte by byte. TestJSEncodeURIComponentMatchesNode holds it to node's.
func jsEncodeURIComponent(s string) string {
	var b strings.Builder
	for _, c := range []byte(s) {
		if 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || strings.IndexByte("-_.!~*'()", c) >= 0 {
			b.WriteByte(c)
			continue
		}
		fmt.Fprintf(&b, "%%%02X", c)
	}
	return b.String()
}

func TestJSEncodeURIComponentMatchesNode(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed; the hand-written encodeURIComponent is checked against known encodings only")
	}
	ids := append([]string{}, oddTemplates...)
	in, _ := json.Marshal(ids)
	out, err := exec.Command(node, "-e", `for (const s of JSON.parse(process.argv[1])) console.log(encodeURIComponent(s))`, string(in)).Output()
	if err != nil {
		t.Fatalf("node: %v", err)
	}
	got := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	if len(got) != len(ids) {
		t.Fatalf("node printed %d lines for %d ids: %q", len(got), len(ids), out)
	}
	for i, id := range ids {
		if want := got[i]; jsEncodeURIComponent(id) != want {
			t.Errorf("encodeURIComponent(%q) = %q, node says %q", id, jsEncodeURIComponent(id), want)
		}
	}
}

func TestJSEncodeURIComponentKnown(t *testing.T) {
	// Written down from the ECMAScript definition, for hosts without node.
	for in, want := range map[string]string{
		"a+b":        "a%2Bb",
		"me@host":    "me%40host",
		"$&=":        "%24%26%3D",
		"c,d;e":      "c%2Cd%3Be",
		"!'()*":      "!'()*",
		"with space": "with%20space",
		"é":          "%C3%A9",
		"q?h#f":      "q%3Fh%23f",
	} {
		if got := jsEncodeURIComponent(in); got != want {
			t.Errorf("encodeURIComponent(%q) = %q, want %q", in, got, want)
		}
	}
}

// oddFake is the fake service holding, for each odd template name, a
// template, an instance and a migration whose ids contain it.
func oddFake() (*fakeService, []string) {
	f := newFake()
	var ids []string
	for _, name := range oddTemplates {
		id := name + "-1a2b3c"
		ids = append(ids, id)
		f.templates = append(f.templates, &sim.Template{Name: name, Path: "/t/" + name, Valid: true, Strategy: sim.StopThenStart})
		f.add(sim.Instance{ID: id, JobID: "job-" + id, Node: "a", Template: name, Runtime: sim.RuntimeExternal, State: sim.InstanceRunning})
		f.addMig(&sim.Migration{ID: "mig-" + id, JobID: "job-" + id, Strategy: sim.StopThenStart, State: sim.MigrationCompleted, StartedAt: time.Now(),
			Source: sim.MigrationEndpoint{Instance: id, Node: "a"}, Target: sim.MigrationEndpoint{Node: "b"}})
	}
	return f, ids
}

// TestIDsInPathsEitherEncoding: every route that takes an id finds it
// whether the client encoded it with url.PathEscape (the Go client, the
// CLI) or with JavaScript's encodeURIComponent.
func TestIDsInPathsEitherEncoding(t *testing.T) {
	f, ids := oddFake()
	s := newServer(t, f, nil)
	tok := csrfToken(t, s, "/")
	encoders := map[string]func(string) string{"PathEscape": url.PathEscape, "encodeURIComponent": jsEncodeURIComponent}
	for encName, enc := range encoders {
		for i, id := range ids {
			name := oddTemplates[i]
			t.Run(encName+" "+id, func(t *testing.T) {
				e, me, te := enc(id), enc("mig-"+id), enc(name)
				check := func(r response, want int, what string) {
					t.Helper()
					if r.Status != want {
						t.Errorf("%s = %d, want %d\n%s", what, r.Status, want, r.Body)
					}
				}
				r := get(t, s, "/api/v1/instances/"+e)
				check(r, http.StatusOK, "GET instance")
				var in sim.Instance
				if json.Unmarshal([]byte(r.Body), &in); r.Status == http.StatusOK && in.ID != id {
					t.Errorf("GET instance found %q", in.ID)
				}
				check(get(t, s, "/api/v1/instances/"+e+"/logs"), http.StatusOK, "GET logs")
				check(do(t, s, httptest.NewRequest(http.MethodPost, "/api/v1/instances/"+e+"/migrate", nil)), http.StatusAccepted, "POST migrate")
				check(get(t, s, "/api/v1/migrations/"+me), http.StatusOK, "GET migration")
				check(get(t, s, "/api/v1/templates/"+te), http.StatusOK, "GET template")
				check(get(t, s, "/instances/"+e), http.StatusOK, "instance page")
				check(get(t, s, "/migrations/"+me), http.StatusOK, "migration page")

				check(post(t, s, "/ui/instances/"+e+"/stop", url.Values{"csrf": {tok}}), http.StatusSeeOther, "stop form")
				check(do(t, s, httptest.NewRequest(http.MethodDelete, "/api/v1/instances/"+e, nil)), http.StatusNoContent, "DELETE instance")
				f.mu.Lock()
				stopped := f.stopped[len(f.stopped)-2:]
				f.mu.Unlock()
				if stopped[0] != id || stopped[1] != id {
					t.Errorf("stopped %q, want %q twice", stopped, id)
				}
			})
		}
	}
}

var hrefRE = regexp.MustCompile(`(?:href|action|data-src)="(/(?:instances|migrations|ui/instances|api/v1/instances)/[^"]*)"`)

// TestPageLinksToOddIDsResolve follows every link to an instance or a
// migration on the pages and checks it names the same one.
func TestPageLinksToOddIDsResolve(t *testing.T) {
	f, ids := oddFake()
	s := newServer(t, f, nil)
	pages := []string{"/", "/migrations"}
	for _, id := range ids {
		pages = append(pages, "/instances/"+url.PathEscape(id), "/migrations/"+url.PathEscape("mig-"+id))
	}
	followed := 0
	for _, p := range pages {
		r := get(t, s, p)
		if r.Status != http.StatusOK {
			t.Errorf("%s = %d", p, r.Status)
			continue
		}
		for _, m := range hrefRE.FindAllStringSubmatch(r.Body, -1) {
			link := html.UnescapeString(m[1])
			u, err := url.Parse(link)
			if err != nil {
				t.Errorf("%s links to %q, not a URL: %v", p, link, err)
				continue
			}
			if rest, ok := strings.CutPrefix(u.Path, "/ui/instances/"); ok {
				// A form: posting it is TestIDsInPathsEitherEncoding's;
				// here its action must name a known instance.
				rest = strings.TrimSuffix(strings.TrimSuffix(rest, "/stop"), "/migrate")
				if !slices.Contains(ids, rest) {
					t.Errorf("%s has a form for %q (from %q), not one of the instances", p, rest, link)
				}
				continue
			}
			followed++
			if r := get(t, s, u.RequestURI()); r.Status != http.StatusOK {
				t.Errorf("%s links to %q: %d", p, link, r.Status)
			}
		}
	}
	if followed < 2*len(ids) {
		t.Errorf("followed %d links, want at least %d", followed, 2*len(ids))
	}
}
