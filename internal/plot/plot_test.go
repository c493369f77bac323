package plot

import (
	"bytes"
	"flag"
	"image"
	"image/color"
	"image/png"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/golden.png from the current drawing")

// jobs are the job counts `normsim bench` measures at.
var jobs = []float64{100, 1000, 5000, 10000}

func curve(ys ...float64) []Point {
	ps := make([]Point, len(ys))
	for i, y := range ys {
		ps[i] = Point{X: jobs[i], Y: y}
	}
	return ps
}

// benchFigure is the figure `normsim bench --plot` is for: four charts over
// jobs on a log axis, two columns, 1200×800.
func benchFigure() Figure {
	return Figure{
		Title:   "normsim bench: cost per job",
		Columns: 2,
		Width:   1200, Height: 800,
		Charts: []Chart{
			{
				Title: "Handover throughput", XLabel: "jobs", YLabel: "handovers/s",
				LogX: true, YFromZero: true,
				Series: []Series{
					{Name: "sqlite", Points: curve(4100, 3900, 2600, 2150)},
					{Name: "memory", Points: curve(5200, 5000, 3600, 3100)},
				},
				Target: &Target{Y: 2000, Label: "target 2,000/s"},
			},
			{
				Title: "Handover latency", XLabel: "jobs", YLabel: "ms",
				LogX: true, YFromZero: true,
				Series: []Series{
					{Name: "p50", Points: curve(1.2, 1.4, 2.1, 3.0)},
					{Name: "p99", Points: curve(4.5, 6.0, 11.5, 19.0)},
				},
			},
			{
				Title: "Manager memory", XLabel: "jobs", YLabel: "MiB",
				LogX: true, LogY: true,
				Series: []Series{{Name: "RSS", Points: curve(38, 61, 190, 350)}},
			},
			{
				Title: "Start to ready", XLabel: "jobs", YLabel: "s",
				LogX: true,
				Series: []Series{
					{Name: "manager", Points: curve(0.4, 0.9, 3.2, 6.1)},
					{Name: "workers", Points: curve(0.3, 0.6, 2.0, 3.9)},
					{Name: "not measured"},
				},
			},
		},
	}
}

// mustEncode renders f through WritePNG and decodes the bytes back, so
// tests look at what a reader of the file sees.
func mustEncode(tb testing.TB, f Figure) ([]byte, image.Image) {
	tb.Helper()
	var buf bytes.Buffer
	if err := f.WritePNG(&buf); err != nil {
		tb.Fatalf("WritePNG: %v", err)
	}
	img, err := png.Decode(bytes.NewReader(buf.Bytes()))
	if err != nil {
		tb.Fatalf("decode the PNG WritePNG wrote: %v", err)
	}
	return buf.Bytes(), img
}

func mustFrames(tb testing.TB, f Figure) []frame {
	tb.Helper()
	_, frames, err := f.render()
	if err != nil {
		tb.Fatalf("render: %v", err)
	}
	return frames
}

func rgbaAt(img image.Image, p image.Point) color.RGBA {
	return color.RGBAModel.Convert(img.At(p.X, p.Y)).(color.RGBA)
}

func TestWritePNGSize(t *testing.T) {
	for _, tc := range []struct {
		name         string
		w, h         int
		wantW, wantH int
	}{
		{"default", 0, 0, DefaultWidth, DefaultHeight},
		{"given", 900, 500, 900, 500},
		{"default height", 1600, 0, 1600, DefaultHeight},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := benchFigure()
			f.Width, f.Height = tc.w, tc.h
			_, img := mustEncode(t, f)
			if b := img.Bounds(); b.Dx() != tc.wantW || b.Dy() != tc.wantH {
				t.Errorf("image is %dx%d, want %dx%d", b.Dx(), b.Dy(), tc.wantW, tc.wantH)
			}
		})
	}
}

