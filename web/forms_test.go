package web_test

import (
	"bytes"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/normsim/normsim/normsimtest"
	"github.com/normsim/normsim/sim"
	"github.com/normsim/normsim/web"
)

func TestLaunchFormRedirectsToTheInstance(t *testing.T) {
	f := newFake()
	s := newServer(t, f, nil)
	tok := csrfToken(t, s, "/")
	r := post(t, s, "/ui/instances", url.Values{"csrf": {tok}, "template": {"counter"}, "node": {"b"}, "runtime": {"external"},
		"param.RATE": {"20"}, "param.MODE": {"slow"}, "param.API_KEY": {""}, "param.SRT_PORT": {"  "}})
	if r.Status != http.StatusSeeOther || r.Header.Get("Location") != "/instances/counter-new" {
		t.Fatalf("launch = %d Location %q\n%s", r.Status, r.Header.Get("Location"), r.Body)
	}
	got := f.launched[0]
	if got.Template != "counter" || got.Node != "b" || got.Runtime != "external" || len(got.Params) != 3 ||
		got.Params["RATE"] != "20" || got.Params["MODE"] != "slow" {
		t.Fatalf("launch request = %+v (blank fields must be left out so defaults apply)", got)
	}
	// A cleared port field is the operator closing the port, which a
	// default of auto must not reopen: it is sent blank, not left out.
	if v, sent := got.Params["SRT_PORT"]; !sent || v != "" {
		t.Fatalf("SRT_PORT = %q (sent %v), want a blank that closes the port", v, sent)
	}
}

func TestLaunchFormShowsTheCatalogsRefusalNextToTheField(t *testing.T) {
	s := startSim(t, normsimtest.Options{Runtime: sim.RuntimeExternal})
	h := s.Main.Web
	tok := csrfToken(t, h, "/")
	r := post(t, h, "/ui/instances", url.Values{"csrf": {tok}, "template": {"counter"}, "node": {"a"}, "param.RATE": {"5000"}})
	if r.Status != http.StatusUnprocessableEntity {
		t.Fatalf("launch with RATE=5000 = %d\n%s", r.Status, r.Body)
	}
	mustContain(t, r, "Launch refused", sim.EParamsInvalid, "params.RATE:", `id="launch-counter-error"`, `role="alert"`,
		// next to the field, which keeps the value typed and is marked invalid
		`id="launch-counter-RATE-err"`, `value="5000"`, `aria-invalid="true"`, `aria-describedby="launch-counter-RATE-hint launch-counter-RATE-err"`)
	// The refusal is rendered at the form's address; the page says where it
	// really lives so a refresh and a reload go there.
	mustContain(t, r, `data-refresh="/"`)

	for _, tc := range []struct {
		form   url.Values
		status int
		says   string
	}{
		{url.Values{"template": {"nope"}, "node": {"a"}}, http.StatusNotFound, `template "nope" not found`},
		{url.Values{"template": {"counter"}, "node": {"z"}}, http.StatusNotFound, `node "z" not found`},
		{url.Values{"template": {"counter"}, "node": {"a"}, "runtime": {"warp"}}, http.StatusUnprocessableEntity, `runtime "warp" is not available`},
		{url.Values{"template": {"counter"}, "node": {"a"}, "param.NOPE": {"1"}}, http.StatusUnprocessableEntity, "params.NOPE: unknown parameter"},
		{url.Values{"template": {"counter"}, "node": {"a"}, "param.NORSK_X": {"1"}}, http.StatusUnprocessableEntity, "reserved for the infrastructure"},
	} {
		tc.form.Set("csrf", tok)
		r := post(t, h, "/ui/instances", tc.form)
		if r.Status != tc.status {
			t.Errorf("%v = %d, want %d", tc.form, r.Status, tc.status)
		}
		mustContain(t, r, tc.says)
	}
}

