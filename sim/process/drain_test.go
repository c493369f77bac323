//go:build unix && !aix

package process

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/normsim/normsim/sim"
	"github.com/normsim/normsim/sim/logcap"
	"github.com/normsim/normsim/sim/memstore"
)

// batchRecorder is a lineKeeper that remembers the largest batch it was
// handed: what a drain held at once.
type batchRecorder struct {
	lines, maxLines, maxBytes, longest int
	last                               string
}

func (b *batchRecorder) append(lines ...string) {
	size := 0
	for _, l := range lines {
		size += len(l)
		b.longest = max(b.longest, len(l))
	}
	b.lines += len(lines)
	b.maxLines, b.maxBytes = max(b.maxLines, len(lines)), max(b.maxBytes, size)
	if len(lines) > 0 {
		b.last = lines[len(lines)-1]
	}
}

type countingSink struct{ n int }

func (c *countingSink) CaptureLog(sim.LogLine) { c.n++ }

// A backlog far over the drain's bounds (a job printing faster than normsim
// reads) is handed on in bounded batches, each non-final drain reads a
// bounded part of it, and every line reaches both the ring and the sink.
func TestDrainHandsOnBoundedBatches(t *testing.T) {
	dir := t.TempDir()
	const lines = 100_000 // 10 MB: 200 batches, over two drain budgets
	var out strings.Builder
	for i := range lines {
		out.WriteString("flood " + strconv.Itoa(1_000_000+i) + " " + floodPad + "\n")
	}
	// One enormous unfinished line: cut, never held whole.
	const longLine = 20 << 20
	errText := strings.Repeat("a", longLine)
	stdout, stderr := filepath.Join(dir, "stdout"), filepath.Join(dir, "stderr")
	if err := os.WriteFile(stdout, []byte(out.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(stderr, []byte(errText), 0o600); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	errText = ""
	var streams []*stream
	for _, f := range []struct{ name, path string }{{sim.StreamStdout, stdout}, {sim.StreamStderr, stderr}} {
		rd, err := os.Open(f.path)
		if err != nil {
			t.Fatal(err)
		}
		streams = append(streams, &stream{name: f.name, f: rd})
	}
	sink := &countingSink{}
	p := &proc{svc: &service{name: "job", prefix: "job | "}, inst: "i1", sink: sink,
		now: func() time.Time { return testNow }, streams: streams}

	keep := &batchRecorder{}
	drains := 1
	for p.drain(keep, false) {
		if drains++; drains > 100 {
			t.Fatal("drain still says more is left after 100 drains of a finished file")
		}
	}
	if drains < 3 {
		t.Errorf("%d non-final drains read 10 MB; each should stop at %d bytes", drains, drainBudget)
	}
	p.drain(keep, true)

	if keep.maxLines > drainBatchLines {
		t.Errorf("a batch of %d lines was handed on; the bound is %d", keep.maxLines, drainBatchLines)
	}
	// A batch is handed on once it reaches the bound: at most one line over.
	if keep.maxBytes > drainBatchBytes+keep.longest {
		t.Errorf("a batch of %d bytes was handed on; the bound is %d plus a line", keep.maxBytes, drainBatchBytes)
	}
	// The long line, read over several drains, is shown cut as its first
	// 8 KiB come in, and its count follows at its end.
	if want := lines + 2; keep.lines != want || sink.n != want {
		t.Errorf("ring got %d lines, sink %d; want %d each", keep.lines, sink.n, want)
	}
	wantLast := "job | …[normsim: the line cut above ended " + strconv.Itoa(longLine-sim.MaxLogLineBytes) + " bytes later]"
	if keep.last != wantLast {
		t.Errorf("the long line ended as %.80q… (%d bytes), want its count %q", keep.last, len(keep.last), wantLast)
	}
	if cap(p.buf) > 32<<10 {
		t.Errorf("the read buffer grew to %d bytes", cap(p.buf))
	}
}

// Every line a job floods out is kept or counted as lost by the capture,
// however far the store's queue falls behind: kept + trimmed + overflowed
// is what the job printed.
func TestFloodIsKeptOrCounted(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir())
	store := memstore.New()
	// A small queue, so the flood overflows it on any machine.
	capture := logcap.New(logcap.Config{Store: store, Limits: logcap.Limits{Lines: 1000, Bytes: 1 << 20}})
	t.Cleanup(capture.Close)
	rec := &recorder{}
	r := New(Config{Observer: rec.observe, Logs: capture, Now: func() time.Time { return testNow }})
	r.closeGrace = 300 * time.Millisecond
	t.Cleanup(func() {
		if err := r.Close(context.Background(), false); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	const lines = 100_000
	MustLaunch(t, r, "i1", helper("job", "flood", strconv.Itoa(lines)))
	if ev := rec.waitFor(t, sim.ServiceExited, "job"); ev.ExitCode != 0 {
		t.Fatalf("flood exited: %+v", ev)
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	if err := capture.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	page, err := store.ReadLogs(ctx, sim.LogQuery{Instance: "i1", Tail: 1})
	if err != nil {
		t.Fatal(err)
	}
	if got := page.Kept.Lines + page.Lost.Trimmed + page.Lost.Overflowed; got != lines {
		t.Fatalf("kept %d + trimmed %d + overflowed %d = %d, want the %d lines printed",
			page.Kept.Lines, page.Lost.Trimmed, page.Lost.Overflowed, got, lines)
	}
	t.Logf("kept %d, trimmed %d, overflowed %d", page.Kept.Lines, page.Lost.Trimmed, page.Lost.Overflowed)
	if logs := logsNow(t, r, "i1"); !strings.HasSuffix(logs, fmt.Sprintf("job | flood %07d %s\n", lines-1, floodPad)) {
		t.Fatalf("the ring's last line is not the flood's last:\n%.300s", logs[max(0, len(logs)-300):])
	}
}

// skipCountingSink is a sim.LogSkipper that counts what it is handed and
// what it is told was skipped.
type skipCountingSink struct {
	countingSink
	skipped int64
}

func (c *skipCountingSink) SkipLogs(_ sim.LogLine, n int64) { c.skipped += n }

// TestABacklogTooLargeToReadIsSkippedAndCounted (issue 34, the third
// attack's finding 3): a job that printed far faster than normsim reads
// (`yes` writes 2.9 GB in 5 s) left a backlog that took 11 minutes to read
// line by line when it was stopped. Past maxLogBacklog all but the last
// keptOfBacklog is skipped: its lines counted (read and skipped add up to
// what was printed), noted where they were, the last line still the job's.
func TestABacklogTooLargeToReadIsSkippedAndCounted(t *testing.T) {
	dir := t.TempDir()
	line := "flood " + floodPad // the same length each
	total := (maxLogBacklog + 8<<20) / (len(line) + 1)
	var out strings.Builder
	out.Grow(total * (len(line) + 1))
	out.WriteString("half a line the job was writing when the drain began")
	for i := range total {
		out.WriteString(line + " " + strconv.Itoa(i%10) + "\n")
	}
	path := filepath.Join(dir, "stdout")
	if err := os.WriteFile(path, []byte(out.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	rd, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	sink := &skipCountingSink{}
	p := &proc{svc: &service{name: "job", prefix: "job | "}, inst: "i1", sink: sink,
		now: func() time.Time { return testNow }, streams: []*stream{{name: sim.StreamStdout, f: rd}}}
	keep := &noteRecorder{}
	p.drain(keep, true)

	if got := int64(sink.n) + sink.skipped; got != int64(total) {
		t.Errorf("read %d + skipped %d = %d lines, want the %d printed", sink.n, sink.skipped, got, total)
	}
	if sink.skipped == 0 {
		t.Fatal("nothing was skipped of a backlog over maxLogBacklog")
	}
	if read := sink.n * (len(line) + 3); read > keptOfBacklog+2*(len(line)+3) {
		t.Errorf("%d lines (%d bytes) were read one by one; past the skip at most %d bytes are", sink.n, read, keptOfBacklog)
	}
	if keep.lines[0] != "job | half a line the job was writing when the drain beganflood "+floodPad+" 0" {
		t.Errorf("the line under way when the skip began came out as %.80q", keep.lines[0])
	}
	note := fmt.Sprintf("normsim | %d lines were skipped here, unread: the job printed faster than normsim reads its output", sink.skipped)
	if keep.lines[1] != note {
		t.Errorf("the ring's second line is %.100q, want the note %q", keep.lines[1], note)
	}
	if last := keep.lines[len(keep.lines)-1]; last != "job | "+line+" "+strconv.Itoa((total-1)%10) {
		t.Errorf("the ring's last line is %.100q, want the job's last", last)
	}
}

// noteRecorder keeps every line a drain hands on.
type noteRecorder struct{ lines []string }

func (r *noteRecorder) append(lines ...string) { r.lines = append(r.lines, lines...) }

// ringRecorder is a lineKeeper that keeps every line.
type ringRecorder struct{ lines []string }

func (r *ringRecorder) append(lines ...string) { r.lines = append(r.lines, lines...) }

// TestAJobThatTruncatesItsOutputIsReadFromTheNewStart (issue 34, round
// three, F3): a job that truncated its own stdout and printed on was read
// from the old offset: the lines it printed after the truncation up to
// that offset were lost without a word, and the next line came out cut
// ("e 2890"). The drain sees the file was truncated, whether it has grown
// past the old offset again or not, says so where it happened, and reads
// on from the file's new start.
func TestAJobThatTruncatesItsOutputIsReadFromTheNewStart(t *testing.T) {
	for _, tc := range []struct {
		name  string
		after int // lines printed after the truncation
	}{
		{"grown past where it was read", 1500},
		{"still shorter than where it was read", 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "stdout")
			w, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			rd, err := os.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			p := &proc{svc: &service{name: "job", prefix: ""}, inst: "i1",
				now: func() time.Time { return testNow }, streams: []*stream{{name: sim.StreamStdout, f: rd}}}
			print := func(from, to int) {
				var b strings.Builder
				for i := from; i <= to; i++ {
					fmt.Fprintf(&b, "line %d\n", i)
				}
				if _, err := w.WriteString(b.String()); err != nil {
					t.Fatal(err)
				}
			}
			keep := &ringRecorder{}
			print(1, 1500)
			p.drain(keep, false)
			if err := w.Truncate(0); err != nil {
				t.Fatal(err)
			}
			print(1501, 1500+tc.after)
			p.drain(keep, false)
			p.drain(keep, true)

			var want []string
			for i := 1; i <= 1500; i++ {
				want = append(want, fmt.Sprintf("line %d", i))
			}
			want = append(want, "normsim | the job truncated its output file here")
			for i := 1501; i <= 1500+tc.after; i++ {
				want = append(want, fmt.Sprintf("line %d", i))
			}
			if len(keep.lines) != len(want) {
				t.Fatalf("%d lines read, want %d; around the truncation: %q", len(keep.lines), len(want), keep.lines[1498:min(len(keep.lines), 1503)])
			}
			for i, l := range keep.lines {
				if !strings.HasPrefix(l, want[i]) {
					t.Fatalf("line %d is %q, want %q", i+1, l, want[i])
				}
			}
		})
	}
}

// TestAHoleInTheOutputIsNotRead (issue 34, round four, F0): a job that
// seeked its stdout a terabyte ahead and wrote a line there had normsim
// read the hole, zeros at 440 MB/s for 40 minutes, holding the lock a stop
// waits for; the lines after it never came. A hole holds no line end: it
// is skipped unread, as part of the line it lies in, which is counted, and
// the lines after it are read as usual.
func TestAHoleInTheOutputIsNotRead(t *testing.T) {
	path := filepath.Join(t.TempDir(), "stdout")
	w, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if _, err := w.WriteString("line before\n"); err != nil {
		t.Fatal(err)
	}
	if _, err := w.WriteAt([]byte("after the hole\nline after\n"), 1<<40); err != nil {
		t.Skipf("this file system takes no terabyte-long sparse file: %v", err)
	}
	rd, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	sink := &skipCountingSink{}
	p := &proc{svc: &service{name: "job", prefix: ""}, inst: "i1", sink: sink,
		now: func() time.Time { return testNow }, streams: []*stream{{name: sim.StreamStdout, f: rd}}}
	keep := &ringRecorder{}
	done := make(chan int)
	go func() {
		drains := 1
		for p.drain(keep, false) && drains < 1000 {
			drains++
		}
		p.drain(keep, true)
		done <- drains
	}()
	select {
	case drains := <-done:
		if drains >= 1000 {
			t.Fatalf("still draining after %d drains", drains)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the drain still reads a terabyte-long hole after 60s")
	}
	text := strings.Join(keep.lines, "\n")
	for _, want := range []string{"line before", "line after", "lines were skipped here"} {
		if !strings.Contains(text, want) {
			t.Errorf("the lines read lack %q:\n%.2000s", want, text)
		}
	}
	if sink.skipped < 1 {
		t.Errorf("%d lines counted skipped, want the line the hole lies in", sink.skipped)
	}
}
