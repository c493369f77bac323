package plot

import (
	"cmp"
	"fmt"
	"image"
	"image/color"
	"math"
	"slices"
)

var (
	white     = color.RGBA{0xff, 0xff, 0xff, 0xff}
	inkColor  = color.RGBA{0x22, 0x22, 0x22, 0xff} // text, axes, ticks
	gridColor = color.RGBA{0xe4, 0xe4, 0xe4, 0xff}
	// targetColor is a grey no series has, so the dashed line reads as a
	// reference rather than data.
	targetColor = color.RGBA{0x66, 0x66, 0x66, 0xff}
)

// Layout sizes in pixels.
const (
	pad          = 10 // around a chart's cell
	figTitleK    = 2  // figure title at twice the font's size
	majorTick    = 5
	minorTick    = 3
	tickGap      = 4 // between a tick mark and its label
	lineWidth    = 2
	legendRow    = 17
	legendSwatch = 22 // a line segment with the series' marker
	legendGap    = 18 // between legend entries
	xTickSpacing = 70 // aim for a labelled x tick every this many pixels
	yTickSpacing = 40
	inset        = 6 // between the axes and the data, so no marker sits on an axis
	minPlotW     = 120
	minPlotH     = 80
	dashLen      = 8
	dashGap      = 5
)

// frame is one chart placed on the image: its box (inside the axis lines),
// its data area inset in the box (every point falls inside it), and its
// axes.
type frame struct {
	box, area image.Rectangle
	x, y      axis
}

// toPixel maps a data point to pixel space. The ends of an axis map to the
// centres of the area's first and last pixel, so the point's pixel is
// (⌊x⌋, ⌊y⌋).
func (f frame) toPixel(p Point) fpt {
	return fpt{
		x: float64(f.area.Min.X) + 0.5 + f.x.frac(p.X)*float64(f.area.Dx()-1),
		y: float64(f.area.Max.Y) - 0.5 - f.y.frac(p.Y)*float64(f.area.Dy()-1),
	}
}

// pixelOf is the pixel that holds p's mapped position.
func (f frame) pixelOf(p Point) image.Point {
	q := f.toPixel(p)
	return image.Pt(int(math.Floor(q.x)), int(math.Floor(q.y)))
}

// render validates f, lays it out and draws it.
func (f Figure) render() (*image.RGBA, []frame, error) {
	c, frames, err := f.paint()
	if err != nil {
		return nil, nil, err
	}
	return c.img, frames, nil
}

// paint is render keeping the canvas, whose text boxes tests inspect.
func (f Figure) paint() (*canvas, []frame, error) {
	f = f.withDefaults()
	if err := f.validate(); err != nil {
		return nil, nil, err
	}
	c := newCanvas(f.Width, f.Height, white)
	top := 0
	if f.Title != "" {
		title := fitText(f.Title, (f.Width-2*pad)/figTitleK)
		h := lineHeight * figTitleK
		c.bigText((f.Width-textWidth(title)*figTitleK)/2, pad, title, figTitleK, inkColor)
		top = pad + h
	}
	rows := (len(f.Charts) + f.Columns - 1) / f.Columns
	cw, ch := f.Width/f.Columns, (f.Height-top)/rows
	frames := make([]frame, len(f.Charts))
	for i, chart := range f.Charts {
		col, row := i%f.Columns, i/f.Columns
		cell := image.Rect(col*cw, top+row*ch, (col+1)*cw, top+(row+1)*ch)
		fr, err := chart.draw(c, cell)
		if err != nil {
			return nil, nil, fmt.Errorf("chart %d %q: %w", i+1, chart.Title, err)
		}
		frames[i] = fr
	}
	return c, frames, nil
}

// legendEntry is a series or the target as the legend shows it.
type legendEntry struct {
	text   string
	series int // index into Palette and marker shapes; -1 for the target
}

func (ch Chart) legend() []legendEntry {
	var es []legendEntry
	for i, s := range ch.Series {
		t := s.Name
		if len(s.Points) == 0 {
			t += " (no data)" // said, not dropped
		}
		es = append(es, legendEntry{text: t, series: i})
	}
	if ch.Target != nil {
		es = append(es, legendEntry{text: ch.Target.Label, series: -1})
	}
	return es
}

// placed is a legend entry at its position.
type placed struct {
	legendEntry
	x, y int // left end, top of row
}

// layoutLegend wraps entries into rows no wider than w, starting at x, y.
// It returns the entries with their places and the number of rows.
func layoutLegend(es []legendEntry, x, y, w int) ([]placed, int) {
	var out []placed
	rows, cx := 0, x
	for _, e := range es {
		e.text = fitText(e.text, w-legendSwatch-4)
		ew := legendSwatch + 4 + textWidth(e.text)
		if rows == 0 || (cx > x && cx+ew > x+w) {
			rows++
			cx = x
		}
		out = append(out, placed{legendEntry: e, x: cx, y: y + (rows-1)*legendRow})
		cx += ew + legendGap
	}
	return out, rows
}

