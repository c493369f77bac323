package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/normsim/normsim/apiclient"
	"github.com/normsim/normsim/app"
	"github.com/normsim/normsim/app/withsqlite"
	"github.com/normsim/normsim/internal/jobplay"
	"github.com/normsim/normsim/internal/procstat"
	"github.com/normsim/normsim/sim"
)

// Where the sim under load runs.
const (
	// SimInProcess runs the sim inside the bench process: the goroutine
	// count is the sim's and the clients', and the RSS includes the clients.
	SimInProcess = "in-process"
	// SimChild runs `normsim up` as a child process: its peak RSS (VmHWM)
	// is the sim's alone.
	SimChild = "child"
	// SimServer is a sim someone else runs (Config.Server).
	SimServer = "server"
	// SimBare is no sim but BareSim, in the bench process: the handovers'
	// floor, to measure the sim against (as SimInProcess is measured).
	SimBare = "bare"
)

// inThisProcess says whether what the bench loads runs in its own process.
func inThisProcess(where string) bool { return where == SimInProcess || where == SimBare }

// Config configures a load run.
type Config struct {
	// Jobs is how many simulated jobs connect (half on each of two nodes);
	// each hands over once, all at the same time. Default 1000.
	Jobs int
	// Concurrency bounds the handovers in flight. Default: Jobs.
	Concurrency int
	// Server is the base URL of a running sim; empty starts one as Sim says.
	Server string
	// Sim is SimInProcess (default) or SimChild when Server is empty.
	Sim string
	// Binary is the normsim executable for SimChild (default: this one).
	Binary string
	// Template is the handover template to launch (default "counter"); it
	// must declare the handover strategy.
	Template string
	// TemplateDirs and DefaultTemplates are the in-process sim's templates.
	TemplateDirs     []string
	DefaultTemplates fs.FS
	// Timeout bounds the whole run (default 5 minutes per round).
	Timeout time.Duration
	// Out receives progress lines; Every is how often (default 1s).
	Out   io.Writer
	Every time.Duration
	// Logger receives the in-process sim's logs (default: discarded).
	Logger *slog.Logger
	// KeepMigrations caps the finished migrations the sim this command
	// starts keeps (up --keep-migrations); 0 keeps all.
	KeepMigrations int
	// MemoryLimit is the child sim's up --memory-limit (e.g. "600MiB");
	// empty: none.
	MemoryLimit string
	// Rounds is how many times every job hands over, one round after
	// another (default 1): a long run shows whether the sim stays flat.
	Rounds int
	// ProfileDir, when set, receives cpu.pprof (the sim's whole run) and
	// heap.pprof (its heap at the peak, after the handovers); with a child
	// sim also bench-cpu.pprof, this process's own: the load generator
	// shares the machine's cores with the sim, so what it costs is what
	// the sim cannot have.
	ProfileDir string
}

// Report is what a load run measured.
type Report struct {
	Sim         string
	Jobs        int
	Concurrency int
	// ConcurrencyNote says why fewer than all jobs hand over at once.
	ConcurrencyNote string
	// Connected is how long launching and connecting every job took, and
	// ConnectRate the jobs per second that makes.
	Connected   time.Duration
	ConnectRate float64
	// ConnectCPU is the CPU time a job's launch and connection cost, and
	// HandoverCPU a handover's (the first round's): with every core busy
	// they, not any queue, bound ConnectRate and Throughput.
	ConnectCPU, HandoverCPU CPUCost
	// Completed and Failed count the handovers of every round; Elapsed is
	// the rounds' wall time, each from its first migrate request to its
	// last handover's end.
	Completed, Failed int
	Elapsed           time.Duration
	// Throughput is completed handovers per second of Elapsed.
	Throughput float64
	// Wall and Cutover are per handover, from the jobs' side (see Handover).
	Wall, Cutover Summary
	// PeakRSS is the sim's peak resident set (VmHWM) over the whole run,
	// the jobs' removal at its end included, and HandoverPeakRSS the peak
	// by the end of the first round's handovers; RSSBefore and RSSAfter
	// its resident set before the jobs connected and after they were all
	// removed. RSSWhat says whose memory it is.
	PeakRSS, HandoverPeakRSS, RSSBefore, RSSAfter int64
	RSSWhat                                       string
	// GoroutinesBefore and GoroutinesAfter are counted before the jobs
	// connect and after every instance was removed and every client closed
	// (in-process only; -1 otherwise).
	GoroutinesBefore, GoroutinesAfter int
	// Rounds is each round of handovers (one unless Config.Rounds says).
	Rounds []RoundReport
	// StoreCaughtUp is how long after the first round's last handover the
	// sim's store first had no write pending (Peak.Store.Pending waited
	// at the handovers' end): zero when none did, -1 when it was not seen
	// to catch up (a sim without stats, or one still behind 30 s after the
	// jobs' removal).
	StoreCaughtUp time.Duration
	// Peak is what the sim said of itself after the first round, before
	// anything was removed, and After once everything was (nil for a
	// sim that does not answer GET /api/v1/stats).
	Peak, After *sim.Stats
	// Profiles lists the profile files written (Config.ProfileDir).
	Profiles []string
	// Errors holds the first few failures.
	Errors []string
}

