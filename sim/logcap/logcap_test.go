package logcap_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/normsim/normsim/sim"
	"github.com/normsim/normsim/sim/logcap"
	"github.com/normsim/normsim/sim/sqlite"
)

// memStore is a real store in memory, closed when the test ends.
func memStore(t *testing.T) *sqlite.Store {
	t.Helper()
	st, err := sqlite.Open(context.Background(), sqlite.Memory)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// splitMarks counts a page's lines the job printed and returns normsim's
// marker lines among them.
func splitMarks(p *sim.LogPage) (kept int, marks []string) {
	for _, l := range p.Lines {
		if l.Stream == sim.StreamNormsim {
			marks = append(marks, l.Text)
		} else {
			kept++
		}
	}
	return kept, marks
}

// gatedStore is a real store whose log writes wait for a gate: a store
// that falls behind.
type gatedStore struct {
	*sqlite.Store
	once    sync.Once
	entered chan struct{}
	gate    chan struct{}
}

// captureBehindAGate is a capture of at most lines queued lines on a
// gatedStore.
func captureBehindAGate(t *testing.T, lines int) (*logcap.Capture, *gatedStore) {
	t.Helper()
	g := &gatedStore{Store: memStore(t), entered: make(chan struct{}), gate: make(chan struct{})}
	c := logcap.New(logcap.Config{Store: g, Limits: logcap.Limits{Lines: lines, Bytes: 1 << 20}})
	t.Cleanup(c.Close)
	return c, g
}

func (g *gatedStore) AppendLogs(ctx context.Context, lines []sim.LogLine) error {
	g.once.Do(func() { close(g.entered) })
	<-g.gate
	return g.Store.AppendLogs(ctx, lines)
}

// TestOverflowIsCountedAndMarked: lines the queue cannot take while the
// store is stuck are counted exactly and marked in the log; kept plus
// counted is what was printed.
func TestOverflowIsCountedAndMarked(t *testing.T) {
	ctx := context.Background()
	c, g := captureBehindAGate(t, 10)
	at := time.Now()
	line := func(i int) sim.LogLine {
		return sim.LogLine{Instance: "i1", Service: "app", Stream: sim.StreamStdout, At: at.Add(time.Duration(i)), Text: fmt.Sprintf("line %d", i)}
	}
	c.CaptureLog(line(0))
	<-g.entered // the writer holds line 0 and waits
	const printed = 100
	for i := 1; i < printed; i++ {
		c.CaptureLog(line(i))
	}
	close(g.gate)
	p, err := c.Read(ctx, sim.LogQuery{Instance: "i1"})
	if err != nil {
		t.Fatal(err)
	}
	kept, marks := splitMarks(p)
	for _, m := range marks {
		if !strings.Contains(m, fmt.Sprintf("%d line(s)", p.Lost.Overflowed)) {
			t.Errorf("marker %q does not say %d lines", m, p.Lost.Overflowed)
		}
	}
	if p.Lost.Overflowed == 0 || len(marks) != 1 || int64(kept)+p.Lost.Overflowed != printed {
		t.Fatalf("kept %d + overflowed %d (marks %q), want %d in all, some overflowed, one mark", kept, p.Lost.Overflowed, marks, printed)
	}
}

// TestReadSeesEverythingCapturedBefore: Read waits for the lines captured
// before it, however recent.
func TestReadSeesEverythingCapturedBefore(t *testing.T) {
	ctx := context.Background()
	st := memStore(t)
	c := logcap.New(logcap.Config{Store: st})
	defer c.Close()
	for i := range 1000 {
		c.CaptureLog(sim.LogLine{Instance: "i1", Service: "app", Stream: sim.StreamStderr, At: time.Now(), Text: fmt.Sprint(i)})
	}
	p, err := c.Read(ctx, sim.LogQuery{Instance: "i1", Tail: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Lines) != 1 || p.Lines[0].Text != "999" || p.Kept.Lines != 1000 {
		t.Fatalf("last line %+v of %d, want 999 of 1000", p.Lines, p.Kept.Lines)
	}
}

// TestHoldDefersWritesNotCapture: while a cutover holds the book, lines
// are taken but not written; they are written on release, and a hold
// never released ends by itself (sim.MaxLogHold).
func TestHoldDefersWritesNotCapture(t *testing.T) {
	ctx := context.Background()
	st := memStore(t)
	c := logcap.New(logcap.Config{Store: st})
	defer c.Close()
	line := func(text string) sim.LogLine {
		return sim.LogLine{Instance: "i1", Service: "app", Stream: sim.StreamStdout, At: time.Now(), Text: text}
	}
	release := c.Hold()
	c.CaptureLog(line("held"))
	time.Sleep(100 * time.Millisecond) // well past the linger
	if p, _ := st.ReadLogs(ctx, sim.LogQuery{Instance: "i1"}); len(p.Lines) != 0 {
		t.Fatalf("written during the hold: %+v", p.Lines)
	}
	release()
	release() // twice is once
	if p, _ := c.Read(ctx, sim.LogQuery{Instance: "i1"}); len(p.Lines) != 1 {
		t.Fatalf("after the release: %+v", p.Lines)
	}
	c.Hold() // never released
	c.CaptureLog(line("held for good"))
	if p, _ := c.Read(ctx, sim.LogQuery{Instance: "i1"}); len(p.Lines) != 2 {
		t.Fatalf("a hold past sim.MaxLogHold still holds: %+v", p.Lines)
	}
}

// failingStore is a real store whose first log write fails, as one that
// timed out under load would.
type failingStore struct {
	*sqlite.Store
	mu    sync.Mutex
	fails int
}

func (f *failingStore) AppendLogs(ctx context.Context, lines []sim.LogLine) error {
	f.mu.Lock()
	fail := f.fails > 0
	f.fails--
	f.mu.Unlock()
	if fail {
		return context.DeadlineExceeded
	}
	return f.Store.AppendLogs(ctx, lines)
}

// TestFailedWriteIsCountedAndMarked: the lines of a batch the store failed
// to write are counted as overflowed and marked with why, once the store
// writes again; kept plus counted is what was printed.
func TestFailedWriteIsCountedAndMarked(t *testing.T) {
	ctx := context.Background()
	st := memStore(t)
	// The batch write and the marker after it fail; the next write works.
	f := &failingStore{Store: st, fails: 2}
	c := logcap.New(logcap.Config{Store: f})
	defer c.Close()
	const first = 50
	for i := range first {
		c.CaptureLog(sim.LogLine{Instance: "i1", Service: "app", Stream: sim.StreamStdout, At: time.Now(), Text: fmt.Sprint(i)})
	}
	if err := c.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	c.CaptureLog(sim.LogLine{Instance: "i1", Service: "app", Stream: sim.StreamStdout, At: time.Now(), Text: "after"})
	p, err := c.Read(ctx, sim.LogQuery{Instance: "i1"})
	if err != nil {
		t.Fatal(err)
	}
	kept, marks := splitMarks(p)
	for _, m := range marks {
		if !strings.Contains(m, "the store failed to write them") || !strings.Contains(m, fmt.Sprintf("%d line(s)", first)) {
			t.Errorf("marker %q", m)
		}
	}
	if kept != 1 || len(marks) != 1 || p.Lost.Overflowed != first {
		t.Fatalf("kept %d, marks %q, overflowed %d; want 1, one and %d", kept, marks, p.Lost.Overflowed, first)
	}
}

// TestRegisterIsQueuedAndNeverRefused: a registration waits in the queue
// like a line (a launch does not wait for the store), is taken even when
// the queue is full, and is stored before Read answers: a silent
// instance's log is known.
func TestRegisterIsQueuedAndNeverRefused(t *testing.T) {
	ctx := context.Background()
	c, g := captureBehindAGate(t, 2)
	c.CaptureLog(sim.LogLine{Instance: "chatty", Service: "app", Stream: sim.StreamStdout, At: time.Now(), Text: "first"})
	<-g.entered // the writer is stuck in the store
	for i := range 5 {
		c.CaptureLog(sim.LogLine{Instance: "chatty", Service: "app", Stream: sim.StreamStdout, At: time.Now(), Text: fmt.Sprint(i)})
	}
	c.Register("silent") // the queue is full of chatty's lines
	if p, err := g.Store.ReadLogs(ctx, sim.LogQuery{Instance: "silent"}); err != nil || p.Known {
		t.Fatalf("silent known in the store before the writer ran: %+v, %v", p, err)
	}
	close(g.gate)
	p, err := c.Read(ctx, sim.LogQuery{Instance: "silent"})
	if err != nil {
		t.Fatal(err)
	}
	if !p.Known || len(p.Lines) != 0 {
		t.Fatalf("silent: known %v with %d lines, want known with none", p.Known, len(p.Lines))
	}
}

// TestSkippedLinesAreCountedAndMarked: lines a runtime skipped unread
// (sim.LogSkipper) are counted as overflowed and marked with why; kept
// plus counted is what was printed.
func TestSkippedLinesAreCountedAndMarked(t *testing.T) {
	ctx := context.Background()
	c := logcap.New(logcap.Config{Store: memStore(t)})
	t.Cleanup(c.Close)
	at := time.Now()
	c.CaptureLog(sim.LogLine{Instance: "i1", Service: "app", Stream: sim.StreamStdout, At: at, Text: "before"})
	var skipper sim.LogSkipper = c
	skipper.SkipLogs(sim.LogLine{Instance: "i1", Service: "app", Stream: sim.StreamStdout, At: at.Add(time.Millisecond)}, 226449)
	c.CaptureLog(sim.LogLine{Instance: "i1", Service: "app", Stream: sim.StreamStdout, At: at.Add(2 * time.Millisecond), Text: "after"})
	p, err := c.Read(ctx, sim.LogQuery{Instance: "i1"})
	if err != nil {
		t.Fatal(err)
	}
	kept, marks := splitMarks(p)
	if kept != 2 || p.Lost.Overflowed != 226449 || len(marks) != 1 ||
		!strings.Contains(marks[0], "226449 line(s)") || !strings.Contains(marks[0], "faster than normsim reads its output") {
		t.Fatalf("kept %d, overflowed %d, marks %q; want 2 kept, 226449 counted and marked as skipped unread", kept, p.Lost.Overflowed, marks)
	}
}

// Attack round 16, B-F4: a store that refuses output (its disk full) is
// failing, so launches are turned away, and stops failing once it writes
// again, though the job that printed has gone quiet: the marks owed for
// what was lost are what tries it.
func TestAStoreThatRefusesOutputIsFailingUntilItWritesAgain(t *testing.T) {
	ctx := context.Background()
	st := memStore(t)
	f := &failingStore{Store: st, fails: 1 << 20}
	c := logcap.New(logcap.Config{Store: f})
	defer c.Close()
	if err := c.Failing(ctx); err != nil {
		t.Fatalf("failing before any write: %v", err)
	}
	for i := range 10 {
		c.CaptureLog(sim.LogLine{Instance: "i1", Service: "app", Stream: sim.StreamStdout, At: time.Now(), Text: fmt.Sprint(i)})
	}
	if err := c.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.Failing(ctx); err == nil {
		t.Fatal("a store that refused the lines and their mark is not failing")
	}
	f.mu.Lock()
	f.fails = 0 // room again
	f.mu.Unlock()
	if err := c.Failing(ctx); err != nil {
		t.Fatalf("a store that writes again is still failing: %v", err)
	}
	p, err := c.Read(ctx, sim.LogQuery{Instance: "i1"})
	if err != nil {
		t.Fatal(err)
	}
	if _, marks := splitMarks(p); len(marks) != 1 || p.Lost.Overflowed != 10 {
		t.Fatalf("marks %q, overflowed %d; want one mark for the 10 lost", marks, p.Lost.Overflowed)
	}
}
