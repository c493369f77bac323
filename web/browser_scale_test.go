package web_test

import (
	"fmt"
	"html"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/normsim/normsim/sim"
)

// renderProbe runs in every page of the render benchmark: it stamps the
// moment the page's DOM is complete (DOMContentLoaded, after the deferred
// app.js ran: a server-rendered list is in the DOM by then) and the moment
// the dashboard's catch-up refresh, which it fetches as soon as its event
// stream opens, has been parsed and swapped in.
const renderProbe = `
(function () {
  document.addEventListener('DOMContentLoaded', function () { window.__benchDOM = performance.now(); });
  var parse = DOMParser.prototype.parseFromString;
  DOMParser.prototype.parseFromString = function () {
    var doc = parse.apply(this, arguments);
    // The swap runs right after the parse, in the same callback.
    setTimeout(function () { if (window.__benchLive === undefined) window.__benchLive = performance.now(); }, 0);
    return doc;
  };
})();
`

// BenchmarkPageRender10k: how long the overview and the migrations list
// take to render in headless Chromium with 10,000 instances in the sim,
// from navigation start to the list in the DOM (ms/op). It also reports
// the time to the first byte (the server's render: it renders into a
// buffer before it sends), the time until the page is live and caught up
// (its event stream open and its first refresh swapped in), the page's
// size and the rows it shows.
//
//	go test -run '^$' -bench PageRender ./web/
func BenchmarkPageRender10k(b *testing.B) {
	br := newBrowser(b)
	if _, err := chromedp.Call(br.ctx, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: renderProbe}); err != nil {
		b.Fatal(err)
	}
	s := startScaleSim(b)
	for _, pg := range []struct{ name, path, rows string }{
		{"overview", "/", `#nodes tr[data-instance]`},
		{"migrations", "/migrations", `#history table.migrations tbody tr`},
	} {
		b.Run(pg.name, func(b *testing.B) {
			var dom, ttfb, live, kb, rows float64
			for b.Loop() {
				br.do("open "+pg.path, chromedp.Navigate(s.URL+pg.path))
				br.wait("the caught-up page", `window.__benchLive !== undefined`, time.Minute)
				m := evalJS[map[string]float64](br, `(() => {
					const nav = performance.getEntriesByType('navigation')[0];
					return {dom: window.__benchDOM, live: window.__benchLive, ttfb: nav.responseStart,
						kb: nav.decodedBodySize / 1024, rows: document.querySelectorAll(`+"`"+pg.rows+"`"+`).length};
				})()`)
				if m["rows"] == 0 {
					br.fail("no rows (%s) on %s", pg.rows, pg.path)
				}
				dom += m["dom"]
				ttfb += m["ttfb"]
				live += m["live"]
				kb, rows = m["kb"], m["rows"]
			}
			n := float64(b.N)
			b.ReportMetric(dom/n, "ms/op")
			b.ReportMetric(ttfb/n, "ms-ttfb/op")
			b.ReportMetric(live/n, "ms-live/op")
			b.ReportMetric(kb, "KB/page")
			b.ReportMetric(rows, "rows")
		})
	}
}