func TestMigrateFormRedirectsToTheTimeline(t *testing.T) {
	f := newFake()
	f.add(sim.Instance{ID: "i1", Node: "a", Template: "counter", Runtime: sim.RuntimeProcess, State: sim.InstanceRunning, Connected: true})
	s := newServer(t, f, nil)
	tok := csrfToken(t, s, "/instances/i1")
	r := post(t, s, "/ui/instances/i1/migrate", url.Values{"csrf": {tok}, "strategy": {"handover"}, "to": {"b"}, "runtime": {""},
		"timeout.targetReady": {"1500"}, "timeout.apply": {"250.5"}, "timeout.state": {""}})
	if r.Status != http.StatusSeeOther || r.Header.Get("Location") != "/migrations/mig-new" {
		t.Fatalf("migrate = %d Location %q\n%s", r.Status, r.Header.Get("Location"), r.Body)
	}
	got := f.migrated[0]
	if got.Strategy != "handover" || got.To != "b" || got.Runtime != "" ||
		got.Timeouts.TargetReady.D() != 1500*time.Millisecond || got.Timeouts.Apply.D() != 250500*time.Microsecond || got.Timeouts.State != 0 {
		t.Fatalf("migrate request = %+v", got)
	}
}

func TestMigrateFormRefusesABadTimeoutBeforeAsking(t *testing.T) {
	f := newFake()
	f.add(sim.Instance{ID: "i1", Node: "a", Template: "counter", Runtime: sim.RuntimeProcess, State: sim.InstanceRunning})
	s := newServer(t, f, nil)
	tok := csrfToken(t, s, "/instances/i1")
	for _, v := range []string{"abc", "-5", "1e12"} {
		r := post(t, s, "/ui/instances/i1/migrate", url.Values{"csrf": {tok}, "strategy": {"handover"}, "timeout.stop": {v}})
		if r.Status != http.StatusBadRequest {
			t.Errorf("timeout %q = %d", v, r.Status)
		}
		mustContain(t, r, "timeouts.stop: must be a number of milliseconds", `value="`+v+`"`, `id="migrate-error"`, "<details class=\"timeouts\" open>")
	}
	if len(f.migrated) != 0 {
		t.Fatalf("Migrate was called with a bad timeout: %+v", f.migrated)
	}
}

func TestMigrateFormExplainsARefusal(t *testing.T) {
	s := startSim(t, normsimtest.Options{Runtime: sim.RuntimeExternal})
	h := s.Main.Web
	plain := s.Launch(t, sim.LaunchRequest{Template: "plain", Node: "a"})
	counter := s.Launch(t, sim.LaunchRequest{Template: "counter", Node: "a"})
	s.WaitInstance(t, counter.ID, 10*time.Second, "running", func(in sim.Instance) bool { return in.State == sim.InstanceRunning })
	s.WaitInstance(t, plain.ID, 10*time.Second, "running", func(in sim.Instance) bool { return in.State == sim.InstanceRunning })
	tok := csrfToken(t, h, "/instances/"+plain.ID)

	for _, tc := range []struct {
		name, id string
		form     url.Values
		status   int
		says     []string
	}{
		{"strategy the manifest does not allow", plain.ID, url.Values{"strategy": {"overlap"}}, http.StatusUnprocessableEntity,
			[]string{`strategy "overlap" is not allowed: the template declares "stopThenStart"`, "never one the product did not promise"}},
		{"handover of a template that declares handover, but not connected", counter.ID, url.Values{"strategy": {"handover"}}, http.StatusUnprocessableEntity,
			[]string{"handover needs the source connected to its job socket; " + counter.ID + " is not connected"}},
		{"overlap of a handover product", counter.ID, url.Values{"strategy": {"overlap"}}, http.StatusUnprocessableEntity,
			[]string{`strategy "overlap" is not allowed: the template declares "handover"`}},
		{"unknown strategy", counter.ID, url.Values{"strategy": {"teleport"}}, http.StatusUnprocessableEntity,
			[]string{"strategy: must be one of overlap, stopThenStart, handover"}},
		{"to its own node", counter.ID, url.Values{"strategy": {"stopThenStart"}, "to": {"a"}}, http.StatusUnprocessableEntity,
			[]string{"already runs on node a"}},
		{"to a node that does not exist", counter.ID, url.Values{"strategy": {"stopThenStart"}, "to": {"q"}}, http.StatusNotFound,
			[]string{`node "q" not found`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.form.Set("csrf", tok)
			r := post(t, h, "/ui/instances/"+tc.id+"/migrate", tc.form)
			if r.Status != tc.status {
				t.Errorf("status %d, want %d", r.Status, tc.status)
			}
			mustContain(t, r, append(tc.says, `id="migrate-error"`, "Refused", `data-refresh="/instances/`+tc.id+`"`)...)
		})
	}

	// An instance that is not there is a 404 page, not an instance page.
	r := post(t, h, "/ui/instances/nope/migrate", url.Values{"csrf": {tok}, "strategy": {"handover"}})
	if r.Status != http.StatusNotFound {
		t.Errorf("migrate of an unknown instance = %d", r.Status)
	}
	mustContain(t, r, `instance "nope" not found`)
}