// fdReserve is what a bench or a sim needs open besides the jobs' sockets:
// API connections (256 at most), listeners, the store, stdio.
const fdReserve = 512

// fitConcurrency bounds the handovers in flight by the open-file limit.
// Each job holds a socket at both ends, and a handover in flight one more
// (its target's) until the source's closes: jobs + in flight + a reserve
// must fit the limit, in this process and in the sim alike (a child sim
// inherits this limit). Asked for all at once (0), the bench takes as many
// as fit and says so in note; asked for more than fit, it is an error.
func fitConcurrency(jobs, asked, limit int) (n int, note string, err error) {
	if limit <= 0 {
		if asked <= 0 || asked > jobs {
			return jobs, "", nil
		}
		return asked, "", nil
	}
	fit := limit - jobs - fdReserve
	if fit < 1 {
		return 0, "", fmt.Errorf("%d jobs need at least %d open files here and in the sim; the limit (ulimit -n) is %d", jobs, jobs+fdReserve+1, limit)
	}
	switch {
	case asked > 0 && asked <= jobs && asked > fit:
		return 0, "", fmt.Errorf("%d handovers in flight with %d jobs need %d open files here and in the sim; the limit (ulimit -n) is %d: at most %d fit",
			asked, jobs, jobs+asked+fdReserve, limit, fit)
	case asked > 0 && asked <= jobs:
		return asked, "", nil
	case jobs > fit:
		return fit, fmt.Sprintf("%d of %d handovers in flight at once: each holds one more socket at both ends until its source's closes, and the open-file limit (ulimit -n) is %d", fit, jobs, limit), nil
	}
	return jobs, "", nil
}

