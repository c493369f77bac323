package sim

import (
	"math"
	"testing"
)

func TestFormatMs(t *testing.T) {
	for _, tc := range []struct {
		in   float64
		want string
	}{
		{0, "0.0 ms"}, {0.84, "0.8 ms"}, {9.96, "10.0 ms"}, {412.34, "412.3 ms"}, {1234.56, "1234.6 ms"},
		{9999.9, "9999.9 ms"}, {9999.96, "10.000 s"}, {34210, "34.210 s"}, {123456.7, "123.457 s"},
		{-2.5, "-2.5 ms"}, {math.NaN(), "—"}, {math.Inf(1), "—"},
	} {
		if got := FormatMs(tc.in); got != tc.want {
			t.Errorf("FormatMs(%v) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
