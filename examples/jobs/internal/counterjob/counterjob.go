// Package counterjob is normsim's example job: it sends a sequence number to its
// output at a steady rate and hands over at an exact position.
//
// Its output goes to NORMSIM_OUTPUT_ADDR (UDP host:port, one JSON datagram
// {"job","instance","seq"} per packet; none when unset) at COUNTER_RATE
// packets per second (default 50). A fresh counter starts at the number of
// ticks since the Unix epoch, so two counters started independently agree on
// what "now" is and a gap or overlap between them shows up as lost or
// repeated numbers. In a handover the source stops on cutover-ready and
// reports the last number it sent; the target continues from exactly the
// next one.
//
// COUNTER_STOP_DRAIN_MS keeps the output going that many milliseconds after
// SIGTERM, like an encoder flushing, before the counter exits.
//
// COUNTER_LOG_RATE prints that many numbered lines a second to stdout
// ("chatty N", N from 0) while it runs, and how many it printed when it
// stops: a chatty job, to prove normsim keeps up with its logs.
//
// COUNTER_MISBEHAVE makes it break the protocol on purpose, for normsim's
// own scenarios: refuse (answers state-refused), never-ready (never sends
// target-ready), crash-on-apply (exits 3 on cutover-apply), wrong-position
// (reports a position 5 behind the truth), keep-running (keeps producing
// after it said it stopped), ignores-abort (a target that starts its output
// as soon as it is ready, then ignores abort and SIGTERM), skips-to-live (a
// target that rejoins "live" at the clock's number instead of the handed
// position, losing what was due in between). The misbehaving example jobs
// are this job with one of those modes fixed.
//
// COUNTER_MISBEHAVE=restart-at-zero numbers from 0 whenever it starts
// producing: on a fresh start, and as a target, ignoring the position
// cutover-apply gave it, as a job that keeps its count in memory only
// would. After a source that ran a while, the target repeats numbers the
// job sent long before.
//
// COUNTER_MISBEHAVE=apply-fails continues exactly, but reports in
// target-applied that it could not apply its overlay participant.
package counterjob

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/normsim/normsim/jobclient"
	"github.com/normsim/normsim/protocol"
)

// position is what the counter hands over: the last number the source sent.
type position struct {
	Last int64 `json:"last"`
}

// counter produces the output.
type counter struct {
	log       *slog.Logger
	rate      int
	job, inst string
	out       net.Conn
	misbehave string
	// target: the counter was launched as a migration target.
	target bool

	mu        sync.Mutex
	producing bool
	next      int64
	sent      int64 // last number sent; -1 before the first
}

// Main runs the counter until SIGTERM. misbehave, when not empty, fixes the
// COUNTER_MISBEHAVE mode.
func Main(misbehave string) {
	log := slog.New(slog.NewTextHandler(os.Stdout, nil))
	if misbehave == "" {
		misbehave = os.Getenv("COUNTER_MISBEHAVE")
	}
	if err := run(log, misbehave); err != nil {
		log.Error("counter failed", "err", err)
		os.Exit(1)
	}
}