func (c *Config) defaults() {
	if c.Jobs <= 0 {
		c.Jobs = 1000
	}
	if c.Template == "" {
		c.Template = "counter"
	}
	if c.Rounds <= 0 {
		c.Rounds = 1
	}
	if c.Timeout <= 0 {
		c.Timeout = time.Duration(max(1, c.Rounds)) * 5 * time.Minute
	}
	if c.Out == nil {
		c.Out = io.Discard
	}
	if c.Every <= 0 {
		c.Every = time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	switch {
	case c.Server != "":
		c.Sim = SimServer
	case c.Sim == "":
		c.Sim = SimInProcess
	}
}

// target is the sim under load.
type target struct {
	url   string
	pid   int // 0 in-process or unknown
	close func() error
}

// Run connects cfg.Jobs jobs and hands every one of them over at once
// (cfg.Rounds times).
func Run(ctx context.Context, cfg Config) (rep *Report, err error) {
	cfg.defaults()
	var note string
	limit := openFileLimit()
	if inThisProcess(cfg.Sim) {
		limit /= 2 // the jobs' sockets and the sim's ends of them share this process
	}
	if cfg.Concurrency, note, err = fitConcurrency(cfg.Jobs, cfg.Concurrency, limit); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	rep = &Report{Sim: cfg.Sim, Jobs: cfg.Jobs, Concurrency: cfg.Concurrency, ConcurrencyNote: note, GoroutinesBefore: -1, GoroutinesAfter: -1}
	if note != "" {
		fmt.Fprintf(cfg.Out, "normsim bench: %s\n", note)
	}

	if cfg.ProfileDir != "" {
		if err := os.MkdirAll(cfg.ProfileDir, 0o755); err != nil {
			return nil, fmt.Errorf("--profile: %w", err)
		}
		if cfg.Sim != SimServer {
			stop, err := ProfileCPU(filepath.Join(cfg.ProfileDir, ownCPUProfile(cfg.Sim)))
			if err != nil {
				return nil, err
			}
			defer stop()
		}
	}
	tgt, err := startTarget(ctx, cfg)
	if err != nil {
		return nil, err
	}
	defer tgt.close()
	api := NewAPI(tgt.url, min(cfg.Concurrency, 256))
	defer api.Close()
	nodes, err := socketNodes(ctx, api)
	if err != nil {
		return nil, err
	}
	media := ""
	if cfg.Sim == SimInProcess || cfg.Sim == SimChild {
		media = " (--no-media: the bench's jobs send none)"
	}
	fmt.Fprintf(cfg.Out, "normsim bench: %d jobs on nodes %s and %s, %d handovers in flight, sim %s%s at %s\n",
		cfg.Jobs, nodes[0], nodes[1], cfg.Concurrency, cfg.Sim, media, tgt.url)

	if inThisProcess(cfg.Sim) {
		rep.GoroutinesBefore = settledGoroutines(0)
	}
	if st, err := procstat.Read(tgt.pid); err == nil && cfg.Sim != SimServer {
		rep.RSSBefore = st.VmRSS
	}

	// 1. Launch and connect every job, alternating nodes.
	jobs := make([]benchJob, cfg.Jobs)
	simPID := tgt.pid
	if inThisProcess(cfg.Sim) {
		simPID = 0 // this process: its CPU time is the bench's too
	}
	cpuStart := markCPU(simPID)
	start := time.Now()
	var connected atomic.Int64
	stop := progress(cfg.Out, cfg.Every, func() string {
		return fmt.Sprintf("  connecting: %d/%d jobs", connected.Load(), cfg.Jobs)
	})
	err = parallel(ctx, min(cfg.Concurrency, 64), cfg.Jobs, func(ctx context.Context, i int) error {
		in, j, err := LaunchConnected(ctx, api, cfg.Template, nodes[i%2])
		if err != nil {
			return err
		}
		jobs[i] = benchJob{id: in.ID, node: i % 2, conn: j}
		connected.Add(1)
		return nil
	})
	stop()
	rep.Connected = time.Since(start)
	rep.ConnectRate = float64(cfg.Jobs) / rep.Connected.Seconds()
	connectedCPU := markCPU(simPID)
	rep.ConnectCPU = connectedCPU.costPer(cpuStart, cfg.Jobs)
	// Whatever happens next, every job's instance is removed and its
	// client closed, once: the sim must be back where it started.
	removeJobs := func(ctx context.Context) error {
		var ids []string
		for i, j := range jobs {
			if j.conn != nil {
				j.conn.Close()
			}
			if j.id != "" {
				ids = append(ids, j.id)
			}
			jobs[i] = benchJob{}
		}
		return remove(ctx, api, ids)
	}
	defer func() {
		if rerr := removeJobs(context.WithoutCancel(ctx)); rerr != nil && err == nil {
			err = fmt.Errorf("remove the instances: %w", rerr)
		}
	}()
	if err != nil {
		return nil, fmt.Errorf("connect the jobs: %w", err)
	}
	fmt.Fprintf(cfg.Out, "  connected %d jobs in %s (%.0f jobs/s)\n", cfg.Jobs, Round(rep.Connected), rep.ConnectRate)

	// 2. Every job hands over to the other node, all released at once;
	// with Rounds > 1, again and again, each round handing the targets of
	// the last back.
	var walls, cutovers []time.Duration
	var caughtUp <-chan time.Duration
	for r := range cfg.Rounds {
		rd := handoverRound(ctx, cfg, api, nodes, jobs, &rep.Errors)
		walls, cutovers = append(walls, rd.walls...), append(cutovers, rd.cutovers...)
		rd.N = r + 1
		rep.Completed += rd.Completed
		rep.Failed += rd.Failed
		rep.Elapsed += rd.Elapsed
		if r == 0 {
			roundEnd := time.Now()
			rep.HandoverCPU = markCPU(simPID).costPer(connectedCPU, rd.Completed+rd.Failed)
			rep.Peak = readStats(ctx, api, false)
			caughtUp = storeCatchingUp(ctx, api, rep.Peak, roundEnd)
			if cfg.Sim != SimServer {
				if st, err := procstat.Read(tgt.pid); err == nil {
					rep.HandoverPeakRSS, rep.PeakRSS = st.VmHWM, st.VmHWM
				}
			}
			if cfg.ProfileDir != "" {
				path := filepath.Join(cfg.ProfileDir, "heap.pprof")
				if err := saveHeapProfile(ctx, api, cfg.Sim, path); err != nil {
					return rep, err
				}
				rep.Profiles = append(rep.Profiles, path)
			}
		}
		if cfg.Rounds > 1 {
			// The last round's migrations linger and wait for output
			// before they end: what is measured is the sim at rest.
			rd.Stats = settledStats(ctx, api)
			if rd.Stats != nil {
				fmt.Fprintf(cfg.Out, "  round %d: %d completed, %d failed in %s (%.0f/s); %d goroutines, %s live heap, %d migrations stored\n",
					rd.N, rd.Completed, rd.Failed, Round(rd.Elapsed), rd.Throughput, rd.Stats.Goroutines, MiB(int64(rd.Stats.HeapLiveBytes)), rd.Stats.Store.Migrations)
			}
		}
		rep.Rounds = append(rep.Rounds, rd.RoundReport)
		if rd.Failed > 0 {
			break // the jobs that failed have no connection to hand over again
		}
	}
	rep.Throughput = float64(rep.Completed) / rep.Elapsed.Seconds()
	rep.Wall, rep.Cutover = Summarize(walls), Summarize(cutovers)
	fmt.Fprintf(cfg.Out, "  %d completed, %d failed in %s (%.0f handovers/s)\n", rep.Completed, rep.Failed, Round(rep.Elapsed), rep.Throughput)

	switch cfg.Sim {
	case SimInProcess:
		rep.RSSWhat = fmt.Sprintf("this process: the sim and the %d client connections together", 2*cfg.Jobs)
	case SimChild:
		rep.RSSWhat = fmt.Sprintf("the sim alone (normsim up, pid %d)", tgt.pid)
	case SimBare:
		rep.RSSWhat = fmt.Sprintf("this process: the bare server and the %d client connections together", 2*cfg.Jobs)
	}

	// 3. Remove everything and close every client now, so the sim's rest
	// is measured (the deferred call then finds nothing left).
	if err := removeJobs(ctx); err != nil {
		return rep, fmt.Errorf("remove the instances: %w", err)
	}
	// Before the goroutines are counted: the watch is one of them.
	rep.StoreCaughtUp = -1
	switch {
	case caughtUp != nil:
		select {
		case rep.StoreCaughtUp = <-caughtUp:
		case <-time.After(30 * time.Second):
		case <-ctx.Done():
		}
	case rep.Peak != nil:
		rep.StoreCaughtUp = 0 // nothing was pending
	}
	api.Close()
	if inThisProcess(cfg.Sim) {
		rep.GoroutinesAfter = settledGoroutines(rep.GoroutinesBefore)
	}
	if cfg.Sim != SimServer {
		runtime.GC()
		time.Sleep(200 * time.Millisecond)
		if st, err := procstat.Read(tgt.pid); err == nil {
			// Removing 10,000 jobs at once (their sockets closing, their
			// records written) can take the sim past the handovers' peak.
			rep.RSSAfter, rep.PeakRSS = st.VmRSS, st.VmHWM
		}
	}
	rep.After = readStats(ctx, api, true)
	if cfg.ProfileDir != "" && cfg.Sim != SimServer {
		// The child writes its CPU profile as it exits; this process's
		// is written when Run returns.
		if err := tgt.close(); err != nil {
			return rep, err
		}
		rep.Profiles = append(rep.Profiles, filepath.Join(cfg.ProfileDir, "cpu.pprof"))
		if own := ownCPUProfile(cfg.Sim); own != "cpu.pprof" {
			rep.Profiles = append(rep.Profiles, filepath.Join(cfg.ProfileDir, own))
		}
	}
	return rep, nil
}

// ownCPUProfile names this process's CPU profile under --profile: the
// sim's own (cpu.pprof) when the sim runs in it, else bench-cpu.pprof,
// the load generator's, which shares the machine's cores with the sim.
func ownCPUProfile(where string) string {
	if inThisProcess(where) {
		return "cpu.pprof"
	}
	return "bench-cpu.pprof"
}

// WriteReport prints a report for a reader.
func WriteReport(w io.Writer, r *Report) {
	fmt.Fprintf(w, "\nnormsim bench: %d jobs, %d concurrent handovers (sim %s)\n", r.Jobs, r.Concurrency, r.Sim)
	if r.ConcurrencyNote != "" {
		fmt.Fprintf(w, "  note         %s\n", r.ConcurrencyNote)
	}
	fmt.Fprintf(w, "  connect      %s for all %d jobs (%.0f jobs/s)\n", Round(r.Connected), r.Jobs, r.ConnectRate)
	if len(r.Rounds) > 1 {
		fmt.Fprintf(w, "  rounds       %d of %d handovers each\n", len(r.Rounds), r.Jobs)
		for _, rd := range r.Rounds {
			fmt.Fprintf(w, "    %3d  %d completed, %d failed, %.0f/s", rd.N, rd.Completed, rd.Failed, rd.Throughput)
			if st := rd.Stats; st != nil {
				fmt.Fprintf(w, "; at rest: %d goroutines, %s live heap, store %s with %d migrations (%d pruned)",
					st.Goroutines, MiB(int64(st.HeapLiveBytes)), MiB(st.Store.Bytes), st.Store.Migrations, st.Store.MigrationsPruned)
			}
			fmt.Fprintln(w)
		}
		if first, last := r.Rounds[0].Stats, r.Rounds[len(r.Rounds)-1].Stats; first != nil && last != nil && len(r.Rounds) > 1 {
			fmt.Fprintf(w, "  flat?        goroutines %d -> %d, live heap %s -> %s (%+.1f%%)\n", first.Goroutines, last.Goroutines,
				MiB(int64(first.HeapLiveBytes)), MiB(int64(last.HeapLiveBytes)),
				100*(float64(last.HeapLiveBytes)/float64(first.HeapLiveBytes)-1))
			if n := r.Completed - r.Rounds[0].Completed; n > 0 {
				fmt.Fprintf(w, "  store growth %.0f bytes per completed migration after the first round\n",
					float64(last.Store.Bytes-first.Store.Bytes)/float64(n))
			}
		}
	}
	fmt.Fprintf(w, "  handovers    %d completed, %d failed in %s\n", r.Completed, r.Failed, Round(r.Elapsed))
	fmt.Fprintf(w, "  throughput   %.0f handovers/s\n", r.Throughput)
	if r.ConnectCPU.Cores > 0 {
		fmt.Fprintf(w, "  cpu          per job connected: %s\n", r.ConnectCPU)
		fmt.Fprintf(w, "               per handover:      %s\n", r.HandoverCPU)
	}
	fmt.Fprintf(w, "  wall         %s  (migrate request -> source stopped, per handover)\n", r.Wall)
	fmt.Fprintf(w, "  cutover      %s  (source-stopped-output sent -> cutover-apply read)\n", r.Cutover)
	if r.PeakRSS > 0 {
		fmt.Fprintf(w, "  peak RSS     %s over the whole run, %s by the handovers' end  (%s)\n", MiB(r.PeakRSS), MiB(r.HandoverPeakRSS), r.RSSWhat)
		fmt.Fprintf(w, "  RSS          %s before, %s after\n", MiB(r.RSSBefore), MiB(r.RSSAfter))
	}
	if r.GoroutinesBefore >= 0 {
		fmt.Fprintf(w, "  goroutines   %d before, %d after\n", r.GoroutinesBefore, r.GoroutinesAfter)
	}
	if p := r.Peak; p != nil {
		fmt.Fprintf(w, "  sim          %s, %d goroutines at the handovers' end", liveHeap(p.HeapLiveBytes), p.Goroutines)
		if a := r.After; a != nil {
			fmt.Fprintf(w, "; %s, %d goroutines after", liveHeap(a.HeapLiveBytes), a.Goroutines)
		}
		fmt.Fprintln(w)
		if m := p.Memory; m.HeapObjectsBytes > 0 {
			fmt.Fprintf(w, "  memory       at the handovers' end: heap objects %s, heap free %s, stacks %s (%s used), Go runtime %s, outside Go about %s\n",
				MiB(int64(m.HeapObjectsBytes)), MiB(int64(m.HeapFreeBytes)), MiB(int64(m.StacksBytes)), MiB(int64(m.StacksUsedBytes)), MiB(int64(m.RuntimeBytes)), MiB(int64(m.OutsideGoBytes)))
			if m.LimitBytes > 0 {
				fmt.Fprintf(w, "  limit        the sim ran with a Go memory limit of %s (up --memory-limit or GOMEMLIMIT): its collector works harder near it\n", MiB(m.LimitBytes))
			}
		}
		fmt.Fprintf(w, "  store        %s, %d migrations at the handovers' end", MiB(p.Store.Bytes), p.Store.Migrations)
		switch {
		case p.Store.Pending == 0:
			fmt.Fprintln(w, "; no write pending")
		case r.StoreCaughtUp > 0:
			fmt.Fprintf(w, "; %d writes still pending, all written %s later\n", p.Store.Pending, Round(r.StoreCaughtUp))
		default:
			fmt.Fprintf(w, "; %d writes still pending, not all written by the run's end\n", p.Store.Pending)
		}
		last := p
		if r.After != nil {
			last = r.After
		}
		fmt.Fprintf(w, "  records      %d frame records lost; connections slowed for the store %d times\n", last.Records.FramesLost, last.Records.FramesWaited)
	}
	for _, p := range r.Profiles {
		fmt.Fprintf(w, "  profile      %s\n", p)
	}
	for _, e := range r.Errors {
		fmt.Fprintf(w, "  error: %s\n", e)
	}
}

// RoundReport is one round of handovers: every job handed over once, all
// released at once.
type RoundReport struct {
	N                 int
	Completed, Failed int
	Elapsed           time.Duration
	Throughput        float64
	Wall, Cutover     Summary
	// Stats is the sim at rest after the round (Rounds > 1 only).
	Stats *sim.Stats
}

// benchJob is one simulated job: its instance, the node it is on, and
// its open connection.
type benchJob struct {
	id   string
	node int
	conn *jobplay.Job
}

type roundResult struct {
	RoundReport
	walls, cutovers []time.Duration
}

// handoverRound hands every job in jobs over to the other node, at most
// cfg.Concurrency at once, and leaves in jobs what was handed over: the
// target's instance and connection. A job whose handover failed keeps its
// source (the sim rolled back or failed it); errs collects the first ten
// failures.
func handoverRound(ctx context.Context, cfg Config, api *API, nodes [2]string, jobs []benchJob, errs *[]string) roundResult {
	var (
		mu      sync.Mutex
		rd      = roundResult{walls: make([]time.Duration, 0, len(jobs)), cutovers: make([]time.Duration, 0, len(jobs))}
		done    atomic.Int64
		failed  atomic.Int64
		sources []string // the stopped sources of completed handovers
	)
	start := time.Now()
	stop := progress(cfg.Out, cfg.Every, func() string {
		n := done.Load()
		return fmt.Sprintf("  handovers: %d/%d completed, %d failed, %.0f/s", n, len(jobs), failed.Load(),
			float64(n)/time.Since(start).Seconds())
	})
	sem := make(chan struct{}, cfg.Concurrency)
	var wg sync.WaitGroup
	for i := range jobs {
		wg.Add(1)
		go func(j *benchJob) {
			defer wg.Done()
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				failed.Add(1)
				return
			}
			defer func() { <-sem }()
			hctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
			defer cancel()
			h, err := PlayHandover(hctx, api, j.id, j.conn, HandoverOptions{To: nodes[1-j.node], WithoutTimeline: true})
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				failed.Add(1)
				if len(*errs) < 10 {
					*errs = append(*errs, err.Error())
				}
				return
			}
			done.Add(1)
			rd.walls = append(rd.walls, h.Wall)
			rd.cutovers = append(rd.cutovers, h.Cutover)
			j.conn.Close() // the worker closed the source's socket
			sources = append(sources, j.id)
			*j = benchJob{id: h.TargetID, node: 1 - j.node, conn: h.TargetJob}
		}(&jobs[i])
	}
	wg.Wait()
	stop()
	rd.Elapsed = time.Since(start)
	// A source a migration stopped stays listed (docs/contract-choices.md):
	// the bench removes those it handed over, as a user done with them
	// would, so a long run holds its jobs and not every source it left.
	if err := removeStopped(ctx, api, sources); err != nil && len(*errs) < 10 {
		*errs = append(*errs, "remove the stopped sources: "+err.Error())
	}
	rd.Completed, rd.Failed = int(done.Load()), int(failed.Load())
	rd.Throughput = float64(rd.Completed) / rd.Elapsed.Seconds()
	rd.Wall, rd.Cutover = Summarize(rd.walls), Summarize(rd.cutovers)
	return rd
}

