package storetest

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/normsim/normsim/sim"
)

var eventTests = []test{
	{"ListEventsSelects", testListEventsSelects},
	{"EventsAreBoundedPerInstance", testEventsAreBoundedPerInstance},
	{"EventsAreBoundedInAll", testEventsAreBoundedInAll},
}

// testEventsAreBoundedPerInstance (issue 34, round three, F4): a job that
// reconnects in a loop added two events a time to its instance, without
// end. Past the bound an instance's oldest events go, down to TrimTo of
// it, and are counted; another instance's and no instance's stay, and
// the newest is always kept.
func testEventsAreBoundedPerInstance(t *testing.T, open Opener) {
	ctx := context.Background()
	s := open(t)
	s.SetEventLimits(sim.EventLimits{PerInstance: 10})
	at := time.Unix(1700000000, 0).UTC()
	ev := func(i int, inst string) sim.Event {
		return sim.Event{At: at.Add(time.Duration(i) * time.Millisecond), Kind: sim.EventInstanceConnected, Instance: inst, Data: json.RawMessage(fmt.Sprintf(`{"n":%d}`, i))}
	}
	for i := range 5 {
		if err := s.AppendEvents(ctx, []sim.Event{ev(i, "quiet"), ev(i, "")}); err != nil {
			t.Fatal(err)
		}
	}
	const loud = 57
	for i := 0; i < loud; i += 3 { // batches of three, one of them past the bound at once
		if err := s.AppendEvents(ctx, []sim.Event{ev(i, "loud"), ev(i+1, "loud"), ev(i+2, "loud")}); err != nil {
			t.Fatal(err)
		}
	}
	kept, err := s.ListEvents(ctx, sim.EventFilter{Instance: "loud"})
	if err != nil {
		t.Fatal(err)
	}
	if len(kept) > 10 || len(kept) < 9 {
		t.Fatalf("the loud instance keeps %d events, want at most its bound of 10 (and at least 9, the trim's share)", len(kept))
	}
	if last := kept[len(kept)-1]; string(last.Data) != fmt.Sprintf(`{"n":%d}`, loud-1) {
		t.Errorf("its newest event kept is %s, want the last appended", last.Data)
	}
	for i := 1; i < len(kept); i++ {
		if kept[i].Seq != kept[i-1].Seq+1 {
			t.Errorf("the kept events are not the newest in a row: seq %d after %d", kept[i].Seq, kept[i-1].Seq)
		}
	}
	if got, want := s.EventsTrimmed(), int64(loud-len(kept)); got != want {
		t.Errorf("EventsTrimmed %d, want %d (appended %d, kept %d)", got, want, loud, len(kept))
	}
	all, err := s.ListEvents(ctx, sim.EventFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if others := len(all) - len(kept); others != 10 {
		t.Errorf("%d events of the quiet instance and of none kept, want all 10", others)
	}
}

// testEventsAreBoundedInAll (attack round 9c, M1): many instances each
// under its own bound, launched and removed in a loop, grew the events
// without end (99 MB, then 179 MB, nothing counted). Past the total the
// oldest of all go, down to TrimTo of it, counted; the newest stay.
func testEventsAreBoundedInAll(t *testing.T, open Opener) {
	ctx := context.Background()
	s := open(t)
	s.SetEventLimits(sim.EventLimits{PerInstance: 10, Total: 40})
	at := time.Unix(1700000000, 0).UTC()
	const n = 100
	for i := range n {
		inst := fmt.Sprint("i", i/5) // 5 events each, under their bound
		if err := s.AppendEvents(ctx, []sim.Event{{At: at.Add(time.Duration(i) * time.Millisecond), Kind: sim.EventInstanceConnected, Instance: inst, Data: json.RawMessage(fmt.Sprintf(`{"n":%d}`, i))}}); err != nil {
			t.Fatal(err)
		}
	}
	all, err := s.ListEvents(ctx, sim.EventFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(all) > 40 || len(all) < 36 {
		t.Fatalf("%d events kept in all, want at most the bound of 40 (and at least 36, the trim's share)", len(all))
	}
	if last := all[len(all)-1]; string(last.Data) != fmt.Sprintf(`{"n":%d}`, n-1) {
		t.Errorf("the newest event kept is %s, want the last appended", last.Data)
	}
	for i := 1; i < len(all); i++ {
		if all[i].Seq != all[i-1].Seq+1 {
			t.Errorf("the kept events are not the newest in a row: seq %d after %d", all[i].Seq, all[i-1].Seq)
		}
	}
	if got, want := s.EventsTrimmed(), int64(n-len(all)); got != want {
		t.Errorf("EventsTrimmed %d, want %d (appended %d, kept %d)", got, want, n, len(all))
	}
}

// testListEventsSelects: events list oldest first, by instance, by
// migration, after a seq, the first or last few; an event without data
// reads without; nothing found is nil.
func testListEventsSelects(t *testing.T, open Opener) {
	ctx := context.Background()
	s := open(t)
	if evs, err := s.ListEvents(ctx, sim.EventFilter{}); err != nil || evs != nil {
		t.Fatalf("an empty store lists %#v, %v; want nil", evs, err)
	}
	at := time.Unix(1700000000, 0).UTC()
	var evs []sim.Event
	for i := range 12 {
		ev := sim.Event{At: at.Add(time.Duration(i) * time.Second), Kind: sim.EventKind(fmt.Sprint("k", i)),
			Instance: fmt.Sprint("i", i%3), Migration: fmt.Sprint("m", i%2), Seq: 1000, ID: 7}
		if i%4 == 0 {
			ev.Data = json.RawMessage(fmt.Sprintf(`{"n":%d}`, i))
		}
		if i == 1 {
			ev.Data = json.RawMessage{}
		}
		evs = append(evs, ev)
	}
	if err := s.AppendEvents(ctx, evs[:5]); err != nil {
		t.Fatal(err)
	}
	if err := s.AppendEvents(ctx, evs[5:]); err != nil {
		t.Fatal(err)
	}
	if err := s.AppendEvents(ctx, nil); err != nil {
		t.Fatal(err)
	}
	all, err := s.ListEvents(ctx, sim.EventFilter{})
	if err != nil || len(all) != 12 {
		t.Fatalf("listed %d events, %v; want 12", len(all), err)
	}
	for i, ev := range all {
		if ev.Kind != evs[i].Kind || ev.Instance != evs[i].Instance || ev.Migration != evs[i].Migration || !ev.At.Equal(evs[i].At) || ev.ID != 0 ||
			string(ev.Data) != string(evs[i].Data) || (len(evs[i].Data) == 0) != (ev.Data == nil) || (i > 0 && ev.Seq <= all[i-1].Seq) {
			t.Fatalf("event %d read back as %+v, want %+v, its own seq in order", i, ev, evs[i])
		}
	}
	kinds := func(f sim.EventFilter) string {
		t.Helper()
		got, err := s.ListEvents(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		var ks []string
		for _, ev := range got {
			ks = append(ks, string(ev.Kind))
		}
		return strings.Join(ks, " ")
	}
	for _, tc := range []struct {
		f    sim.EventFilter
		want string
	}{
		{sim.EventFilter{Instance: "i1"}, "k1 k4 k7 k10"},
		{sim.EventFilter{Migration: "m0"}, "k0 k2 k4 k6 k8 k10"},
		{sim.EventFilter{Instance: "i1", Migration: "m0"}, "k4 k10"},
		{sim.EventFilter{AfterSeq: all[8].Seq}, "k9 k10 k11"},
		{sim.EventFilter{Limit: 3}, "k0 k1 k2"},
		{sim.EventFilter{Limit: 3, Tail: true}, "k9 k10 k11"},
		{sim.EventFilter{Tail: true}, "k0 k1 k2 k3 k4 k5 k6 k7 k8 k9 k10 k11"},
		{sim.EventFilter{Limit: -2}, "k0 k1 k2 k3 k4 k5 k6 k7 k8 k9 k10 k11"},
		{sim.EventFilter{Migration: "m1", AfterSeq: all[2].Seq, Limit: 2}, "k3 k5"},
		{sim.EventFilter{Migration: "m1", AfterSeq: all[2].Seq, Limit: 2, Tail: true}, "k9 k11"},
		{sim.EventFilter{Instance: "i2", Limit: 10, Tail: true}, "k2 k5 k8 k11"},
		{sim.EventFilter{Instance: "nobody"}, ""},
		{sim.EventFilter{AfterSeq: all[11].Seq}, ""},
	} {
		if got := kinds(tc.f); got != tc.want {
			t.Errorf("ListEvents(%+v) = %q, want %q", tc.f, got, tc.want)
		}
	}
}
