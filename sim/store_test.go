package sim

import (
	"encoding/json"
	"testing"
)

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

// TestAClosedSocketSaysWhoClosedIt (attack round 10b, L2): an instance's
// history said "its job's socket closed (4400: frame is not valid JSON)"
// alike for normsim's 4400 and a job's own, while the migration's timeline
// told them apart.
func TestAClosedSocketSaysWhoClosedIt(t *testing.T) {
	for _, c := range []struct{ data, want string }{
		{`{"connected":false,"code":4400,"reason":"frame is not valid JSON","closedBy":"worker"}`, "normsim closed its job's socket (4400: frame is not valid JSON)"},
		{`{"connected":false,"code":4400,"reason":"frame is not valid JSON","closedBy":"job"}`, "its job closed its socket (4400: frame is not valid JSON)"},
		{`{"connected":false,"code":1006,"reason":"connection lost","closedBy":"lost"}`, "its job's connection was lost, without a close frame (1006: connection lost)"},
		{`{"connected":false,"code":1000,"reason":"bye"}`, "its job's socket closed (1000: bye)"},
	} {
		if got := DescribeEvent(Event{Kind: EventInstanceConnected, Data: json.RawMessage(c.data)}); got != c.want {
			t.Errorf("%s: %q, want %q", c.data, got, c.want)
		}
	}
}
