package plot

import (
	"image"
	"image/color"
	"image/draw"
	"math"

	"golang.org/x/image/font"
	"golang.org/x/image/font/basicfont"
	"golang.org/x/image/math/fixed"
	"golang.org/x/image/vector"
)

// face is the one font: 7×13 pixel ASCII glyphs, ascent 11.
var face = basicfont.Face7x13

const (
	lineHeight = 13 // face's glyph height
	ascent     = 11
)

// fpt is a point in pixel space, y down, at sub-pixel precision.
type fpt struct{ x, y float64 }

// canvas draws anti-aliased shapes (through x/image/vector) and bitmap text
// onto an RGBA image.
type canvas struct {
	img *image.RGBA
	z   vector.Rasterizer
	// texts are the boxes of the text drawn so far, so tests can check
	// that no two labels overlap.
	texts []image.Rectangle
}

func newCanvas(w, h int, bg color.RGBA) *canvas {
	c := &canvas{img: image.NewRGBA(image.Rect(0, 0, w, h))}
	draw.Draw(c.img, c.img.Bounds(), image.NewUniform(bg), image.Point{}, draw.Src)
	return c
}

// rect fills whole pixels: crisp axes, ticks and gridlines.
func (c *canvas) rect(r image.Rectangle, col color.RGBA) {
	draw.Draw(c.img, r, image.NewUniform(col), image.Point{}, draw.Over)
}

// fill fills one closed path built by path. It rasterizes only the path's
// bounding box, not the whole image, since a chart draws hundreds of small
// shapes.
func (c *canvas) fill(minX, minY, maxX, maxY float64, col color.RGBA, path func(moveTo, lineTo func(x, y float64), cubeTo func(x1, y1, x2, y2, x, y float64))) {
	r := image.Rect(int(math.Floor(minX)), int(math.Floor(minY)), int(math.Ceil(maxX)), int(math.Ceil(maxY))).Intersect(c.img.Bounds())
	if r.Empty() {
		return
	}
	ox, oy := float64(r.Min.X), float64(r.Min.Y)
	c.z.Reset(r.Dx(), r.Dy())
	path(
		func(x, y float64) { c.z.MoveTo(float32(x-ox), float32(y-oy)) },
		func(x, y float64) { c.z.LineTo(float32(x-ox), float32(y-oy)) },
		func(x1, y1, x2, y2, x, y float64) {
			c.z.CubeTo(float32(x1-ox), float32(y1-oy), float32(x2-ox), float32(y2-oy), float32(x-ox), float32(y-oy))
		},
	)
	c.z.ClosePath()
	c.z.Draw(c.img, r, image.NewUniform(col), image.Point{})
}

// polygon fills the polygon through pts.
func (c *canvas) polygon(pts []fpt, col color.RGBA) {
	if len(pts) < 3 {
		return
	}
	minX, minY, maxX, maxY := pts[0].x, pts[0].y, pts[0].x, pts[0].y
	for _, p := range pts[1:] {
		minX, maxX = math.Min(minX, p.x), math.Max(maxX, p.x)
		minY, maxY = math.Min(minY, p.y), math.Max(maxY, p.y)
	}
	c.fill(minX, minY, maxX, maxY, col, func(moveTo, lineTo func(x, y float64), _ func(x1, y1, x2, y2, x, y float64)) {
		moveTo(pts[0].x, pts[0].y)
		for _, p := range pts[1:] {
			lineTo(p.x, p.y)
		}
	})
}

// disc fills a circle of radius r around p, as four cubic Béziers.
func (c *canvas) disc(p fpt, r float64, col color.RGBA) {
	const k = 0.5522847498 // control distance of a quarter circle
	d := k * r
	c.fill(p.x-r, p.y-r, p.x+r, p.y+r, col, func(moveTo, _ func(x, y float64), cubeTo func(x1, y1, x2, y2, x, y float64)) {
		moveTo(p.x+r, p.y)
		cubeTo(p.x+r, p.y+d, p.x+d, p.y+r, p.x, p.y+r)
		cubeTo(p.x-d, p.y+r, p.x-r, p.y+d, p.x-r, p.y)
		cubeTo(p.x-r, p.y-d, p.x-d, p.y-r, p.x, p.y-r)
		cubeTo(p.x+d, p.y-r, p.x+r, p.y-d, p.x+r, p.y)
	})
}

// segment strokes a straight line of width w from a to b, with flat ends.
func (c *canvas) segment(a, b fpt, w float64, col color.RGBA) {
	dx, dy := b.x-a.x, b.y-a.y
	l := math.Hypot(dx, dy)
	if l == 0 {
		return
	}
	nx, ny := -dy/l*w/2, dx/l*w/2
	c.polygon([]fpt{{a.x + nx, a.y + ny}, {b.x + nx, b.y + ny}, {b.x - nx, b.y - ny}, {a.x - nx, a.y - ny}}, col)
}

// polyline strokes pts joined in order, rounding the joints so a bend has no
// notch.
func (c *canvas) polyline(pts []fpt, w float64, col color.RGBA) {
	for i := 1; i < len(pts); i++ {
		c.segment(pts[i-1], pts[i], w, col)
		if i < len(pts)-1 {
			c.disc(pts[i], w/2, col)
		}
	}
}

