package conform

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/normsim/normsim/internal/testenv"
)

// The browser test opens the HTML report the way a developer does, from
// a file with no network, in headless Chromium, and clicks through it.
// Without a Chromium-family browser it skips, or fails when
// NORMSIM_REQUIRE_BROWSER=1.

// reportProbe runs in the page before its own script: it collects script
// errors and every Content-Security-Policy violation (an attempt to load
// or run anything the page's CSP does not allow).
const reportProbe = `
(function () {
  window.__nsErrors = [];
  window.__nsCSP = [];
  window.addEventListener('error', function (e) { window.__nsErrors.push(String(e.message)); });
  document.addEventListener('securitypolicyviolation', function (e) {
    window.__nsCSP.push(e.violatedDirective + ' ' + e.blockedURI);
  });
})();
`

type reportBrowser struct {
	t   *testing.T
	ctx context.Context
	dir string
	n   int
}

func newReportBrowser(t *testing.T) *reportBrowser {
	t.Helper()
	path := testenv.RequireBrowser(t)
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-background-networking", true),
		chromedp.WindowSize(1280, 900),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelTab := chromedp.NewContext(actx)
	ctx, cancelTime := context.WithTimeout(ctx, 2*time.Minute)
	t.Cleanup(func() { cancelTime(); cancelTab(); cancelAlloc() })
	b := &reportBrowser{t: t, ctx: ctx, dir: reportArtifactDir(t)}
	if _, err := chromedp.Call(ctx, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: reportProbe}); err != nil {
		t.Fatalf("start %s: %v", path, err)
	}
	return b
}

// reportArtifactDir is where screenshots go: $NORMSIM_ARTIFACTS/<test>
// when set (CI keeps it), else the test's artifact directory.
func reportArtifactDir(t *testing.T) string {
	if root := os.Getenv("NORMSIM_ARTIFACTS"); root != "" {
		dir := filepath.Join(root, regexp.MustCompile(`[^A-Za-z0-9_.-]+`).ReplaceAllString(t.Name(), "_"))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatalf("artifacts: %v", err)
		}
		return dir
	}
	return t.ArtifactDir()
}

func (b *reportBrowser) do(what string, steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	if err := chromedp.Do(b.ctx, steps...); err != nil {
		b.fail("%s: %v", what, err)
	}
}

func (b *reportBrowser) fail(format string, args ...any) {
	b.t.Helper()
	b.screenshot("failure")
	b.t.Fatalf(format, args...)
}

func (b *reportBrowser) screenshot(name string) {
	b.t.Helper()
	png, err := chromedp.Run(b.ctx, chromedp.FullScreenshot(100))
	if err != nil {
		b.t.Logf("screenshot %s: %v", name, err)
		return
	}
	b.n++
	p := filepath.Join(b.dir, fmt.Sprintf("%02d-%s.png", b.n, name))
	if err := os.WriteFile(p, png, 0o644); err != nil {
		b.t.Errorf("save screenshot: %v", err)
		return
	}
	b.t.Logf("screenshot: %s", p)
}

func reportEval[T any](b *reportBrowser, expr string) T {
	b.t.Helper()
	v, err := chromedp.Run(b.ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		b.fail("evaluate %s: %v", expr, err)
	}
	return v
}

