// Package videojob is normsim's example video job: it sends real H.264
// video (a 2 s test clip, looped) in MPEG-TS over UDP, in real time at
// 25 fps, and hands over to its migration target without a visible seam.
//
// Output: OUTPUT_URL, udp://HOST:PORT for MPEG-TS straight in UDP (7 TS
// packets a datagram) or rtp://HOST:PORT for RTP with payload type 33
// (7 TS packets a packet); VIDEO_RTP=1 sends RTP to a udp:// URL too.
// When OUTPUT_URL is unset, or still normsim's placeholder normsim:media
// (a run without normsim to replace it), NORMSIM_MEDIA_URL is used; with
// neither the job runs without output.
//
// The stream: PAT, PMT (PID 4096), H.264 on PID 256 carrying the PCR; one
// PES per frame with its PTS (no B-frames, so DTS = PTS); PAT and PMT
// before every IDR and every 12 frames; the random_access_indicator on an
// IDR frame's first packet. Frame n (from 0 over the job's life, across
// handovers) shows clip frame n mod 50 with PTS 90000 + n×3600.
//
// Handover: the source, on cutover-ready, goes on sending to the end of
// the GOP, so the next frame is an IDR, then stops and reports its
// Position (next frame, PTS base, the continuity counter of every PID,
// and the RTP session when it sends RTP). The target, on cutover-apply,
// starts at that frame with PAT and PMT, then SPS, PPS and the IDR, the
// PTS and counters continuing.
//
// VIDEO_MISBEHAVE makes it get the handover wrong the way a job author
// could, for normsim's media seam checks (the misbehaving example jobs
// are this job with one mode fixed):
//   - mid-gop: the source stops right after a keyframe (its author took
//     the IDR for the end of the GOP), and the target starts at the frame
//     it was handed though it is a P-frame (sent as is);
//   - pts-restart: the target restarts the PTS at 0 from the frame it was
//     handed;
//   - cc-restart: the target starts its continuity counters at 0, without
//     the discontinuity_indicator;
//   - no-psi: the target sends no PAT/PMT before its first frame, only
//     1 s later;
//   - rtp-new-ssrc: sends RTP (whatever the URL), and the target starts a
//     new RTP session (random SSRC, sequence number and timestamp)
//     instead of continuing the source's.
package videojob

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/normsim/normsim/jobclient"
	"github.com/normsim/normsim/protocol"
)

// Env the job reads.
const (
	EnvOutputURL = "OUTPUT_URL"
	EnvMediaURL  = "NORMSIM_MEDIA_URL" // sim.EnvMediaURL
	EnvRTP       = "VIDEO_RTP"
	EnvMisbehave = "VIDEO_MISBEHAVE"
	// mediaPlaceholder is sim.MediaURLParam: normsim replaces it with the
	// job's media URL; left as is, the job falls back to EnvMediaURL.
	mediaPlaceholder = "normsim:media"
)

// Misbehaviours lists the VIDEO_MISBEHAVE modes.
var Misbehaviours = []string{"mid-gop", "pts-restart", "cc-restart", "no-psi", "rtp-new-ssrc"}

// FrameInterval is one frame at 25 fps.
const FrameInterval = time.Second / 25

// Main runs the video job until SIGTERM. misbehave, when not empty, fixes
// the VIDEO_MISBEHAVE mode.
func Main(misbehave string) {
	log := slog.New(slog.NewTextHandler(os.Stdout, nil))
	if misbehave == "" {
		misbehave = os.Getenv(EnvMisbehave)
	}
	if err := run(log, misbehave); err != nil {
		log.Error("video job failed", "err", err)
		os.Exit(1)
	}
}

// Output is where the job sends: the address and whether as RTP.
type Output struct {
	URL  string // as configured, for the log
	Addr string // host:port
	RTP  bool
}

// OutputFromEnv reads OUTPUT_URL (or NORMSIM_MEDIA_URL) and VIDEO_RTP.
// A zero Output (Addr "") means no output.
func OutputFromEnv(getenv func(string) string) (Output, error) {
	raw := strings.TrimSpace(getenv(EnvOutputURL))
	if raw == "" || raw == mediaPlaceholder {
		raw = strings.TrimSpace(getenv(EnvMediaURL))
	}
	if raw == "" {
		return Output{}, nil
	}
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || u.Port() == "" {
		return Output{}, fmt.Errorf("output URL %q is not udp://HOST:PORT or rtp://HOST:PORT", raw)
	}
	o := Output{URL: raw, Addr: u.Host}
	switch u.Scheme {
	case "udp":
	case "rtp":
		o.RTP = true
	default:
		return Output{}, fmt.Errorf("output URL %q: scheme %q is neither udp nor rtp", raw, u.Scheme)
	}
	switch v := getenv(EnvRTP); strings.ToLower(strings.TrimSpace(v)) {
	case "", "0", "false":
	case "1", "true":
		o.RTP = true
	default:
		return Output{}, fmt.Errorf("%s must be 1, 0, true or false; got %q", EnvRTP, v)
	}
	return o, nil
}

