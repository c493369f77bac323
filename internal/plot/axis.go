package plot

import (
	"math"
	"strconv"
	"strings"
)

// eps absorbs the rounding of math.Log10 and of v/step so that a value
// sitting on a decade or a tick is not pushed to the next one.
const eps = 1e-9

// scale maps data values onto [0, 1] along one axis. A log scale's ends are
// whole decades, 10^loExp and 10^hiExp.
type scale struct {
	log          bool
	lo, hi       float64 // linear ends
	loExp, hiExp int     // log ends
}

// frac is where v falls between the axis ends, 0 at the low end and 1 at the
// high end.
func (s scale) frac(v float64) float64 {
	if s.log {
		return (math.Log10(v) - float64(s.loExp)) / float64(s.hiExp-s.loExp)
	}
	return (v - s.lo) / (s.hi - s.lo)
}

// tick is a major tick: a tick mark and, when label is not empty, a label
// and a gridline.
type tick struct {
	v     float64
	label string
}

// axis is a scale with the ticks chosen for it.
type axis struct {
	scale
	major []tick
	minor []float64 // tick marks without label or gridline
}

// span is the smallest and largest value an axis must show; ok is false when
// there is none (no points, no target).
type span struct {
	min, max float64
	ok       bool
}

func (s *span) add(v float64) {
	if !s.ok {
		s.min, s.max, s.ok = v, v, true
		return
	}
	s.min = math.Min(s.min, v)
	s.max = math.Max(s.max, v)
}

// linearEnds is the range a linear axis must cover before it is widened to
// whole ticks: the data's, with zero if fromZero, and a sensible width
// around a single value.
func linearEnds(s span, fromZero bool) (lo, hi float64) {
	if !s.ok {
		return 0, 1
	}
	lo, hi = s.min, s.max
	if fromZero {
		lo, hi = math.Min(lo, 0), math.Max(hi, 0)
	}
	// Values equal to 9 digits have no span to divide into ticks that
	// float64 can place and a label can tell apart: centre them in a range
	// ±10% of their size (±1 around zero).
	if hi-lo <= 1e-9*math.Max(math.Abs(lo), math.Abs(hi)) {
		v := (lo + hi) / 2
		if v == 0 {
			if fromZero {
				return 0, 1
			}
			return -1, 1
		}
		d := math.Abs(v) / 10
		lo, hi = v-d, v+d
		if fromZero { // keep zero as the end it was
			if v > 0 {
				lo = 0
			} else {
				hi = 0
			}
		}
	}
	return lo, hi
}

// linearAxis covers [lo, hi] with about n ticks spaced 1, 2 or 5 × 10^e, its
// ends widened to the ticks just outside the data.
func linearAxis(lo, hi float64, n int) axis {
	if n < 1 {
		n = 1
	}
	raw := (hi - lo) / float64(n)
	e := int(math.Floor(math.Log10(raw) + eps))
	m := 1
	for _, c := range []int{1, 2, 5, 10} {
		m = c
		if float64(c)*pow10(e) >= raw*(1-eps) {
			break
		}
	}
	if m == 10 {
		m, e = 1, e+1
	}
	step := float64(m) * pow10(e)
	loI := int64(math.Floor(lo/step + eps))
	hiI := int64(math.Ceil(hi/step - eps))
	if hiI == loI {
		hiI++
	}
	a := axis{scale: scale{lo: tickValue(loI, m, e), hi: tickValue(hiI, m, e)}}
	for i := loI; i <= hiI; i++ {
		v := tickValue(i, m, e)
		a.major = append(a.major, tick{v: v, label: formatLinear(v, e)})
	}
	return a
}

// tickValue is i × m × 10^e, computed so that 0.1 steps print as 0.1, 0.2, …
// and not 0.30000000000000004 (dividing by an exact power of ten rounds once).
func tickValue(i int64, m, e int) float64 {
	if e >= 0 {
		return float64(i*int64(m)) * pow10(e)
	}
	return float64(i*int64(m)) / pow10(-e)
}

func pow10(e int) float64 { return math.Pow10(e) }

var siPrefixes = []string{"", "k", "M", "G", "T"}

// formatLinear labels a tick of an axis stepped in units of 10^e: 0, 250,
// 1.5k, 20M. Each label carries the digits its step needs and no trailing
// zeros.
func formatLinear(v float64, e int) string {
	if v == 0 {
		return "0"
	}
	ev := int(math.Floor(math.Log10(math.Abs(v)) + eps))
	if e < -6 { // too many zeros after the point: as many digits as the step needs
		return strconv.FormatFloat(v, 'g', max(1, ev-e+1), 64)
	}
	p := 0
	if ev >= 3 {
		p = min(ev/3, len(siPrefixes)-1)
	}
	decimals := max(0, 3*p-e)
	s := strconv.FormatFloat(v/pow10(3*p), 'f', decimals, 64)
	if strings.Contains(s, ".") {
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	}
	return s + siPrefixes[p]
}

// logEnds is the whole decades a log axis spans around the data: at least
// one, and one either side of a value that is itself a decade.
func logEnds(s span) (loExp, hiExp int) {
	if !s.ok {
		return 0, 1
	}
	loExp = int(math.Floor(math.Log10(s.min) + eps))
	hiExp = int(math.Ceil(math.Log10(s.max) - eps))
	if hiExp == loExp {
		loExp, hiExp = loExp-1, hiExp+1
	}
	return loExp, hiExp
}

// logAxis ticks every decade from 10^loExp to 10^hiExp and labels every
// every-th one (those whose exponent every divides, so 1, 1k, 1M line up).
// With minors it also marks 2..9 × 10^n.
func logAxis(loExp, hiExp, every int, minors bool) axis {
	a := axis{scale: scale{log: true, loExp: loExp, hiExp: hiExp}}
	for e := loExp; e <= hiExp; e++ {
		t := tick{v: pow10(e)}
		if ((e%every)+every)%every == 0 {
			t.label = formatDecade(e)
		}
		a.major = append(a.major, t)
		if minors && e < hiExp {
			for k := 2; k <= 9; k++ {
				a.minor = append(a.minor, float64(k)*pow10(e))
			}
		}
	}
	return a
}

// formatDecade labels 10^e: 0.01, 1, 100, 1k, 10k, 1M, and 1e-4 or 1e15
// where a prefix or a short decimal no longer fits.
func formatDecade(e int) string {
	switch {
	case e >= 0 && e < 3*len(siPrefixes):
		return "1" + strings.Repeat("0", e%3) + siPrefixes[e/3]
	case e < 0 && e >= -3:
		return "0." + strings.Repeat("0", -e-1) + "1"
	default:
		return "1e" + strconv.Itoa(e)
	}
}