// startTarget starts (or attaches to) the sim under load.
func startTarget(ctx context.Context, cfg Config) (*target, error) {
	switch cfg.Sim {
	case SimServer:
		if err := WaitReady(ctx, cfg.Server+"/readyz"); err != nil {
			return nil, err
		}
		return &target{url: cfg.Server, close: func() error { return nil }}, nil
	case SimInProcess:
		opts := app.DefaultOptions()
		opts.OpenStore = withsqlite.Open
		opts.SocketPort = 0
		opts.SocketHost = "127.0.0.1"
		opts.Addr = "127.0.0.1:0"
		opts.DB = app.Memory
		opts.Runtime = sim.RuntimeExternal
		opts.Templates = cfg.TemplateDirs
		opts.DefaultTemplates = cfg.DefaultTemplates
		opts.Logger = cfg.Logger
		opts.KeepMigrations = cfg.KeepMigrations
		opts.NoMedia = true // see startChild
		m := app.New(opts)
		if err := m.Open(ctx); err != nil {
			return nil, fmt.Errorf("start the sim: %w", err)
		}
		return &target{url: m.URL(), close: m.Close}, nil
	case SimChild:
		return startChild(ctx, cfg)
	case SimBare:
		b, err := OpenBareSim()
		if err != nil {
			return nil, fmt.Errorf("start the bare server: %w", err)
		}
		return &target{url: b.URL(), close: b.Close}, nil
	}
	return nil, fmt.Errorf("sim %q: use %s, %s or %s", cfg.Sim, SimInProcess, SimChild, SimBare)
}