func TestMigrateFormConflict(t *testing.T) {
	f := newFake()
	f.add(sim.Instance{ID: "i1", Node: "a", Template: "counter", Runtime: sim.RuntimeProcess, State: sim.InstanceRunning, Connected: true})
	f.migrateErr = sim.Errorf(sim.EConflict, "job job-1 is already migrating (mig-7); wait for it to end")
	s := newServer(t, f, nil)
	r := post(t, s, "/ui/instances/i1/migrate", url.Values{"csrf": {csrfToken(t, s, "/")}, "strategy": {"handover"}, "to": {"b"}})
	if r.Status != http.StatusConflict {
		t.Fatalf("conflict = %d", r.Status)
	}
	// The form keeps the choice made.
	mustContain(t, r, "is already migrating (mig-7)", sim.EConflict, `<option value="b" selected>`)
}

func TestStopForm(t *testing.T) {
	f := newFake()
	f.add(sim.Instance{ID: "i1", Node: "a", Template: "counter", Runtime: sim.RuntimeProcess, State: sim.InstanceRunning})
	s := newServer(t, f, nil)
	tok := csrfToken(t, s, "/instances/i1")

	r := post(t, s, "/ui/instances/i1/stop", url.Values{"csrf": {tok}})
	if r.Status != http.StatusSeeOther || r.Header.Get("Location") != "/" || f.stopped[0] != "i1" {
		t.Fatalf("stop = %d %q, stopped %v", r.Status, r.Header.Get("Location"), f.stopped)
	}

	f.stopErr = sim.Errorf(sim.EConflict, `instance "i1" is part of running migration mig-3; wait for it to end`)
	r = post(t, s, "/ui/instances/i1/stop", url.Values{"csrf": {tok}})
	if r.Status != http.StatusConflict {
		t.Fatalf("stop during a migration = %d", r.Status)
	}
	mustContain(t, r, "is part of running migration mig-3", `id="migrate-error"`)

	f.stopErr = sim.Errorf(sim.ENotFound, `instance "i9" not found`)
	r = post(t, s, "/ui/instances/i9/stop", url.Values{"csrf": {tok}})
	if r.Status != http.StatusNotFound {
		t.Fatalf("stop of an unknown instance = %d", r.Status)
	}
	mustContain(t, r, `instance "i9" not found`)
}