func run(log *slog.Logger, misbehave string) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if misbehave != "" && !contains(Misbehaviours, misbehave) {
		return fmt.Errorf("%s=%q is none of %s", EnvMisbehave, misbehave, strings.Join(Misbehaviours, ", "))
	}
	clip, err := Clip()
	if err != nil {
		return fmt.Errorf("clip: %w", err)
	}
	out, err := OutputFromEnv(os.Getenv)
	if err != nil {
		return err
	}
	if misbehave == "rtp-new-ssrc" && !out.RTP {
		log.Info("sending RTP: the rtp-new-ssrc bug is in its RTP session")
		out.RTP = true
	}
	var w *datagramWriter
	if out.Addr != "" {
		conn, err := net.Dial("udp", out.Addr)
		if err != nil {
			return fmt.Errorf("output %s: %w", out.URL, err)
		}
		defer conn.Close()
		w = &datagramWriter{conn: conn, log: log}
	} else {
		log.Warn("no output: neither " + EnvOutputURL + " nor " + EnvMediaURL + " names one; producing into the void")
	}
	job, inst := identity()
	var sink io.Writer = discard{}
	if w != nil {
		sink = w
	}
	j := NewJob(log, NewStream(clip, sink, out.RTP, misbehave), misbehave)
	format := "mpegts"
	if out.RTP {
		format = "rtp/mp2t"
	}
	log.Info("video job starting", "job", job, "instance", inst, "output", out.URL, "format", format, "frames", len(clip), "misbehave", misbehave)

	client := jobclient.Connect(ctx, j.Handler(), jobclient.Options{Logger: log})
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
	if target {
		log.Info("started as a migration target; waiting for cutover-apply", "migration", client.Migration().ID)
	} else {
		j.Start(nil)
	}
	j.Loop(ctx)
	frames, datagrams := j.sent()
	log.Info("video job stopping", "next", j.next(), "frames", frames, "datagrams", datagrams)
	return nil
}

// Job is the video job's real-time side: it paces a Stream at 25 fps and
// answers the handover. Its methods are safe for concurrent use.
type Job struct {
	log       *slog.Logger
	misbehave string

	mu        sync.Mutex
	stream    *Stream
	producing bool
	// anchor and anchorFrame pace the output: frame anchorFrame+k is due
	// at anchor + k×40 ms, so late ticks catch up and nothing drifts.
	anchor      time.Time
	anchorFrame int64
	// stopAt is set while a source waits for its GOP end; the loop
	// sends it the position once it stopped there.
	stopAt chan Position
	// handedOver: output stopped for a handover (Abort resumes it).
	handedOver bool
}

// NewJob returns a job sending stream; Start it and run its Loop.
func NewJob(log *slog.Logger, stream *Stream, misbehave string) *Job {
	return &Job{log: log, stream: stream, misbehave: misbehave}
}

// Start starts the output now, fresh or from a source's position.
func (j *Job) Start(from *Position) {
	j.mu.Lock()
	j.stream.Start(from)
	j.producing, j.handedOver = true, false
	j.anchor, j.anchorFrame = time.Now(), j.stream.Next()
	n, pts, key := j.stream.Next(), j.stream.PTS(j.stream.Next()), j.stream.AtGOPEnd()
	j.mu.Unlock()
	j.log.Info("output started", "frame", n, "pts", pts, "keyframe", key)
}

// Loop sends the frames as they fall due until ctx ends.
func (j *Job) Loop(ctx context.Context) {
	tick := time.NewTicker(FrameInterval / 4)
	defer tick.Stop()
	report := time.NewTicker(time.Second)
	defer report.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-report.C:
			j.mu.Lock()
			p, n, pts := j.producing, j.stream.Next(), j.stream.PTS(j.stream.Next())
			j.mu.Unlock()
			j.log.Info("video", "producing", p, "next", n, "pts", pts)
		case now := <-tick.C:
			j.sendDue(now)
		}
	}
}

// sendDue sends every frame due by now. A job that fell more than a second
// behind (a stopped process) re-anchors rather than bursting.
func (j *Job) sendDue(now time.Time) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if !j.producing {
		return
	}
	due := j.anchorFrame + int64(now.Sub(j.anchor)/FrameInterval) + 1
	if due-j.stream.Next() > 25 {
		j.log.Warn("output fell behind; re-anchoring", "behind", due-j.stream.Next())
		j.anchor, j.anchorFrame = now, j.stream.Next()
		due = j.stream.Next() + 1
	}
	for j.stream.Next() < due && j.producing {
		if err := j.stream.SendFrame(); err != nil {
			j.log.Warn("send failed", "err", err)
		}
		if j.stopAt != nil && j.atStopPoint() {
			j.stopNow()
		}
	}
}

// stopNow stops the output and hands the position to the waiting
// StopAtGOPEnd. j.mu held.
func (j *Job) stopNow() Position {
	j.producing, j.handedOver = false, true
	pos := j.stream.Position()
	if j.stopAt != nil {
		j.stopAt <- pos
		j.stopAt = nil
	}
	return pos
}

