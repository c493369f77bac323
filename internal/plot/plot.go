package plot

import (
	"bufio"
	"errors"
	"fmt"
	"image/color"
	"image/png"
	"io"
	"math"
	"strings"
)

// Point is one measurement: X across, Y up.
type Point struct{ X, Y float64 }

// Series is one line of a chart. Its points are joined in order of X; its
// colour and marker come from its index in the chart (see Palette).
type Series struct {
	Name   string
	Points []Point
}

// Target is a horizontal line drawn dashed at Y, named in the legend by
// Label, e.g. "target 2,000/s".
type Target struct {
	Y     float64
	Label string
}

// Chart is one plot of a figure.
type Chart struct {
	Title, XLabel, YLabel string
	// LogX and LogY put an axis on a log scale ticked by decades; every
	// value on it (and a target, on LogY) must then be positive.
	LogX, LogY bool
	// YFromZero stretches a linear y axis to include 0, so that heights
	// compare as ratios.
	YFromZero bool
	Series    []Series
	Target    *Target
}

// Figure lays out charts in a grid, row by row, and encodes them as one PNG.
type Figure struct {
	Title  string
	Charts []Chart
	// Columns is the grid's width in charts; 0 picks ⌈√n⌉ for n charts.
	Columns int
	// Width and Height are the image's size in pixels; 0 means 1200×800.
	Width, Height int
}

// Default and largest image sizes. The cap keeps a mistyped size from
// allocating gigabytes.
const (
	DefaultWidth  = 1200
	DefaultHeight = 800
	MaxSide       = 8192
)

// Palette is the series colours, by index: the Okabe–Ito colours that stay
// apart for colour-blind readers, without their yellow, which is unreadable
// on white. A chart has at most len(Palette) series.
var Palette = [...]color.RGBA{
	{0x00, 0x72, 0xB2, 0xff}, // blue
	{0xD5, 0x5E, 0x00, 0xff}, // vermillion
	{0x00, 0x9E, 0x73, 0xff}, // bluish green
	{0xCC, 0x79, 0xA7, 0xff}, // reddish purple
	{0xE6, 0x9F, 0x00, 0xff}, // orange
	{0x56, 0xB4, 0xE9, 0xff}, // sky blue
	{0x00, 0x00, 0x00, 0xff}, // black
}

// WritePNG draws the figure and writes it to w as a PNG. The same figure
// always encodes to the same bytes. It returns an error, and writes
// nothing, when the figure cannot be drawn: no charts, a size out of range,
// a value that is not finite or not positive on a log axis, more series
// than colours, text the font lacks, or charts too small for their axes.
func (f Figure) WritePNG(w io.Writer) error {
	img, _, err := f.render()
	if err != nil {
		return err
	}
	bw := bufio.NewWriter(w)
	if err := png.Encode(bw, img); err != nil {
		return fmt.Errorf("encode png: %w", err)
	}
	return bw.Flush()
}

// withDefaults fills the zero size and column count.
func (f Figure) withDefaults() Figure {
	if f.Width == 0 {
		f.Width = DefaultWidth
	}
	if f.Height == 0 {
		f.Height = DefaultHeight
	}
	if f.Columns == 0 {
		f.Columns = int(math.Ceil(math.Sqrt(float64(len(f.Charts)))))
	}
	return f
}

func (f Figure) validate() error {
	if len(f.Charts) == 0 {
		return errors.New("figure has no charts")
	}
	if f.Width < 1 || f.Height < 1 || f.Width > MaxSide || f.Height > MaxSide {
		return fmt.Errorf("figure size %dx%d: each side must be 1..%d pixels", f.Width, f.Height, MaxSide)
	}
	if f.Columns < 1 {
		return fmt.Errorf("figure columns %d: must be at least 1", f.Columns)
	}
	if err := checkText("figure title", f.Title); err != nil {
		return err
	}
	for i, c := range f.Charts {
		if err := c.validate(); err != nil {
			return fmt.Errorf("chart %d %q: %w", i+1, c.Title, err)
		}
	}
	return nil
}

func (c Chart) validate() error {
	for _, t := range []struct{ what, s string }{
		{"title", c.Title}, {"x label", c.XLabel}, {"y label", c.YLabel},
	} {
		if err := checkText(t.what, t.s); err != nil {
			return err
		}
	}
	if len(c.Series) > len(Palette) {
		return fmt.Errorf("%d series: the palette tells apart at most %d", len(c.Series), len(Palette))
	}
	if c.LogY && c.YFromZero {
		return errors.New("YFromZero on a log y axis: a log axis cannot reach 0")
	}
	for i, s := range c.Series {
		if s.Name == "" {
			return fmt.Errorf("series %d has no name; the legend needs one", i+1)
		}
		if err := checkText(fmt.Sprintf("series %d name", i+1), s.Name); err != nil {
			return err
		}
		for j, p := range s.Points {
			if err := checkValue("X", p.X, c.LogX); err != nil {
				return fmt.Errorf("series %q point %d: %w", s.Name, j+1, err)
			}
			if err := checkValue("Y", p.Y, c.LogY); err != nil {
				return fmt.Errorf("series %q point %d: %w", s.Name, j+1, err)
			}
		}
	}
	return c.validateTarget()
}

func (c Chart) validateTarget() error {
	if c.Target != nil {
		if err := checkValue("Y", c.Target.Y, c.LogY); err != nil {
			return fmt.Errorf("target: %w", err)
		}
		if c.Target.Label == "" {
			return errors.New("target has no label; the legend needs one")
		}
		if err := checkText("target label", c.Target.Label); err != nil {
			return err
		}
	}
	return nil
}

// The largest magnitude an axis draws and the smallest value a log axis
// does: past them a range's padding, its outer ticks or its end decades
// leave float64.
const (
	maxValue = 1e300
	minLog   = 1e-300
)

func checkValue(name string, v float64, log bool) error {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return fmt.Errorf("%s = %v: must be a finite number", name, v)
	}
	if log && v <= 0 {
		return fmt.Errorf("%s = %v: a log %s axis needs values > 0", name, v, strings.ToLower(name))
	}
	if math.Abs(v) > maxValue {
		return fmt.Errorf("%s = %v: beyond ±%g an axis's ends and ticks overflow float64", name, v, maxValue)
	}
	if log && v < minLog {
		return fmt.Errorf("%s = %v: a log %s axis starts at %g, the smallest decade float64 holds with room", name, v, strings.ToLower(name), minLog)
	}
	return nil
}

// checkText rejects what the bitmap font cannot draw: it has printable
// ASCII only, and would draw anything else as a box.
func checkText(what, s string) error {
	for _, r := range s {
		if r < 0x20 || r > 0x7e {
			return fmt.Errorf("%s %q: %U is not printable ASCII, the only text the built-in font draws", what, s, r)
		}
	}
	return nil
}
