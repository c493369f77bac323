package storetest

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/normsim/normsim/sim"
)

var recordTests = []test{
	{"RecordsReadBack", testRecordsReadBack},
	{"NotFoundCarriesCode", testNotFoundCarriesCode},
	{"InstancesUpsertAndOrder", testInstancesUpsertAndOrder},
	{"CopiesNotAliases", testCopiesNotAliases},
	{"TimesReadBackInUTC", testTimesReadBackInUTC},
}

// testRecordsReadBack: every kind of record reads back as written.
func testRecordsReadBack(t *testing.T, open Opener) {
	s := open(t)
	WriteRecords(t, s)
	CheckRecords(t, s)
}

// recordsAt is when WriteRecords says its records happened: a time with
// nanoseconds, which must read back exact.
var recordsAt = time.Unix(1700000000, 123456789).UTC()

// WriteRecords writes one record of every kind, each field set, for
// CheckRecords to read back (sim/sqlite reads them back after a reopen).
func WriteRecords(t *testing.T, s sim.RecordStore) {
	t.Helper()
	ctx := context.Background()
	now := recordsAt
	in := &sim.Instance{ID: "counter-1", JobID: "job-1", Role: "counter-1", Node: "a", Template: "counter",
		Runtime: sim.RuntimeProcess, State: sim.InstanceRunning, Params: map[string]string{"RATE": "5"},
		Token: "secret", Ports: map[string]int{"PORT": 9000}, Connected: true, CreatedAt: now, UpdatedAt: now,
		Adjustments: []string{"services.app.container_name: renamed"}, Healthy: true, MigrationID: "m0", Error: "e",
		Env: map[string]map[string]string{"app": {"NORSK_X": "1"}}, RuntimeRef: map[string]string{"pid": "42"}}
	if err := s.SaveInstance(ctx, in); err != nil {
		t.Fatal(err)
	}
	m := &sim.Migration{ID: "m1", JobID: "job-1", Strategy: sim.Handover, State: sim.MigrationRunning, StartedAt: now,
		Source: sim.MigrationEndpoint{Instance: "counter-1", Node: "a"}}
	if err := s.SaveMigration(ctx, m); err != nil {
		t.Fatal(err)
	}
	evs := []sim.MigrationEvent{
		{Seq: 1, At: now, Phase: "get-state", Side: "manager", Kind: sim.TimelineRequested, Detail: "asked source for state"},
		{Seq: 2, At: now.Add(time.Millisecond), Phase: "get-state", Side: "source", Detail: "state",
			Frame: &sim.FrameInfo{Direction: "in", Type: "state", Size: 30, Payload: json.RawMessage(`{"next":7}`)}},
	}
	if err := s.AppendMigrationEvents(ctx, "m1", evs); err != nil {
		t.Fatal(err)
	}
	if err := s.AppendEvents(ctx, []sim.Event{{At: now, Kind: "instance.state", Instance: "counter-1", Data: json.RawMessage(`{"state":"running"}`)}}); err != nil {
		t.Fatal(err)
	}
	if err := s.RecordFrames(ctx, []sim.FrameRecord{{At: now, Node: "a", JobID: "job-1", Role: "counter-1", Direction: "in", Type: "hello", Size: 20}}); err != nil {
		t.Fatal(err)
	}
}

