package web_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

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