func TestInternalErrorsAreLoggedAndNotShown(t *testing.T) {
	var logs bytes.Buffer
	f := newFake()
	f.launchErr = errorString("open /var/secret/place: permission denied")
	s := web.New(web.Config{Service: f, Addr: host, Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	r := post(t, s, "/ui/instances", url.Values{"csrf": {csrfToken(t, s, "/")}, "template": {"counter"}, "node": {"a"}})
	if r.Status != http.StatusInternalServerError {
		t.Fatalf("internal error = %d", r.Status)
	}
	mustContain(t, r, "internal error")
	mustNotContain(t, r, "/var/secret/place")
	if !strings.Contains(logs.String(), "/var/secret/place") {
		t.Fatalf("the internal error was not logged: %s", logs.String())
	}
}

type errorString string

func (e errorString) Error() string { return string(e) }

func TestMigrateFormArmsFaults(t *testing.T) {
	f := newFake()
	f.add(sim.Instance{ID: "i1", Node: "a", Template: "counter", Runtime: sim.RuntimeProcess, State: sim.InstanceRunning, Connected: true})
	s := newServer(t, f, nil)
	tok := csrfToken(t, s, "/instances/i1")
	r := post(t, s, "/ui/instances/i1/migrate", url.Values{"csrf": {tok}, "strategy": {"handover"},
		"faults": {`[{"kind":"kill","side":"target","on":"target-ready"},{"kind":"delay-frame","frame":"get-state","delay":"300ms"}]`}})
	if r.Status != http.StatusSeeOther {
		t.Fatalf("migrate with faults = %d\n%s", r.Status, r.Body)
	}
	got := f.migrated[0].Faults
	if len(got) != 2 || got[0].Kind != "kill" || got[0].Side != "target" || got[0].On != "target-ready" || got[1].Delay.D() != 300*time.Millisecond {
		t.Fatalf("faults = %+v", got)
	}
	for _, bad := range []string{`{"kind":"kill"}`, `[{"Kind":"kill"}]`, `[{"kind":"kill","when":"now"}]`, `[`} {
		r := post(t, s, "/ui/instances/i1/migrate", url.Values{"csrf": {tok}, "strategy": {"handover"}, "faults": {bad}})
		if r.Status != http.StatusBadRequest {
			t.Errorf("faults %s = %d, want 400", bad, r.Status)
		}
		mustContain(t, r, "faults", `id="migrate-error"`, `<details class="faults" open>`)
	}
	if len(f.migrated) != 1 {
		t.Fatalf("Migrate was called with bad faults: %+v", f.migrated[1:])
	}
}

// TestStoppedInstanceIsRemovedAsItsRecord (issue 34 item 5): the page of a
// stopped instance (a migration's source) removes that record; the API
// does so with DELETE ?stopped=true; a plain DELETE stays a stop.
func TestStoppedInstanceIsRemovedAsItsRecord(t *testing.T) {
	f := newFake()
	f.add(sim.Instance{ID: "src", JobID: "job-1", Node: "a", Template: "counter", Runtime: sim.RuntimeProcess, State: sim.InstanceStopped})
	f.add(sim.Instance{ID: "tgt", JobID: "job-1", Node: "b", Template: "counter", Runtime: sim.RuntimeProcess, State: sim.InstanceRunning})
	s := newServer(t, f, nil)
	mustContain(t, get(t, s, "/instances/src"), `<input type="hidden" name="stopped" value="true">`)
	mustNotContain(t, get(t, s, "/instances/tgt"), `name="stopped"`)
	tok := csrfToken(t, s, "/instances/src")
	r := post(t, s, "/ui/instances/src/stop", url.Values{"csrf": {tok}, "stopped": {"true"}})
	if r.Status != http.StatusSeeOther || len(f.removedStopped) != 1 || f.removedStopped[0] != "src" || len(f.stopped) != 0 {
		t.Fatalf("remove a stopped record = %d; removed %v, stopped %v", r.Status, f.removedStopped, f.stopped)
	}
	if r := do(t, s, httptest.NewRequest(http.MethodDelete, "/api/v1/instances/src?stopped=true", nil)); r.Status != http.StatusNoContent || len(f.removedStopped) != 2 {
		t.Fatalf("DELETE ?stopped=true = %d; removed %v", r.Status, f.removedStopped)
	}
	if r := do(t, s, httptest.NewRequest(http.MethodDelete, "/api/v1/instances/tgt", nil)); r.Status != http.StatusNoContent || len(f.stopped) != 1 || f.stopped[0] != "tgt" {
		t.Fatalf("DELETE = %d; stopped %v", r.Status, f.stopped)
	}
	r = do(t, s, httptest.NewRequest(http.MethodDelete, "/api/v1/instances/src?stopped=maybe", nil))
	if r.Status != http.StatusBadRequest || !strings.Contains(r.Body, "stopped") {
		t.Fatalf("DELETE ?stopped=maybe = %d %s", r.Status, r.Body)
	}
}