func run(log *slog.Logger, misbehave string) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rate := 50
	if v := os.Getenv("COUNTER_RATE"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 100000 {
			return fmt.Errorf("COUNTER_RATE must be a whole number from 1 to 100000; got %q", v)
		}
		rate = n
	}
	job, inst := identity()
	c := &counter{log: log, rate: rate, job: job, inst: inst, misbehave: misbehave, sent: -1}
	if addr := os.Getenv("NORMSIM_OUTPUT_ADDR"); addr != "" {
		conn, err := net.Dial("udp", addr)
		if err != nil {
			return fmt.Errorf("output %s: %w", addr, err)
		}
		defer conn.Close()
		c.out = conn
	}
	log.Info("counter starting", "job", job, "instance", inst, "rate", rate, "output", os.Getenv("NORMSIM_OUTPUT_ADDR"), "misbehave", c.misbehave)

	client := jobclient.Connect(ctx, c.handler(), jobclient.Options{Logger: log})
	defer client.Close()
	// A migration target learns it is one from its hello-ack: wait for it
	// before producing, so a target never writes before its cutover.
	target := false
	if client.Enabled() {
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := client.WaitConnected(wctx)
		cancel()
		if err != nil {
			log.Warn("job socket not reachable; producing anyway", "err", err)
		}
		target = client.Migration() != nil
	}
	c.target = target
	if target {
		log.Info("started as a migration target; waiting for cutover-apply", "migration", client.Migration().ID)
	} else {
		c.startAt(c.clockTick())
	}
	drain := time.Duration(0)
	if v := os.Getenv("COUNTER_STOP_DRAIN_MS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return fmt.Errorf("COUNTER_STOP_DRAIN_MS must be a whole number of milliseconds; got %q", v)
		}
		drain = time.Duration(n) * time.Millisecond
	}
	logRate := 0
	if v := os.Getenv("COUNTER_LOG_RATE"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n > 1_000_000 {
			return fmt.Errorf("COUNTER_LOG_RATE must be a whole number of lines per second from 0 to 1000000; got %q", v)
		}
		logRate = n
	}
	var chatted chan int64
	if logRate > 0 {
		chatted = make(chan int64, 1)
		go func() { chatted <- chatter(ctx, logRate) }()
	}
	c.loop(ctx)
	if chatted != nil {
		log.Info("counter printed chatty lines", "count", <-chatted)
	}
	if drain > 0 {
		log.Info("draining output before exit", "for", drain)
		dctx, cancel := context.WithTimeout(context.Background(), drain)
		c.loop(dctx)
		cancel()
	}
	log.Info("counter stopping", "last", c.last())
	return nil
}

// identity is the job and instance names for attribution: normsim passes
// them, and the socket URL carries them too.
func identity() (job, inst string) {
	job, inst = os.Getenv("NORMSIM_JOB"), os.Getenv("NORMSIM_INSTANCE")
	if u, err := url.Parse(os.Getenv(protocol.EnvURL)); err == nil {
		if j, r, ok := protocol.ParsePath(u.EscapedPath()); ok {
			if job == "" {
				job = j
			}
			if inst == "" {
				inst = r
			}
		}
	}
	if inst == "" {
		inst, _ = os.Hostname()
	}
	return job, inst
}

func (c *counter) clockTick() int64 {
	return time.Now().UnixMilli() * int64(c.rate) / 1000
}

func (c *counter) startAt(next int64) {
	if c.misbehave == "restart-at-zero" {
		c.log.Warn("numbering from 0, whatever the position (COUNTER_MISBEHAVE=restart-at-zero)", "instead of", next)
		next = 0
	}
	c.mu.Lock()
	c.next, c.producing = next, true
	c.mu.Unlock()
	c.log.Info("output started", "from", next)
}

// stop stops the output and returns the last number sent.
func (c *counter) stop() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.misbehave != "keep-running" {
		c.producing = false
	}
	return c.sent
}

func (c *counter) last() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sent
}

func (c *counter) loop(ctx context.Context) {
	tick := time.NewTicker(time.Second / time.Duration(c.rate))
	defer tick.Stop()
	report := time.NewTicker(time.Second)
	defer report.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-report.C:
			c.mu.Lock()
			p, s := c.producing, c.sent
			c.mu.Unlock()
			c.log.Info("counter", "producing", p, "last", s)
		case <-tick.C:
			c.mu.Lock()
			if c.producing {
				seq := c.next
				c.next++
				c.sent = seq
				c.mu.Unlock()
				c.emit(seq)
				continue
			}
			c.mu.Unlock()
		}
	}
}

func (c *counter) emit(seq int64) {
	if c.out == nil {
		return
	}
	b, _ := json.Marshal(map[string]any{"job": c.job, "instance": c.inst, "seq": seq})
	c.out.Write(b)
}

