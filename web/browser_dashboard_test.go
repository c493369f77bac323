package web_test

import (
	"fmt"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/normsim/normsim/normsimtest"
	"github.com/normsim/normsim/sim"
)

// TestBrowserStoppedAndWaitingInstances: the source a migration stopped
// offers no migrate button and claims no health; the external target it
// placed, which nobody has started, says it waits for its job.
func TestBrowserStoppedAndWaitingInstances(t *testing.T) {
	b := newBrowser(t)
	s := startSim(t, normsimtest.Options{Runtime: sim.RuntimeExternal})
	src := s.Launch(t, sim.LaunchRequest{Template: "plain", Node: "a"})
	// Only a running instance migrates; a loaded machine may still be
	// starting it.
	s.WaitInstance(t, src.ID, 10*time.Second, "running", func(in sim.Instance) bool { return in.State == sim.InstanceRunning })
	m := s.MigrateAndWait(t, src.ID, sim.MigrateRequest{Strategy: string(sim.StopThenStart)})
	if m.State != sim.MigrationCompleted {
		t.Fatalf("stopThenStart of plain: %s (%s)", m.State, m.Reason)
	}

	b.open(s.URL + "/instances/" + src.ID)
	b.wait("the stopped source", `!!document.querySelector('#inst-state [data-state="stopped"]')`, 10*time.Second)
	if n := evalJS[int](b, `document.querySelectorAll('#migrate button[name="strategy"]').length`); n != 0 {
		b.fail("a stopped instance offers %d migrate buttons", n)
	}
	if h := evalJS[string](b, `[...document.querySelectorAll('#status dt')].find(e => e.textContent === 'Healthy').nextElementSibling.textContent.trim()`); h == "yes" {
		b.fail("a stopped instance says Healthy: %q", h)
	}
	if note := b.text("#migrate-notes"); !strings.Contains(note, "only a running instance can migrate") {
		b.fail("the stopped instance does not say why it cannot migrate: %q", note)
	}
	b.screenshot("stopped-source")

	b.open(s.URL + "/instances/" + m.Target.Instance)
	b.wait("the target", `!!document.querySelector('#inst-state [data-state="running"]')`, 10*time.Second)
	if c := b.text("#inst-conn"); !strings.Contains(c, "waiting for its job") {
		b.fail("the external target nobody started reads %q, want it to say it waits for its job", c)
	}
	b.screenshot("waiting-target")

	b.open(s.URL + "/")
	row := fmt.Sprintf(`[data-node="b"] tr[data-instance=%q]`, m.Target.Instance)
	if c := b.text(row); !strings.Contains(c, "waiting for its job") {
		b.fail("the overview's row of the waiting target reads %q", c)
	}
	b.noScriptErrors()
}

// TestBrowserOverviewTablesFitTheirCards: with three nodes, every cell of
// a node's instance table stays inside the node's card from 1,000 px to
// 1,600 px wide (the job column and the logs link once spilled over the
// next card).
func TestBrowserOverviewTablesFitTheirCards(t *testing.T) {
	b := newBrowser(t)
	s := startSim(t, normsimtest.Options{Runtime: sim.RuntimeExternal, Nodes: []string{"a", "b", "c"}})
	for _, n := range []string{"a", "b", "c"} {
		s.Launch(t, sim.LaunchRequest{Template: "counter", Node: n})
		s.Launch(t, sim.LaunchRequest{Template: "plain", Node: n})
	}
	for _, w := range []int{1000, 1280, 1600} {
		b.do(fmt.Sprintf("resize to %d px", w), chromedp.EmulateViewport(int64(w), 900))
		b.open(s.URL + "/")
		b.wait("three node tables", `document.querySelectorAll('.node table.instances').length === 3`, 10*time.Second)
		spill := evalJS[[]string](b, `[...document.querySelectorAll('.node')].flatMap(card => {
			const c = card.getBoundingClientRect();
			return [...card.querySelectorAll('table.instances th, table.instances td')].filter(td => {
				const r = td.getBoundingClientRect();
				return r.left < c.left - 0.5 || r.right > c.right + 0.5;
			}).map(td => card.dataset.node + ': ' + td.textContent.trim().slice(0, 40) + ' (' + Math.round(td.getBoundingClientRect().right) + ' > ' + Math.round(c.right) + ')');
		})`)
		b.screenshot(fmt.Sprintf("overview-%d", w))
		if len(spill) > 0 {
			b.fail("at %d px these cells spill out of their node card: %q", w, spill)
		}
	}
	b.noScriptErrors()
}