// Every point's mapped pixel holds its series' colour, and the pixel half
// way along each segment is that colour's line, not the background. A
// point a later series' marker covers is skipped (and counted).
func TestPointsDrawnWhereMapped(t *testing.T) {
	f := benchFigure()
	_, img := mustEncode(t, f)
	frames := mustFrames(t, f)
	checked, covered := 0, 0
	for ci, ch := range f.Charts {
		fr := frames[ci]
		for si, s := range ch.Series {
			want := Palette[si]
			for pi, p := range s.Points {
				px := fr.pixelOf(p)
				if !px.In(fr.area) {
					t.Errorf("chart %d series %q point %d at %v: pixel %v outside the data area %v", ci+1, s.Name, pi+1, p, px, fr.area)
				}
				if coveredLater(fr, ch.Series[si+1:], p) {
					covered++
				} else if checked++; rgbaAt(img, px) != want {
					got := rgbaAt(img, px)
					t.Errorf("chart %d series %q point %d at %v: pixel %v is %v, want the series colour %v", ci+1, s.Name, pi+1, p, px, got, want)
				}
				if pi == 0 {
					continue
				}
				a, b := fr.toPixel(s.Points[pi-1]), fr.toPixel(p)
				mid := image.Pt(int(math.Floor((a.x+b.x)/2)), int(math.Floor((a.y+b.y)/2)))
				if got := rgbaAt(img, mid); !tintOf(got, want) {
					t.Errorf("chart %d series %q between points %d and %d: pixel %v is %v, want a tint of %v", ci+1, s.Name, pi, pi+1, mid, got, want)
				}
			}
		}
	}
	if checked < 20 {
		t.Errorf("checked %d points (%d covered by later markers), want at least 20", checked, covered)
	}
}

// coveredLater says whether a marker of one of the later series lies
// within a marker's reach of p.
func coveredLater(fr frame, later []Series, p Point) bool {
	q := fr.toPixel(p)
	for _, s := range later {
		for _, o := range s.Points {
			r := fr.toPixel(o)
			if math.Hypot(r.x-q.x, r.y-q.y) < 16 {
				return true
			}
		}
	}
	return false
}

// tintOf says whether got is want blended with something light (the white
// background, a grey gridline): closer to want than to white.
func tintOf(got, want color.RGBA) bool {
	dist := func(a, b color.RGBA) float64 {
		dr, dg, db := float64(a.R)-float64(b.R), float64(a.G)-float64(b.G), float64(a.B)-float64(b.B)
		return dr*dr + dg*dg + db*db
	}
	return dist(got, want) < dist(got, white)
}

func TestLogAxisSpacesDecadesEqually(t *testing.T) {
	f := Figure{Charts: []Chart{{
		Title: "log", LogX: true,
		Series: []Series{{Name: "s", Points: curve(1, 2, 3, 4)}},
	}}}
	fr := mustFrames(t, f)[0]
	x := func(v float64) float64 { return fr.toPixel(Point{X: v, Y: 1}).x }
	d1, d2 := x(1000)-x(100), x(10000)-x(1000)
	if d1 < 100 || math.Abs(d1-d2) > 1e-9 {
		t.Errorf("100, 1k, 10k at x = %.6f, %.6f, %.6f: steps %.6f and %.6f, want equal and wide", x(100), x(1000), x(10000), d1, d2)
	}
	if x(100) != float64(fr.area.Min.X)+0.5 || x(10000) != float64(fr.area.Max.X)-0.5 {
		t.Errorf("100 and 10k at x = %v and %v, want the area's ends %d+0.5 and %d-0.5", x(100), x(10000), fr.area.Min.X, fr.area.Max.X)
	}
	// 5,000 sits where log10 puts it: 0.699 of a decade past 1,000.
	if got, want := (x(5000)-x(1000))/d2, math.Log10(5); math.Abs(got-want) > 1e-9 {
		t.Errorf("5k is %.6f of a decade past 1k, want %.6f", got, want)
	}
	var labels []string
	for _, tk := range fr.x.major {
		labels = append(labels, tk.label)
	}
	if got := strings.Join(labels, " "); got != "100 1k 10k" {
		t.Errorf("x labels %q, want %q", got, "100 1k 10k")
	}
}