// startChild runs `normsim up` with an in-memory store on free ports.
func startChild(ctx context.Context, cfg Config) (*target, error) {
	bin := cfg.Binary
	if bin == "" {
		var err error
		if bin, err = os.Executable(); err != nil {
			return nil, err
		}
	}
	port, err := FreePort()
	if err != nil {
		return nil, err
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	args := []string{"up", "--db", app.Memory, "--addr", addr, "--socket-port", "0", "--socket-host", "127.0.0.1",
		"--runtime", sim.RuntimeExternal, "--log-level", "warn",
		// The bench's jobs send no media, and a media port for each job is
		// one more open file beside its socket: with them 10,000 jobs do
		// not fit in 20,000 (docs/media.md).
		"--no-media"}
	if cfg.ProfileDir != "" {
		args = append(args, "--pprof", "--cpuprofile", filepath.Join(cfg.ProfileDir, "cpu.pprof"))
	}
	if cfg.KeepMigrations > 0 {
		args = append(args, "--keep-migrations", strconv.Itoa(cfg.KeepMigrations))
	}
	if cfg.MemoryLimit != "" {
		args = append(args, "--memory-limit", cfg.MemoryLimit)
	}
	for _, d := range cfg.TemplateDirs {
		args = append(args, "--templates", d)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s up: %w", bin, err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	var stopOnce sync.Once
	stop := func() error {
		stopOnce.Do(func() { stopChild(cmd, exited) })
		return nil
	}
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := WaitReady(rctx, "http://"+addr+"/readyz"); err != nil {
		stop()
		return nil, err
	}
	return &target{url: "http://" + addr, pid: cmd.Process.Pid, close: stop}, nil
}

// stopChild interrupts the child sim as Ctrl-C would (so it writes its CPU
// profile) and kills it if it has not exited in 10 s.
func stopChild(cmd *exec.Cmd, exited <-chan struct{}) {
	cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		cmd.Process.Kill()
		<-exited
	}
}

// ProfileCPU profiles this process's CPU into path until stop.
func ProfileCPU(path string) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("cpu profile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("cpu profile: %w", err)
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}

// readStats asks the sim for its figures, after a collection when gc;
// nil when it does not say.
func readStats(ctx context.Context, api *API, gc bool) *sim.Stats {
	st, err := api.Stats(ctx, gc)
	if err != nil {
		return nil
	}
	return st
}

// storeCatchingUp watches, from the handovers' end on, for the sim's store
// to have no write pending, and sends how long after end that was, or -1
// when it cannot tell: the throughput counts the handovers, and this says
// when what they recorded was all in the store. Nil when nothing was
// pending (or the sim has no stats).
func storeCatchingUp(ctx context.Context, api *API, atEnd *sim.Stats, end time.Time) <-chan time.Duration {
	if atEnd == nil || atEnd.Store.Pending == 0 {
		return nil
	}
	out := make(chan time.Duration, 1)
	go func() {
		for {
			select {
			case <-time.After(100 * time.Millisecond):
			case <-ctx.Done():
				out <- -1
				return
			}
			st := readStats(ctx, api, false)
			if st == nil {
				out <- -1
				return
			}
			if st.Store.Pending == 0 {
				out <- time.Since(end)
				return
			}
		}
	}()
	return out
}

// settledStats reads the sim's figures once its goroutine count has held
// still for half a second and its store has nothing pending (at most
// 10 s): a round's migrations linger and wait for the target's output
// after the jobs saw them complete, and leave memory once the journal has
// written them.
func settledStats(ctx context.Context, api *API) *sim.Stats {
	last := readStats(ctx, api, false)
	for deadline := time.Now().Add(10 * time.Second); last != nil && time.Now().Before(deadline); {
		select {
		case <-time.After(500 * time.Millisecond):
		case <-ctx.Done():
			return last
		}
		st := readStats(ctx, api, false)
		if st == nil || (st.Goroutines == last.Goroutines && st.Store.Pending == 0) {
			break
		}
		last = st
	}
	return readStats(ctx, api, true)
}

// saveHeapProfile writes the sim's heap profile, after a collection, to
// path: this process's own in-process, the child's over its API.
func saveHeapProfile(ctx context.Context, api *API, where, path string) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("heap profile: %w", err)
	}
	defer f.Close()
	if inThisProcess(where) {
		runtime.GC()
		return pprof.Lookup("heap").WriteTo(f, 0)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, api.Base()+"/debug/pprof/heap?gc=1", nil)
	if err != nil {
		return err
	}
	resp, err := api.hc.Do(req)
	if err != nil {
		return fmt.Errorf("heap profile: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("heap profile: the sim answered %s (was it started with --pprof?)", resp.Status)
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		return fmt.Errorf("heap profile: %w", err)
	}
	return f.Close()
}