// atStopPoint reports whether the source may stop here: where the next
// frame is an IDR, or, with mid-gop, right after one (its author took the
// keyframe for the end of the GOP). j.mu held.
func (j *Job) atStopPoint() bool {
	if j.misbehave == "mid-gop" {
		return j.stream.AfterKeyframe()
	}
	return j.stream.AtGOPEnd()
}

// StopAtGOPEnd stops the output where a target can take over: right away
// when the next frame is an IDR (or not producing), otherwise after the
// frames left in the GOP went out at their due times. With mid-gop it
// stops right after a keyframe instead. It returns the position to hand
// over.
func (j *Job) StopAtGOPEnd(ctx context.Context) (Position, error) {
	j.mu.Lock()
	if !j.producing || j.atStopPoint() {
		pos := j.stopNow()
		j.mu.Unlock()
		return pos, nil
	}
	ch := make(chan Position, 1)
	j.stopAt = ch
	j.mu.Unlock()
	select {
	case pos := <-ch:
		return pos, nil
	case <-ctx.Done():
		j.mu.Lock()
		defer j.mu.Unlock()
		if j.stopAt == ch {
			j.stopAt = nil
			return Position{}, ctx.Err()
		}
		return <-ch, nil // stopped meanwhile: Abort resumes it
	}
}

// resume restarts a source whose handover was rolled back, at the frame
// it stopped at, paced from now.
func (j *Job) resume() bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.stopAt = nil
	if j.producing || !j.handedOver {
		return false
	}
	j.producing, j.handedOver = true, false
	j.anchor, j.anchorFrame = time.Now(), j.stream.Next()
	return true
}

func (j *Job) next() int64 {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.stream.Next()
}

func (j *Job) sent() (frames, datagrams int64) {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.stream.Sent()
}

// Handler answers the handover.
func (j *Job) Handler() jobclient.Handler {
	return jobclient.Handler{
		GetState: func(ctx context.Context, migrationID string) (json.RawMessage, error) {
			j.log.Info("get-state", "migration", migrationID)
			return json.Marshal(map[string]any{"clip": "testsrc2 320x180 25fps H.264", "gop": GOP})
		},
		InitialState: func(ctx context.Context, migrationID string, state json.RawMessage) (json.RawMessage, error) {
			j.log.Info("initial-state", "migration", migrationID, "state", string(state))
			return json.RawMessage(`{"ready":true}`), nil
		},
		CutoverReady: func(ctx context.Context, migrationID string, ready json.RawMessage) (json.RawMessage, error) {
			j.log.Info("cutover-ready: stopping at the end of the GOP", "migration", migrationID, "next", j.next())
			pos, err := j.StopAtGOPEnd(ctx)
			if err != nil {
				return nil, err
			}
			if j.misbehave == "mid-gop" {
				j.log.Warn("stopped mid-GOP (VIDEO_MISBEHAVE=mid-gop)", "frame", pos.Frame)
			}
			j.log.Info("cutover-ready: output stopped", "migration", migrationID, "frame", pos.Frame, "pts", pos.NextPTS, "cc", pos.CC)
			return json.Marshal(pos)
		},
		CutoverApply: func(ctx context.Context, migrationID string, stoppedAt json.RawMessage) (jobclient.Applied, error) {
			var pos Position
			if err := json.Unmarshal(stoppedAt, &pos); err != nil {
				return jobclient.Applied{}, errors.New("cutover-apply position is not a video position {\"frame\", \"ptsBase\", \"cc\"}: " + strings.TrimSpace(string(stoppedAt)))
			}
			if pos.Frame < 0 {
				return jobclient.Applied{}, fmt.Errorf("cutover-apply position: frame %d is negative", pos.Frame)
			}
			if j.misbehave != "" {
				j.log.Warn("continuing with a bug (VIDEO_MISBEHAVE="+j.misbehave+")", "migration", migrationID)
			}
			j.Start(&pos)
			if pos.Frame%GOP != 0 {
				j.log.Warn("cutover-apply: the position is not at a keyframe; the picture breaks until the next IDR", "frame", pos.Frame)
			}
			j.log.Info("cutover-apply: output continues", "migration", migrationID, "frame", pos.Frame)
			return jobclient.Applied{Applied: []string{"video"}}, nil
		},
		Abort: func(migrationID, reason string) {
			resumed := j.resume()
			j.log.Warn("migration aborted", "migration", migrationID, "reason", reason, "resumed", resumed)
		},
	}
}

// datagramWriter writes datagrams to the output, logging the first error
// of a run (a receiver that is not listening yet is not fatal).
type datagramWriter struct {
	conn   net.Conn
	log    *slog.Logger
	failed bool
}

func (w *datagramWriter) Write(b []byte) (int, error) {
	n, err := w.conn.Write(b)
	if err != nil && !w.failed {
		w.log.Warn("output write failed (further failures not logged until one succeeds)", "err", err)
	}
	w.failed = err != nil
	return n, nil
}

type discard struct{}

func (discard) Write(b []byte) (int, error) { return len(b), nil }

// identity is the job and instance names for the log.
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

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