// spans are the data ranges of a chart's two axes.
func (ch Chart) spans() (xs, ys span) {
	for _, s := range ch.Series {
		for _, p := range s.Points {
			xs.add(p.X)
			ys.add(p.Y)
		}
	}
	if ch.Target != nil {
		ys.add(ch.Target.Y)
	}
	return xs, ys
}

// xAxis picks the x axis for a plot length pixels wide: the most ticks whose
// labels do not touch.
func xAxis(s span, log bool, length int) axis {
	return fitAxis(s, log, false, length, xTickSpacing, func(a axis) bool {
		lastEnd := math.Inf(-1)
		for _, t := range a.major {
			if t.label == "" {
				continue
			}
			w := float64(textWidth(t.label))
			mid := a.frac(t.v) * float64(length)
			if mid-w/2 < lastEnd+8 {
				return false
			}
			lastEnd = mid + w/2
		}
		return true
	})
}

// yAxis picks the y axis for a plot length pixels high.
func yAxis(s span, log, fromZero bool, length int) axis {
	return fitAxis(s, log, fromZero, length, yTickSpacing, func(a axis) bool {
		last := math.Inf(-1)
		for _, t := range a.major {
			if t.label == "" {
				continue
			}
			mid := a.frac(t.v) * float64(length)
			if mid < last+lineHeight+4 {
				return false
			}
			last = mid
		}
		return true
	})
}

// fitAxis tries tick densities from dense to sparse until fits accepts one.
// A linear axis tries fewer ticks; a log axis labels every decade, then
// every second, third, … one.
func fitAxis(s span, log, fromZero bool, length, spacing int, fits func(axis) bool) axis {
	if log {
		lo, hi := logEnds(s)
		decades := hi - lo
		minors := float64(length)/float64(decades) >= 40
		var a axis
		for every := 1; every <= decades; every++ {
			if a = logAxis(lo, hi, every, minors); fits(a) {
				break
			}
		}
		return a
	}
	lo, hi := linearEnds(s, fromZero)
	var a axis
	for n := max(length/spacing, 1); n >= 1; n-- {
		if a = linearAxis(lo, hi, n); fits(a) {
			break
		}
	}
	return a
}