// TestBrowserTimelineLabelsEveryMark: on a crowded timeline (a fault and
// its consequences within a millisecond) every mark shows a label, and no
// mark is drawn over another in its lane.
func TestBrowserTimelineLabelsEveryMark(t *testing.T) {
	m := completedMigration()
	at := func(ms float64) time.Time { return m.StartedAt.Add(time.Duration(ms * float64(time.Millisecond))) }
	crowd := []string{"fault: drop-socket the source (armed on state)", "state is lost with the source", "socket closed by normsim with 1006",
		"rolling back: normsim closed the source's socket", "target removed", "source left running", "paused for 1s", "resumed",
		"fault: kill the target (armed on target-ready)", "could not resume the target: gone"}
	for i, d := range crowd {
		m.Events = append(m.Events, sim.MigrationEvent{At: at(125.1 + float64(i)*0.05), Phase: "cutover-apply", Side: "manager", Detail: d})
	}
	slices.SortStableFunc(m.Events, func(x, y sim.MigrationEvent) int { return x.At.Compare(y.At) })
	for i := range m.Events {
		m.Events[i].Seq = i + 1
	}
	f := newFake()
	f.addMig(m)
	srv := httptest.NewServer(newServer(t, f, nil))
	t.Cleanup(srv.Close)
	b := newBrowser(t) // after the server: its cleanup, closing the event stream, runs first

	for _, zoom := range []string{"", "?zoom=cutover"} {
		b.open(srv.URL + "/migrations/mig-ok" + zoom)
		b.screenshot("timeline" + strings.ReplaceAll(zoom, "?zoom=", "-"))
		bad := evalJS[[]string](b, `(() => {
			const out = [];
			for (const lane of document.querySelectorAll('#timeline .tl-lane')) {
				const marks = [...lane.querySelectorAll('.mark')].map(e => ({e, r: e.getBoundingClientRect(), text: e.textContent.trim()}));
				for (const m of marks) {
					if (!m.text || m.r.width < 20) out.push(lane.dataset.lane + ': mark ' + m.e.dataset.seq + ' shows no label (' + m.e.title + ')');
				}
				for (let i = 0; i < marks.length; i++) for (let j = i + 1; j < marks.length; j++) {
					const a = marks[i].r, c = marks[j].r;
					if (a.left < c.right - 1 && c.left < a.right - 1 && a.top < c.bottom - 1 && c.top < a.bottom - 1) {
						out.push(lane.dataset.lane + ': "' + marks[i].text + '" and "' + marks[j].text + '" overlap');
					}
				}
			}
			return out;
		})()`)
		if len(bad) > 0 {
			b.fail("timeline%s: %q", zoom, bad)
		}
	}
	b.noScriptErrors()
}

// TestBrowserSummaryShowsTheJudgementBesideTheSeam: a handover whose
// target reported a participant it could not apply shows, in the summary
// beside the output seam, the judgement (tolerated, nobody at fault, why)
// and every failed id with its reason.
func TestBrowserSummaryShowsTheJudgementBesideTheSeam(t *testing.T) {
	f := newFake()
	f.addMig(completedMigration()) // overlay failed: missing font
	srv := httptest.NewServer(newServer(t, f, nil))
	t.Cleanup(srv.Close)
	b := newBrowser(t) // after the server: its cleanup, closing the event stream, runs first

	b.open(srv.URL + "/migrations/mig-ok")
	b.wait("the judgement", `!!document.querySelector('#summary #judgement')`, 10*time.Second)
	if g := b.text("#judgement-grade"); g != "tolerated" {
		b.fail("judgement reads %q, want tolerated", g)
	}
	if a := b.text("#judgement-at-fault"); a != "at fault: none" {
		b.fail("at fault reads %q", a)
	}
	if w := b.text("#judgement-why"); w != "the target could not apply 1 participant: overlay (missing font)" {
		b.fail("why reads %q", w)
	}
	if r := b.text(`#result-failed [data-failed="overlay"]`); r != "overlay missing font" {
		b.fail("the failed participant reads %q", r)
	}
	// Beside the seam: the same row of the stats, and visible.
	if !evalJS[bool](b, `(() => {
		const s = document.querySelector('#seam').getBoundingClientRect(), j = document.querySelector('#judgement').getBoundingClientRect();
		return j.width > 0 && j.height > 0 && Math.abs(s.top - j.top) < 2;
	})()`) {
		b.fail("the judgement is not beside the output seam")
	}
	b.screenshot("judgement")
	b.noScriptErrors()
}

