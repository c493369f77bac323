package plot

import (
	"math"
	"math/rand/v2"
	"testing"
)

func TestFormatLinear(t *testing.T) {
	for _, tc := range []struct {
		v    float64
		e    int // the axis steps in units of 10^e
		want string
	}{
		{0, 0, "0"},
		{5, 0, "5"},
		{250, 1, "250"},
		{-500, 2, "-500"},
		{1000, 2, "1k"},
		{1500, 2, "1.5k"},
		{2000, 3, "2k"},
		{12500, 2, "12.5k"},
		{1e6, 5, "1M"},
		{2.5e9, 8, "2.5G"},
		{0.2, -1, "0.2"},
		{0.1 * 3, -1, "0.3"}, // 0.30000000000000004
		{0.05, -2, "0.05"},
		{1.25, -2, "1.25"},
		{3e-8, -8, "3e-08"},
	} {
		if got := formatLinear(tc.v, tc.e); got != tc.want {
			t.Errorf("formatLinear(%v, %d) = %q, want %q", tc.v, tc.e, got, tc.want)
		}
	}
}

func TestFormatDecade(t *testing.T) {
	for e, want := range map[int]string{
		-5: "1e-5", -3: "0.001", -2: "0.01", -1: "0.1", 0: "1", 1: "10", 2: "100",
		3: "1k", 4: "10k", 5: "100k", 6: "1M", 9: "1G", 14: "100T", 15: "1e15",
	} {
		if got := formatDecade(e); got != want {
			t.Errorf("formatDecade(%d) = %q, want %q", e, got, want)
		}
	}
}

func TestLinearAxisTicks(t *testing.T) {
	for _, tc := range []struct {
		lo, hi float64
		n      int
		want   []float64
	}{
		{0, 6.1, 4, []float64{0, 2, 4, 6, 8}},
		{0, 19, 4, []float64{0, 5, 10, 15, 20}},
		{0, 5200, 6, []float64{0, 1000, 2000, 3000, 4000, 5000, 6000}},
		{0.3, 0.7, 4, []float64{0.3, 0.4, 0.5, 0.6, 0.7}},
		{-3, 7, 5, []float64{-4, -2, 0, 2, 4, 6, 8}},
		{1800, 2200, 4, []float64{1800, 1900, 2000, 2100, 2200}},
	} {
		a := linearAxis(tc.lo, tc.hi, tc.n)
		var got []float64
		for _, tk := range a.major {
			got = append(got, tk.v)
		}
		if !equalFloats(got, tc.want) {
			t.Errorf("linearAxis(%v, %v, %d) ticks %v, want %v", tc.lo, tc.hi, tc.n, got, tc.want)
		}
		if a.lo != tc.want[0] || a.hi != tc.want[len(tc.want)-1] {
			t.Errorf("linearAxis(%v, %v, %d) ends %v..%v, want the outer ticks", tc.lo, tc.hi, tc.n, a.lo, a.hi)
		}
	}
}

// Any range gets ticks 1, 2 or 5 × 10^e apart, covering the range, with
// labels that tell every tick apart.
func TestLinearAxisNiceSteps(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		lo := (rng.Float64() - 0.5) * math.Pow10(rng.IntN(16)-6)
		hi := lo + rng.Float64()*math.Pow10(rng.IntN(16)-6) + 1e-300
		lo, hi = linearEnds(span{min: lo, max: hi, ok: true}, false)
		n := 1 + rng.IntN(12)
		a := linearAxis(lo, hi, n)
		if len(a.major) < 2 {
			t.Fatalf("linearAxis(%g, %g, %d) has %d ticks", lo, hi, n, len(a.major))
		}
		step := a.major[1].v - a.major[0].v
		// Within a billionth of a step, a value counts as on the tick.
		if a.lo > lo+eps*step || a.hi < hi-eps*step {
			t.Fatalf("linearAxis(%g, %g, %d) = %g..%g does not cover the range", lo, hi, n, a.lo, a.hi)
		}
		if !isNiceStep(step) {
			t.Fatalf("linearAxis(%g, %g, %d) steps %g, want 1, 2 or 5 × 10^n", lo, hi, n, step)
		}
		seen := map[string]bool{}
		for _, tk := range a.major {
			if seen[tk.label] {
				t.Fatalf("linearAxis(%g, %g, %d): label %q twice in %v", lo, hi, n, tk.label, a.major)
			}
			seen[tk.label] = true
		}
	}
}

func TestLinearEnds(t *testing.T) {
	for _, tc := range []struct {
		name           string
		s              span
		fromZero       bool
		wantLo, wantHi float64
	}{
		{"no data", span{}, false, 0, 1},
		{"range", span{2, 5, true}, false, 2, 5},
		{"range from zero", span{2, 5, true}, true, 0, 5},
		{"negative from zero", span{-5, -2, true}, true, -5, 0},
		{"one value", span{2000, 2000, true}, false, 1800, 2200},
		{"one negative value", span{-10, -10, true}, false, -11, -9},
		{"one value from zero", span{2000, 2000, true}, true, 0, 2000},
		{"zero", span{0, 0, true}, false, -1, 1},
		{"zero from zero", span{0, 0, true}, true, 0, 1},
	} {
		lo, hi := linearEnds(tc.s, tc.fromZero)
		if !near(lo, tc.wantLo) || !near(hi, tc.wantHi) {
			t.Errorf("%s: linearEnds = %v..%v, want %v..%v", tc.name, lo, hi, tc.wantLo, tc.wantHi)
		}
	}
}

func TestLogEnds(t *testing.T) {
	for _, tc := range []struct {
		s            span
		wantLo, want int
	}{
		{span{}, 0, 1},
		{span{100, 10000, true}, 2, 4},
		{span{1000, 1000, true}, 2, 4}, // a decade alone gets one either side
		{span{500, 500, true}, 2, 3},
		{span{38, 350, true}, 1, 3},
		{span{0.002, 0.3, true}, -3, 0},
	} {
		lo, hi := logEnds(tc.s)
		if lo != tc.wantLo || hi != tc.want {
			t.Errorf("logEnds(%v) = 1e%d..1e%d, want 1e%d..1e%d", tc.s, lo, hi, tc.wantLo, tc.want)
		}
	}
}

func TestLogAxisLabelsEveryNthDecade(t *testing.T) {
	a := logAxis(-3, 9, 3, false)
	var labels []string
	for _, tk := range a.major {
		if tk.label != "" {
			labels = append(labels, tk.label)
		}
	}
	want := []string{"0.001", "1", "1k", "1M", "1G"}
	if len(labels) != len(want) {
		t.Fatalf("labels %q, want %q", labels, want)
	}
	for i := range want {
		if labels[i] != want[i] {
			t.Fatalf("labels %q, want %q", labels, want)
		}
	}
	if len(a.major) != 13 || len(a.minor) != 0 {
		t.Errorf("%d decade ticks and %d minor ones, want 13 and 0", len(a.major), len(a.minor))
	}
}

// isNiceStep says whether step is 1, 2 or 5 × 10^n, give or take the
// rounding that ticks far from zero carry into their difference.
func isNiceStep(step float64) bool {
	for _, m := range []float64{1, 2, 5} {
		e := math.Round(math.Log10(step / m))
		if math.Abs(step/(m*math.Pow(10, e))-1) < 1e-4 {
			return true
		}
	}
	return false
}

func near(a, b float64) bool {
	return math.Abs(a-b) <= 1e-9*math.Max(1, math.Max(math.Abs(a), math.Abs(b)))
}

func equalFloats(a, b []float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !near(a[i], b[i]) {
			return false
		}
	}
	return true
}
