package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"text/tabwriter"

	"github.com/normsim/normsim/internal/plot"
)

// RunCurve runs Run once for each job count in sizes, each against a sim
// of its own (cfg.Sim), smallest first: the cost curve of
// docs/benchmarks.md. A size whose run fails ends the curve with the sizes
// measured so far and the error.
func RunCurve(ctx context.Context, cfg Config, sizes []int) ([]*Report, error) {
	var reps []*Report
	for i, n := range sizes {
		c := cfg
		c.Jobs, c.Concurrency = n, 0
		if cfg.Concurrency > 0 {
			c.Concurrency = min(cfg.Concurrency, n)
		}
		fmt.Fprintf(cfg.Out, "normsim bench: curve point %d of %d: %d jobs\n", i+1, len(sizes), n)
		rep, err := Run(ctx, c)
		if err != nil {
			return reps, fmt.Errorf("%d jobs: %w", n, err)
		}
		reps = append(reps, rep)
	}
	return reps, nil
}

// WriteCurve prints the curve as a table, one row per size.
func WriteCurve(w io.Writer, reps []*Report) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "jobs\tconnect/s\thandovers/s\tCPU/handover\twall p50\twall p99\tcutover p50\tcutover p99\tpeak RSS\tRSS/job\tstore\tstore/migration\tdone\tlost records\t")
	for _, r := range reps {
		store, perMig, lost, cpu := "-", "-", "-", "-"
		if c := r.HandoverCPU; c.Machine > 0 {
			cpu = ms(c.Machine) // the machine's: the sim's, the bench's and the kernel's
		}
		if p := r.Peak; p != nil {
			store = MiB(p.Store.Bytes)
			if p.Store.Migrations > 0 {
				perMig = fmt.Sprintf("%.1f KiB", float64(p.Store.Bytes)/float64(p.Store.Migrations)/1024)
			}
		}
		if a := r.After; a != nil {
			lost = fmt.Sprint(a.Records.FramesLost)
		}
		fmt.Fprintf(tw, "%d\t%.0f\t%.0f\t%s\t%s\t%s\t%s\t%s\t%s\t%.0f KiB\t%s\t%s\t%d/%d\t%s\t\n",
			r.Jobs, r.ConnectRate, r.Throughput, cpu, Round(r.Wall.P50), Round(r.Wall.P99), Round(r.Cutover.P50), Round(r.Cutover.P99),
			MiB(r.PeakRSS), float64(r.PeakRSS)/float64(r.Jobs)/1024, store, perMig, r.Completed, r.Jobs, lost)
	}
	tw.Flush()
}

// targetRSSPerJobKiB is the memory target drawn on the plot: 640 MiB at
// 10,000 jobs. The throughput targets are ratios to a bare server at the
// same job count (normsim bench --sim bare), which the curve does not
// run, so no line on its throughput chart could stand for them.
const targetRSSPerJobKiB = 64

// PlotCurve draws the curve into a PNG at path: throughput, wall and
// cutover latency, peak RSS per job and store size, against the job count.
func PlotCurve(path string, reps []*Report) error {
	var (
		handovers, connects              []plot.Point
		wallP50, wallP99, cutP50, cutP99 []plot.Point
		rssPerJob                        []plot.Point
		store                            []plot.Point
	)
	for _, r := range reps {
		x := float64(r.Jobs)
		handovers = append(handovers, plot.Point{X: x, Y: r.Throughput})
		connects = append(connects, plot.Point{X: x, Y: r.ConnectRate})
		// Latencies on a log axis must be positive: a run too quick to
		// time (0) is left out rather than drawn at an invented value.
		for _, p := range []struct {
			to *[]plot.Point
			v  float64
		}{{&wallP50, Ms(r.Wall.P50)}, {&wallP99, Ms(r.Wall.P99)}, {&cutP50, Ms(r.Cutover.P50)}, {&cutP99, Ms(r.Cutover.P99)}} {
			if p.v > 0 {
				*p.to = append(*p.to, plot.Point{X: x, Y: p.v})
			}
		}
		if r.PeakRSS > 0 {
			rssPerJob = append(rssPerJob, plot.Point{X: x, Y: float64(r.PeakRSS) / float64(r.Jobs) / 1024})
		}
		if r.Peak != nil {
			store = append(store, plot.Point{X: x, Y: float64(r.Peak.Store.Bytes) / (1 << 20)})
		}
	}
	fig := plot.Figure{
		Title:   "normsim bench: cost per job (handed over at once, as the open-file limit allows)",
		Columns: 2,
		Charts: []plot.Chart{
			{Title: "Throughput", XLabel: "jobs", YLabel: "per second", LogX: true, YFromZero: true,
				Series: []plot.Series{{Name: "handovers/s", Points: handovers}, {Name: "jobs connected/s", Points: connects}}},
			{Title: "Latency per handover", XLabel: "jobs", YLabel: "ms", LogX: true, LogY: true,
				Series: []plot.Series{{Name: "wall p50", Points: wallP50}, {Name: "wall p99", Points: wallP99},
					{Name: "cutover p50", Points: cutP50}, {Name: "cutover p99", Points: cutP99}}},
			{Title: "Sim peak RSS per job", XLabel: "jobs", YLabel: "KiB", LogX: true, YFromZero: true,
				Series: []plot.Series{{Name: "peak RSS / jobs", Points: rssPerJob}},
				Target: &plot.Target{Y: targetRSSPerJobKiB, Label: "target 64 KiB"}},
			{Title: "Store size after the handovers", XLabel: "jobs", YLabel: "MiB", LogX: true, YFromZero: true,
				Series: []plot.Series{{Name: "store", Points: store}}},
		},
	}
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("--plot: %w", err)
	}
	if err := fig.WritePNG(f); err != nil {
		f.Close()
		return fmt.Errorf("--plot: %w", err)
	}
	return f.Close()
}
