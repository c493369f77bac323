package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/normsim/normsim/app"
	"github.com/normsim/normsim/app/withsqlite"
	"github.com/normsim/normsim/internal/testenv"
	"github.com/normsim/normsim/internal/testjob"
	"github.com/normsim/normsim/normsimtest"
	"github.com/normsim/normsim/protocol"
	"github.com/normsim/normsim/sim"
)

// The browser tests drive the dashboard in headless Chromium the way a
// developer uses it: they click the buttons and watch the pages change
// through the event stream, never reloading. Without a Chromium-family
// browser they skip, or fail when NORMSIM_REQUIRE_BROWSER=1.

// probe runs in every page before its own scripts: it counts page loads
// (so a test can prove a change arrived without a reload), records what the
// page showed when it loaded, and collects script errors.
const probe = `
(function () {
  var n = Number(sessionStorage.getItem('nsLoads') || 0) + 1;
  sessionStorage.setItem('nsLoads', String(n));
  window.__nsLoads = n;
  window.__nsErrors = [];
  window.addEventListener('error', function (e) { window.__nsErrors.push(String(e.message)); });
  window.addEventListener('unhandledrejection', function (e) { window.__nsErrors.push('unhandled rejection: ' + e.reason); });
  document.addEventListener('DOMContentLoaded', function () {
    var m = document.querySelector('#mig-state [data-state]');
    window.__nsFirstState = m ? m.dataset.state : '';
    window.__nsFirstConnected = !!document.querySelector('#inst-conn .conn.on');
    window.__nsLoaded = true;
  });
})();
`

// browser is one headless Chromium tab for a test.
type browser struct {
	t   testing.TB
	ctx context.Context
	dir string
	n   int
}

func newBrowser(t testing.TB) *browser {
	t.Helper()
	path := testenv.RequireBrowser(t)
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-background-networking", true),
		chromedp.WindowSize(1440, 1000),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelTab := chromedp.NewContext(actx)
	ctx, cancelTime := context.WithTimeout(ctx, 4*time.Minute)
	t.Cleanup(func() { cancelTime(); cancelTab(); cancelAlloc() })
	b := &browser{t: t, ctx: ctx, dir: artifactDir(t)}
	if _, err := chromedp.Call(ctx, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: probe}); err != nil {
		t.Fatalf("start %s: %v", path, err)
	}
	t.Logf("screenshots go to %s", b.dir)
	return b
}

// artifactDir is where a test's screenshots go: $NORMSIM_ARTIFACTS/<test>
// when set (CI keeps it), else the test's artifact directory (kept under
// the output directory with go test -artifacts).
func artifactDir(t testing.TB) string {
	if root := os.Getenv("NORMSIM_ARTIFACTS"); root != "" {
		dir := filepath.Join(root, regexp.MustCompile(`[^A-Za-z0-9_.-]+`).ReplaceAllString(t.Name(), "_"))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatalf("artifacts: %v", err)
		}
		return dir
	}
	return t.ArtifactDir()
}

func (b *browser) do(what string, steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	if err := chromedp.Do(b.ctx, steps...); err != nil {
		b.fail("%s: %v", what, err)
	}
}

// fail saves a screenshot and the page's text, then fails the test.
func (b *browser) fail(format string, args ...any) {
	b.t.Helper()
	b.screenshot("failure")
	text, _ := chromedp.Run(b.ctx, chromedp.Evaluate[string](`location.href + "\n" + document.body.innerText`))
	b.t.Fatalf(format+"\npage: %s", append(args, text)...)
}

func (b *browser) open(url string) {
	b.t.Helper()
	b.do("open "+url, chromedp.Navigate(url))
	b.wait("the event stream to connect", `document.querySelector('#live[data-state="live"]') !== null`, 15*time.Second)
}

