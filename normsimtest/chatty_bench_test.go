package normsimtest_test

import (
	"slices"
	"testing"
	"time"

	"github.com/normsim/normsim/normsimtest"
	"github.com/normsim/normsim/sim"
)

// BenchmarkChattyCutover hands over two counters alternately on one sim
// (process runtime): one printing 10,000 lines/s, one printing nothing,
// and reports each one's median cutover (cutover-ready → target-applied)
// and their ratio: what capturing a chatty job's logs costs its handover.
//
//	go test -run '^$' -bench BenchmarkChattyCutover -benchtime 30x ./normsimtest/
func BenchmarkChattyCutover(b *testing.B) {
	s := normsimtest.Start(b, normsimtest.Options{Templates: []string{chattyTemplates}})
	launch := func(rate string) string {
		in := s.Launch(b, sim.LaunchRequest{Template: "chatty", Node: "a", Params: map[string]string{"LOG_RATE": rate}})
		s.WaitConnected(b, in.ID)
		return in.ID
	}
	chatty, quiet := launch("10000"), launch("0")
	time.Sleep(time.Second) // the chatty one is chatting
	var cc, cq []float64
	to := map[string]string{"a": "b", "b": "a"}
	node := map[string]string{chatty: "a", quiet: "a"}
	hand := func(id string, into *[]float64) string {
		m := s.MigrateAndWait(b, id, sim.MigrateRequest{To: to[node[id]]})
		normsimtest.RequireSeamless(b, m)
		if m.Durations.CutoverMs == nil {
			b.Fatalf("migration %s has no cutover time", m.ID)
		}
		*into = append(*into, *m.Durations.CutoverMs)
		node[m.Target.Instance] = m.Target.Node
		return m.Target.Instance
	}
	for b.Loop() {
		chatty = hand(chatty, &cc)
		quiet = hand(quiet, &cq)
	}
	pc, pq := median(cc), median(cq)
	b.ReportMetric(pc, "chatty-cutover-p50-ms")
	b.ReportMetric(pq, "quiet-cutover-p50-ms")
	b.ReportMetric(pc/pq, "ratio")
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}