// Tick marks and gridlines land on the mapped pixels of their values.
func TestTicksDrawnAtTheirValues(t *testing.T) {
	f := benchFigure()
	_, img := mustEncode(t, f)
	fr := mustFrames(t, f)[0]
	for _, tk := range fr.x.major {
		px := fr.pixelOf(Point{X: tk.v, Y: fr.y.lowEnd()})
		mark := image.Pt(px.X, fr.box.Max.Y+2) // just under the x axis line
		if got := rgbaAt(img, mark); got != inkColor {
			t.Errorf("x tick %q: pixel %v under the axis is %v, want the tick mark %v", tk.label, mark, got, inkColor)
		}
		if tk.label == "" {
			continue
		}
		grid := image.Pt(px.X, fr.box.Min.Y+1) // top of the plot, above the data
		if got := rgbaAt(img, grid); got != gridColor {
			t.Errorf("x tick %q: pixel %v at the top of the plot is %v, want the gridline %v", tk.label, grid, got, gridColor)
		}
	}
	for _, tk := range fr.y.major {
		py := fr.pixelOf(Point{X: fr.x.lowEnd(), Y: tk.v})
		mark := image.Pt(fr.box.Min.X-3, py.Y)
		if got := rgbaAt(img, mark); got != inkColor {
			t.Errorf("y tick %q: pixel %v left of the axis is %v, want the tick mark %v", tk.label, mark, got, inkColor)
		}
	}
}

func TestTargetLineDashed(t *testing.T) {
	f := benchFigure()
	_, img := mustEncode(t, f)
	fr := mustFrames(t, f)[0]
	row := int(math.Round(fr.toPixel(Point{X: 100, Y: f.Charts[0].Target.Y}).y))
	var on, off int
	for x := fr.box.Min.X; x < fr.box.Max.X; x++ {
		switch rgbaAt(img, image.Pt(x, row)) {
		case targetColor:
			on++
		case white, gridColor:
			off++
		}
	}
	if on == 0 || off == 0 || on < off {
		t.Errorf("target row %d: %d pixels of the target colour, %d background: want a dashed line (mostly dashes, some gaps)", row, on, off)
	}
}

// Nothing written overlaps: no two pieces of text, no text inside a plot's
// axes, all of it inside the image. Checked on the figure bench draws and on
// figures that push the layout: long names that wrap the legend, many
// decades on a narrow axis, tiny and huge values.
func TestTextDoesNotOverlap(t *testing.T) {
	many := Chart{
		Title: "a title far too long to fit in the narrow cell it was given, so it is cut", XLabel: "jobs", YLabel: "a long y axis label",
		LogX: true, LogY: true,
		Series: []Series{
			{Name: "first series with a long name", Points: []Point{{1e-3, 1e-6}, {1e9, 1e12}}},
			{Name: "second series with a long name", Points: []Point{{1, 1}}},
			{Name: "third", Points: []Point{{10, 10}}},
		},
		Target: &Target{Y: 5, Label: "a target with a label long enough to need its own row"},
	}
	huge := Chart{
		Title: "huge and tiny",
		Series: []Series{
			{Name: "big", Points: []Point{{1e12, 123456789}, {3e12, 987654321}}},
		},
	}
	tiny := Chart{
		Title: "tiny", YLabel: "s",
		Series: []Series{{Name: "small", Points: []Point{{0.0001, 0.0000012}, {0.0009, 0.0000019}}}},
	}
	for name, f := range map[string]Figure{
		"bench":  benchFigure(),
		"narrow": {Columns: 3, Width: 900, Height: 500, Charts: []Chart{many, huge, tiny, many}},
		"one":    {Title: "one chart", Charts: []Chart{many}},
	} {
		t.Run(name, func(t *testing.T) {
			c, frames, err := f.paint()
			if err != nil {
				t.Fatal(err)
			}
			bounds := c.img.Bounds()
			for i, a := range c.texts {
				if !a.In(bounds) {
					t.Errorf("text box %v leaves the image %v", a, bounds)
				}
				for _, fr := range frames {
					if a.Overlaps(fr.box) {
						t.Errorf("text box %v is inside the axes %v", a, fr.box)
					}
				}
				for _, b := range c.texts[i+1:] {
					if a.Overlaps(b) {
						t.Errorf("text boxes %v and %v overlap", a, b)
					}
				}
			}
			if len(c.texts) < 10*len(f.Charts) {
				t.Errorf("%d text boxes for %d charts: the recorder missed some", len(c.texts), len(f.Charts))
			}
		})
	}
}

