package web_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/normsim/normsim/sim"
	"github.com/normsim/normsim/web"
)

// The paging fuzz targets (issue 34 item 9: GET /api/v1/instances with
// limit=9223372036854775807&offset=1 panicked as offset+limit wrapped)
// send any limit, offset or page through the real router, over a small
// fixture, and check each answer against the list it pages: never a 5xx
// or a panic, a 400 naming the parameter for what is no page, else
// exactly the rows asked for and links that lead on from them.

// pagingSeeds are limits, offsets and pages at and past the edges of an
// int, and things that are no number.
var pagingSeeds = []string{
	"", "0", "1", "2", "3", "6", "7", "-1", "+2", "0002", " 1", "1 ", "1.5", "1e3", "0x10", "abc", "٣",
	"9223372036854775807", "9223372036854775806", "-9223372036854775808", "9223372036854775808",
	"99999999999999999999", "92233720368547758", "184467440737095516",
}

// pagingFixture is a server over a fake with instances and migrations
// whose ids say their place in the lists.
type pagingFixture struct {
	h          http.Handler
	svc        *fakeService
	instances  []string // oldest first, the API's order
	migrations []string // as the fake lists them
}

func newPagingFixture(instances, migrations int) *pagingFixture {
	fx := &pagingFixture{svc: newFake()}
	now := time.Now()
	for i := range instances {
		id := fmt.Sprintf("a-%03d", i)
		fx.svc.add(sim.Instance{ID: id, JobID: "job-" + id, Node: "a", Template: "plain", State: sim.InstanceRunning, CreatedAt: now})
		fx.instances = append(fx.instances, id)
	}
	for i := range migrations {
		m := completedMigration()
		m.ID = fmt.Sprintf("mig-%03d", i)
		fx.svc.addMig(m)
		fx.migrations = append(fx.migrations, m.ID)
	}
	fx.h = web.New(web.Config{Service: fx.svc, Addr: host, Version: "test"})
	return fx
}

// forget drops what the fake remembers of each request, so a long fuzz
// run does not grow it.
func (fx *pagingFixture) forget() {
	fx.svc.mu.Lock()
	fx.svc.filters = nil
	fx.svc.mu.Unlock()
}

// FuzzAPIPaging (issue 34 item 9): any limit and offset on the API's
// lists is a 400 naming the parameter, or the page they ask for with its
// total and a next link that leads to the rest.
func FuzzAPIPaging(f *testing.F) {
	for _, limit := range pagingSeeds {
		for _, offset := range []string{"", "0", "1", "5", "-1", "9223372036854775807", "x"} {
			f.Add(limit, offset)
		}
	}
	fx := newPagingFixture(7, 5)
	f.Fuzz(func(t *testing.T, limit, offset string) {
		defer fx.forget()
		checkAPIPage(t, fx.h, "/api/v1/instances", fx.instances, limit, offset)
		checkAPIPage(t, fx.h, "/api/v1/migrations", fx.migrations, limit, offset)
	})
}

// apiParam is what a limit or offset means: absent is 0, and anything
// but a non-negative integer is no page.
func apiParam(v string) (n int, ok bool) {
	if v == "" {
		return 0, true
	}
	n, err := strconv.Atoi(v)
	return n, err == nil && n >= 0
}

var nextLinkRE = regexp.MustCompile(`^<([^>]*)>; rel="next"$`)

// checkAPIPage asks path for a page of ids and checks the answer; a next
// link is followed once.
func checkAPIPage(t *testing.T, h http.Handler, path string, ids []string, limit, offset string) {
	t.Helper()
	q := url.Values{"limit": {limit}, "offset": {offset}}
	r := get(t, h, path+"?"+q.Encode())
	lim, limOK := apiParam(limit)
	off, offOK := apiParam(offset)
	switch {
	case r.Status >= 500:
		t.Fatalf("GET %s?%s: %d %s", path, q.Encode(), r.Status, r.Body)
	case !limOK || !offOK:
		bad := "limit"
		if limOK {
			bad = "offset"
		}
		// Either refusal names the parameter it is about.
		named := strings.Contains(r.Body, bad+": must be a non-negative integer") || strings.Contains(r.Body, bad+": ") && strings.Contains(r.Body, "is too large; give at most")
		if r.Status != http.StatusBadRequest || !named {
			t.Fatalf("GET %s?%s: %d %s; want 400 naming %s", path, q.Encode(), r.Status, r.Body, bad)
		}
		return
	case r.Status != http.StatusOK:
		t.Fatalf("GET %s?%s: %d %s", path, q.Encode(), r.Status, r.Body)
	}
	got := listIDs(t, r)
	total := len(ids)
	lo := min(off, total)
	hi := total
	if lim > 0 && lim < total-lo {
		hi = lo + lim
	}
	if !slices.Equal(got, ids[lo:hi]) || r.Header.Get("X-Total-Count") != strconv.Itoa(total) {
		t.Fatalf("GET %s?%s = %v, total %q; want %v of %d", path, q.Encode(), got, r.Header.Get("X-Total-Count"), ids[lo:hi], total)
	}
	link := r.Header.Get("Link")
	if lim == 0 || hi == total {
		if link != "" {
			t.Fatalf("GET %s?%s: the last page links on: %s", path, q.Encode(), link)
		}
		return
	}
	m := nextLinkRE.FindStringSubmatch(link)
	if m == nil {
		t.Fatalf("GET %s?%s: %d of %d shown and Link %q; want a next link", path, q.Encode(), hi-lo, total, link)
	}
	next, err := url.Parse(m[1])
	if err != nil || next.Path != path {
		t.Fatalf("GET %s?%s: next link %q: %v", path, q.Encode(), m[1], err)
	}
	nq := next.Query()
	if nq.Get("limit") != limit || nq.Get("offset") != strconv.Itoa(hi) {
		t.Fatalf("GET %s?%s: next link %q, want limit %q and offset %d", path, q.Encode(), m[1], limit, hi)
	}
	r = get(t, h, m[1])
	if rest := listIDs(t, r); r.Status != http.StatusOK || len(rest) == 0 || rest[0] != ids[hi] {
		t.Fatalf("GET %s (the next link): %d %v, want %s first", m[1], r.Status, rest, ids[hi])
	}
}

