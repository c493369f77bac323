package plot_test

import (
	"fmt"
	"image/png"
	"os"
	"path/filepath"

	"github.com/normsim/normsim/internal/plot"
)

// A cost curve as `normsim bench --plot` draws it: four charts over jobs on
// a log axis, two columns.
func Example() {
	jobs := []float64{100, 1000, 5000, 10000}
	curve := func(ys ...float64) []plot.Point {
		ps := make([]plot.Point, len(jobs))
		for i, x := range jobs {
			ps[i] = plot.Point{X: x, Y: ys[i]}
		}
		return ps
	}
	fig := plot.Figure{
		Title:   "normsim bench: cost per job",
		Columns: 2,
		Charts: []plot.Chart{
			{
				Title: "Handover throughput", XLabel: "jobs", YLabel: "handovers/s",
				LogX: true, YFromZero: true,
				Series: []plot.Series{
					{Name: "sqlite", Points: curve(4100, 3900, 2600, 2150)},
					{Name: "memory", Points: curve(5200, 5000, 3600, 3100)},
				},
				Target: &plot.Target{Y: 2000, Label: "target 2,000/s"},
			},
			{
				Title: "Handover latency", XLabel: "jobs", YLabel: "ms",
				LogX: true, YFromZero: true,
				Series: []plot.Series{
					{Name: "p50", Points: curve(1.2, 1.4, 2.1, 3.0)},
					{Name: "p99", Points: curve(4.5, 6.0, 11.5, 19.0)},
				},
			},
			{
				Title: "Manager memory", XLabel: "jobs", YLabel: "MiB",
				LogX: true, LogY: true,
				Series: []plot.Series{{Name: "RSS", Points: curve(38, 61, 190, 350)}},
			},
			{
				Title: "Start to ready", XLabel: "jobs", YLabel: "s",
				LogX: true, YFromZero: true,
				Series: []plot.Series{
					{Name: "manager", Points: curve(0.4, 0.9, 3.2, 6.1)},
					{Name: "workers", Points: curve(0.3, 0.6, 2.0, 3.9)},
					{Name: "not measured", Points: nil},
				},
			},
		},
	}
	dir, err := os.MkdirTemp("", "plot-example")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	out := filepath.Join(dir, "bench.png")
	f, err := os.Create(out)
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := fig.WritePNG(f); err != nil {
		fmt.Println(err)
		return
	}
	if err := f.Close(); err != nil {
		fmt.Println(err)
		return
	}
	check, err := os.Open(out)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer check.Close()
	cfg, err := png.DecodeConfig(check)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("wrote a %dx%d PNG\n", cfg.Width, cfg.Height)
	// Output: wrote a 1200x800 PNG
}
