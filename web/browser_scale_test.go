package web_test

import (
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
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