// listIDs is the ids of the list an API answer holds.
func listIDs(t *testing.T, r response) []string {
	t.Helper()
	var items []struct{ ID string }
	if err := json.Unmarshal([]byte(r.Body), &items); err != nil {
		t.Fatalf("%v in %d %s", err, r.Status, r.Body)
	}
	ids := make([]string, len(items))
	for i, it := range items {
		ids[i] = it.ID
	}
	return ids
}

// FuzzDashboardPage (issue 34 item 9): any page asked of the overview's
// node cards or of the migration history shows a page that exists (past
// the last, the last), or 400 naming the parameter, with links to the
// pages beside it.
func FuzzDashboardPage(f *testing.F) {
	for _, s := range pagingSeeds {
		f.Add(s)
	}
	// Node a's card shows 50 a page, the history 100: three pages each.
	fx := newPagingFixture(120, 250)
	f.Fuzz(func(t *testing.T, page string) {
		defer fx.forget()
		checkDashboardPage(t, fx.h, "/", "page.a", page, fx.instances, 50, `data-instance="%s"`, "/?page.a=%d#node-a-h")
		checkDashboardPage(t, fx.h, "/migrations", "page", page, fx.migrations, 100, `href="/migrations/%s"`, "/migrations?page=%d")
	})
}

// checkDashboardPage asks path for page (the parameter param) of ids,
// size a page, and checks that it shows the page it says; row is how a
// row's id shows, link how a link to a page does.
func checkDashboardPage(t *testing.T, h http.Handler, path, param, page string, ids []string, size int, row, link string) {
	t.Helper()
	q := url.Values{param: {page}}
	r := get(t, h, path+"?"+q.Encode())
	pages := (len(ids) + size - 1) / size
	asked, err := strconv.Atoi(page)
	valid := page == "" || (err == nil && asked >= 1)
	switch {
	case r.Status >= 500:
		t.Fatalf("GET %s?%s: %d %s", path, q.Encode(), r.Status, r.Body)
	case !valid:
		if r.Status != http.StatusBadRequest || !strings.Contains(r.Body, param+": must be a page number from 1") {
			t.Fatalf("GET %s?%s: %d; want 400 naming %s", path, q.Encode(), r.Status, param)
		}
		return
	case r.Status != http.StatusOK:
		t.Fatalf("GET %s?%s: %d", path, q.Encode(), r.Status)
	}
	shown := min(max(asked, 1), pages)
	lo, hi := (shown-1)*size, min(shown*size, len(ids))
	for _, want := range []string{
		fmt.Sprintf("page %d of %d", shown, pages),
		fmt.Sprintf("%d–%d of %d", lo+1, hi, len(ids)),
		fmt.Sprintf(row, ids[lo]),
		fmt.Sprintf(row, ids[hi-1]),
	} {
		if !strings.Contains(r.Body, want) {
			t.Fatalf("GET %s?%s shows no %q (page %d of %d)", path, q.Encode(), want, shown, pages)
		}
	}
	for _, outside := range []int{lo - 1, hi} {
		if outside >= 0 && outside < len(ids) && strings.Contains(r.Body, fmt.Sprintf(row, ids[outside])) {
			t.Fatalf("GET %s?%s (page %d) shows %s, of another page", path, q.Encode(), shown, ids[outside])
		}
	}
	next := fmt.Sprintf(`href="%s" rel="next"`, fmt.Sprintf(link, shown+1))
	if has := strings.Contains(r.Body, next); has != (shown < pages) {
		t.Fatalf("GET %s?%s (page %d of %d): next link %s there: %v", path, q.Encode(), shown, pages, next, has)
	}
}