// Input with little or nothing to show draws axes over a sensible range;
// a lone point sits inside the plot.
func TestDegenerateInputDraws(t *testing.T) {
	for _, tc := range []struct {
		name        string
		chart       Chart
		wantXLabels string
		wantYLabels string
	}{
		{"no series", Chart{Title: "empty"}, "0 0.2 0.4 0.6 0.8 1", "0 0.2 0.4 0.6 0.8 1"},
		{"empty series on log axes", Chart{LogX: true, LogY: true, Series: []Series{{Name: "none"}}}, "1 10", "1 10"},
		{"one point", Chart{Series: []Series{{Name: "one", Points: []Point{{5, 2000}}}}}, "4.4 4.6 4.8 5 5.2 5.4 5.6", "1.8k 1.85k 1.9k 1.95k 2k 2.05k 2.1k 2.15k 2.2k"},
		{"one point on log axes", Chart{LogX: true, LogY: true, Series: []Series{{Name: "one", Points: []Point{{1000, 3}}}}}, "100 1k 10k", "1 10"},
		{"equal Y", Chart{Series: []Series{{Name: "flat", Points: []Point{{1, 7}, {2, 7}, {3, 7}}}}}, "", "6.2 6.4 6.6 6.8 7 7.2 7.4 7.6 7.8"},
		{"zero Y", Chart{YFromZero: true, Series: []Series{{Name: "zero", Points: []Point{{1, 0}, {2, 0}}}}}, "", "0 0.2 0.4 0.6 0.8 1"},
		{"negative", Chart{Series: []Series{{Name: "neg", Points: []Point{{-3, -20}, {7, -5}}}}}, "", ""},
		{"target only", Chart{Target: &Target{Y: 2000, Label: "target"}}, "0 0.2 0.4 0.6 0.8 1", "1.8k 1.85k 1.9k 1.95k 2k 2.05k 2.1k 2.15k 2.2k"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := Figure{Width: 600, Height: 400, Charts: []Chart{tc.chart}}
			_, img := mustEncode(t, f)
			fr := mustFrames(t, f)[0]
			if tc.wantXLabels != "" {
				if got := labels(fr.x); got != tc.wantXLabels {
					t.Errorf("x labels %q, want %q", got, tc.wantXLabels)
				}
			}
			if tc.wantYLabels != "" {
				if got := labels(fr.y); got != tc.wantYLabels {
					t.Errorf("y labels %q, want %q", got, tc.wantYLabels)
				}
			}
			for si, s := range tc.chart.Series {
				for _, p := range s.Points {
					px := fr.pixelOf(p)
					if !px.In(fr.area) {
						t.Errorf("point %v at pixel %v, outside the data area %v", p, px, fr.area)
					}
					if got := rgbaAt(img, px); got != Palette[si] {
						t.Errorf("point %v: pixel %v is %v, want %v", p, px, got, Palette[si])
					}
				}
			}
		})
	}
}

func labels(a axis) string {
	var ls []string
	for _, t := range a.major {
		ls = append(ls, t.label)
	}
	return strings.Join(ls, " ")
}