// FreePort returns a loopback TCP port that was free a moment ago.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// socketNodes returns the first two nodes that serve a job socket.
func socketNodes(ctx context.Context, api *API) ([2]string, error) {
	var nodes []sim.NodeView
	if err := api.Do(ctx, http.MethodGet, "/api/v1/nodes", nil, &nodes); err != nil {
		return [2]string{}, err
	}
	var out []string
	for _, n := range nodes {
		if n.Socket != nil {
			out = append(out, n.Name)
		}
	}
	if len(out) < 2 {
		return [2]string{}, fmt.Errorf("the sim has %d nodes with a job socket; a handover needs 2", len(out))
	}
	return [2]string{out[0], out[1]}, nil
}

// remove stops and removes the instances the run created (and only
// those: a --server sim may hold others).
func remove(ctx context.Context, api *API, ids []string) error {
	return removeWith(ctx, api.Stop, ids)
}

// removeStopped removes the records of stopped instances (the sources the
// run's handovers stopped) while their jobs run on.
func removeStopped(ctx context.Context, api *API, ids []string) error {
	return removeWith(ctx, api.RemoveStopped, ids)
}

// removeWith removes the ids with do, 32 at a time; one already gone is
// not an error.
func removeWith(ctx context.Context, do func(context.Context, string) error, ids []string) error {
	return parallel(ctx, 32, len(ids), func(ctx context.Context, i int) error {
		err := do(ctx, ids[i])
		var e *apiclient.Error
		if errors.As(err, &e) && e.Status == http.StatusNotFound {
			return nil
		}
		return err
	})
}

