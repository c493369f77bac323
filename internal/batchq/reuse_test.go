package batchq

import "testing"

// TestReuseLetsABurstsArrayGo: the written items' array is kept for the
// next ones, unless a burst grew it past keepAfterBurst and the load is
// now under a quarter of it.
func TestReuseLetsABurstsArrayGo(t *testing.T) {
	for _, c := range []struct {
		len, cap int
		kept     bool
	}{
		{1, 100, true},
		{10, keepAfterBurst, true},
		{keepAfterBurst, 4 * keepAfterBurst, true},
		{10, 4 * keepAfterBurst, false},
	} {
		got := reuse(make([]int, c.len, c.cap))
		if kept := cap(got) == c.cap; kept != c.kept || len(got) != 0 {
			t.Errorf("reuse of %d items in room for %d: len %d cap %d, want kept %v", c.len, c.cap, len(got), cap(got), c.kept)
		}
	}
}