// dashedH strokes a dashed horizontal line 2 px thick from x0 to x1,
// centred on the pixel boundary nearest y so that it stays crisp.
func (c *canvas) dashedH(x0, x1, y float64, dash, gap float64, col color.RGBA) {
	yc := math.Round(y)
	for x := x0; x < x1; x += dash + gap {
		e := math.Min(x+dash, x1)
		c.polygon([]fpt{{x, yc - 1}, {e, yc - 1}, {e, yc + 1}, {x, yc + 1}}, col)
	}
}

// Marker shapes, chosen by series index so that series stay apart in grey.
const (
	markerCircle = iota
	markerSquare
	markerDiamond
	markerTriangle
	markerShapes
)

// marker draws series i's marker centred on p, over a white ring that keeps
// neighbouring markers and lines apart. The pixel that holds p always gets
// the full colour.
func (c *canvas) marker(p fpt, i int, col color.RGBA) {
	const ring = 1.5
	for _, pass := range []struct {
		grow float64
		col  color.RGBA
	}{{ring, white}, {0, col}} {
		g := pass.grow
		switch i % markerShapes {
		case markerCircle:
			c.disc(p, 4.5+g, pass.col)
		case markerSquare:
			h := 4 + g
			c.polygon([]fpt{{p.x - h, p.y - h}, {p.x + h, p.y - h}, {p.x + h, p.y + h}, {p.x - h, p.y + h}}, pass.col)
		case markerDiamond:
			h := 5.5 + g*1.4
			c.polygon([]fpt{{p.x, p.y - h}, {p.x + h, p.y}, {p.x, p.y + h}, {p.x - h, p.y}}, pass.col)
		case markerTriangle:
			// Equilateral, centred on its centroid; inradius R/2 = 2.9.
			r := 5.8 + g*2
			s := r * math.Sqrt(3) / 2
			c.polygon([]fpt{{p.x, p.y - r}, {p.x + s, p.y + r/2}, {p.x - s, p.y + r/2}}, pass.col)
		}
	}
}

// textWidth is s's advance in pixels.
func textWidth(s string) int { return font.MeasureString(face, s).Ceil() }

// text draws s with its left end at x and its baseline at y.
func (c *canvas) text(x, y int, s string, col color.RGBA) {
	d := font.Drawer{Dst: c.img, Src: image.NewUniform(col), Face: face, Dot: fixed.P(x, y)}
	d.DrawString(s)
	c.texts = append(c.texts, image.Rect(x, y-ascent, x+textWidth(s), y-ascent+lineHeight))
}

// boldText fakes a bold weight, which the bitmap font lacks, by drawing s
// twice a pixel apart.
func (c *canvas) boldText(x, y int, s string, col color.RGBA) {
	c.text(x, y, s, col)
	c.text(x+1, y, s, col)
	c.texts = append(c.texts[:len(c.texts)-2], c.texts[len(c.texts)-2].Union(c.texts[len(c.texts)-1]))
}

// textMask renders s as a coverage mask lineHeight pixels high.
func textMask(s string) *image.Alpha {
	m := image.NewAlpha(image.Rect(0, 0, max(textWidth(s), 1), lineHeight))
	d := font.Drawer{Dst: m, Src: image.Opaque, Face: face, Dot: fixed.P(0, ascent)}
	d.DrawString(s)
	return m
}

// bigText draws s k times the font's size (pixels repeated, bold), its top
// left corner at x, y: the figure's title.
func (c *canvas) bigText(x, y int, s string, k int, col color.RGBA) {
	src := textMask(s)
	b := src.Bounds()
	m := image.NewAlpha(image.Rect(0, 0, b.Dx()*k+1, b.Dy()*k))
	for yy := 0; yy < b.Dy()*k; yy++ {
		for xx := 0; xx < b.Dx()*k+1; xx++ {
			// Bold: a pixel is set if the glyph pixel under it or the
			// one to its left is.
			a := uint8(0)
			if xx < b.Dx()*k {
				a = src.AlphaAt(xx/k, yy/k).A
			}
			if xx >= 1 && xx-1 < b.Dx()*k {
				a = max(a, src.AlphaAt((xx-1)/k, yy/k).A)
			}
			m.SetAlpha(xx, yy, color.Alpha{A: a})
		}
	}
	r := m.Bounds().Add(image.Pt(x, y))
	draw.DrawMask(c.img, r, image.NewUniform(col), image.Point{}, m, image.Point{}, draw.Over)
	c.texts = append(c.texts, r)
}

// upText draws s rotated a quarter turn anticlockwise, reading upwards, in
// the box whose top left corner is x, y (lineHeight wide, textWidth(s)
// high): the y axis label.
func (c *canvas) upText(x, y int, s string, col color.RGBA) {
	src := textMask(s)
	w, h := src.Bounds().Dx(), src.Bounds().Dy()
	m := image.NewAlpha(image.Rect(0, 0, h, w))
	for yy := 0; yy < w; yy++ {
		for xx := 0; xx < h; xx++ {
			m.SetAlpha(xx, yy, src.AlphaAt(w-1-yy, xx))
		}
	}
	r := m.Bounds().Add(image.Pt(x, y))
	draw.DrawMask(c.img, r, image.NewUniform(col), image.Point{}, m, image.Point{}, draw.Over)
	c.texts = append(c.texts, r)
}

// fitText shortens s with "..." until it is at most w pixels wide, so a long
// title shows that it was cut rather than running into its neighbour.
func fitText(s string, w int) string {
	if textWidth(s) <= w {
		return s
	}
	for n := len(s) - 1; n > 0; n-- { // checkText allowed ASCII only: bytes are runes
		if t := s[:n] + "..."; textWidth(t) <= w {
			return t
		}
	}
	return ""
}
