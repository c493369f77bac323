package storetest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/normsim/normsim/sim"
)

var frameTests = []test{
	{"RecordFramesKeepsEveryRecordInOrder", testRecordFramesKeepsEveryRecordInOrder},
	{"ListFramesSelects", testListFramesSelects},
	{"FrameRecordsAreBounded", testFrameRecordsAreBounded},
	{"FrameCountsOfABatchOfManyInstances", testFrameCountsOfABatchOfManyInstances},
	{"FrameLimitsBoundRecordsAndBytes", testFrameLimitsBoundRecordsAndBytes},
	{"FrameBytesAreUTF8Bytes", testFrameBytesAreUTF8Bytes},
}

// testFrameBytesAreUTF8Bytes: a frame's bytes are its text's UTF-8 bytes,
// as the bounds say, in what is trimmed as in what is kept: three "ééé"
// frames let go are 18 bytes, not 9 characters.
func testFrameBytesAreUTF8Bytes(t *testing.T, open Opener) {
	ctx := context.Background()
	s := open(t)
	s.SetFrameLimits(sim.FrameLimits{PerInstance: 10, PerInstanceBytes: 1 << 20, Total: 1000, TotalBytes: 1 << 20})
	var frs []sim.FrameRecord
	for range 12 {
		frs = append(frs, sim.FrameRecord{JobID: "j", Role: "r", Data: "ééé"})
	}
	if err := s.RecordFrames(ctx, frs); err != nil {
		t.Fatal(err)
	}
	if c, err := s.FrameCounts(ctx, "j", "r"); err != nil || c != (sim.FrameCounts{Kept: 9, Dropped: 3, DroppedBytes: 18}) {
		t.Fatalf("counts %+v, %v; want 9 kept, 3 dropped of 18 bytes", c, err)
	}
}

// FrameRecords are n frame records of job-1, a microsecond apart from at,
// of instances counter-0, counter-1 and counter-2 in turn; record i is
// 20+i bytes (benchmarks in sim/sqlite write them too).
func FrameRecords(n int, at time.Time) []sim.FrameRecord {
	frs := make([]sim.FrameRecord, n)
	for i := range frs {
		frs[i] = sim.FrameRecord{At: at.Add(time.Duration(i) * time.Microsecond), Node: "a", JobID: "job-1", Role: fmt.Sprintf("counter-%d", i%3),
			Direction: "in", Type: "state", Size: 20 + i, Data: fmt.Sprintf(`{"type":"state","payload":%d}`, i)}
	}
	return frs
}

// testRecordFramesKeepsEveryRecordInOrder: a batch of several instances'
// frames reads back whole and in order.
func testRecordFramesKeepsEveryRecordInOrder(t *testing.T, open Opener) {
	ctx := context.Background()
	s := open(t)
	at := time.Unix(1700000000, 0).UTC()
	want := FrameRecords(70, at)
	if err := s.RecordFrames(ctx, want); err != nil {
		t.Fatal(err)
	}
	got, err := s.ListFrames(ctx, sim.FrameFilter{JobID: "job-1"})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("read %d frames, want %d", len(got), len(want))
	}
	for i := range want {
		w, g := want[i], got[i]
		if !g.At.Equal(w.At) || g.Node != w.Node || g.JobID != w.JobID || g.Role != w.Role || g.Direction != w.Direction ||
			g.Type != w.Type || g.Size != w.Size || g.Data != w.Data {
			t.Fatalf("frame %d read back as %+v, want %+v", i, g, w)
		}
	}
	if c, err := s.FrameCounts(ctx, "job-1", "counter-0"); err != nil || c != (sim.FrameCounts{Kept: 24}) {
		t.Fatalf("counter-0's counts %+v, %v; want 24 kept", c, err)
	}
	if c, err := s.FrameCounts(ctx, "", ""); err != nil || c != (sim.FrameCounts{Kept: 70}) {
		t.Fatalf("totals %+v, %v; want 70 kept", c, err)
	}
	if c, err := s.FrameCounts(ctx, "job-1", "nobody"); err != nil || c != (sim.FrameCounts{}) {
		t.Fatalf("an instance with no frames counts %+v, %v", c, err)
	}
}