// parallel runs f for 0..n-1 on workers goroutines; the first error stops
// handing out work and is returned.
func parallel(ctx context.Context, workers, n int, f func(context.Context, int) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var next atomic.Int64
	var once sync.Once
	var first error
	var wg sync.WaitGroup
	for range max(1, min(workers, n)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n || ctx.Err() != nil {
					return
				}
				if err := f(ctx, i); err != nil {
					once.Do(func() { first = err; cancel() })
					return
				}
			}
		}()
	}
	wg.Wait()
	if first == nil && ctx.Err() != nil && n > 0 {
		return ctx.Err()
	}
	return first
}

// progress prints line() every interval until stop is called.
func progress(w io.Writer, every time.Duration, line func() string) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				fmt.Fprintln(w, line())
			case <-done:
				return
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}

// settledGoroutines waits up to 5 s for the goroutine count to fall to
// want (0: just let things settle) and returns the count.
func settledGoroutines(want int) int {
	deadline := time.Now().Add(5 * time.Second)
	n := runtime.NumGoroutine()
	for time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
		m := runtime.NumGoroutine()
		if (want > 0 && m <= want) || (want == 0 && m == n) {
			return m
		}
		n = m
	}
	return n
}

// liveHeap says the live heap the runtime measured at its last
// collection: none has run in a sim that started a moment ago (the
// binary starts with its collector off, internal/initgc), and 0 is then
// not a measure.
func liveHeap(b uint64) string {
	if b == 0 {
		return "live heap not yet measured (no collection had run)"
	}
	return MiB(int64(b)) + " live heap"
}