func TestBadInputErrors(t *testing.T) {
	ok := func() Chart {
		return Chart{Title: "c", Series: []Series{{Name: "s", Points: []Point{{1, 1}, {2, 2}}}}}
	}
	with := func(change func(*Chart)) Figure {
		c := ok()
		change(&c)
		return Figure{Charts: []Chart{c}}
	}
	for _, tc := range []struct {
		name string
		f    Figure
		want string // in the error
	}{
		{"no charts", Figure{}, "figure has no charts"},
		{"negative width", Figure{Width: -5, Charts: []Chart{ok()}}, "figure size -5x800"},
		{"too big", Figure{Width: 100000, Height: 100, Charts: []Chart{ok()}}, "each side must be 1..8192"},
		{"negative columns", Figure{Columns: -1, Charts: []Chart{ok()}}, "figure columns -1"},
		{"zero X on log x", with(func(c *Chart) { c.LogX = true; c.Series[0].Points[1].X = 0 }),
			`chart 1 "c": series "s" point 2: X = 0: a log x axis needs values > 0`},
		{"negative X on log x", with(func(c *Chart) { c.LogX = true; c.Series[0].Points[0].X = -10 }),
			`series "s" point 1: X = -10: a log x axis needs values > 0`},
		{"zero Y on log y", with(func(c *Chart) { c.LogY = true; c.Series[0].Points[0].Y = 0 }),
			`point 1: Y = 0: a log y axis needs values > 0`},
		{"target on log y", with(func(c *Chart) { c.LogY = true; c.Target = &Target{Y: -1, Label: "t"} }),
			`target: Y = -1: a log y axis needs values > 0`},
		{"huge", with(func(c *Chart) { c.Series[0].Points[0].Y = -math.MaxFloat64 }), "beyond ±1e+300 an axis's ends and ticks overflow float64"},
		{"tiny on log", with(func(c *Chart) { c.LogX = true; c.Series[0].Points[0].X = 5e-324 }), "a log x axis starts at 1e-300"},
		{"NaN", with(func(c *Chart) { c.Series[0].Points[0].Y = math.NaN() }), "Y = NaN: must be a finite number"},
		{"Inf", with(func(c *Chart) { c.Series[0].Points[0].X = math.Inf(1) }), "X = +Inf: must be a finite number"},
		{"too many series", with(func(c *Chart) { c.Series = make([]Series, len(Palette)+1) }), "8 series: the palette tells apart at most 7"},
		{"unnamed series", with(func(c *Chart) { c.Series[0].Name = "" }), "series 1 has no name"},
		{"unlabelled target", with(func(c *Chart) { c.Target = &Target{Y: 1} }), "target has no label"},
		{"from zero on log y", with(func(c *Chart) { c.LogY = true; c.YFromZero = true }), "YFromZero on a log y axis"},
		{"not ASCII", with(func(c *Chart) { c.YLabel = "latency µs" }), `y label "latency µs": U+00B5 is not printable ASCII`},
		{"too small", Figure{Width: 300, Height: 200, Charts: []Chart{ok(), ok(), ok(), ok()}}, "leaves a plot"},
		{"too narrow", Figure{Width: 150, Height: 800, Charts: []Chart{ok()}}, "px wide, under 120"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			err := tc.f.WritePNG(&buf)
			if err == nil {
				t.Fatalf("WritePNG succeeded, want an error containing %q", tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q, want it to contain %q", err, tc.want)
			}
			if buf.Len() != 0 {
				t.Errorf("wrote %d bytes before failing, want none", buf.Len())
			}
		})
	}
}

