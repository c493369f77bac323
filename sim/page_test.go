package sim

import (
	"math"
	"testing"
)

// TestPageOfHugeLimits (issue 34 item 9): a limit or offset near the
// largest int is a page that ends at the list's end, never a panic or a
// wrapped bound.
func TestPageOfHugeLimits(t *testing.T) {
	all := []int{1, 2, 3}
	for _, tc := range []struct{ offset, limit, want int }{
		{1, math.MaxInt, 2},
		{0, math.MaxInt, 3},
		{math.MaxInt, 5, 0},
		{math.MaxInt - 1, 2, 0},
		{1, 1, 1},
		{0, 0, 3},
	} {
		if got := PageOf(all, tc.offset, tc.limit); len(got.Items) != tc.want || got.Total != 3 {
			t.Errorf("PageOf(offset %d, limit %d) = %v, want %d items", tc.offset, tc.limit, got, tc.want)
		}
	}
}
