package e2e_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/normsim/normsim/internal/bench"
	"github.com/normsim/normsim/normsimtest"
	"github.com/normsim/normsim/protocol"
	"github.com/normsim/normsim/sim"
)

// BenchmarkCutoverRelay measures the relay at the heart of a handover, from
// the jobs' side: the source writes source-stopped-output, the target reads
// cutover-apply. Each iteration is one whole handover of an instant job on
// the external runtime (a→b, then b→a, ...). Right before the source writes
// source-stopped-output, one frame of the same size goes through a raw
// coder/websocket relay (two connections, forward each frame, nothing else)
// in the same process: both are measured at the same moment, on the same
// machine, under the same background work.
//
// Run it for a fixed number of handovers; the figures are in
// docs/benchmarks.md:
//
//	go test -run '^$' -bench BenchmarkCutoverRelay -benchtime 1000x ./e2e/
func BenchmarkCutoverRelay(b *testing.B) {
	ctx := context.Background()
	s, api, in, job := externalCounter(b, ctx)
	relay, err := bench.OpenRawRelay()
	if err != nil {
		b.Fatal(err)
	}
	defer relay.Close()
	pair, err := relay.Pair(ctx)
	if err != nil {
		b.Fatal(err)
	}
	defer pair.Close()

	id, node := in.ID, "a"
	defer func() { job.Close() }()
	var cutover, raw, wall, total, inside []time.Duration
	var rawErr error
	measureRaw := func() {
		// The same frame and the same kind of context as the jobs use.
		rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		f := protocol.JobFrame{Type: protocol.TypeSourceStoppedOutput,
			Payload: []byte(`{"last":` + strconv.FormatInt(time.Now().UnixNano(), 10) + `}`)}
		d, err := pair.Relay(rctx, f)
		if err != nil {
			rawErr = err
			return
		}
		raw = append(raw, d)
	}
	for b.Loop() {
		to := map[string]string{"a": "b", "b": "a"}[node]
		hctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		h, err := bench.PlayHandover(hctx, api, id, job, bench.HandoverOptions{To: to, BeforeCutover: measureRaw})
		cancel()
		if err != nil {
			var tl string
			if h != nil && h.MigrationID != "" {
				tl = normsimtest.Timeline(s.Migration(b, h.MigrationID))
			}
			b.Fatalf("handover %d: %v\n%s", len(cutover)+1, err, tl)
		}
		if rawErr != nil {
			b.Fatalf("raw relay: %v", rawErr)
		}
		job.Close()
		id, node, job = h.TargetID, to, h.TargetJob
		cutover = append(cutover, h.Cutover)
		wall = append(wall, h.Wall)
		if t := h.Migration.Durations.TotalMs; t != nil {
			total = append(total, time.Duration(*t*float64(time.Millisecond)))
		}
		if d, ok := relayInside(h.Migration); ok {
			inside = append(inside, d)
		}
	}
	b.StopTimer()
	c, r, w, t, i := bench.Summarize(cutover), bench.Summarize(raw), bench.Summarize(wall), bench.Summarize(total), bench.Summarize(inside)
	b.ReportMetric(us(c.P50), "cutover-p50-µs")
	b.ReportMetric(us(c.P99), "cutover-p99-µs")
	b.ReportMetric(us(r.P50), "raw-p50-µs")
	b.ReportMetric(us(r.P99), "raw-p99-µs")
	b.ReportMetric(bench.Ratio(c.P50, r.P50), "p50-ratio")
	b.ReportMetric(bench.Ms(w.P50), "wall-p50-ms")
	b.ReportMetric(bench.Ms(t.P50), "total-p50-ms")
	b.ReportMetric(us(i.P50), "inside-p50-µs")
	b.Logf("cutover  %s\nraw      %s\ninside   %s (the sim's timeline: source-stopped-output read -> cutover-apply written)\nwall     %s (migrate request -> source socket closed)\ntotal    %s (the sim's requested -> ended)", c, r, i, w, t)
}

// relayInside is the cutover relay as the sim's own timeline stamps it:
// from the listener handing source-stopped-output over to the cutover-apply
// write returning.
func relayInside(m *sim.Migration) (time.Duration, bool) {
	var in, out time.Time
	for _, ev := range m.Events {
		switch {
		case ev.Frame != nil && ev.Frame.Direction == "in" && ev.Frame.Type == protocol.TypeSourceStoppedOutput:
			in = ev.At
		case ev.Frame != nil && ev.Frame.Direction == "out" && ev.Frame.Type == protocol.TypeCutoverApply:
			out = ev.At
		}
	}
	return out.Sub(in), !in.IsZero() && !out.IsZero()
}

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