// draw lays chart ch out in cell and draws it.
func (ch Chart) draw(c *canvas, cell image.Rectangle) (frame, error) {
	inner := cell.Inset(pad)
	// Top down: title, legend, plot area.
	y := inner.Min.Y
	titleBase := -1
	if ch.Title != "" {
		titleBase = y + ascent
		y += lineHeight + 6
	}
	legend, rows := layoutLegend(ch.legend(), inner.Min.X, y, inner.Dx())
	y += rows*legendRow + 8 // room for the top y tick label's upper half
	bottom := inner.Max.Y - majorTick - tickGap - lineHeight
	if ch.XLabel != "" {
		bottom -= lineHeight + 6
	}
	plotH := bottom - y - 2*inset
	if plotH < minPlotH {
		return frame{}, fmt.Errorf("cell %dx%d leaves a plot %d px high, under %d: make the figure taller, use more columns or shorten the legend", cell.Dx(), cell.Dy(), plotH, minPlotH)
	}

	xs, ys := ch.spans()
	ya := yAxis(ys, ch.LogY, ch.YFromZero, plotH)
	yLabelW := 0
	for _, t := range ya.major {
		yLabelW = max(yLabelW, textWidth(t.label))
	}
	left := inner.Min.X + yLabelW + tickGap + majorTick
	if ch.YLabel != "" {
		left += lineHeight + 6
	}
	// The last x label is centred on the right edge: size the right margin
	// for it, then choose the ticks again for the width that leaves.
	right := inner.Max.X - 12
	xa := xAxis(xs, ch.LogX, right-left-2*inset)
	if last := lastLabel(xa); last != "" {
		right = inner.Max.X - max(textWidth(last)/2-inset, 0)
		xa = xAxis(xs, ch.LogX, right-left-2*inset)
	}
	if plotW := right - left - 2*inset; plotW < minPlotW {
		return frame{}, fmt.Errorf("cell %dx%d leaves a plot %d px wide, under %d: make the figure wider or use fewer columns", cell.Dx(), cell.Dy(), plotW, minPlotW)
	}
	box := image.Rect(left, y, right, bottom)
	fr := frame{box: box, area: box.Inset(inset), x: xa, y: ya}
	a := fr.box

	// Gridlines at labelled ticks (a log axis may label only some decades),
	// then the axes over them.
	for _, t := range xa.major {
		if t.label == "" {
			continue
		}
		px := int(math.Floor(fr.toPixel(Point{X: t.v, Y: ya.lowEnd()}).x))
		c.rect(image.Rect(px, a.Min.Y, px+1, a.Max.Y), gridColor)
	}
	for _, t := range ya.major {
		if t.label == "" {
			continue
		}
		py := int(math.Floor(fr.toPixel(Point{X: xa.lowEnd(), Y: t.v}).y))
		c.rect(image.Rect(a.Min.X, py, a.Max.X, py+1), gridColor)
	}
	c.rect(image.Rect(a.Min.X-1, a.Min.Y, a.Min.X, a.Max.Y+1), inkColor) // y axis
	c.rect(image.Rect(a.Min.X-1, a.Max.Y, a.Max.X, a.Max.Y+1), inkColor) // x axis

	// Ticks and their labels.
	for _, v := range xa.minor {
		px := int(math.Floor(fr.toPixel(Point{X: v, Y: ya.lowEnd()}).x))
		c.rect(image.Rect(px, a.Max.Y+1, px+1, a.Max.Y+1+minorTick), inkColor)
	}
	for _, t := range xa.major {
		px := int(math.Floor(fr.toPixel(Point{X: t.v, Y: ya.lowEnd()}).x))
		c.rect(image.Rect(px, a.Max.Y+1, px+1, a.Max.Y+1+majorTick), inkColor)
		if t.label != "" {
			w := textWidth(t.label)
			lx := min(max(px-w/2, cell.Min.X), cell.Max.X-w)
			c.text(lx, a.Max.Y+1+majorTick+tickGap+ascent, t.label, inkColor)
		}
	}
	for _, v := range ya.minor {
		py := int(math.Floor(fr.toPixel(Point{X: xa.lowEnd(), Y: v}).y))
		c.rect(image.Rect(a.Min.X-1-minorTick, py, a.Min.X-1, py+1), inkColor)
	}
	for _, t := range ya.major {
		py := int(math.Floor(fr.toPixel(Point{X: xa.lowEnd(), Y: t.v}).y))
		c.rect(image.Rect(a.Min.X-1-majorTick, py, a.Min.X-1, py+1), inkColor)
		if t.label != "" {
			lx := a.Min.X - 1 - majorTick - tickGap - textWidth(t.label)
			c.text(lx, py+ascent/2+1, t.label, inkColor)
		}
	}

	// Axis labels and title.
	if ch.XLabel != "" {
		s := fitText(ch.XLabel, inner.Dx())
		c.text(centre(a.Min.X, a.Max.X, textWidth(s), inner), inner.Max.Y-lineHeight+ascent, s, inkColor)
	}
	if ch.YLabel != "" {
		s := fitText(ch.YLabel, a.Dy()+8)
		w := textWidth(s)
		c.upText(inner.Min.X, a.Min.Y+(a.Dy()-w)/2, s, inkColor)
	}
	if titleBase >= 0 {
		s := fitText(ch.Title, inner.Dx()-1)
		c.boldText(centre(a.Min.X, a.Max.X, textWidth(s)+1, inner), titleBase, s, inkColor)
	}

	// Data: the target under the series, lines under markers.
	if ch.Target != nil {
		ty := fr.toPixel(Point{X: xa.lowEnd(), Y: ch.Target.Y}).y
		c.dashedH(float64(a.Min.X), float64(a.Max.X), ty, dashLen, dashGap, targetColor)
	}
	paths := make([][]fpt, len(ch.Series))
	for i, s := range ch.Series {
		pts := slices.Clone(s.Points)
		slices.SortStableFunc(pts, func(p, q Point) int { return cmp.Compare(p.X, q.X) })
		for _, p := range pts {
			paths[i] = append(paths[i], fr.toPixel(p))
		}
		c.polyline(paths[i], lineWidth, Palette[i])
	}
	for i, path := range paths {
		for _, p := range path {
			c.marker(p, i, Palette[i])
		}
	}

	// Legend last: it sits above the plot and overlaps nothing.
	for _, e := range legend {
		mid := float64(e.y) + float64(lineHeight)/2
		if e.series < 0 {
			c.dashedH(float64(e.x), float64(e.x+legendSwatch), mid, 5, 3, targetColor)
		} else {
			col := Palette[e.series]
			c.segment(fpt{float64(e.x), mid}, fpt{float64(e.x + legendSwatch), mid}, lineWidth, col)
			c.marker(fpt{float64(e.x) + legendSwatch/2, mid}, e.series, col)
		}
		c.text(e.x+legendSwatch+4, e.y+ascent, e.text, inkColor)
	}
	return fr, nil
}

// lowEnd is a value at the axis's low end, for mapping a point whose other
// coordinate is all that matters.
func (a axis) lowEnd() float64 {
	if a.log {
		return pow10(a.loExp)
	}
	return a.lo
}

func lastLabel(a axis) string {
	for i := len(a.major) - 1; i >= 0; i-- {
		if a.major[i].label != "" {
			return a.major[i].label
		}
	}
	return ""
}

// centre is the left end of a w pixels wide text centred over [x0, x1),
// kept inside bounds.
func centre(x0, x1, w int, bounds image.Rectangle) int {
	return min(max((x0+x1-w)/2, bounds.Min.X), bounds.Max.X-w)
}
