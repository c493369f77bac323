package app

import (
	"slices"
	"sync"
	"testing"
	"time"
)

// The lane's whole point is that start-up work never holds two cores: its
// pieces run one at a time, in the order queued, and all of them run
// although the lane is closed while they wait.
func TestLaneRunsOnePieceAtATimeInOrder(t *testing.T) {
	var wg sync.WaitGroup
	l := startLane(&wg)
	var (
		mu            sync.Mutex
		running, most int
		order         []int
	)
	for i := range 6 {
		l.Go(func() {
			mu.Lock()
			running++
			most = max(most, running)
			mu.Unlock()
			time.Sleep(2 * time.Millisecond) // long enough for a second piece to overlap, were it started
			mu.Lock()
			running--
			order = append(order, i)
			mu.Unlock()
		})
	}
	l.close()
	l.close() // a second close (Open's defer after an early one) is harmless
	wg.Wait()
	if want := []int{0, 1, 2, 3, 4, 5}; !slices.Equal(order, want) {
		t.Errorf("pieces ran in the order %v, want %v", order, want)
	}
	if most != 1 {
		t.Errorf("%d pieces ran at once, want 1", most)
	}
}
