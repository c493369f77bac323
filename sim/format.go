package sim

import (
	"fmt"
	"math"
)

// FormatMs formats a duration (or a time from a migration's start) given
// in milliseconds for people: "0.8 ms", "412.3 ms", "9999.9 ms", then
// seconds, "34.210 s". The CLI and the dashboard both use it, so a
// duration reads the same in either, to a tenth of a millisecond below
// ten seconds (timeline events a fraction of a millisecond apart read
// apart) and to the millisecond above.
func FormatMs(ms float64) string {
	switch {
	case math.IsNaN(ms) || math.IsInf(ms, 0):
		return "—"
	case math.Abs(ms) < 9999.95: // what would round to 10000.0 ms reads 10.000 s
		return fmt.Sprintf("%.1f ms", ms)
	default:
		return fmt.Sprintf("%.3f s", ms/1000)
	}
}