// wait polls a condition, for what a click sets off (the scroll, the
// hashchange handler) to have happened.
func (b *reportBrowser) wait(what, cond string) {
	b.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ok, err := chromedp.Run(b.ctx, chromedp.Evaluate[bool]("!!("+cond+")"))
		if err == nil && ok {
			return
		}
		if time.Now().After(deadline) || b.ctx.Err() != nil {
			b.fail("waiting for %s (%s): last error %v", what, cond, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestBrowserHTMLReport(t *testing.T) {
	b := newReportBrowser(t)
	r := fixtureReport()
	file := filepath.Join(t.TempDir(), "conform report.html")
	if err := WriteFile(file, r.WriteHTML); err != nil {
		t.Fatal(err)
	}
	url := "file://" + strings.ReplaceAll(file, " ", "%20")

	// Record every request the tab makes, and take the network away: the
	// page must load and work with none.
	var mu sync.Mutex
	var requests []string
	if err := chromedp.Listen(b.ctx, func(ev any) {
		if e, ok := ev.(*network.EventRequestWillBeSent); ok {
			mu.Lock()
			requests = append(requests, e.Request.URL)
			mu.Unlock()
		}
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Call(b.ctx, network.Enable, network.EnableParams{}); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Call(b.ctx, network.EmulateNetworkConditionsByRule, network.EmulateNetworkConditionsByRuleParams{
		MatchedNetworkConditions: []*network.Conditions{{Offline: true, DownloadThroughput: -1, UploadThroughput: -1}},
	}); err != nil {
		t.Fatalf("take the network away: %v", err)
	}
	// An address naming a case opens it, as a link from a CI page does.
	b.do("open the report at case 7.1", chromedp.Navigate(url+"#case-7.1"))
	b.wait("case 7.1 to open from the address", `document.getElementById('case-7.1').open`)
	b.screenshot("loaded")

	// One row per result, in case-ID order, under one heading per group.
	ids := reportEval[[]string](b, `Array.from(document.querySelectorAll('#cases tr.case td:first-child a')).map(a => a.textContent)`)
	wantIDs := []string{"1.1", "1.2", "1.3", "2.1", "2.9", "2.10", "7.1"}
	if len(ids) != len(r.Results) || !slices.Equal(ids, wantIDs) {
		b.fail("table rows %q, want one per result: %q", ids, wantIDs)
	}
	groups := reportEval[[]string](b, `Array.from(document.querySelectorAll('#cases tr.group')).map(g => g.textContent)`)
	if want := []string{"handover", "faults at get-state", "faults at target-applied"}; !slices.Equal(groups, want) {
		b.fail("groups %q, want %q", groups, want)
	}
	grades := reportEval[[]string](b, `Array.from(document.querySelectorAll('#cases tr.case td.grade')).map(td => td.textContent + ' ' + getComputedStyle(td).backgroundColor)`)
	if want := []string{"pass rgb(26, 127, 55)", "pass rgb(26, 127, 55)", "n/a rgb(110, 119, 129)", "fail rgb(207, 34, 46)",
		"error rgb(130, 80, 223)", "tolerated rgb(183, 121, 31)", "fail rgb(207, 34, 46)"}; !slices.Equal(grades, want) {
		b.fail("grade cells %q, want %q", grades, want)
	}

	// Clicking a case's link opens its details and brings them into view.
	if reportEval[bool](b, `document.getElementById('case-2.1').open`) {
		b.fail("case 2.1's details are open before anything was clicked")
	}
	b.do("click case 2.1", chromedp.Click(chromedp.CSS(`a[href="#case-2.1"]`), chromedp.NodeVisible))
	b.wait("case 2.1 to open", `location.hash === '#case-2.1' && document.getElementById('case-2.1').open`)
	b.wait("case 2.1 in view", `(function (r) { return r.top >= -1 && r.top < innerHeight / 2 })(document.getElementById('case-2.1').getBoundingClientRect())`)
	if h := reportEval[float64](b, `document.getElementById('case-2.1').querySelector('table.logs').getBoundingClientRect().height`); h <= 0 {
		b.fail("case 2.1's log table is not shown (height %v)", h)
	}
	b.screenshot("case-2.1")

	// A click anywhere on a row does the same.
	b.do("click row 2.10", chromedp.Click(chromedp.CSS(`tr[data-href="#case-2.10"] td.why`), chromedp.NodeVisible))
	b.wait("case 2.10 to open", `location.hash === '#case-2.10' && document.getElementById('case-2.10').open`)

	// Every migration's timeline has one row per event.
	rows := reportEval[map[string]int](b, `Object.fromEntries(Array.from(document.querySelectorAll('table.timeline')).map(t => [t.dataset.migration, t.tBodies[0].rows.length]))`)
	want := map[string]int{}
	tables := 0
	for _, res := range r.Results {
		for _, m := range res.Migrations {
			want[m.ID] = len(m.Events)
			tables++
		}
	}
	if n := reportEval[int](b, `document.querySelectorAll('table.timeline').length`); n != tables {
		b.fail("%d timeline tables, want one per migration: %d", n, tables)
	}
	for id, n := range want {
		if rows[id] != n {
			b.fail("migration %s: %d timeline rows, want %d (all: %v)", id, rows[id], n, rows)
		}
	}
	if s := reportEval[string](b, `document.querySelector('table.timeline[data-migration="m-plain"] tbody tr:nth-child(3)').textContent`); !strings.HasPrefix(s, "12.4get-state") ||
		!strings.Contains(s, "state in") || !strings.Contains(s, `<script>window.__pwned=\"payload\"`) {
		b.fail("the state frame's row %q lacks its offset, frame or payload", s)
	}

	// What the job printed is shown as text and never ran.
	logs := reportEval[string](b, `document.getElementById('case-2.1').querySelector('table.logs').textContent`)
	if !strings.Contains(logs, hostileScript) || !strings.Contains(logs, hostileAttr) {
		b.fail("the log table does not show the job's markup as text: %q", logs)
	}
	if !strings.Contains(reportEval[string](b, `document.getElementById('case-2.1').querySelector('.logs-omitted').textContent`), "37 earlier line(s)") {
		b.fail("the omitted log lines are not said")
	}
	if pwned := reportEval[string](b, `String(window.__pwned)`); pwned != "undefined" {
		b.fail("text from the report ran as script: window.__pwned = %s", pwned)
	}
	if n := reportEval[int](b, `document.querySelectorAll('script, img, iframe, object, embed, link, b').length`); n != 1 {
		b.fail("%d elements that load or run things (or markup from the fixture), want only the report's own script", n)
	}

	// The grade badges filter the table.
	b.do("show only fail", chromedp.Click(chromedp.CSS(`button[data-grade="fail"]`), chromedp.NodeVisible))
	shown := reportEval[[]string](b, `Array.from(document.querySelectorAll('#cases tr.case')).filter(tr => tr.offsetParent !== null).map(tr => tr.querySelector('a').textContent)`)
	if !slices.Equal(shown, []string{"2.1", "7.1"}) {
		b.fail("with only fail shown the table shows %q", shown)
	}
	b.do("show all again", chromedp.Click(chromedp.CSS(`button[data-grade="fail"]`), chromedp.NodeVisible))
	if n := reportEval[int](b, `Array.from(document.querySelectorAll('#cases tr.case')).filter(tr => tr.offsetParent !== null).length`); n != len(r.Results) {
		b.fail("after the second click %d rows show, want all %d", n, len(r.Results))
	}

	// The chaos section: the violation with its replay command, a row per trial.
	if s := reportEval[string](b, `document.querySelector('#chaos ~ .violation code.replay').textContent`); s != r.Chaos.Violations[0].Replay {
		b.fail("replay command %q", s)
	}
	if n := reportEval[int](b, `document.querySelectorAll('table.trials tbody tr').length`); n != len(r.Chaos.Trials) {
		b.fail("%d trial rows, want %d", n, len(r.Chaos.Trials))
	}

	// Nothing was fetched: no resource but the page itself, no attempt the
	// CSP had to block, no script error.
	if n := reportEval[int](b, `performance.getEntriesByType('resource').length`); n != 0 {
		b.fail("the page loaded %d resources: %s", n, reportEval[string](b, `JSON.stringify(performance.getEntriesByType('resource').map(e => e.name))`))
	}
	if v := reportEval[[]string](b, `window.__nsCSP`); len(v) > 0 {
		b.fail("the CSP blocked %q", v)
	}
	if errs := reportEval[[]string](b, `window.__nsErrors`); len(errs) > 0 {
		b.fail("script errors: %q", errs)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, u := range requests {
		if u != url {
			b.fail("the page requested %s (all requests: %q)", u, requests)
		}
	}
}