// TestBrowserWideScreenAndPromises: at 1,920 px the page, and with it the
// timeline, is wider than at 1,440 px; a stopThenStart's gap is coloured
// as the promise it is, a handover's as a failure; a stopped source links
// to where its job runs now.
func TestBrowserWideScreenAndPromises(t *testing.T) {
	f := newFake()
	m := completedMigration()
	f.addMig(m)
	gap, lost, total := 240.0, int64(12), 900.0
	last, first := int64(310), int64(323)
	ended := m.StartedAt.Add(900 * time.Millisecond)
	sts := &sim.Migration{ID: "mig-sts", JobID: "job-9", Strategy: sim.StopThenStart, State: sim.MigrationCompleted, Phase: "start-target",
		StartedAt: m.StartedAt, EndedAt: &ended, Durations: sim.Durations{TotalMs: &total},
		Source: sim.MigrationEndpoint{Instance: "plain-src", Node: "a"}, Target: sim.MigrationEndpoint{Instance: "plain-tgt", Node: "b"},
		Output: &sim.OutputReport{Verdict: sim.VerdictGap, GapMs: &gap, Lost: lost, LastSource: &last, FirstTarget: &first,
			Detail: "source stopped at 310, target continued at 323: 12 lost, a gap of 240 ms, as stopThenStart promises"},
		Events: []sim.MigrationEvent{{Seq: 1, At: m.StartedAt, Phase: sim.PhaseRequested, Side: "manager", Kind: sim.TimelineRequested, Detail: "stopThenStart of plain-src from node a to node b"}}}
	f.addMig(sts)
	f.add(sim.Instance{ID: "plain-src", JobID: "job-9", Node: "a", Template: "plain", State: sim.InstanceStopped})
	f.add(sim.Instance{ID: "plain-tgt", JobID: "job-9", Node: "b", Template: "plain", State: sim.InstanceRunning, MigrationID: "mig-sts"})
	srv := httptest.NewServer(newServer(t, f, nil))
	t.Cleanup(srv.Close)
	b := newBrowser(t)

	width := func() float64 {
		b.open(srv.URL + "/migrations/" + m.ID)
		return evalJS[float64](b, `document.querySelector('#timeline').getBoundingClientRect().width`)
	}
	narrow := width()
	b.do("widen the window", chromedp.EmulateViewport(1920, 1080))
	wide := width()
	b.screenshot("timeline-1920")
	if wide < narrow+300 {
		b.fail("the timeline is %.0f px wide at 1,920 px and %.0f px at 1,440 px; want it to use the wider screen", wide, narrow)
	}

	b.open(srv.URL + "/migrations/mig-sts")
	if tone := evalJS[string](b, `document.getElementById('seam').className`); !strings.Contains(tone, "ok") {
		b.fail("a stopThenStart's gap is coloured %q, want ok", tone)
	}
	if h := b.text("#seam-verdict"); !strings.Contains(h, "as stopThenStart promises") {
		b.fail("the seam headline reads %q", h)
	}
	b.screenshot("stopthenstart-gap")
	b.open(srv.URL + "/instances/plain-src")
	b.click("#replaced-by a")
	b.waitPage("the successor's page", "/instances/plain-tgt", 10*time.Second)
	if txt := b.text("#moved-from"); !strings.Contains(txt, "plain-src") {
		b.fail("the successor's page says %q", txt)
	}
	b.noScriptErrors()
}