// The same figure encodes to the same bytes: twice in a row, at once from
// several goroutines (no shared drawing state), and as the golden file
// recorded on amd64.
func TestDeterministic(t *testing.T) {
	first, _ := mustEncode(t, benchFigure())
	second, _ := mustEncode(t, benchFigure())
	if !bytes.Equal(first, second) {
		t.Fatalf("two encodes differ: %d and %d bytes", len(first), len(second))
	}
	var wg sync.WaitGroup
	outs := make([][]byte, 4)
	for i := range outs {
		wg.Go(func() {
			var buf bytes.Buffer
			if err := benchFigure().WritePNG(&buf); err != nil {
				t.Error(err)
			}
			outs[i] = buf.Bytes()
		})
	}
	wg.Wait()
	for i, o := range outs {
		if !bytes.Equal(o, first) {
			t.Errorf("concurrent encode %d differs from the first", i)
		}
	}

	golden := filepath.Join("testdata", "golden.png")
	if *update {
		if err := os.WriteFile(golden, first, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// Other architectures may fuse multiply-adds in the rasterizer and
	// shade an edge pixel one level apart; the golden file is amd64's.
	if runtime.GOARCH != "amd64" {
		t.Skipf("golden file recorded on amd64; this is %s", runtime.GOARCH)
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run go test ./internal/plot -run TestDeterministic -update to record it)", err)
	}
	if !bytes.Equal(first, want) {
		_, gotImg := mustEncode(t, benchFigure())
		wantImg, err := png.Decode(bytes.NewReader(want))
		if err != nil {
			t.Fatalf("decode %s: %v", golden, err)
		}
		t.Errorf("drawing differs from %s in %d pixels; if the change is meant, look at the image and run with -update", golden, pixelsDiffering(gotImg, wantImg))
	}
}

func pixelsDiffering(a, b image.Image) int {
	if a.Bounds() != b.Bounds() {
		return a.Bounds().Dx() * a.Bounds().Dy()
	}
	n := 0
	for y := a.Bounds().Min.Y; y < a.Bounds().Max.Y; y++ {
		for x := a.Bounds().Min.X; x < a.Bounds().Max.X; x++ {
			if rgbaAt(a, image.Pt(x, y)) != rgbaAt(b, image.Pt(x, y)) {
				n++
			}
		}
	}
	return n
}

// TestWriteSample writes the bench figure to a file and reads it back;
// NORMSIM_PLOT_SAMPLE=FILE.png keeps it there to look at.
func TestWriteSample(t *testing.T) {
	out := filepath.Join(t.TempDir(), "bench.png")
	if dest := os.Getenv("NORMSIM_PLOT_SAMPLE"); dest != "" {
		out = dest
	}
	f, err := os.Create(out)
	if err != nil {
		t.Fatal(err)
	}
	if err := benchFigure().WritePNG(f); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	r, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	cfg, err := png.DecodeConfig(r)
	if err != nil {
		t.Fatalf("read back %s: %v", out, err)
	}
	if cfg.Width != 1200 || cfg.Height != 800 {
		t.Errorf("%s is %dx%d, want 1200x800", out, cfg.Width, cfg.Height)
	}
	t.Logf("wrote %s", out)
}

// Whatever the numbers, WritePNG returns an image or an error; it never
// panics, an image it returns decodes, and every point lies in its chart's
// data area.
func FuzzWritePNG(f *testing.F) {
	f.Add(100.0, 1.0, 10000.0, 2.0, 2000.0, true, false, false)
	f.Add(0.0, 0.0, 0.0, 0.0, 0.0, false, false, true)
	f.Add(-1e300, 1e300, 1e300, -1e300, 0.0, false, false, false)
	f.Add(1e-300, 1e-300, 1e300, 1e300, 1.0, true, true, false)
	f.Add(1.0, 1.0, 1.0+1e-12, 1.0+1e-12, 1.0, false, false, false)
	f.Add(5.0, 7.0, 5.0, 7.0, 7.0, true, true, false)
	f.Fuzz(func(t *testing.T, x1, y1, x2, y2, target float64, logX, logY, fromZero bool) {
		fig := Figure{Width: 400, Height: 300, Charts: []Chart{{
			Title: "fuzz", XLabel: "x", YLabel: "y",
			LogX: logX, LogY: logY, YFromZero: fromZero,
			Series: []Series{
				{Name: "a", Points: []Point{{x1, y1}, {x2, y2}}},
				{Name: "b", Points: []Point{{x2, y1}}},
			},
			Target: &Target{Y: target, Label: "t"},
		}}}
		var buf bytes.Buffer
		if err := fig.WritePNG(&buf); err != nil {
			return
		}
		if _, err := png.Decode(&buf); err != nil {
			t.Fatalf("WritePNG wrote a PNG that does not decode: %v", err)
		}
		fr := mustFrames(t, fig)[0]
		for _, s := range fig.Charts[0].Series {
			for _, p := range s.Points {
				// Within a billionth of a step a point counts as on the
				// axis's end tick, so allow it a pixel past the area.
				if px := fr.pixelOf(p); !px.In(fr.area.Inset(-1)) {
					t.Fatalf("point %v at pixel %v, outside the data area %v", p, px, fr.area)
				}
			}
		}
	})
}

// The drawing's cost next to the PNG encoding of a blank image the same
// size, measured side by side.
func BenchmarkWritePNG(b *testing.B) {
	f := benchFigure()
	b.Run("bench-figure", func(b *testing.B) {
		for b.Loop() {
			if err := f.WritePNG(io.Discard); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("blank-encode-baseline", func(b *testing.B) {
		img := newCanvas(f.Width, f.Height, white).img
		for b.Loop() {
			if err := png.Encode(io.Discard, img); err != nil {
				b.Fatal(err)
			}
		}
	})
}
