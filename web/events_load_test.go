package web_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/normsim/normsim/apiclient"
	"github.com/normsim/normsim/internal/bench"
	"github.com/normsim/normsim/normsimtest"
	"github.com/normsim/normsim/sim"
)

// BenchmarkEventStreamUnderLoad: a real SSE client reads /api/v1/events
// over TCP while the load `normsim bench` runs (internal/bench: the jobs
// connect, then each hands over once, as many at once as the open-file
// limit lets) against the same sim. It reports the events/s the sim
// published (GET /api/v1/stats) and the events/s the client received, how
// late the client got them (from an instance event's time to its arrival), and how
// often the client was dropped for falling behind.
//
// sim=child runs `normsim up` as a child (built from this tree), as a
// developer runs it with the dashboard open: 10,000 jobs. sim=in-process
// runs it in this process, where each job's sockets count twice against
// the open-file limit: 4,000 jobs (both 1,000 with -short;
// NORMSIM_EVENT_LOAD_JOBS asks for another count).
//
//	go test -run '^$' -bench EventStreamUnderLoad -benchtime 1x ./web/
func BenchmarkEventStreamUnderLoad(b *testing.B) {
	for _, tc := range []struct {
		sim  string
		jobs int
	}{{"child", 10_000}, {"in-process", 4_000}} {
		b.Run("sim="+tc.sim, func(b *testing.B) {
			jobs := tc.jobs
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
				if tc.sim == "child" {
					url := startChildSim(b)
					var peak int
					var peakBytes int64
					api := apiclient.New(url, nil)
					eventLoad(b, url, jobs, func() int64 {
						st, err := api.Stats(b.Context(), false)
						if err != nil {
							b.Fatal(err)
						}
						peak, peakBytes = st.Events.PeakBacklog, st.Events.PeakBacklogBytes
						return st.Events.Published
					})
					// The most the client's stream held at once, of the
					// 65,536 events and 16 MiB it may before it is dropped.
					b.ReportMetric(float64(peak), "peak-backlog-ev")
					b.ReportMetric(float64(peakBytes), "peak-backlog-bytes")
					continue
				}
				// In-process, a subscriber here counts what the bus
				// publishes.
				s := startSim(b, normsimtest.Options{Runtime: sim.RuntimeExternal})
				sub := s.Main.Manager.Bus().Subscribe(1 << 16)
				var counted atomic.Int64
				var counting sync.WaitGroup
				counting.Go(func() {
					for range sub.C {
						counted.Add(1)
					}
				})
				eventLoad(b, s.URL, jobs, counted.Load)
				sub.Close()
				counting.Wait()
				if sub.Dropped() {
					b.Fatal("the in-process counter fell behind the bus: the published count is short")
				}
			}
		})
	}
}

// eventLoad runs the load against the sim at url with one SSE client
// reading, and reports what the client got against what the sim published
// (published counts it).
func eventLoad(b *testing.B, url string, jobs int, published func() int64) {
	ctx, cancel := context.WithCancel(b.Context())
	defer cancel()
	c := &sseClient{url: url + "/api/v1/events", connected: make(chan struct{})}
	var read sync.WaitGroup
	read.Go(func() { c.run(ctx) })
	<-c.connected
	before := published()

	rep, err := bench.Run(ctx, bench.Config{Server: url, Jobs: jobs})
	if err != nil {
		b.Fatalf("the load: %v", err)
	}
	if rep.Failed > 0 {
		b.Fatalf("%d of %d handovers failed: %q", rep.Failed, jobs, rep.Errors)
	}
	// The sim goes on publishing for a moment (the removals end), and the
	// client reads what is still on its way: wait until the count has
	// held still for half a second and the client has it all.
	var total int64
	for last, still, deadline := int64(-1), time.Now(), time.Now().Add(30*time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		total = published() - before
		if total != last {
			last, still = total, time.Now()
		}
		if time.Since(still) > 500*time.Millisecond && int64(c.tally.count()) >= total {
			break
		}
	}
	cancel()
	read.Wait()

	received := int64(c.tally.count())
	window := c.tally.last.Sub(c.tally.first).Seconds()
	b.Logf("%d jobs connected in %v, %d handovers in %v (%.0f/s, %d at once)", jobs, rep.Connected.Round(time.Millisecond),
		rep.Completed, rep.Elapsed.Round(time.Millisecond), rep.Throughput, rep.Concurrency)
	b.Logf("the sim published %d events, the SSE client received %d (%.0f/s over %.1f s) over %d connection(s), %d dropped notice(s); lateness of instance events %s",
		total, received, c.tally.rate(), window, c.connections, c.dropNotices, c.tally.lateness())
	b.ReportMetric(float64(total)/window, "published-ev/s")
	b.ReportMetric(c.tally.rate(), "received-ev/s")
	b.ReportMetric(float64(total-received), "missed-ev")
	b.ReportMetric(float64(c.connections-1), "drops")
	b.ReportMetric(millis(c.tally.percentile(50)), "late-p50-ms")
	b.ReportMetric(millis(c.tally.percentile(99)), "late-p99-ms")
	b.ReportMetric(millis(c.tally.percentile(100)), "late-max-ms")
}

// startChildSim builds normsim from this tree and runs `normsim up` on the
// external runtime, an in-memory store and free ports, for the rest of the
// benchmark; it returns its URL.
func startChildSim(b *testing.B) string {
	b.Helper()
	root, _ := filepath.Abs("..")
	bin, err := bench.Build(b.Context(), root, ".", b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	port, err := bench.FreePort()
	if err != nil {
		b.Fatal(err)
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	cmd := exec.Command(bin, "up", "--db", ":memory:", "--addr", addr, "--socket-port", "0", "--socket-host", "127.0.0.1",
		"--runtime", sim.RuntimeExternal, "--log-level", "warn", "--templates", templatesDir)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	b.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-exited
		}
	})
	ctx, cancel := context.WithTimeout(b.Context(), 30*time.Second)
	defer cancel()
	if err := bench.WaitReady(ctx, "http://"+addr+"/readyz"); err != nil {
		b.Fatalf("normsim up did not get ready: %v", err)
	}
	return "http://" + addr
}

func millis(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// eventTally counts events and how late each arrived. Only an instance
// event's time is when it was published: a timeline event carries the
// moment it happened, which the sim may publish later (a target's events
// are held until it is placed), so those are counted and not timed.
type eventTally struct {
	mu          sync.Mutex
	n           int
	late        []time.Duration
	first, last time.Time
}

func (t *eventTally) add(kind string, at, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.first.IsZero() {
		t.first = now
	}
	t.last = now
	t.n++
	if strings.HasPrefix(kind, "instance.") {
		t.late = append(t.late, now.Sub(at))
	}
}

func (t *eventTally) count() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.n
}

// rate is events per second from the first to the last.
func (t *eventTally) rate() float64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.n < 2 {
		return 0
	}
	return float64(t.n) / t.last.Sub(t.first).Seconds()
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
				c.tally.add(kind, ev.At, now)
			}
		}
		resp.Body.Close()
	}
}
