package batchq_test

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/normsim/normsim/internal/batchq"
)

// TestOrderBatchesAndClose: items reach the writer in order, in batches no
// larger than asked, and Close writes what is still queued.
func TestOrderBatchesAndClose(t *testing.T) {
	var mu sync.Mutex
	var got []int
	var sizes []int
	q := batchq.New(batchq.Limits{}, time.Millisecond, 3, func(b []int) {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, b...)
		sizes = append(sizes, len(b))
	})
	for i := range 10 {
		if !q.Add(i, 0) {
			t.Fatalf("item %d refused by an unbounded queue", i)
		}
	}
	q.Close()
	if q.Add(10, 0) {
		t.Fatal("a closed queue took an item")
	}
	if want := []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}; !slices.Equal(got, want) {
		t.Fatalf("written %v, want %v", got, want)
	}
	for _, n := range sizes {
		if n > 3 {
			t.Fatalf("a batch of %d, over 3: %v", n, sizes)
		}
	}
}

// TestLimits: while the writer is busy, the queue takes items up to its
// item limit and its size limit, whichever comes first.
func TestLimits(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	var written []string
	q := batchq.New(batchq.Limits{Items: 3, Size: 10}, 0, 100, func(b []string) {
		once.Do(func() { close(entered); <-release })
		written = append(written, b...)
	})
	q.Add("first", 0)
	<-entered // the writer holds "first"; what follows waits in the queue
	took := []bool{q.Add("a", 4), q.Add("b", 4), q.Add("c", 4), q.Add("d", 1), q.Add("e", 1)}
	// a, b fit (8); c would make 12 > 10; d makes 9; e is a fourth item > 3.
	if want := []bool{true, true, false, true, false}; !slices.Equal(took, want) {
		t.Fatalf("taken %v, want %v", took, want)
	}
	close(release)
	q.Close()
	if want := []string{"first", "a", "b", "d"}; !slices.Equal(written, want) {
		t.Fatalf("written %v, want %v", written, want)
	}
}

// TestHurryCutsTheLingerShort: a queue lingering an hour writes at once
// when hurried.
func TestHurryCutsTheLingerShort(t *testing.T) {
	wrote := make(chan []int, 1)
	q := batchq.New(batchq.Limits{}, time.Hour, 10, func(items []int) { wrote <- append([]int(nil), items...) })
	q.Add(7, 0)
	q.Hurry()
	select {
	case got := <-wrote:
		if len(got) != 1 || got[0] != 7 {
			t.Fatalf("wrote %v", got)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a hurried queue still lingered")
	}
	q.Close()
}

// TestAddOverKeepsPastTheLimits: on a full queue Add refuses and AddOver
// keeps the item; Full says so until the writer takes what is pending,
// and closes its channel then; a closed queue refuses both.
func TestAddOverKeepsPastTheLimits(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	var mu sync.Mutex
	var written []string
	q := batchq.New(batchq.Limits{Items: 1}, 0, 100, func(b []string) {
		once.Do(func() { close(entered); <-release })
		mu.Lock()
		defer mu.Unlock()
		written = append(written, b...)
	})
	q.Add("first", 0)
	<-entered
	q.Add("queued", 0) // the one item the queue holds
	if q.Add("refused", 0) {
		t.Fatal("Add took an item past the limit")
	}
	if !q.AddOver("over", 0) {
		t.Fatal("AddOver refused an item on an open queue")
	}
	full, room := q.Full()
	if !full {
		t.Fatal("a queue past its limit is not full")
	}
	select {
	case <-room:
		t.Fatal("room before the writer took anything")
	case <-time.After(20 * time.Millisecond):
	}
	close(release)
	select {
	case <-room:
	case <-time.After(5 * time.Second):
		t.Fatal("no room after the writer took what was pending")
	}
	q.Close()
	if q.AddOver("after", 0) {
		t.Fatal("a closed queue took an item")
	}
	mu.Lock()
	defer mu.Unlock()
	if want := []string{"first", "queued", "over"}; !slices.Equal(written, want) {
		t.Fatalf("written %v, want %v", written, want)
	}
}

// TestAddKeyedMergesWhileStillPending: an item added under a key already
// pending is merged into that one where it stands; once the writer has
// taken it, the key starts afresh at the end.
func TestAddKeyedMergesWhileStillPending(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	var mu sync.Mutex
	var written []string
	q := batchq.New(batchq.Limits{}, 0, 100, func(b []string) {
		once.Do(func() { close(entered); <-release })
		mu.Lock()
		defer mu.Unlock()
		written = append(written, b...)
	})
	replace := func(pending *string, item string) { *pending = item }
	q.AddKeyed("m1", "m1 v1", replace)
	<-entered // the writer holds m1 v1
	q.AddKeyed("m1", "m1 v2", replace)
	q.Add("event", 0)
	q.AddKeyed("i1", "i1 v1", replace)
	q.AddKeyed("m1", "m1 v3", replace)
	q.AddKeyed("i1", "i1 v2", replace)
	close(release)
	q.Close()
	if q.AddKeyed("m1", "after", replace) {
		t.Fatal("a closed queue took an item")
	}
	mu.Lock()
	defer mu.Unlock()
	if want := []string{"m1 v1", "m1 v3", "event", "i1 v2"}; !slices.Equal(written, want) {
		t.Fatalf("written %v, want %v", written, want)
	}
}

// TestLenCountsWhatIsNotYetWritten: Len counts the items waiting and those
// the writer is writing, and is 0 once they are written.
func TestLenCountsWhatIsNotYetWritten(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	q := batchq.New(batchq.Limits{}, 0, 100, func(b []string) {
		once.Do(func() { close(entered); <-release })
	})
	q.Add("a", 0)
	q.Add("b", 0)
	<-entered // the writer holds what it took
	q.Add("c", 0)
	if n := q.Len(); n != 3 {
		t.Fatalf("Len %d while a, b are being written and c waits, want 3", n)
	}
	close(release)
	q.Close()
	if n := q.Len(); n != 0 {
		t.Fatalf("Len %d after everything was written", n)
	}
}
