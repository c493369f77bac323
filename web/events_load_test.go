package web_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/normsim/normsim/internal/bench"
	"github.com/normsim/normsim/normsimtest"
	"github.com/normsim/normsim/sim"
)

// BenchmarkEventStreamUnderLoad: a real SSE client reads /api/v1/events
// over TCP while the load `normsim bench` runs (internal/bench: the jobs
// connect, then each hands over once, all at once) against the same sim. It reports the events/s the bus published
// and the events/s the client received, how late the client got them
// (from the event's time to its arrival), and how often the client was
// dropped for falling behind.
//
// The sim, the jobs and the client share this process, and a job costs it
// four descriptors once it handed over (its socket and its target's, each
// at both ends): 4,000 jobs by default (1,000 with -short) fit a limit of
// 20,000 open files; NORMSIM_EVENT_LOAD_JOBS asks for another count.
//
//	go test -run '^$' -bench EventStreamUnderLoad -benchtime 1x ./web/
func BenchmarkEventStreamUnderLoad(b *testing.B) {
	jobs := 4_000
	if testing.Short() {
		jobs = 1_000
	}
	if v := os.Getenv("NORMSIM_EVENT_LOAD_JOBS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 2 {
			b.Fatalf("NORMSIM_EVENT_LOAD_JOBS: want a number of jobs of at least 2; got %q", v)
		}
		jobs = n
	}
	for b.Loop() {
		s := startSim(b, normsimtest.Options{Runtime: sim.RuntimeExternal})
		ctx, cancel := context.WithCancel(b.Context())
		// Every event the bus publishes, counted in-process.
		pub := &eventTally{}
		sub := s.Main.Manager.Bus().Subscribe(1 << 16)
		var counted sync.WaitGroup
		counted.Go(func() {
			for ev := range sub.C {
				pub.add(ev.At, time.Now(), "")
			}
		})
		c := &sseClient{url: s.URL + "/api/v1/events", connected: make(chan struct{})}
		var read sync.WaitGroup
		read.Go(func() { c.run(ctx) })
		<-c.connected

		rep, err := bench.Run(ctx, bench.Config{Server: s.URL, Jobs: jobs})
		if err != nil {
			b.Fatalf("the load: %v", err)
		}
		if rep.Failed > 0 {
			b.Fatalf("%d of %d handovers failed: %q", rep.Failed, jobs, rep.Errors)
		}
		// Let the client read what is still on its way.
		deadline := time.Now().Add(30 * time.Second)
		for c.tally.count() < pub.count() && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
		}
		sub.Close()
		counted.Wait()
		if sub.Dropped() {
			b.Fatal("the in-process counter fell behind the bus: the published count is short")
		}
		cancel()
		read.Wait()

		published, received := pub.count(), c.tally.count()
		b.Logf("%d jobs connected in %v, %d handovers in %v (%.0f/s)", jobs, rep.Connected.Round(time.Millisecond),
			rep.Completed, rep.Elapsed.Round(time.Millisecond), rep.Throughput)
		b.Logf("published %d events (%.0f/s), the SSE client received %d (%.0f/s) over %d connection(s), %d dropped notice(s); lateness %s",
			published, pub.rate(), received, c.tally.rate(), c.connections, c.dropNotices, c.tally.lateness())
		b.ReportMetric(pub.rate(), "published-ev/s")
		b.ReportMetric(c.tally.rate(), "received-ev/s")
		b.ReportMetric(float64(published-received), "missed-ev")
		b.ReportMetric(float64(c.connections-1), "drops")
		b.ReportMetric(millis(c.tally.percentile(50)), "late-p50-ms")
		b.ReportMetric(millis(c.tally.percentile(99)), "late-p99-ms")
		b.ReportMetric(millis(c.tally.percentile(100)), "late-max-ms")
	}
}

func millis(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// eventTally counts events and how late each arrived.
type eventTally struct {
	mu          sync.Mutex
	late        []time.Duration
	first, last time.Time
}

func (t *eventTally) add(at, now time.Time, _ string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.first.IsZero() {
		t.first = now
	}
	t.last = now
	t.late = append(t.late, now.Sub(at))
}

func (t *eventTally) count() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.late)
}

// rate is events per second from the first to the last.
func (t *eventTally) rate() float64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.late) < 2 {
		return 0
	}
	return float64(len(t.late)) / t.last.Sub(t.first).Seconds()
}

func (t *eventTally) percentile(p int) time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.late) == 0 {
		return 0
	}
	s := slices.Clone(t.late)
	slices.Sort(s)
	return s[max(0, min(len(s)-1, (p*len(s)+99)/100-1))]
}

func (t *eventTally) lateness() string {
	return "p50 " + t.percentile(50).Round(time.Microsecond).String() + ", p99 " + t.percentile(99).Round(time.Microsecond).String() +
		", max " + t.percentile(100).Round(time.Microsecond).String()
}

// sseClient reads an event stream as a browser's EventSource does: when
// the stream ends it connects again.
type sseClient struct {
	url         string
	connected   chan struct{}
	once        sync.Once
	tally       eventTally
	connections int
	dropNotices int
}

func (c *sseClient) run(ctx context.Context) {
	for ctx.Err() == nil {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, c.url, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			time.Sleep(100 * time.Millisecond)
			continue
		}
		c.connections++
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 64<<10), 16<<20)
		kind := ""
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, ": connected"):
				c.once.Do(func() { close(c.connected) })
			case strings.HasPrefix(line, "event: "):
				kind = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				now := time.Now()
				if kind == "dropped" {
					c.dropNotices++
					continue
				}
				var ev struct {
					At time.Time `json:"at"`
				}
				json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &ev)
				c.tally.add(ev.At, now, kind)
			}
		}
		resp.Body.Close()
	}
}
