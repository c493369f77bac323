package storetest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/normsim/normsim/sim"
)

var logTests = []test{
	{"LogsTrimAndCount", testLogsTrimAndCount},
	{"ReadLogsSelects", testReadLogsSelects},
	{"RegisterLogsForgetsTheOldest", testRegisterLogsForgetsTheOldest},
	{"RegisterLogsManyAtOnce", testRegisterLogsManyAtOnce},
	{"PrintingKeepsAnInstancesLogs", testPrintingKeepsAnInstancesLogs},
	{"LogsAreBoundedInAll", testLogsAreBoundedInAll},
	{"LogAccountingAddsUpToWhatTheJobPrinted", testLogAccountingAddsUpToWhatTheJobPrinted},
	{"LogBytesAreUTF8Bytes", testLogBytesAreUTF8Bytes},
}

func logLines(inst string, from, n int, at time.Time) []sim.LogLine {
	var out []sim.LogLine
	for i := from; i < from+n; i++ {
		out = append(out, sim.LogLine{Instance: inst, Service: "app", Stream: sim.StreamStdout, At: at.Add(time.Duration(i) * time.Millisecond), Text: fmt.Sprintf("line %d", i)})
	}
	return out
}

// testLogsTrimAndCount: an instance over its bound loses its oldest
// lines, counted exactly; tail, since and after select; overflows add up.
func testLogsTrimAndCount(t *testing.T, open Opener) {
	ctx := context.Background()
	s := open(t)
	WriteLogs(t, s)
	CheckLogs(t, s)
	if err := s.CountOverflow(ctx, "i1", 2); err != nil {
		t.Fatal(err)
	}
	if p, _ := s.ReadLogs(ctx, sim.LogQuery{Instance: "i1"}); p.Lost.Overflowed != 9 || p.Lost.Trimmed != 60 {
		t.Errorf("overflowed %d, trimmed %d; want 9 and 60", p.Lost.Overflowed, p.Lost.Trimmed)
	}
}