// CheckRecords fails t unless s holds what WriteRecords wrote, as it
// wrote it.
func CheckRecords(t *testing.T, s sim.RecordStore) {
	t.Helper()
	ctx := context.Background()
	now := recordsAt
	got, err := s.GetInstance(ctx, "counter-1")
	if err != nil {
		t.Fatal(err)
	}
	if got.State != sim.InstanceRunning || got.Token != "secret" || got.Params["RATE"] != "5" || got.Ports["PORT"] != 9000 || len(got.Adjustments) != 1 || !got.Connected || !got.CreatedAt.Equal(now) {
		t.Fatalf("instance read back = %+v", got)
	}
	if got.ID != "counter-1" || got.JobID != "job-1" || got.Role != "counter-1" || got.Node != "a" || got.Template != "counter" || got.Runtime != sim.RuntimeProcess ||
		!got.Healthy || got.MigrationID != "m0" || got.Error != "e" || got.Env["app"]["NORSK_X"] != "1" || got.RuntimeRef["pid"] != "42" || !got.UpdatedAt.Equal(now) {
		t.Fatalf("instance read back = %+v, want the one WriteRecords wrote", got)
	}
	gm, err := s.GetMigration(ctx, "m1")
	if err != nil {
		t.Fatal(err)
	}
	if len(gm.Events) != 2 || gm.Events[1].Frame == nil || string(gm.Events[1].Frame.Payload) != `{"next":7}` ||
		gm.Events[0].Kind != sim.TimelineRequested || gm.Events[1].Kind != "" || gm.Events[0].Phase != sim.PhaseGetState {
		t.Fatalf("migration events read back = %+v", gm.Events)
	}
	if gm.Events[0].Frame != nil || gm.Events[1].Frame.Type != "state" || gm.Events[1].Frame.Size != 30 || gm.Events[1].Side != "source" ||
		!gm.Events[1].At.Equal(now.Add(time.Millisecond)) || gm.Strategy != sim.Handover || gm.Source.Instance != "counter-1" {
		t.Fatalf("migration read back = %+v", gm)
	}
	if sum, err := s.GetMigrationSummary(ctx, "m1"); err != nil || sum.ID != "m1" || sum.State != gm.State || sum.Events != nil {
		t.Fatalf("summary = %+v, %v; want m1 as stored, without events", sum, err)
	}
	list, err := s.ListMigrations(ctx, sim.MigrationFilter{State: sim.MigrationRunning})
	if err != nil || len(list) != 1 || list[0].Events != nil {
		t.Fatalf("running migrations = %v, %v", list, err)
	}
	evl, err := s.ListEvents(ctx, sim.EventFilter{Instance: "counter-1"})
	if err != nil || len(evl) != 1 || evl[0].Kind != "instance.state" || string(evl[0].Data) != `{"state":"running"}` || evl[0].Seq <= 0 {
		t.Fatalf("events = %v, %v", evl, err)
	}
	frs, err := s.ListFrames(ctx, sim.FrameFilter{JobID: "job-1"})
	if err != nil || len(frs) != 1 || frs[0].Type != "hello" || frs[0].Size != 20 || frs[0].Role != "counter-1" || !frs[0].At.Equal(now) {
		t.Fatalf("frames = %v, %v", frs, err)
	}
}

func testNotFoundCarriesCode(t *testing.T, open Opener) {
	s := open(t)
	_, err := s.GetInstance(context.Background(), "nope")
	if sim.ErrorCode(err) != sim.ENotFound {
		t.Fatalf("code = %s (%v)", sim.ErrorCode(err), err)
	}
	_, err = s.GetMigration(context.Background(), "nope")
	if sim.ErrorCode(err) != sim.ENotFound {
		t.Fatalf("code = %s (%v)", sim.ErrorCode(err), err)
	}
	_, err = s.GetMigrationSummary(context.Background(), "nope")
	if sim.ErrorCode(err) != sim.ENotFound {
		t.Fatalf("summary: code = %s (%v)", sim.ErrorCode(err), err)
	}
	_, err = s.SeamCapture(context.Background(), "nope")
	if sim.ErrorCode(err) != sim.ENotFound {
		t.Fatalf("seam capture: code = %s (%v)", sim.ErrorCode(err), err)
	}
}

