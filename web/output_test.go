package web_test

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/normsim/normsim/sim"
)

func TestOutputCountsAnInstancesPacketsSinceAMoment(t *testing.T) {
	f := newFake()
	id := "counter-1"
	f.instances = append(f.instances, sim.Instance{ID: id, JobID: "job-1", Node: "a", State: sim.InstanceRunning})
	t0 := time.Date(2026, 12, 1, 18, 0, 0, 0, time.UTC)
	for i := range 5 {
		f.packets = append(f.packets, sim.Packet{At: t0.Add(time.Duration(i) * time.Second), Instance: id, Seq: int64(100 + i)},
			sim.Packet{At: t0.Add(time.Duration(i) * time.Second), Instance: "someone-else", Seq: 7})
	}
	h := newServer(t, f, nil)

	r := get(t, h, "/api/v1/instances/"+id+"/output?since="+t0.Add(2*time.Second).Format(time.RFC3339Nano))
	if r.Status != http.StatusOK {
		t.Fatalf("status %d: %s", r.Status, r.Body)
	}
	var sum sim.OutputSummary
	if err := json.Unmarshal([]byte(r.Body), &sum); err != nil {
		t.Fatal(err)
	}
	if sum.Packets != 3 || sum.FirstSeq == nil || *sum.FirstSeq != 102 || sum.LastSeq == nil || *sum.LastSeq != 104 {
		t.Fatalf("got %+v, want 3 packets 102…104 of %s only", sum, id)
	}

	r = get(t, h, "/api/v1/instances/"+id+"/output?since=yesterday")
	if code, msg := apiError(t, r); r.Status != http.StatusBadRequest || code != sim.EInvalid {
		t.Fatalf("bad since: %d %s %s", r.Status, code, msg)
	}
	r = get(t, h, "/api/v1/instances/no-such/output")
	if r.Status != http.StatusNotFound {
		t.Fatalf("unknown instance: %d %s", r.Status, r.Body)
	}
}

func TestCensusCountsWhatTheManagerDoesNotKnow(t *testing.T) {
	f := newFake()
	f.units = []sim.RunningUnit{
		{Runtime: sim.RuntimeProcess, Instance: "counter-1", Ref: "4242", Known: true, State: sim.InstanceRunning},
		{Runtime: sim.RuntimeProcess, Instance: "counter-gone", Ref: "4343"},
	}
	r := get(t, newServer(t, f, nil), "/api/v1/census")
	if r.Status != http.StatusOK {
		t.Fatalf("status %d: %s", r.Status, r.Body)
	}
	var v struct {
		Units       []sim.RunningUnit
		Unknown     int
		Unsupported []string
	}
	if err := json.Unmarshal([]byte(r.Body), &v); err != nil {
		t.Fatal(err)
	}
	if len(v.Units) != 2 || v.Unknown != 1 || len(v.Unsupported) != 1 {
		t.Fatalf("got %+v, want 2 units, 1 unknown, external unsupported", v)
	}
}
