package sim

import "testing"

// TestOverflowTrimsBackUnderTheBound: within both bounds nothing goes;
// past either, what goes leaves TrimTo of each bound (1,800 of 2,000
// frames, 3,774,873 of 4 MiB).
func TestOverflowTrimsBackUnderTheBound(t *testing.T) {
	for _, tc := range []struct {
		n, size       int64
		dropN, dropSz int64
		ok            bool
	}{
		{2000, 4 << 20, 0, 0, false},
		{2001, 100, 2001 - 1800, 100 - 3774873, true},
		{10, 4<<20 + 1, 10 - 1800, 4<<20 + 1 - 3774873, true},
	} {
		n, sz, ok := DefaultFrameLimits.InstanceOverflow(tc.n, tc.size)
		if n != tc.dropN || sz != tc.dropSz || ok != tc.ok {
			t.Errorf("InstanceOverflow(%d, %d) = %d, %d, %v; want %d, %d, %v", tc.n, tc.size, n, sz, ok, tc.dropN, tc.dropSz, tc.ok)
		}
	}
	if _, _, ok := DefaultFrameLimits.TotalOverflow(100001, 0); !ok {
		t.Error("100,001 frames in all are within the total bound of 100,000")
	}
}