// wait polls a JavaScript condition until it holds. It evaluates the
// condition afresh each time, so a navigation in between (a form post and
// its redirect) is no error.
func (b *browser) wait(what, cond string, timeout time.Duration) {
	b.t.Helper()
	deadline := time.Now().Add(timeout)
	var last error
	for {
		ok, err := chromedp.Run(b.ctx, chromedp.Evaluate[bool]("!!("+cond+")"))
		if err == nil && ok {
			return
		}
		last = err
		if time.Now().After(deadline) || b.ctx.Err() != nil {
			b.fail("waiting %v for %s (%s): last error %v", timeout, what, cond, last)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitPage waits for the browser to be on a page whose path starts with
// prefix, and for that page to have loaded: the path changes when the
// navigation commits, before the probe has recorded what the page showed.
func (b *browser) waitPage(what, prefix string, timeout time.Duration) {
	b.t.Helper()
	b.wait(what, fmt.Sprintf(`location.pathname.startsWith(%q) && window.__nsLoaded === true`, prefix), timeout)
}

func evalJS[T any](b *browser, expr string) T {
	b.t.Helper()
	v, err := chromedp.Run(b.ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		b.fail("evaluate %s: %v", expr, err)
	}
	return v
}

func (b *browser) click(sel string) {
	b.t.Helper()
	b.do("click "+sel, chromedp.Click(chromedp.CSS(sel), chromedp.NodeVisible))
}

func (b *browser) text(sel string) string {
	b.t.Helper()
	return evalJS[string](b, fmt.Sprintf(`(document.querySelector(%q) || {textContent: ''}).textContent`, sel))
}

func (b *browser) loads() int { return evalJS[int](b, `window.__nsLoads`) }

func (b *browser) screenshot(name string) {
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

// noScriptErrors fails the test if a page script threw.
func (b *browser) noScriptErrors() {
	b.t.Helper()
	if errs := evalJS[[]string](b, `window.__nsErrors || []`); len(errs) > 0 {
		b.fail("script errors on the page: %q", errs)
	}
}

func TestBrowserLaunchAndHandoverCounter(t *testing.T) {
	b := newBrowser(t)
	s := startSim(t, normsimtest.Options{})
	b.open(s.URL + "/")
	b.screenshot("overview")

	// Launch counter from its form, on node a.
	b.do("pick node a", chromedp.SetValue(chromedp.ID("launch-counter-node"), "a"))
	b.click("#launch-counter")
	b.waitPage("the instance page", "/instances/counter-", 20*time.Second)
	b.wait("the instance page's event stream", `document.querySelector('#live[data-state="live"]') !== null`, 15*time.Second)
	id := strings.TrimPrefix(evalJS[string](b, `location.pathname`), "/instances/")
	loads := b.loads()

	// The first launch compiles the counter: the page shows it starting,
	// then connected, without a reload.
	b.wait("the instance to run and connect", `!!document.querySelector('#inst-state [data-state="running"]') && !!document.querySelector('#inst-conn .conn.on')`, 90*time.Second)
	if !evalJS[bool](b, `window.__nsFirstConnected`) {
		t.Logf("the instance page loaded before %s connected, and showed the connection live", id)
	}
	b.wait("the log tail", `document.getElementById('log').textContent.includes('job socket connected')`, 20*time.Second)
	if got := b.loads(); got != loads {
		b.fail("the instance page reloaded (%d loads, want %d)", got, loads)
	}
	b.screenshot("instance")

	// Hand over from the instance page; the migration page follows it live.
	b.click("#migrate-handover")
	b.waitPage("the migration page", "/migrations/mig-", 20*time.Second)
	loads = b.loads()
	first := evalJS[string](b, `window.__nsFirstState`)
	b.wait("the migration to complete", `!!document.querySelector('#mig-state [data-state="completed"]')`, 90*time.Second)
	b.wait("the seam verdict", `!!document.querySelector('#seam-verdict[data-verdict]')`, 10*time.Second)
	if got := b.loads(); got != loads {
		b.fail("the migration page reloaded (%d loads, want %d)", got, loads)
	}
	t.Logf("the migration page loaded showing %q and reached completed without a reload", first)
	if v := evalJS[string](b, `document.getElementById('seam-verdict').dataset.verdict`); v != sim.VerdictSeamless {
		b.fail("seam verdict %q, want seamless", v)
	}
	if txt := b.text("#seam-verdict"); txt != "Seamless" {
		b.fail("seam verdict reads %q", txt)
	}
	if txt := b.text("#seam"); !strings.Contains(txt, "source last") || !strings.Contains(txt, "target first") {
		b.fail("the seam shows no positions: %q", txt)
	}

	// Every frame of the handover is on the timeline; one click shows a
	// frame's payload.
	for _, typ := range []string{"get-state", "state", "initial-state", "target-ready", "cutover-ready", "source-stopped-output", "cutover-apply", "target-applied"} {
		if !evalJS[bool](b, fmt.Sprintf(`[...document.querySelectorAll('#timeline .mark.frame')].some(e => e.textContent.trim().endsWith(' %s'))`, typ)) {
			b.fail("no %s frame on the timeline", typ)
		}
	}
	b.do("click the source-stopped-output frame", chromedp.Click(chromedp.JSPath(
		`[...document.querySelectorAll('#timeline .mark.frame')].filter(e => e.textContent.includes('source-stopped-output'))`)))
	b.wait("the frame's payload", `(document.querySelector('#frame-detail-body pre') || {textContent: ''}).textContent.includes('"last"')`, 5*time.Second)
	if h := b.text("#fd-h"); !strings.HasPrefix(h, "Frame #") {
		b.fail("detail heading %q", h)
	}
	b.screenshot("migration")
	b.noScriptErrors()

	// Zoomed on the cutover, the few milliseconds of the handover spread out.
	b.click("#zoom-cutover")
	b.wait("the cutover axis", `location.search === '?zoom=cutover' && !!document.querySelector('#zoom-cutover[aria-current]')`, 10*time.Second)
	b.wait("the cutover frames", `[...document.querySelectorAll('#timeline .mark.frame')].length >= 4`, 10*time.Second)
	b.screenshot("migration-cutover")

	// Back on the overview: the job runs on node b, the source stopped.
	m := s.Migration(t, strings.TrimPrefix(evalJS[string](b, `location.pathname`), "/migrations/"))
	b.open(s.URL + "/")
	b.wait("the target on node b", fmt.Sprintf(`!!document.querySelector('[data-node="b"] tr[data-instance=%q] [data-state="running"]')`, m.Target.Instance), 10*time.Second)
	b.wait("the source stopped on node a", fmt.Sprintf(`!!document.querySelector('[data-node="a"] tr[data-instance=%q] [data-state="stopped"]')`, id), 10*time.Second)
	b.screenshot("overview-after")

	// The history lists it, and filters by job and state.
	b.open(s.URL + "/migrations?job=" + m.JobID + "&state=completed")
	b.wait("the migration in the history", fmt.Sprintf(`!!document.querySelector('#history a[href="/migrations/%s"]')`, m.ID), 10*time.Second)
	b.screenshot("history")
	b.noScriptErrors()
}

func TestBrowserRefusedMigrations(t *testing.T) {
	b := newBrowser(t)
	s := startSim(t, normsimtest.Options{Runtime: sim.RuntimeExternal})

	// plain declares nothing: only stopThenStart is allowed.
	b.open(s.URL + "/")
	b.click("#launch-plain")
	b.waitPage("the plain instance page", "/instances/plain-", 20*time.Second)
	// A starting instance offers no migrate buttons; the page swaps them in
	// once it runs.
	b.wait("the migrate buttons", `!!document.getElementById('migrate-overlap')`, 20*time.Second)
	for _, st := range []string{"overlap", "handover"} {
		if !evalJS[bool](b, `document.getElementById('migrate-`+st+`').disabled`) {
			b.fail("the %s button of plain is enabled", st)
		}
		if why := b.text("#why-" + st); !strings.Contains(why, "promises only stopThenStart") {
			b.fail("the %s button says why not: %q", st, why)
		}
	}
	if evalJS[bool](b, `document.getElementById('migrate-stopThenStart').disabled`) {
		b.fail("stopThenStart is disabled for plain")
	}
	b.screenshot("plain-buttons")

	// A request for a strategy the template does not allow (a stale page,
	// a crafted form) is refused and the page says why.
	b.do("force the overlap button", chromedp.Evaluate[chromedp.Void](`document.getElementById('migrate-overlap').disabled = false`))
	b.click("#migrate-overlap")
	b.wait("the refusal", `(document.querySelector('#migrate-error') || {textContent: ''}).textContent.includes('is not allowed')`, 20*time.Second)
	msg := b.text("#migrate-error")
	for _, want := range []string{`strategy "overlap" is not allowed: the template declares "stopThenStart"`, "never one the product did not promise"} {
		if !strings.Contains(msg, want) {
			b.fail("the refusal reads %q, want %q", msg, want)
		}
	}
	if p := evalJS[string](b, `location.pathname`); !strings.HasPrefix(p, "/instances/plain-") || strings.HasSuffix(p, "/migrate") {
		b.fail("after a refusal the address is %s, want the instance page", p)
	}
	b.screenshot("refused-strategy")
	b.noScriptErrors()

	// counter declares handover, but an external instance nobody started is
	// not connected: the handover is refused with the reason.
	b.open(s.URL + "/")
	b.click("#launch-counter")
	b.waitPage("the counter instance page", "/instances/counter-", 20*time.Second)
	id := strings.TrimPrefix(evalJS[string](b, `location.pathname`), "/instances/")
	b.wait("the instance to run", `!!document.querySelector('#inst-state [data-state="running"]')`, 20*time.Second)
	if env := b.text("#env-dotenv"); !strings.Contains(env, protocol.EnvToken+"=") {
		b.fail("the external instance shows no env to paste: %q", env)
	}
	b.click("#migrate-handover")
	b.wait("the refusal", `!!document.querySelector('#migrate-error')`, 20*time.Second)
	if msg := b.text("#migrate-error"); !strings.Contains(msg, "handover needs the source connected to its job socket; "+id+" is not connected") {
		b.fail("the refusal reads %q", msg)
	}
	b.screenshot("refused-not-connected")

	// Connected now (a job we play), the source itself refuses: the
	// migration page ends refused, highlighted, with the job's reason.
	in := s.Instance(t, id)
	full, _ := s.Main.Manager.Instance(t.Context(), id)
	src := testjob.Dial(t, full.Env["counter"])
	b.wait("the instance to show connected", `!!document.querySelector('#inst-conn .conn.on')`, 10*time.Second)
	b.click("#migrate-handover")
	b.waitPage("the migration page", "/migrations/mig-", 20*time.Second)
	b.wait("the migration page's event stream", `document.querySelector('#live[data-state="live"]') !== null`, 15*time.Second)
	loads := b.loads()
	src.Expect(protocol.TypeGetState)
	src.Send(protocol.JobFrame{Type: protocol.TypeStateRefused, Reason: "busy recording"})
	b.wait("the refused end", `!!document.querySelector('#mig-state [data-state="refused"]')`, 20*time.Second)
	if r := b.text("#mig-reason"); !strings.Contains(r, "busy recording") || !strings.Contains(r, "no target was placed") {
		b.fail("the end reason reads %q", r)
	}
	if !evalJS[bool](b, `document.getElementById('mig-reason').classList.contains('bad')`) {
		b.fail("a refused migration is not highlighted")
	}
	if got := b.loads(); got != loads {
		b.fail("the migration page reloaded")
	}
	_ = in
	b.screenshot("refused-by-source")
	b.noScriptErrors()
}

func TestBrowserTimelineFollowsAHandoverStepByStep(t *testing.T) {
	b := newBrowser(t)
	s := startSim(t, normsimtest.Options{Runtime: sim.RuntimeExternal})
	in := s.Launch(t, sim.LaunchRequest{Template: "counter", Node: "a"})
	full, _ := s.Main.Manager.Instance(t.Context(), in.ID)
	src := testjob.Dial(t, full.Env["counter"])
	s.WaitConnected(t, in.ID)

	b.open(s.URL + "/instances/" + in.ID)
	b.click("#migrate-handover")
	b.waitPage("the migration page", "/migrations/mig-", 20*time.Second)
	b.wait("the event stream", `document.querySelector('#live[data-state="live"]') !== null`, 15*time.Second)
	migID := strings.TrimPrefix(evalJS[string](b, `location.pathname`), "/migrations/")
	loads := b.loads()
	hasFrame := func(label string) string {
		return fmt.Sprintf(`[...document.querySelectorAll('#timeline .mark.frame')].some(e => e.textContent.trim() === %q)`, label)
	}

	// The source is asked for its state and has not answered: running.
	src.Expect(protocol.TypeGetState)
	b.wait("get-state on the timeline", hasFrame("→ get-state"), 10*time.Second)
	if st := evalJS[string](b, `document.querySelector('#mig-state [data-state]').dataset.state`); st != "running" {
		b.fail("state %q while the source has not answered", st)
	}
	b.screenshot("waiting-for-state")

	src.Send(protocol.JobFrame{Type: protocol.TypeState, Payload: json.RawMessage(`{"next":41}`)})
	b.wait("the state frame", hasFrame("← state"), 10*time.Second)

	var env map[string]string
	waitFor(t, 10*time.Second, "the target's env", func() bool {
		m := s.Migration(t, migID)
		env = m.Target.Env["counter"]
		return env != nil
	})
	b.wait("the env to start the target with", `!!document.querySelector('#target-env')`, 10*time.Second)
	tgt := testjob.Dial(t, env)
	tgt.Expect(protocol.TypeInitialState)
	b.wait("initial-state", hasFrame("→ initial-state"), 10*time.Second)

	tgt.Send(protocol.JobFrame{Type: protocol.TypeTargetReady, Payload: json.RawMessage(`{"ready":true}`)})
	src.Expect(protocol.TypeCutoverReady)
	b.wait("cutover-ready", hasFrame("→ cutover-ready"), 10*time.Second)
	b.screenshot("cutover-ready")

	src.Send(protocol.JobFrame{Type: protocol.TypeSourceStoppedOutput, Payload: json.RawMessage(`{"last":41}`)})
	tgt.Expect(protocol.TypeCutoverApply)
	b.wait("the point of no return", `!!document.querySelector('#timeline .ponr')`, 10*time.Second)

	tgt.Send(protocol.JobFrame{Type: protocol.TypeTargetApplied, Applied: []string{"counter"}})
	b.wait("completed", `!!document.querySelector('#mig-state [data-state="completed"]')`, 20*time.Second)
	if got := b.loads(); got != loads {
		b.fail("the migration page reloaded (%d loads, want %d)", got, loads)
	}
	if d := b.text("#d-cutover"); d == "—" || d == "" {
		b.fail("no cutover duration: %q", d)
	}
	// The sink saw no output from jobs played by the test: said so.
	if v := evalJS[string](b, `document.getElementById('seam-verdict').dataset.verdict`); v != "not measured" && v != sim.VerdictNoOutput {
		b.fail("seam verdict %q for a job without output", v)
	}

	// The state frame's payload, one click away.
	b.do("click the state frame", chromedp.Click(chromedp.JSPath(`[...document.querySelectorAll('#timeline .mark.frame')].filter(e => e.textContent.trim() === '← state')`)))
	b.wait("the payload", `(document.querySelector('#frame-detail-body pre') || {textContent: ''}).textContent.includes('"next": 41')`, 5*time.Second)
	b.screenshot("completed")
	b.noScriptErrors()
}

// TestBrowserSurvivesARestart stops normsim under an open page and starts
// it again on the same address: the page reconnects by itself, refreshes,
// and its forms work with the new run's CSRF token.
func TestBrowserSurvivesARestart(t *testing.T) {
	b := newBrowser(t)
	opts := app.DefaultOptions()
	opts.OpenStore = withsqlite.Open
	opts.Addr = fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
	opts.SocketPort = 0
	opts.SocketHost = "127.0.0.1"
	opts.DB = filepath.Join(t.TempDir(), "normsim.db")
	opts.Templates = []string{templatesDir}
	opts.Runtime = sim.RuntimeExternal
	start := func() *app.Main {
		m := app.New(opts)
		if err := m.Open(context.Background()); err != nil {
			t.Fatalf("start normsim on %s: %v", opts.Addr, err)
		}
		t.Cleanup(func() { m.Close() })
		return m
	}
	first := start()
	b.open(first.URL() + "/")
	token := evalJS[string](b, `document.querySelector('form[aria-label="Launch plain"] input[name="csrf"]').value`)
	loads := b.loads()

	first.Close()
	b.wait("the page to notice", `!!document.querySelector('#live[data-state="reconnecting"]')`, 20*time.Second)
	b.screenshot("reconnecting")
	second := start()
	b.wait("the page to reconnect", `!!document.querySelector('#live[data-state="live"]')`, 30*time.Second)
	b.wait("the new run's token", fmt.Sprintf(`document.querySelector('form[aria-label="Launch plain"] input[name="csrf"]').value !== %q`, token), 10*time.Second)
	if got := b.loads(); got != loads {
		b.fail("the page reloaded (%d loads, want %d)", got, loads)
	}
	b.click("#launch-plain")
	b.waitPage("the instance page", "/instances/plain-", 20*time.Second)
	b.noScriptErrors()
	if list, err := second.Manager.Instances(t.Context()); err != nil || len(list) != 1 {
		t.Fatalf("instances after the launch: %v %v", list, err)
	}
}

// TestBrowserLogLinesSitBesideTheirFrames: the source prints
// "cutover-ready: output stopped" when the cutover-ready frame reaches it;
// on the migration page that line is in the source's lane next to the
// frame, inside the cutover zoom too, and a click shows it whole.
func TestBrowserLogLinesSitBesideTheirFrames(t *testing.T) {
	b := newBrowser(t)
	s := startSim(t, normsimtest.Options{})
	in := s.Launch(t, sim.LaunchRequest{Template: "counter", Node: "a"})
	s.WaitConnected(t, in.ID)
	m := s.MigrateAndWait(t, in.ID, sim.MigrateRequest{To: "b"})
	normsimtest.RequireCompleted(t, m)

	const line = "cutover-ready: output stopped"
	logMark := fmt.Sprintf(`[...document.querySelectorAll('#timeline [data-lane="source"] .mark.logline')].find(e => e.title.includes(%q))`, line)
	frameMark := `[...document.querySelectorAll('#timeline [data-lane="source"] .mark.frame')].find(e => e.textContent.trim().endsWith(' cutover-ready'))`
	for _, view := range []string{"", "?zoom=cutover"} {
		b.open(s.URL + "/migrations/" + m.ID + view)
		b.wait("the source's "+line+" line in its lane"+view, logMark+` !== undefined`, 10*time.Second)
		b.wait("the cutover-ready frame in the source's lane", frameMark+` !== undefined`, 5*time.Second)
		// Beside it: within a millisecond or two of the frame (the frame is
		// stamped once its write returned, which the job may beat in
		// printing the line). The zoom spreads a few ms over the whole
		// track, so there it need only be drawn, which it is only inside
		// the window.
		dx := evalJS[float64](b, `(`+logMark+`).getBoundingClientRect().left - (`+frameMark+`).getBoundingClientRect().left`)
		if view == "" && (dx < -40 || dx > 40) {
			b.fail("the line is %.0f px from its frame, want it beside it", dx)
		}
		t.Logf("view %q: the line is %.0f px after its frame", view, dx)
		b.screenshot("logs" + strings.ReplaceAll(view, "?zoom=", "-"))
	}
	b.do("click the line", chromedp.Click(chromedp.JSPath(logMark)))
	b.wait("the whole line in the detail", fmt.Sprintf(`(document.querySelector('#frame-detail-body pre.log-line') || {textContent: ''}).textContent.includes('msg=%q')`, line), 5*time.Second)
	if txt := b.text("#frame-detail-body"); !strings.Contains(txt, "migration=") || !strings.Contains(txt, "source") {
		b.fail("the detail does not show the whole line: %q", txt)
	}
	// The log table lists it on the source's side too.
	if !evalJS[bool](b, fmt.Sprintf(`[...document.querySelectorAll('#logs tr')].some(r => r.textContent.includes(%q) && r.querySelector('.lane-tag.source'))`, line)) {
		b.fail("the log table does not list the source's line")
	}
	b.screenshot("log-detail")
	b.noScriptErrors()

	// Removed, the target's page still shows what it printed, its last
	// line (printed as it stopped) included.
	if err := s.Client.Stop(context.Background(), m.Target.Instance); err != nil {
		t.Fatal(err)
	}
	b.do("open the removed target's page", chromedp.Navigate(s.URL+"/instances/"+m.Target.Instance))
	b.wait("the removed note", `!!document.getElementById('removed-note')`, 10*time.Second)
	b.wait("its log", `document.getElementById('log').textContent.includes('counter stopping')`, 10*time.Second)
	b.screenshot("removed-instance")
	b.noScriptErrors()
}

// TestBrowserAbortButton: a handover held in get-state is aborted from its
// page; the page shows it rolled back by the user, without reloading, and
// the source is told abort.
func TestBrowserAbortButton(t *testing.T) {
	b := newBrowser(t)
	s := startSim(t, normsimtest.Options{Runtime: sim.RuntimeExternal})
	in := s.Launch(t, sim.LaunchRequest{Template: "counter", Node: "a"})
	full, _ := s.Main.Manager.Instance(t.Context(), in.ID)
	src := testjob.Dial(t, full.Env["counter"])
	s.WaitConnected(t, in.ID)
	m, err := s.Migrate(in.ID, sim.MigrateRequest{})
	if err != nil {
		t.Fatal(err)
	}
	src.Expect(protocol.TypeGetState) // and never answers: the migration waits
	b.open(s.URL + "/migrations/" + m.ID)
	b.wait("the migration page's event stream", `document.querySelector('#live[data-state="live"]') !== null`, 15*time.Second)
	b.screenshot("abort-offered")
	b.click("#mig-abort")
	b.wait("the aborted end", `!!document.querySelector('#mig-state [data-state="aborted"]')`, 20*time.Second)
	if r := b.text("#mig-reason"); !strings.Contains(r, "aborted by the user") || !strings.Contains(r, "Rolled back before the point of no return") {
		b.fail("the end reason reads %q", r)
	}
	if evalJS[bool](b, `!!document.querySelector('#mig-abort')`) {
		b.fail("an aborted migration still offers Abort")
	}
	if f := src.Expect(protocol.TypeAbort); f.MigrationID != m.ID {
		b.fail("the source was told %+v", f)
	}
	b.screenshot("aborted-by-user")
	b.noScriptErrors()
}