// logsAt is when the lines WriteLogs writes begin, a millisecond apart.
var logsAt = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// WriteLogs writes 150 lines of instance i1 under a bound of 100 (so 60
// are trimmed, in two trims), 3 of i2, and counts 7 lines of i1 that
// overflowed, for CheckLogs to read back (sim/sqlite does after a reopen).
func WriteLogs(t *testing.T, s Store) {
	t.Helper()
	ctx := context.Background()
	s.SetLogLimits(sim.LogLimits{Lines: 100, Bytes: 1 << 20, Instances: 10})
	at := logsAt
	for b := 0; b < 5; b++ {
		if err := s.AppendLogs(ctx, logLines("i1", b*30, 30, at)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.AppendLogs(ctx, logLines("i2", 0, 3, at)); err != nil {
		t.Fatal(err)
	}
	if err := s.CountOverflow(ctx, "i1", 7); err != nil {
		t.Fatal(err)
	}
}

// CheckLogs fails t unless s serves what WriteLogs wrote: the lines
// kept and how many went, and the selections of tail, since and after.
func CheckLogs(t *testing.T, s sim.LogStore) {
	t.Helper()
	ctx := context.Background()
	at := logsAt
	p, err := s.ReadLogs(ctx, sim.LogQuery{Instance: "i1"})
	if err != nil {
		t.Fatal(err)
	}
	kept := int64(len(p.Lines))
	if !p.Known || kept > 100 || kept+p.Lost.Trimmed != 150 || p.Kept.Lines != kept {
		t.Fatalf("kept %d (state %d) + trimmed %d, want 150 in all and at most 100 kept", kept, p.Kept.Lines, p.Lost.Trimmed)
	}
	// 120 lines passed 100: trimmed to 90; 90 + 30 = 120 again: to 90.
	if p.Lost.Trimmed != 60 || p.Kept.Bytes != 40*7+50*8 || p.Lost.TrimmedBytes != 10*6+50*7 || p.Matched != 90 {
		t.Fatalf("i1: %+v, %d matched; want 90 kept (%d bytes) and 60 trimmed (%d bytes)", p, p.Matched, 40*7+50*8, 10*6+50*7)
	}
	if first := p.Lines[0]; first.Text != fmt.Sprintf("line %d", p.Lost.Trimmed) || first.Seq != p.Kept.FirstSeq || first.Instance != "i1" || first.Service != "app" || first.Stream != sim.StreamStdout {
		t.Errorf("oldest kept %+v (first %d), want line %d", first, p.Kept.FirstSeq, p.Lost.Trimmed)
	}
	tail, _ := s.ReadLogs(ctx, sim.LogQuery{Instance: "i1", Tail: 2})
	if len(tail.Lines) != 2 || tail.Lines[0].Text != "line 148" || tail.Lines[1].Text != "line 149" || tail.Matched != 90 {
		t.Errorf("tail 2 = %+v (matched %d)", tail.Lines, tail.Matched)
	}
	since, _ := s.ReadLogs(ctx, sim.LogQuery{Instance: "i1", Since: at.Add(147 * time.Millisecond), Until: at.Add(149 * time.Millisecond)})
	if len(since.Lines) != 2 || since.Lines[0].Text != "line 147" || since.Lines[1].Text != "line 148" {
		t.Errorf("since/until = %+v", since.Lines)
	}
	after, _ := s.ReadLogs(ctx, sim.LogQuery{Instance: "i1", AfterSeq: tail.Lines[0].Seq})
	if len(after.Lines) != 1 || after.Lines[0].Text != "line 149" {
		t.Errorf("after = %+v", after.Lines)
	}
	other, _ := s.ReadLogs(ctx, sim.LogQuery{Instance: "i2"})
	if len(other.Lines) != 3 || other.Lost.Trimmed != 0 {
		t.Errorf("i2 = %+v", other)
	}
	none, err := s.ReadLogs(ctx, sim.LogQuery{Instance: "never"})
	if err != nil || none.Known || none.Lines == nil || len(none.Lines) != 0 || none.Matched != 0 || none.Kept != (sim.LogRetention{}) || none.Lost != (sim.LogLostCounts{}) {
		t.Errorf("an unknown instance: %+v, %v", none, err)
	}
	if p.Lost.Overflowed != 7 {
		t.Errorf("overflowed %d, want 7", p.Lost.Overflowed)
	}
}

// testReadLogsSelects: a page is the first Limit lines of the selection,
// or with Tail its last (then cut to Limit); Matched counts the selection
// before Tail took its last; a negative Tail or Limit is none; the first
// line kept counts normsim's notes; lines that could not be kept make an
// instance known.
func testReadLogsSelects(t *testing.T, open Opener) {
	ctx := context.Background()
	s := open(t)
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	note := sim.LogLine{Instance: "i", Service: "app", Stream: sim.StreamNormsim, At: at, Text: "normsim: 3 line(s) were dropped here"}
	lines := append([]sim.LogLine{note}, logLines("i", 0, 10, at)...)
	lines[4].Stream, lines[4].Service = sim.StreamStderr, "db"
	if err := s.AppendLogs(ctx, lines); err != nil {
		t.Fatal(err)
	}
	page := func(q sim.LogQuery) string {
		t.Helper()
		q.Instance = "i"
		p, err := s.ReadLogs(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		var texts []string
		for _, l := range p.Lines {
			texts = append(texts, strings.TrimPrefix(strings.TrimPrefix(l.Text, "line "), "normsim: 3 line(s) were dropped here"))
		}
		return fmt.Sprintf("%v/%d", texts, p.Matched)
	}
	for _, tc := range []struct {
		q    sim.LogQuery
		want string
	}{
		{sim.LogQuery{}, "[ 0 1 2 3 4 5 6 7 8 9]/11"},
		{sim.LogQuery{Limit: 3}, "[ 0 1]/3"},
		{sim.LogQuery{Tail: 4}, "[6 7 8 9]/11"},
		{sim.LogQuery{Tail: 4, Limit: 2}, "[6 7]/11"},
		{sim.LogQuery{Tail: 40, Limit: 2}, "[ 0]/11"},
		{sim.LogQuery{Tail: -1}, "[ 0 1 2 3 4 5 6 7 8 9]/11"},
		{sim.LogQuery{Limit: -1}, "[ 0 1 2 3 4 5 6 7 8 9]/11"},
		{sim.LogQuery{Since: at.Add(3 * time.Millisecond)}, "[3 4 5 6 7 8 9]/7"},
		{sim.LogQuery{Until: at.Add(2 * time.Millisecond)}, "[ 0 1]/3"},
		{sim.LogQuery{Since: at.Add(3 * time.Millisecond), Tail: 2}, "[8 9]/7"},
		{sim.LogQuery{Since: at.Add(time.Hour)}, "[]/0"},
	} {
		if got := page(tc.q); got != tc.want {
			t.Errorf("ReadLogs(%+v) = %s, want %s", tc.q, got, tc.want)
		}
	}
	p, _ := s.ReadLogs(ctx, sim.LogQuery{Instance: "i"})
	if p.Kept.Lines != 10 || p.Kept.Bytes != 60 || p.Kept.FirstSeq != p.Lines[0].Seq || p.Lines[0].Stream != sim.StreamNormsim ||
		p.Lines[4].Stream != sim.StreamStderr || p.Lines[4].Service != "db" || p.Lines[3].Stream != sim.StreamStdout {
		t.Fatalf("i: %+v", p)
	}
	after, _ := s.ReadLogs(ctx, sim.LogQuery{Instance: "i", AfterSeq: p.Lines[8].Seq, Limit: 1})
	if len(after.Lines) != 1 || after.Lines[0].Text != "line 8" {
		t.Fatalf("after line 7, 1 line: %+v", after.Lines)
	}
	if err := s.CountOverflow(ctx, "quiet", 4); err != nil {
		t.Fatal(err)
	}
	q, _ := s.ReadLogs(ctx, sim.LogQuery{Instance: "quiet"})
	if !q.Known || len(q.Lines) != 0 || q.Lost.Overflowed != 4 || q.Kept.FirstSeq != 0 {
		t.Fatalf("an instance that only lost lines: %+v", q)
	}
}

// testRegisterLogsForgetsTheOldest: past the bound on instances, the ones
// that printed longest ago are forgotten; a registered silent instance is
// known.
func testRegisterLogsForgetsTheOldest(t *testing.T, open Opener) {
	ctx := context.Background()
	s := storeKeepingLogsOf(t, open, 3)
	for i := range 5 {
		id := fmt.Sprintf("i%d", i)
		if err := s.RegisterLogs(ctx, id); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Millisecond) // distinct updated_at
	}
	for i := range 5 {
		p, _ := s.ReadLogs(ctx, sim.LogQuery{Instance: fmt.Sprintf("i%d", i)})
		if want := i >= 2; p.Known != want {
			t.Errorf("i%d known %v, want %v", i, p.Known, want)
		}
	}
	if err := s.RegisterLogs(ctx); err != nil {
		t.Fatal(err)
	}
}

// testRegisterLogsManyAtOnce: instances registered in one call are all
// known, and the bound on instances still holds after it.
func testRegisterLogsManyAtOnce(t *testing.T, open Opener) {
	ctx := context.Background()
	s := storeKeepingLogsOf(t, open, 3)
	if err := s.RegisterLogs(ctx, "old1", "old2"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Millisecond) // distinct updated_at
	if err := s.RegisterLogs(ctx, "new1", "new2", "new3"); err != nil {
		t.Fatal(err)
	}
	for id, want := range map[string]bool{"old1": false, "old2": false, "new1": true, "new2": true, "new3": true} {
		p, _ := s.ReadLogs(ctx, sim.LogQuery{Instance: id})
		if p.Known != want {
			t.Errorf("%s known %v, want %v", id, p.Known, want)
		}
	}
	// Registered at the same moment, the first registered is the oldest.
	s = storeKeepingLogsOf(t, open, 3)
	if err := s.RegisterLogs(ctx, "a", "b", "c", "d", "b"); err != nil {
		t.Fatal(err)
	}
	for id, want := range map[string]bool{"a": false, "b": true, "c": true, "d": true} {
		if p, _ := s.ReadLogs(ctx, sim.LogQuery{Instance: id}); p.Known != want {
			t.Errorf("%s registered in one call with 3 others: known %v, want %v", id, p.Known, want)
		}
	}
}

// testPrintingKeepsAnInstancesLogs: an instance that printed since it was
// registered is newer than those that did not; registering it again
// changes nothing; what is forgotten goes with its lines and counts.
func testPrintingKeepsAnInstancesLogs(t *testing.T, open Opener) {
	ctx := context.Background()
	s := storeKeepingLogsOf(t, open, 3)
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, id := range []string{"a", "b", "c"} {
		if err := s.RegisterLogs(ctx, id); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Millisecond)
	}
	if err := s.AppendLogs(ctx, logLines("a", 0, 2, at)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Millisecond)
	if err := s.RegisterLogs(ctx, "b", "c"); err != nil { // known: no news
		t.Fatal(err)
	}
	if err := s.AppendLogs(ctx, logLines("b", 0, 3, at)); err != nil {
		t.Fatal(err)
	}
	if err := s.CountOverflow(ctx, "c", 5); err != nil { // not printing
		t.Fatal(err)
	}
	time.Sleep(time.Millisecond)
	if err := s.RegisterLogs(ctx, "d"); err != nil {
		t.Fatal(err)
	}
	for id, want := range map[string]bool{"a": true, "b": true, "c": false, "d": true} {
		if p, _ := s.ReadLogs(ctx, sim.LogQuery{Instance: id}); p.Known != want {
			t.Errorf("%s known %v, want %v", id, p.Known, want)
		}
	}
	if err := s.RegisterLogs(ctx, "e"); err != nil {
		t.Fatal(err)
	}
	if p, _ := s.ReadLogs(ctx, sim.LogQuery{Instance: "a"}); p.Known {
		t.Errorf("a, the oldest to print, is still known after e came")
	}
	// Printing again after being forgotten starts over.
	if err := s.AppendLogs(ctx, logLines("c", 0, 1, at)); err != nil {
		t.Fatal(err)
	}
	if p, _ := s.ReadLogs(ctx, sim.LogQuery{Instance: "c"}); !p.Known || p.Lost.Overflowed != 0 || len(p.Lines) != 1 || p.Kept.Lines != 1 {
		t.Errorf("c printing after it was forgotten: %+v", p)
	}
}

// storeKeepingLogsOf is a store that keeps the logs of at most instances
// instances.
func storeKeepingLogsOf(t *testing.T, open Opener, instances int) Store {
	t.Helper()
	s := open(t)
	s.SetLogLimits(sim.LogLimits{Lines: 100, Bytes: 1 << 20, Instances: instances})
	return s
}

// testLogsAreBoundedInAll (issue 34 item 10): many chatty instances, each
// within its own bound, keep at most the total of text together; the
// oldest lines go first, whoever's, and each instance counts its own.
func testLogsAreBoundedInAll(t *testing.T, open Opener) {
	ctx := context.Background()
	s := open(t)
	s.SetLogLimits(sim.LogLimits{Lines: 10000, Bytes: 1 << 20, Instances: 100, TotalBytes: 20 << 10})
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	long := strings.Repeat("x", 100)
	for i := range 8 {
		inst := fmt.Sprintf("case-%d", i)
		lines := make([]sim.LogLine, 50) // 5,000 bytes each
		for j := range lines {
			lines[j] = sim.LogLine{Instance: inst, Service: "app", Stream: sim.StreamStdout, At: at.Add(time.Duration(i*50+j) * time.Millisecond), Text: long}
		}
		if err := s.AppendLogs(ctx, lines); err != nil {
			t.Fatal(err)
		}
	}
	var kept, trimmed int64
	var perInstance []int64
	for i := range 8 {
		p, err := s.ReadLogs(ctx, sim.LogQuery{Instance: fmt.Sprintf("case-%d", i)})
		if err != nil {
			t.Fatal(err)
		}
		if int64(len(p.Lines)) != p.Kept.Lines || int64(len(p.Lines))+p.Lost.Trimmed != 50 || p.Lost.TrimmedBytes != p.Lost.Trimmed*100 {
			t.Fatalf("case-%d keeps %d lines (state %d) and counts %d trimmed, want 50 in all", i, len(p.Lines), p.Kept.Lines, p.Lost.Trimmed)
		}
		kept += int64(len(p.Lines)) * 100
		trimmed += p.Lost.Trimmed
		perInstance = append(perInstance, p.Lost.Trimmed)
	}
	if kept > 20<<10 || trimmed == 0 {
		t.Fatalf("the instances keep %d bytes of text together, past the total of %d (trimmed %d lines)", kept, 20<<10, trimmed)
	}
	if p, _ := s.ReadLogs(ctx, sim.LogQuery{Instance: "case-7"}); p.Lost.Trimmed != 0 {
		t.Fatalf("the newest instance lost %d lines; the oldest go first", p.Lost.Trimmed)
	}
	// 20,480 bytes: at 25,000 the total trims to under 18,432 (66 lines
	// go), then at each 23,400 50 lines go: the oldest, whoever's.
	if fmt.Sprint(perInstance) != "[50 50 50 50 16 0 0 0]" {
		t.Fatalf("trimmed per instance %v, want [50 50 50 50 16 0 0 0]", perInstance)
	}
}

// testLogAccountingAddsUpToWhatTheJobPrinted (issue 34 item 10): the
// notes normsim writes where lines were dropped are kept and shown, but
// not counted as the job's: kept, trimmed and overflowed add up to what
// the job printed, also once notes were trimmed with the lines around them.
func testLogAccountingAddsUpToWhatTheJobPrinted(t *testing.T, open Opener) {
	ctx := context.Background()
	s := open(t)
	s.SetLogLimits(sim.LogLimits{Lines: 50, Bytes: 1 << 20, Instances: 10})
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	printed := 0
	for round := range 10 {
		lines := logLines("i1", printed, 20, at)
		printed += 20
		lines = append(lines, sim.LogLine{Instance: "i1", Service: "app", Stream: sim.StreamNormsim, At: at,
			Text: fmt.Sprintf("normsim: 7 line(s) printed between … were dropped here (round %d)", round)})
		if err := s.AppendLogs(ctx, lines); err != nil {
			t.Fatal(err)
		}
		if err := s.CountOverflow(ctx, "i1", 7); err != nil {
			t.Fatal(err)
		}
		printed += 7
	}
	p, err := s.ReadLogs(ctx, sim.LogQuery{Instance: "i1"})
	if err != nil {
		t.Fatal(err)
	}
	notes := 0
	for _, l := range p.Lines {
		if l.Stream == sim.StreamNormsim {
			notes++
		}
	}
	if notes == 0 {
		t.Fatal("no note kept to show where lines were dropped")
	}
	if got := p.Kept.Lines + p.Lost.Trimmed + p.Lost.Overflowed; got != int64(printed) || p.Kept.Lines != int64(len(p.Lines)-notes) {
		t.Fatalf("kept %d + trimmed %d + overflowed %d = %d, the job printed %d (%d lines read, %d of them notes)",
			p.Kept.Lines, p.Lost.Trimmed, p.Lost.Overflowed, got, printed, len(p.Lines), notes)
	}
	// Trims at 60 lines (to 45) and then every 20: the last 45 lines
	// are kept (from the 16th of round 7, numbered 7*27+15), with the
	// notes among them.
	if p.Kept.Lines != 45 || notes != 3 || len(p.Lines) != 48 || p.Lines[0].Text != "line 204" {
		t.Fatalf("kept %d lines and %d notes from %q; want 45 and 3 from line 204", p.Kept.Lines, notes, p.Lines[0].Text)
	}
}

// testLogBytesAreUTF8Bytes: a line's bytes are its text's UTF-8 bytes,
// kept and trimmed alike.
func testLogBytesAreUTF8Bytes(t *testing.T, open Opener) {
	ctx := context.Background()
	s := open(t)
	s.SetLogLimits(sim.LogLimits{Lines: 10, Bytes: 1 << 20, Instances: 10})
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var lines []sim.LogLine
	for i := range 11 {
		lines = append(lines, sim.LogLine{Instance: "i", Stream: sim.StreamStdout, At: at, Text: fmt.Sprintf("é%02d\x00€", i)}) // 8 bytes
	}
	if err := s.AppendLogs(ctx, lines); err != nil {
		t.Fatal(err)
	}
	p, _ := s.ReadLogs(ctx, sim.LogQuery{Instance: "i"})
	if p.Kept.Lines != 9 || p.Kept.Bytes != 72 || p.Lost.Trimmed != 2 || p.Lost.TrimmedBytes != 16 || p.Lines[0].Text != "é02\x00€" {
		t.Fatalf("i: %+v", p)
	}
}