// TestDashboardAt10kInstances: with 10,000 instances (5,000 a node) and
// 1,000 migrations in a real sim, the API pages them and says how many
// there are, the overview and the history render a page each with the
// count and working page links, and in Chromium a paged view stays live:
// what happens shows on page 2 without a reload.
func TestDashboardAt10kInstances(t *testing.T) {
	if testing.Short() {
		t.Skip("10,000 instances")
	}
	s := startScaleSim(t)
	ctx := t.Context()
	perNode := scaleInstances / 2

	t.Run("api", func(t *testing.T) {
		p, err := s.Client.InstancePage(ctx, sim.InstanceFilter{Limit: 100, Offset: scaleInstances - 40})
		if err != nil || p.Total != scaleInstances || len(p.Items) != 40 {
			t.Fatalf("the last page of instances: %d of %d, %v", len(p.Items), p.Total, err)
		}
		p, err = s.Client.InstancePage(ctx, sim.InstanceFilter{Node: "b", Limit: 10})
		if err != nil || p.Total != perNode || len(p.Items) != 10 || p.Items[9].Node != "b" {
			t.Fatalf("node b's first page: %d of %d, %v", len(p.Items), p.Total, err)
		}
		m, err := s.Client.MigrationPage(ctx, sim.MigrationFilter{State: sim.MigrationCompleted, Limit: 10, Offset: 990})
		if err != nil || m.Total != scaleMigrations || len(m.Items) != 10 {
			t.Fatalf("the last page of migrations: %d of %d, %v", len(m.Items), m.Total, err)
		}
		all, err := s.Client.Instances(ctx)
		if err != nil || len(all) != scaleInstances {
			t.Fatalf("every instance, as before paging: %d, %v", len(all), err)
		}
	})

	t.Run("pages", func(t *testing.T) {
		page := httpGet(t, s.URL+"/")
		for _, node := range []string{"a", "b"} {
			card := nodeCard(page, node)
			if n := len(rowRE.FindAllString(card, -1)); n != 50 {
				t.Errorf("node %s's card shows %d rows, want a page of 50", node, n)
			}
			if want := fmt.Sprintf("1–50 of %s", commas(perNode)); !strings.Contains(card, want) {
				t.Errorf("node %s's card does not say %q", node, want)
			}
		}
		next := regexp.MustCompile(`href="(/\?page\.a=2)#node-a-h" rel="next"`).FindStringSubmatch(page)
		if next == nil {
			t.Fatal("node a's card has no link to its next page")
		}
		page2 := httpGet(t, s.URL+html.UnescapeString(next[1]))
		if card := nodeCard(page2, "a"); len(rowRE.FindAllString(card, -1)) != 50 || !strings.Contains(card, "51–100 of "+commas(perNode)) {
			t.Errorf("node a's page 2 does not show rows 51–100 of %d", perNode)
		}

		hist := httpGet(t, s.URL+"/migrations")
		if n := strings.Count(hist, `<a class="mono" href="/migrations/mig-`); n != 100 {
			t.Errorf("the history shows %d migrations, want a page of 100", n)
		}
		if !strings.Contains(hist, "1–100 of "+commas(scaleMigrations)+" migrations") || !strings.Contains(hist, `href="/migrations?page=2" rel="next"`) {
			t.Error("the history does not say how many there are or link its next page")
		}
		if n := strings.Count(httpGet(t, s.URL+"/migrations?page=10"), `<a class="mono" href="/migrations/mig-`); n != 100 {
			t.Errorf("the history's last page shows %d migrations, want 100", n)
		}
	})

	t.Run("browser", func(t *testing.T) {
		b := newBrowser(t)
		b.open(s.URL + "/")
		rows := `document.querySelectorAll('[data-node="a"] tr[data-instance]').length`
		if n := evalJS[int](b, rows); n != 50 {
			b.fail("node a shows %d rows, want 50", n)
		}
		b.click(`[data-node="a"] [data-pager] a[rel="next"]`)
		b.wait("node a's page 2", `location.search === '?page.a=2' && document.querySelector('[data-node="a"] [data-pager]').textContent.includes('51–100 of 5,000')`, 20*time.Second)
		b.wait("the event stream", `document.querySelector('#live[data-state="live"]') !== null`, 15*time.Second)
		first := evalJS[string](b, `document.querySelector('[data-node="a"] tr[data-instance]').dataset.instance`)
		loads := b.loads()
		// A launch on node a shows in page 2's count, live; page 2 stays
		// page 2.
		if _, err := s.Client.Launch(ctx, sim.LaunchRequest{Template: "plain", Node: "a"}); err != nil {
			t.Fatal(err)
		}
		b.wait("the new count on page 2", `document.querySelector('[data-node="a"] [data-pager]').textContent.includes('51–100 of 5,001')`, 20*time.Second)
		if got := evalJS[string](b, `document.querySelector('[data-node="a"] tr[data-instance]').dataset.instance`); got != first || b.loads() != loads {
			b.fail("the refresh left page 2 (first row %s, was %s; %d loads, was %d)", got, first, b.loads(), loads)
		}
		b.screenshot("overview-page-2")

		b.open(s.URL + "/migrations")
		b.click(`#history [data-pager] a[rel="next"]`)
		b.wait("the history's page 2", `location.search === '?page=2' && document.getElementById('history-count').textContent.includes('101–200 of 1,000')`, 20*time.Second)
		b.wait("the event stream", `document.querySelector('#live[data-state="live"]') !== null`, 15*time.Second)
		loads = b.loads()
		in, err := s.Client.Launch(ctx, sim.LaunchRequest{Template: "plain", Node: "b"})
		if err != nil {
			t.Fatal(err)
		}
		// A launch answers while its instance is starting, and only a
		// running one migrates (docs/migrations.md).
		if _, err := s.Client.WaitInstance(ctx, in.ID, sim.UntilRunning); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Client.Migrate(ctx, in.ID, sim.MigrateRequest{Strategy: string(sim.StopThenStart)}); err != nil {
			t.Fatal(err)
		}
		b.wait("the new migration counted on page 2", `document.getElementById('history-count').textContent.includes('101–200 of 1,001')`, 20*time.Second)
		if got := b.loads(); got != loads {
			b.fail("the history reloaded (%d loads, want %d)", got, loads)
		}
		b.screenshot("history-page-2")
		b.noScriptErrors()
	})
}

// rowRE matches an instance row of the overview.
var rowRE = regexp.MustCompile(`<tr class="[^"]*" data-instance="`)

// nodeCard is the overview's card of one node.
func nodeCard(page, node string) string {
	_, card, _ := strings.Cut(page, `data-node="`+node+`"`)
	card, _, _ = strings.Cut(card, `<article class="card node"`)
	return card
}

func httpGet(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s = %d\n%s", url, resp.StatusCode, body)
	}
	return html.UnescapeString(string(body))
}

// commas writes n as the dashboard does (10,000).
func commas(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
