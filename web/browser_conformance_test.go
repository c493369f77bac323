package web_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/normsim/normsim/normsimtest"
)

// TestBrowserConformanceRun: a conformance run started from the
// conformance page's form is followed live on its page to its end, is
// listed with its grades, and its report opens.
func TestBrowserConformanceRun(t *testing.T) {
	b := newBrowser(t)
	s := startSim(t, normsimtest.Options{})
	b.open(s.URL + "/")
	b.click(`nav a[href="/conformance"]`)
	b.wait("the conformance page", `location.pathname === '/conformance' && !!document.querySelector('#live[data-state="live"]')`, 15*time.Second)
	if n := evalJS[int](b, `document.querySelectorAll('#conf-template option[value="counter"]').length`); n != 1 {
		b.fail("the template select offers counter %d times", n)
	}

	// A refused start shows why, next to the form.
	b.do("a case pattern matching nothing", chromedp.SetValue(chromedp.ID("conf-case"), "9.9"))
	b.click("#conf-start")
	b.wait("the refusal", `!!document.getElementById('conformance-error')`, 15*time.Second)
	if msg := b.text("#conformance-error"); !strings.Contains(msg, `case: "9.9" matches none`) {
		b.fail("the refusal reads %q", msg)
	}

	// Section 1 of counter (three cases, a few seconds): the run page
	// follows it to its end live.
	b.do("pick counter", chromedp.SetValue(chromedp.ID("conf-template"), "counter"))
	b.do("section 1", chromedp.SetValue(chromedp.ID("conf-case"), "1.*"))
	b.click("#conf-start")
	b.waitPage("the run page", "/conformance/c", 20*time.Second)
	b.wait("the run page's event stream", `document.querySelector('#live[data-state="live"]') !== null`, 15*time.Second)
	id := strings.TrimPrefix(evalJS[string](b, `location.pathname`), "/conformance/")
	loads := b.loads()
	if first := evalJS[string](b, `document.querySelector('#run-state [data-state]').dataset.state`); first == "running" {
		t.Logf("the run page showed the run running (%s) and follows it live", b.text("#run-progress"))
	}
	b.screenshot("run-started")
	b.wait("the run to end", `!!document.querySelector('#run-state [data-state]:not([data-state="running"])')`, 3*time.Minute)
	if got := b.loads(); got != loads {
		b.fail("the run page reloaded (%d loads, want %d)", got, loads)
	}
	if st := evalJS[string](b, `document.querySelector('#run-state [data-state]').dataset.state`); st != "passed" {
		b.fail("section 1 of counter ended %s, want passed", st)
	}
	if p := b.text("#run-progress"); p != "3/3" {
		b.fail("progress reads %q", p)
	}
	if n, na := b.text(`#run-counts td[data-grade="pass"]`), b.text(`#run-counts td[data-grade="n/a"]`); n != "2" || na != "1" {
		b.fail("the counts read %q pass, %q n/a; want 2 and 1 (the refusal case does not apply to counter)", n, na)
	}
	b.wait("the case's row", `!!document.querySelector('#results tr[data-case="1.1"] [data-grade="pass"]')`, 5*time.Second)
	b.wait("the framed report", `!!document.getElementById('report-frame')`, 5*time.Second)
	// The report is sandboxed, so this page cannot look into it; its
	// load is in this page's resource timings.
	b.wait("the framed report to load", `performance.getEntriesByType('resource').some(e => e.initiatorType === 'iframe' && e.name.endsWith('/api/v1/conformance/`+id+`/report.html') && (e.responseStatus === undefined || e.responseStatus === 200))`, 15*time.Second)
	b.screenshot("run-ended")
	b.noScriptErrors()

	// The runs list shows it with its grades and links its report.
	b.open(s.URL + "/conformance")
	row := fmt.Sprintf(`#conf-runs tr[data-run=%q]`, id)
	b.wait("the run listed", `!!document.querySelector('`+row+` [data-state="passed"]')`, 10*time.Second)
	if p := b.text(row + " .run-progress"); p != "3/3" {
		b.fail("the list's progress reads %q", p)
	}
	if n := b.text(row + ` td[data-grade="pass"]`); n != "2" {
		b.fail("the list's pass count reads %q", n)
	}
	b.screenshot("runs")
	b.click(row + " a.report-link")
	b.wait("the HTML report", `location.pathname === '/api/v1/conformance/`+id+`/report.html' && document.readyState === 'complete'`, 15*time.Second)
	if txt := evalJS[string](b, `document.documentElement.innerText`); !strings.Contains(txt, "counter") {
		b.fail("the report does not name the template: %.500s", txt)
	}
	b.screenshot("report")
}
