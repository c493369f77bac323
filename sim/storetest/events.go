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