func (c *counter) handler() jobclient.Handler {
	return jobclient.Handler{
		GetState: func(ctx context.Context, migrationID string) (json.RawMessage, error) {
			if c.misbehave == "refuse" {
				return nil, &jobclient.Refusal{Reason: "this counter refuses to move (COUNTER_MISBEHAVE=refuse)"}
			}
			c.log.Info("get-state", "migration", migrationID)
			return json.Marshal(map[string]any{"rate": c.rate})
		},
		InitialState: func(ctx context.Context, migrationID string, state json.RawMessage) (json.RawMessage, error) {
			c.log.Info("initial-state", "migration", migrationID, "state", string(state))
			if c.misbehave == "never-ready" {
				<-ctx.Done() // never answer; the worker times out or aborts
				return nil, ctx.Err()
			}
			if c.misbehave == "ignores-abort" {
				// The bug: an optimistic target that starts producing when
				// it is ready rather than on cutover-apply, and will not
				// be talked out of it.
				signal.Ignore(syscall.SIGTERM)
				c.startAt(c.clockTick())
			}
			return json.RawMessage(`{"ready":true}`), nil
		},
		CutoverReady: func(ctx context.Context, migrationID string, ready json.RawMessage) (json.RawMessage, error) {
			last := c.stop()
			if c.misbehave == "wrong-position" {
				last -= 5
			}
			c.log.Info("cutover-ready: output stopped", "migration", migrationID, "last", last)
			return json.Marshal(position{Last: last})
		},
		CutoverApply: func(ctx context.Context, migrationID string, stoppedAt json.RawMessage) (jobclient.Applied, error) {
			if c.misbehave == "crash-on-apply" {
				c.log.Error("crashing on cutover-apply (COUNTER_MISBEHAVE=crash-on-apply)")
				os.Exit(3)
			}
			var pos position
			if err := json.Unmarshal(stoppedAt, &pos); err != nil {
				return jobclient.Applied{}, errors.New("cutover-apply position is not {\"last\": n}: " + strings.TrimSpace(string(stoppedAt)))
			}
			next := pos.Last + 1
			if c.misbehave == "skips-to-live" {
				// The bug: catching up to the live edge drops the numbers
				// that fell due while the handover ran.
				next = max(next, c.clockTick()) + 3
			}
			c.startAt(next)
			c.log.Info("cutover-apply: output continues", "migration", migrationID, "from", next)
			if c.misbehave == "apply-fails" {
				return applyFails(c.log), nil
			}
			return jobclient.Applied{Applied: []string{"counter"}}, nil
		},
		Abort: func(migrationID, reason string) {
			if c.misbehave == "ignores-abort" && c.target {
				c.log.Warn("migration aborted; producing anyway (COUNTER_MISBEHAVE=ignores-abort)", "migration", migrationID, "reason", reason)
				return
			}
			c.mu.Lock()
			wasStopped := !c.producing
			if wasStopped && c.sent >= 0 {
				c.next, c.producing = c.sent+1, true
			}
			c.mu.Unlock()
			c.log.Warn("migration aborted", "migration", migrationID, "reason", reason, "resumed", wasStopped)
		},
	}
}

// chatter prints rate numbered lines a second to stdout until ctx ends, in
// a burst every 10 ms, and returns how many it printed.
func chatter(ctx context.Context, rate int) int64 {
	const every = 10 * time.Millisecond
	t := time.NewTicker(every)
	defer t.Stop()
	start := time.Now()
	var n int64
	var buf []byte
	for {
		select {
		case <-ctx.Done():
			return n
		case now := <-t.C:
			due := int64(now.Sub(start).Seconds() * float64(rate))
			buf = buf[:0]
			for ; n < due; n++ {
				buf = fmt.Appendf(buf, "chatty %d\n", n)
			}
			os.Stdout.Write(buf)
		}
	}
}

// applyFails is what a target whose overlay cannot start on its new node
// reports: the counter applied, the overlay failed with why, and the skew
// it measured. Past the point of no return nothing rolls back; failures
// are reported.
func applyFails(log *slog.Logger) jobclient.Applied {
	skew := 4.0
	failed := []protocol.FailedApply{{ID: "overlay", Reason: "font /fonts/lower-third.ttf is missing on this node"}}
	log.Warn("cutover-apply: overlay not applied (COUNTER_MISBEHAVE=apply-fails)", "reason", failed[0].Reason)
	return jobclient.Applied{Applied: []string{"counter"}, Failed: failed, SkewMs: &skew}
}