// testInstancesUpsertAndOrder: instances list oldest first (ties by ID);
// saving one again replaces it but keeps the time it was created at;
// what the store does not keep (published ports) reads back empty;
// deleting one that is not there is no error.
func testInstancesUpsertAndOrder(t *testing.T, open Opener) {
	ctx := context.Background()
	s := open(t)
	if list, err := s.ListInstances(ctx); err != nil || list != nil {
		t.Fatalf("an empty store lists %v, %v; want nil", list, err)
	}
	at := time.Unix(1700000000, 0).UTC()
	for _, in := range []*sim.Instance{
		{ID: "c", JobID: "j", State: sim.InstanceRunning, CreatedAt: at.Add(2 * time.Second), UpdatedAt: at},
		{ID: "b", JobID: "j", State: sim.InstanceRunning, CreatedAt: at.Add(time.Second), UpdatedAt: at},
		{ID: "a", JobID: "j", State: sim.InstanceRunning, CreatedAt: at.Add(2 * time.Second), UpdatedAt: at},
	} {
		if err := s.SaveInstance(ctx, in); err != nil {
			t.Fatal(err)
		}
	}
	// b again, created later by its own account, and published.
	later := at.Add(time.Hour)
	again := &sim.Instance{ID: "b", JobID: "j", State: sim.InstanceStopped, CreatedAt: later, UpdatedAt: later,
		Published: []sim.PublishedPort{{Service: "app"}}}
	if err := s.SaveInstance(ctx, again); err != nil {
		t.Fatal(err)
	}
	list, err := s.ListInstances(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, in := range list {
		ids = append(ids, in.ID)
	}
	if fmt.Sprint(ids) != "[b a c]" {
		t.Fatalf("instances listed %v, want [b a c] (by creation, then ID; b keeps its first)", ids)
	}
	b, err := s.GetInstance(ctx, "b")
	if err != nil {
		t.Fatal(err)
	}
	if b.State != sim.InstanceStopped || !b.UpdatedAt.Equal(later) || !b.CreatedAt.Equal(at.Add(time.Second)) || b.Published != nil {
		t.Fatalf("b after a second save = %+v; want the new state and update, the first creation, no published ports", b)
	}
	if b.Params != nil || b.Ports != nil || b.Adjustments != nil || b.Env != nil || b.RuntimeRef != nil {
		t.Fatalf("b's absent maps read back as %+v; want nil", b)
	}
	if err := s.DeleteInstance(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteInstance(ctx, "a"); err != nil {
		t.Fatalf("deleting what is gone: %v", err)
	}
	if _, err := s.GetInstance(ctx, "a"); sim.ErrorCode(err) != sim.ENotFound {
		t.Fatalf("a after delete: %v", err)
	}
	if list, _ := s.ListInstances(ctx); len(list) != 2 {
		t.Fatalf("%d instances after delete, want 2", len(list))
	}
}

// testCopiesNotAliases: what a caller gives the store and what it gets
// back are its own: changing either later changes nothing stored.
func testCopiesNotAliases(t *testing.T, open Opener) {
	ctx := context.Background()
	s := open(t)
	at := time.Unix(1700000000, 0).UTC()
	in := &sim.Instance{ID: "i", JobID: "j", Params: map[string]string{"K": "v"}, Adjustments: []string{"x"}, CreatedAt: at, UpdatedAt: at}
	if err := s.SaveInstance(ctx, in); err != nil {
		t.Fatal(err)
	}
	in.Params["K"], in.Adjustments[0] = "changed", "changed"
	got, _ := s.GetInstance(ctx, "i")
	if got.Params["K"] != "v" || got.Adjustments[0] != "x" {
		t.Fatalf("the caller's change after the save reached the store: %+v", got)
	}
	got.Params["K"] = "changed"
	if again, _ := s.GetInstance(ctx, "i"); again.Params["K"] != "v" {
		t.Fatalf("a change to what was read reached the store: %+v", again)
	}

	m := &sim.Migration{ID: "m", JobID: "j", State: sim.MigrationRunning, StartedAt: at, Result: sim.MigrationResult{Applied: []string{"p1"}}}
	if err := s.SaveMigration(ctx, m); err != nil {
		t.Fatal(err)
	}
	m.Result.Applied[0] = "changed"
	payload := json.RawMessage(`{"a":1}`)
	if err := s.AppendMigrationEvents(ctx, "m", []sim.MigrationEvent{{Seq: 1, At: at, Frame: &sim.FrameInfo{Type: "state", Payload: payload}}}); err != nil {
		t.Fatal(err)
	}
	payload[2] = 'b'
	gm, _ := s.GetMigration(ctx, "m")
	if gm.Result.Applied[0] != "p1" || string(gm.Events[0].Frame.Payload) != `{"a":1}` {
		t.Fatalf("the caller's changes reached the stored migration: %+v %s", gm.Result, gm.Events[0].Frame.Payload)
	}
	gm.Result.Applied[0], gm.Events[0].Frame.Payload[2] = "changed", 'b'
	if again, _ := s.GetMigration(ctx, "m"); again.Result.Applied[0] != "p1" || string(again.Events[0].Frame.Payload) != `{"a":1}` {
		t.Fatalf("a change to what was read reached the stored migration")
	}

	data := json.RawMessage(`{"x":1}`)
	if err := s.AppendEvents(ctx, []sim.Event{{At: at, Kind: "k", Data: data}}); err != nil {
		t.Fatal(err)
	}
	data[2] = 'y'
	evs, _ := s.ListEvents(ctx, sim.EventFilter{})
	if string(evs[0].Data) != `{"x":1}` {
		t.Fatalf("the caller's change reached the stored event: %s", evs[0].Data)
	}
	evs[0].Data[2] = 'y'
	if again, _ := s.ListEvents(ctx, sim.EventFilter{}); string(again[0].Data) != `{"x":1}` {
		t.Fatalf("a change to what was read reached the stored event: %s", again[0].Data)
	}

	ts := []byte{0x47, 1, 2, 3}
	if err := s.SaveSeamCapture(ctx, sim.SeamCapture{MigrationID: "m", TS: ts, TargetTS: ts[2:]}); err != nil {
		t.Fatal(err)
	}
	ts[2] = 9
	c, _ := s.SeamCapture(ctx, "m")
	if fmt.Sprint(c.TS, c.TargetTS) != "[71 1 2 3] [2 3]" {
		t.Fatalf("the caller's change reached the stored capture: %v %v", c.TS, c.TargetTS)
	}
	c.TS[2], c.TargetTS[0] = 9, 9
	if again, _ := s.SeamCapture(ctx, "m"); fmt.Sprint(again.TS, again.TargetTS) != "[71 1 2 3] [2 3]" {
		t.Fatalf("a change to what was read reached the stored capture: %v %v", again.TS, again.TargetTS)
	}
}

// testTimesReadBackInUTC: a time read back is the instant stored, to the
// nanosecond, in UTC whatever zone it was written in.
func testTimesReadBackInUTC(t *testing.T, open Opener) {
	ctx := context.Background()
	s := open(t)
	at := time.Date(2026, 3, 1, 12, 0, 0, 123456789, time.FixedZone("X", 5*3600))
	if err := s.SaveInstance(ctx, &sim.Instance{ID: "i", CreatedAt: at, UpdatedAt: at}); err != nil {
		t.Fatal(err)
	}
	if err := s.AppendEvents(ctx, []sim.Event{{At: at, Kind: "k"}}); err != nil {
		t.Fatal(err)
	}
	if err := s.RecordFrames(ctx, []sim.FrameRecord{{At: at, JobID: "j", Role: "r"}}); err != nil {
		t.Fatal(err)
	}
	if err := s.AppendLogs(ctx, []sim.LogLine{{Instance: "i", At: at, Text: "t"}}); err != nil {
		t.Fatal(err)
	}
	in, _ := s.GetInstance(ctx, "i")
	evs, _ := s.ListEvents(ctx, sim.EventFilter{})
	frs, _ := s.ListFrames(ctx, sim.FrameFilter{})
	p, _ := s.ReadLogs(ctx, sim.LogQuery{Instance: "i"})
	if len(evs) != 1 || len(frs) != 1 || len(p.Lines) != 1 {
		t.Fatalf("read %d events, %d frames, %d lines; want one each", len(evs), len(frs), len(p.Lines))
	}
	for what, got := range map[string]time.Time{"created": in.CreatedAt, "event": evs[0].At, "frame": frs[0].At, "line": p.Lines[0].At} {
		if !got.Equal(at) || got.Location() != time.UTC {
			t.Errorf("%s at %v, want %v in UTC", what, got, at)
		}
	}
}
