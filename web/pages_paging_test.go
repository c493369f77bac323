package web_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/normsim/normsim/sim"
)

// TestOverviewPagesEachNode: a node with more instances than a card holds
// shows a page of them, oldest first, with the count and links to the
// other pages; page.NODE picks a node's page and keeps the others', and
// the live refresh fetches the pages shown.
func TestOverviewPagesEachNode(t *testing.T) {
	f := newFake()
	now := time.Now()
	for i := range 120 {
		f.add(sim.Instance{ID: fmt.Sprintf("a-%03d", i), Node: "a", Template: "plain", State: sim.InstanceRunning, CreatedAt: now})
	}
	for i := range 60 {
		f.add(sim.Instance{ID: fmt.Sprintf("b-%03d", i), Node: "b", Template: "plain", State: sim.InstanceRunning, CreatedAt: now})
	}
	f.add(sim.Instance{ID: "c-000", Node: "c", Template: "plain", State: sim.InstanceRunning, CreatedAt: now})
	s := newServer(t, f, nil)

	r := get(t, s, "/")
	mustContain(t, r, `data-instance="a-000"`, `data-instance="a-049"`, "1–50 of 120", "page 1 of 3",
		`href="/?page.a=2#node-a-h" rel="next"`, `href="/?page.a=3#node-a-h" rel="last"`,
		`data-instance="b-049"`, "1–50 of 60", `href="/?page.b=2#node-b-h" rel="next"`, `data-refresh="/"`)
	mustNotContain(t, r, `data-instance="a-050"`, `data-instance="b-050"`, `data-pager="pages-c"`)
	if n := strings.Count(r.Body, `<tr class="" data-instance=`); n != 101 {
		t.Errorf("%d instance rows on the first page, want 50 + 50 + 1", n)
	}

	r = get(t, s, "/?page.a=2&page.b=2")
	mustContain(t, r, `data-instance="a-050"`, `data-instance="a-099"`, "51–100 of 120", `data-instance="b-059"`, "51–60 of 60",
		`href="/?page.a=3&amp;page.b=2#node-a-h" rel="next"`, `href="/?page.b=2#node-a-h" rel="prev"`,
		`href="/?page.a=2#node-b-h" rel="prev"`, `data-refresh="/?page.a=2&amp;page.b=2"`)
	mustNotContain(t, r, `data-instance="a-049"`, `data-instance="a-100"`, `data-instance="b-049"`)

	// Past the last page: the last one.
	r = get(t, s, "/?page.a=9")
	mustContain(t, r, "101–120 of 120", "page 3 of 3", `data-instance="a-119"`, `data-refresh="/?page.a=3"`)

	r = get(t, s, "/?page.a=first")
	if r.Status != http.StatusBadRequest {
		t.Errorf("page.a=first = %d, want 400", r.Status)
	}
	mustContain(t, r, `page.a: must be a page number from 1; got "first"`, `data-instance="a-000"`)
}

// TestOverviewBannerNamesTheFirstRunning: with more migrations running
// than the banner names, it counts the rest and links them; every row of
// an instance in one is still marked.
func TestOverviewBannerNamesTheFirstRunning(t *testing.T) {
	f := newFake()
	for i := range 14 {
		id := fmt.Sprint("src-", i)
		f.add(sim.Instance{ID: id, Node: "a", Template: "plain", State: sim.InstanceRunning})
		f.addMig(&sim.Migration{ID: fmt.Sprint("mig-", i), State: sim.MigrationRunning, Strategy: sim.Handover,
			Source: sim.MigrationEndpoint{Instance: id, Node: "a"}, Target: sim.MigrationEndpoint{Node: "b"}})
	}
	r := get(t, newServer(t, f, nil), "/")
	mustContain(t, r, `of <span class="mono">src-9</span>`, `href="/migrations?state=running">and 4 more running`)
	mustNotContain(t, r, `of <span class="mono">src-10</span>`)
	if n := strings.Count(r.Body, "migrating · source"); n != 14 {
		t.Errorf("%d rows marked migrating, want 14", n)
	}
}

// TestMigrationsPagePages: the history shows a page of 100, newest first,
// with the count and links that keep the filter.
func TestMigrationsPagePages(t *testing.T) {
	f := newFake()
	for i := range 250 {
		m := completedMigration()
		m.ID, m.JobID = fmt.Sprintf("mig-%03d", i), fmt.Sprint("job-", i%2)
		f.addMig(m)
	}
	s := newServer(t, f, nil)

	r := get(t, s, "/migrations")
	mustContain(t, r, "1–100 of 250 migrations", `href="/migrations/mig-099"`, `href="/migrations?page=2" rel="next"`,
		`href="/migrations?page=3" rel="last"`, "page 1 of 3")
	mustNotContain(t, r, `href="/migrations/mig-100"`)
	if last := f.filters[len(f.filters)-1]; last.Limit != 100 || last.Offset != 0 {
		t.Errorf("filter = %+v, want the first 100", last)
	}

	r = get(t, s, "/migrations?job=job-1&page=2")
	mustContain(t, r, "101–125 of 125 migrations of job", `href="/migrations/mig-201"`, `href="/migrations?job=job-1" rel="prev"`,
		`data-refresh="/migrations?job=job-1&amp;page=2"`)
	mustNotContain(t, r, `href="/migrations/mig-199"`, `rel="next"`)

	r = get(t, s, "/migrations?page=7")
	mustContain(t, r, "201–250 of 250", "page 3 of 3")
	// Issue 34 item 9: a page whose offset would wrap round an int (found
	// by FuzzDashboardPage) is past the last, not the first page's rows.
	r = get(t, s, "/migrations?page=9223372036854775807")
	mustContain(t, r, "201–250 of 250", "page 3 of 3", `href="/migrations/mig-249"`)
	mustNotContain(t, r, `href="/migrations/mig-099"`)

	r = get(t, s, "/migrations?page=0")
	if r.Status != http.StatusBadRequest {
		t.Errorf("page=0 = %d, want 400", r.Status)
	}
	mustContain(t, r, `page: must be a page number from 1; got "0"`)
}

// TestHugePagingParametersDoNotWrap (issue 34 item 9): a limit or offset
// near the largest int neither panics nor wraps round to an empty or
// negative page. FuzzAPIPaging tries the rest.
func TestHugePagingParametersDoNotWrap(t *testing.T) {
	f := newFake()
	for _, id := range []string{"i1", "i2", "i3"} {
		f.add(sim.Instance{ID: id, JobID: "job-" + id, Node: "a", Template: "counter", State: sim.InstanceRunning})
	}
	h := newServer(t, f, nil)
	for q, want := range map[string]int{
		"limit=9223372036854775807&offset=1": 2,
		"limit=9223372036854775807":          3,
		"offset=9223372036854775807&limit=5": 0,
		"limit=2&offset=9223372036854775806": 0,
	} {
		r := get(t, h, "/api/v1/instances?"+q)
		if r.Status != http.StatusOK || strings.Count(r.Body, `"jobId"`) != want || r.Header.Get("X-Total-Count") != "3" {
			t.Errorf("?%s: %d, %d instances (want %d), total %q", q, r.Status, strings.Count(r.Body, `"jobId"`), want, r.Header.Get("X-Total-Count"))
		}
	}
}