// testListFramesSelects: the first or last frames of one instance, of a
// job, of a role across jobs, oldest first; nothing found is nil.
func testListFramesSelects(t *testing.T, open Opener) {
	ctx := context.Background()
	s := open(t)
	if frs, err := s.ListFrames(ctx, sim.FrameFilter{}); err != nil || frs != nil {
		t.Fatalf("an empty store lists %#v, %v; want nil", frs, err)
	}
	if err := s.RecordFrames(ctx, FrameRecords(30, time.Unix(1700000000, 0).UTC())); err != nil {
		t.Fatal(err)
	}
	other := FrameRecords(4, time.Unix(1700000001, 0).UTC())
	for i := range other {
		other[i].JobID, other[i].Size = "job-2", 100+i
	}
	if err := s.RecordFrames(ctx, other); err != nil {
		t.Fatal(err)
	}
	sizes := func(f sim.FrameFilter) string {
		t.Helper()
		got, err := s.ListFrames(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		var out []int
		for _, fr := range got {
			out = append(out, fr.Size)
		}
		return fmt.Sprint(out)
	}
	// counter-1 of job-1 said frames 1, 4, …, 25, 28: sizes 21, 24, …, 45, 48.
	for _, tc := range []struct {
		f    sim.FrameFilter
		want string
	}{
		{sim.FrameFilter{JobID: "job-1", Role: "counter-1", Limit: 3, Tail: true}, "[42 45 48]"},
		{sim.FrameFilter{JobID: "job-1", Role: "counter-1", Limit: 2}, "[21 24]"},
		{sim.FrameFilter{Role: "counter-1", Limit: 3, Tail: true}, "[45 48 101]"},
		{sim.FrameFilter{Role: "counter-0"}, "[20 23 26 29 32 35 38 41 44 47 100 103]"},
		{sim.FrameFilter{JobID: "job-2"}, "[100 101 102 103]"},
		{sim.FrameFilter{Limit: 2, Tail: true}, "[102 103]"},
		{sim.FrameFilter{JobID: "job-2", Tail: true}, "[100 101 102 103]"},
		{sim.FrameFilter{JobID: "job-2", Limit: -1}, "[100 101 102 103]"},
		{sim.FrameFilter{JobID: "job-3"}, "[]"},
	} {
		if got := sizes(tc.f); got != tc.want {
			t.Errorf("ListFrames(%+v) = sizes %s, want %s", tc.f, got, tc.want)
		}
	}
}

// testFrameRecordsAreBounded (issue 34 item 6): a job that floods its
// socket with large frames keeps at most its bound of frame records, the
// oldest let go of first and counted; another instance's history is left
// whole; and the store as a whole stays within its total.
func testFrameRecordsAreBounded(t *testing.T, open Opener) {
	ctx := context.Background()
	s := open(t)
	s.SetFrameLimits(sim.FrameLimits{PerInstance: 100, PerInstanceBytes: 64 << 10, Total: 250, TotalBytes: 1 << 20})
	at := time.Unix(1700000000, 0).UTC()
	quiet := sim.FrameRecord{At: at, Node: "a", JobID: "job-q", Role: "quiet-1", Direction: "in", Type: "hello", Size: 30, Data: `{"type":"hello"}`}
	if err := s.RecordFrames(ctx, []sim.FrameRecord{quiet}); err != nil {
		t.Fatal(err)
	}
	big := strings.Repeat("x", 4000)
	for round := range 50 {
		batch := make([]sim.FrameRecord, 20)
		for i := range batch {
			batch[i] = sim.FrameRecord{At: at.Add(time.Duration(round*20+i+1) * time.Millisecond), Node: "a", JobID: "job-f", Role: "flood-1",
				Direction: "in", Type: "state", Size: len(big), Data: fmt.Sprintf("%d %s", round*20+i, big)}
		}
		if err := s.RecordFrames(ctx, batch); err != nil {
			t.Fatal(err)
		}
	}
	flood, err := s.ListFrames(ctx, sim.FrameFilter{JobID: "job-f", Role: "flood-1"})
	if err != nil {
		t.Fatal(err)
	}
	c, err := s.FrameCounts(ctx, "job-f", "flood-1")
	if err != nil {
		t.Fatal(err)
	}
	// 64 KiB of 4 KB frames is 16: the byte bound is the tighter.
	if len(flood) > 16 || len(flood) == 0 || c.Kept != int64(len(flood)) || c.Kept+c.Dropped != 1000 || c.DroppedBytes < c.Dropped*4000 {
		t.Fatalf("the flood keeps %d frames (counts %+v), want at most 16 and 1,000 in all", len(flood), c)
	}
	if !strings.HasPrefix(flood[len(flood)-1].Data, "999 ") {
		t.Fatalf("the newest frame kept is %.10q, want the last one sent", flood[len(flood)-1].Data)
	}
	if q, _ := s.ListFrames(ctx, sim.FrameFilter{JobID: "job-q"}); len(q) != 1 {
		t.Fatalf("the quiet instance keeps %d frames, want its 1", len(q))
	}
	// The total: many instances, none past its own bound.
	for i := range 40 {
		batch := make([]sim.FrameRecord, 10)
		for j := range batch {
			batch[j] = sim.FrameRecord{At: at.Add(time.Hour + time.Duration(i*10+j)*time.Millisecond), Node: "b", JobID: "job-m", Role: fmt.Sprintf("many-%d", i),
				Direction: "out", Type: "get-state", Size: 20, Data: `{"type":"get-state"}`}
		}
		if err := s.RecordFrames(ctx, batch); err != nil {
			t.Fatal(err)
		}
	}
	all, err := s.ListFrames(ctx, sim.FrameFilter{})
	if err != nil {
		t.Fatal(err)
	}
	total, err := s.FrameCounts(ctx, "", "")
	if err != nil {
		t.Fatal(err)
	}
	if len(all) > 250 || total.Kept != int64(len(all)) || total.Kept+total.Dropped != 1+1000+400 {
		t.Fatalf("the store keeps %d frames (totals %+v), want at most 250 and 1,401 in all", len(all), total)
	}
	if q, _ := s.FrameCounts(ctx, "job-q", "quiet-1"); q.Dropped != 1 || q.Kept != 0 || q.DroppedBytes != int64(len(quiet.Data)) {
		t.Fatalf("the quiet instance's oldest frame goes first under the total: %+v", q)
	}
}

// testFrameCountsOfABatchOfManyInstances: a batch of many instances' few
// frames each (a busy sim's) is counted for every one of them.
func testFrameCountsOfABatchOfManyInstances(t *testing.T, open Opener) {
	ctx := context.Background()
	s := open(t)
	at := time.Unix(1700000000, 0).UTC()
	batch := make([]sim.FrameRecord, 300)
	for i := range batch {
		batch[i] = sim.FrameRecord{At: at, Node: "a", JobID: "job", Role: fmt.Sprintf("r%d", i%150), Direction: "in", Type: "hello", Data: "xy"}
	}
	if err := s.RecordFrames(ctx, batch); err != nil {
		t.Fatal(err)
	}
	for _, role := range []string{"r0", "r127", "r128", "r149"} {
		if c, err := s.FrameCounts(ctx, "job", role); err != nil || c.Kept != 2 {
			t.Fatalf("%s: %+v %v, want 2 kept", role, c, err)
		}
	}
	if c, _ := s.FrameCounts(ctx, "", ""); c.Kept != 300 {
		t.Fatalf("totals %+v, want 300 kept", c)
	}
}

// testFrameLimitsBoundRecordsAndBytes: past an instance's bound on
// records, its oldest go until a tenth of the bound is free (not one per
// frame), counted exactly; past the total, the store's oldest go the
// same way; the bounds are checked after each write.
func testFrameLimitsBoundRecordsAndBytes(t *testing.T, open Opener) {
	ctx := context.Background()
	s := open(t)
	s.SetFrameLimits(sim.FrameLimits{PerInstance: 10, PerInstanceBytes: 1 << 20, Total: 25, TotalBytes: 1 << 20})
	at := time.Unix(1700000000, 0).UTC()
	rec := func(role string, i int) sim.FrameRecord {
		return sim.FrameRecord{At: at.Add(time.Duration(i) * time.Millisecond), JobID: "j", Role: role, Type: "t", Data: fmt.Sprintf("%s-%02d", role, i)}
	}
	// a: 10 frames, at its bound; the 11th lets go of the oldest 2 (to 9).
	for i := range 11 {
		if err := s.RecordFrames(ctx, []sim.FrameRecord{rec("a", i)}); err != nil {
			t.Fatal(err)
		}
		want := sim.FrameCounts{Kept: int64(i + 1)}
		if i == 10 {
			want = sim.FrameCounts{Kept: 9, Dropped: 2, DroppedBytes: 8}
		}
		if c, _ := s.FrameCounts(ctx, "j", "a"); c != want {
			t.Fatalf("after a's frame %d: %+v, want %+v", i, c, want)
		}
	}
	if frs, _ := s.ListFrames(ctx, sim.FrameFilter{JobID: "j", Role: "a", Limit: 1}); len(frs) != 1 || frs[0].Data != "a-02" {
		t.Fatalf("a's oldest kept: %+v, want a-02", frs)
	}
	// b and c: 8 each, all in one write: 9 + 16 = 25 kept, at the total.
	var bc []sim.FrameRecord
	for i := range 8 {
		bc = append(bc, rec("b", 20+i), rec("c", 20+i))
	}
	if err := s.RecordFrames(ctx, bc); err != nil {
		t.Fatal(err)
	}
	if c, _ := s.FrameCounts(ctx, "", ""); c != (sim.FrameCounts{Kept: 25, Dropped: 2, DroppedBytes: 8}) {
		t.Fatalf("totals at the bound: %+v", c)
	}
	// One more: 26 > 25, the store's oldest 4 go (to 22): a's.
	if err := s.RecordFrames(ctx, []sim.FrameRecord{rec("c", 40)}); err != nil {
		t.Fatal(err)
	}
	if c, _ := s.FrameCounts(ctx, "", ""); c != (sim.FrameCounts{Kept: 22, Dropped: 6, DroppedBytes: 24}) {
		t.Fatalf("totals past the bound: %+v", c)
	}
	if c, _ := s.FrameCounts(ctx, "j", "a"); c != (sim.FrameCounts{Kept: 5, Dropped: 6, DroppedBytes: 24}) {
		t.Fatalf("a after the total's trim: %+v", c)
	}
	if c, _ := s.FrameCounts(ctx, "j", "c"); c != (sim.FrameCounts{Kept: 9}) {
		t.Fatalf("c after the total's trim: %+v", c)
	}
	if frs, _ := s.ListFrames(ctx, sim.FrameFilter{}); len(frs) != 22 || frs[0].Data != "a-06" {
		t.Fatalf("the store keeps %d frames from %+v, want 22 from a-06", len(frs), frs[0])
	}
}
