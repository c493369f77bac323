package bench

import (
	"fmt"
	"sort"
	"time"
)

// Summary is a sample of durations reduced to what a reader compares.
type Summary struct {
	N                       int
	Min, P50, P90, P99, Max time.Duration
	Mean                    time.Duration
}

// Summarize sorts a copy of d and reads its percentiles (nearest rank).
func Summarize(d []time.Duration) Summary {
	if len(d) == 0 {
		return Summary{}
	}
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	var sum time.Duration
	for _, v := range s {
		sum += v
	}
	return Summary{N: len(s), Min: s[0], P50: rank(s, 50), P90: rank(s, 90), P99: rank(s, 99), Max: s[len(s)-1],
		Mean: sum / time.Duration(len(s))}
}

// rank is the nearest-rank percentile of sorted s.
func rank(s []time.Duration, p int) time.Duration {
	i := (p*len(s)+99)/100 - 1
	return s[max(0, min(i, len(s)-1))]
}

// String is one line: n, p50, p90, p99, max.
func (s Summary) String() string {
	return fmt.Sprintf("n=%d p50=%s p90=%s p99=%s max=%s", s.N, Round(s.P50), Round(s.P90), Round(s.P99), Round(s.Max))
}

// Round keeps three significant figures of a duration for printing.
func Round(d time.Duration) time.Duration {
	switch {
	case d >= time.Second:
		return d.Round(10 * time.Millisecond)
	case d >= 100*time.Millisecond:
		return d.Round(time.Millisecond)
	case d >= 10*time.Millisecond:
		return d.Round(100 * time.Microsecond)
	case d >= time.Millisecond:
		return d.Round(10 * time.Microsecond)
	case d >= 100*time.Microsecond:
		return d.Round(time.Microsecond)
	}
	return d.Round(100 * time.Nanosecond)
}

// Ratio is a/b, 0 when b is 0.
func Ratio(a, b time.Duration) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

// Ms is d in milliseconds.
func Ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// MiB formats bytes as mebibytes.
func MiB(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }
