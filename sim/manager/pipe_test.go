package manager

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"
)

// tape records what a pipe delivers and loses, in order.
type tape struct {
	mu   sync.Mutex
	got  []string
	done chan struct{}
	want int
}

func newTape(want int) *tape { return &tape{done: make(chan struct{}), want: want} }

func (tp *tape) add(s string) {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	tp.got = append(tp.got, s)
	if len(tp.got) == tp.want {
		close(tp.done)
	}
}

func (tp *tape) item(name string, at time.Time) pipeItem {
	return pipeItem{at: at, deliver: func() { tp.add(name) }, lost: func(why string) { tp.add(name + " lost: " + why) }}
}

func (tp *tape) wait(t *testing.T, want ...string) {
	t.Helper()
	select {
	case <-tp.done:
	case <-time.After(10 * time.Second):
	}
	tp.mu.Lock()
	defer tp.mu.Unlock()
	if !slices.Equal(tp.got, want) {
		t.Fatalf("got %q, want %q", tp.got, want)
	}
}

// TestPipeKeepsOrder (issue 29 item 8): what goes on a socket after a held
// frame follows it, in order, even when its own hold is shorter; another
// socket, or the other direction, does not wait; the pipe closes once
// empty.
func TestPipeKeepsOrder(t *testing.T) {
	t.Parallel()
	m := &Manager{ctx: context.Background()}
	tp := newTape(4)
	k := pipeKey{"src-1", dirOut}
	m.hold(k, tp.item("held", time.Now().Add(50*time.Millisecond)))
	if !m.behind(k, tp.item("after", time.Time{})) {
		t.Fatal("behind found no pipe while a frame is held")
	}
	m.hold(k, tp.item("held briefly", time.Now().Add(time.Millisecond)))
	if m.behind(pipeKey{"src-1", dirIn}, tp.item("other way", time.Time{})) || m.behind(pipeKey{"tgt-1", dirOut}, tp.item("other socket", time.Time{})) {
		t.Fatal("a frame on another pipe was queued")
	}
	m.behind(k, tp.item("last", time.Time{}))
	tp.wait(t, "held", "after", "held briefly", "last")
	m.wg.Wait()
	if m.behind(k, tp.item("late", time.Time{})) || m.pipes.open.Load() != 0 {
		t.Fatal("the pipe is still open once empty")
	}
}

// TestPipeCutLosesWhatItHolds: a connection that goes away takes what was
// held on its way to it, and what waited behind, each told why.
func TestPipeCutLosesWhatItHolds(t *testing.T) {
	t.Parallel()
	m := &Manager{ctx: context.Background()}
	tp := newTape(3)
	k := pipeKey{"src-1", dirOut}
	m.hold(k, tp.item("held", time.Now().Add(time.Hour)))
	m.behind(k, tp.item("after", time.Time{}))
	m.cut(k, "gone")
	// The pipe is empty now: it takes "next" if its drain has not closed
	// it yet, and otherwise the caller sends it at once, as the relay does.
	if next := tp.item("next", time.Time{}); !m.behind(k, next) {
		next.deliver()
	}
	tp.wait(t, "held lost: gone", "after lost: gone", "next")
	m.wg.Wait()
}

// TestPipeAtShutdown: normsim shutting down waits out no hold; what only
// waited behind the held frame goes on.
func TestPipeAtShutdown(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	m := &Manager{ctx: ctx}
	tp := newTape(2)
	k := pipeKey{"src-1", dirIn}
	m.hold(k, tp.item("held", time.Now().Add(time.Hour)))
	m.behind(k, tp.item("after", time.Time{}))
	cancel()
	tp.wait(t, "held lost: normsim is shutting down", "after")
	m.wg.Wait()
}
