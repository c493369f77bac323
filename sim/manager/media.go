package manager

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"sort"
	"strconv"
	"syscall"
	"time"

	"github.com/normsim/normsim/sim"
)

// openMedia opens the job's media port (port, or a free one when 0) and
// is the URL an instance of runtime sends its media to; "" when normsim
// runs no media receiver.
func (m *Manager) openMedia(jobID, runtime string, port int) (string, error) {
	if m.cfg.Media == nil {
		return "", nil
	}
	got, err := m.cfg.Media.Open(jobID, port)
	if errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) {
		return "", sim.Errorf(sim.EUnavailable, "%v: every job holds a UDP port for its media beside its job socket; raise the open-file limit (ulimit -n) or start normsim with --no-media (docs/media.md)", err)
	}
	if err != nil {
		return "", sim.Errorf(sim.EUnavailable, "%v", err)
	}
	host := "127.0.0.1"
	if m.cfg.MediaHost != nil {
		host = m.cfg.MediaHost(runtime)
	}
	return "udp://" + net.JoinHostPort(host, strconv.Itoa(got)), nil
}

// closeMediaIfUnused closes the job's media port when no instance of the
// job is held (a first launch that failed).
func (m *Manager) closeMediaIfUnused(jobID string) {
	if m.cfg.Media == nil {
		return
	}
	m.mu.Lock()
	held := m.jobs[jobID] > 0
	m.mu.Unlock()
	if !held {
		m.cfg.Media.Close(jobID)
	}
}

// reopenMedia opens an adopted instance's media port again on the port it
// was launched with: the job sends there still. When that port is taken
// its media cannot arrive, and the log says so.
func (m *Manager) reopenMedia(in *sim.Instance) {
	if m.cfg.Media == nil {
		return
	}
	raw := mediaURLOf(in)
	if raw == "" {
		return
	}
	u, err := url.Parse(raw)
	if err != nil {
		return
	}
	port, err := strconv.Atoi(u.Port())
	if err != nil {
		return
	}
	if got, err := m.cfg.Media.Open(in.JobID, port); err != nil || got != port {
		m.log.Warn("the media port an adopted job sends to could not be opened again: its media will not arrive, and its seams are judged without it",
			"job", in.JobID, "instance", in.ID, "port", port, "err", err)
	}
}

// mediaURLOf is the media URL the instance was launched with, from its
// recorded env.
func mediaURLOf(in *sim.Instance) string { return envOf(in, sim.EnvMediaURL) }

// envOf is the value of the launch-contract variable name an instance's
// services were given: the same for each service that has it, "" when
// none has.
func envOf(in *sim.Instance, name string) string {
	for _, env := range in.Env {
		if v := env[name]; v != "" {
			return v
		}
	}
	return ""
}

// Media seam windows: what is judged reaches this far before the
// migration began, and the target's media is waited for until it spans
// mediaAfter past its first datagram (so a join off a keyframe shows how
// long the picture is missing) or mediaWait has passed.
const (
	mediaBefore   = 3 * time.Second
	mediaAfter    = 2 * time.Second
	mediaWait     = 3 * time.Second
	captureAround = 3 * time.Second
	sourceSlack   = time.Second
)

// measureMedia judges the seam of the job's media, as a receiver would,
// from what the media receiver got: a sender first heard before the
// target was placed is the source, one first heard after it the target.
// The stream around the switch is kept as the migration's seam capture.
func (r *run) measureMedia(ctx context.Context) {
	recv, judge := r.m.cfg.Media, r.m.cfg.MediaJudge
	r.mu.Lock()
	tgtID, placed := r.mig.Target.Instance, r.tgtPlacedAt
	moments := sim.SeamMoments{SourceStopped: r.stoppedAt, ApplySent: r.applySentAt}
	r.mu.Unlock()
	if recv == nil || judge == nil || tgtID == "" || placed.IsZero() {
		return
	}
	since := r.start.Add(-mediaBefore)
	if len(recv.Media(r.src.JobID, since).Datagrams) == 0 {
		return
	}
	r.during(func() { r.waitTargetMedia(ctx, since, placed) })
	moments.JudgedAt = r.m.now()
	w := recv.Media(r.src.JobID, since)
	src, tgt := splitSenders(w, placed, r.start)
	rep := judge.Analyze(src, tgt, moments)
	noteReceiverLosses(rep, w)
	r.mu.Lock()
	o := r.mig.Output
	if o == nil {
		o = &sim.OutputReport{Verdict: rep.Verdict, AtFault: rep.AtFault, GapMs: rep.GapMs, OverlapMs: rep.OverlapMs,
			SourceAfterStop: rep.SourceAfterStop, TargetBeforeApply: rep.TargetBeforeApply, Detail: "media: " + rep.Detail}
		r.mig.Output = o
	} else if o.Verdict == sim.VerdictSeamless && rep.Verdict != sim.VerdictSeamless {
		// The worse of the two: a seamless count over a broken picture is
		// not seamless.
		o.Verdict, o.AtFault = rep.Verdict, rep.AtFault
		o.Detail += "; media: " + rep.Detail
	}
	o.Media = rep
	if o.SwitchAt == nil {
		o.SwitchAt = rep.SwitchAt
	}
	r.mu.Unlock()
	r.recordHere(sideOutput, "media "+rep.Verdict+": "+rep.Detail, nil)
	r.captureSeam(ctx, w, rep, src, tgt)
}

// noteReceiverLosses says in the report what of the window the receiver
// did not judge: what it let go of to stay within its memory bound, and
// what never reached it. The latter is normsim's loss: a defect it may
// have caused is blamed on no one, and the seam cannot be vouched for.
func noteReceiverLosses(rep *sim.MediaReport, w sim.MediaWindow) {
	if rep.Trimmed = w.Trimmed; w.Trimmed > 0 {
		rep.Detail += fmt.Sprintf("; the receiver had let go of %s of this window to stay within its memory bound, so the seam is judged without them", sim.Plural(w.Trimmed, "datagram"))
	}
	if rep.Lost = w.Lost; w.Lost > 0 {
		rep.Detail += fmt.Sprintf("; %s of this window never reached normsim's receiver (the kernel dropped them on a full socket buffer, a read failed, or a datagram was longer than the 9,216 bytes the receiver reads)", sim.Plural(w.Lost, "datagram"))
	}
	// What the receiver let go of, or never got, is normsim's loss: a
	// seam that came through anyway is seamless, any other verdict (no
	// output included: the target's datagrams may be what was lost)
	// cannot be vouched for.
	if w.Lost+w.Trimmed == 0 || rep.Verdict == sim.VerdictSeamless {
		return
	}
	rep.Detail = "the seam cannot be vouched for, normsim lost datagrams: " + rep.Detail
	rep.Verdict, rep.AtFault = sim.VerdictUnknown, ""
	for i := range rep.Defects {
		rep.Defects[i].AtFault = ""
	}
}

// waitTargetMedia waits until the target's media spans mediaAfter, or
// mediaWait has passed.
func (r *run) waitTargetMedia(ctx context.Context, since, placed time.Time) {
	recv := r.m.cfg.Media
	poke, stop := recv.Watch(r.src.JobID)
	defer stop()
	deadline := time.NewTimer(mediaWait)
	defer deadline.Stop()
	for {
		_, tgt := splitSenders(recv.Media(r.src.JobID, since), placed, r.start)
		if n := len(tgt); n > 0 && tgt[n-1].At.Sub(tgt[0].At) >= mediaAfter {
			return
		}
		select {
		case <-poke:
		case <-deadline.C:
			return
		case <-ctx.Done():
			return
		}
	}
}

// splitSenders tells the source's datagrams from the target's as a
// receiver would, by sender address: one first heard before the target
// was placed (and heard since a second before the migration began) is the
// source's, one first heard after it the target's.
func splitSenders(w sim.MediaWindow, placed, began time.Time) (src, tgt []sim.MediaDatagram) {
	// A sender heard within sourceSlack of the start counts as active: a
	// stopThenStart source may have stopped at once, and an earlier move's
	// source stopped at least mediaAfter before its migration ended.
	active := map[string]bool{}
	for _, d := range w.Datagrams {
		if !d.At.Before(began.Add(-sourceSlack)) {
			active[d.From] = true
		}
	}
	for _, d := range w.Datagrams {
		first := w.FirstHeard[d.From]
		switch {
		case !first.Before(placed):
			tgt = append(tgt, d)
		case active[d.From]:
			src = append(src, d)
		}
	}
	return src, tgt
}

// captureSeam keeps what the receiver got from captureAround before the
// switch to captureAround after it as the migration's seam.ts.
func (r *run) captureSeam(ctx context.Context, w sim.MediaWindow, rep *sim.MediaReport, src, tgt []sim.MediaDatagram) {
	store := r.m.cfg.Captures
	if store == nil {
		return
	}
	switchAt := time.Time{}
	switch {
	case rep.SwitchAt != nil:
		switchAt = *rep.SwitchAt
	case len(tgt) > 0:
		switchAt = tgt[0].At
	case len(src) > 0:
		switchAt = src[len(src)-1].At
	default:
		return
	}
	var around []sim.MediaDatagram
	for _, d := range append(append([]sim.MediaDatagram(nil), src...), tgt...) {
		if !d.At.Before(switchAt.Add(-captureAround)) && !d.At.After(switchAt.Add(captureAround)) {
			around = append(around, d)
		}
	}
	sort.SliceStable(around, func(i, j int) bool { return around[i].At.Before(around[j].At) })
	if len(around) == 0 {
		return
	}
	ts, leftOut, err := r.m.cfg.MediaJudge.Capture(around, false)
	if err != nil {
		r.recordHere(sideOutput, "the seam capture could not be made: "+err.Error(), nil)
		return
	}
	var joined []sim.MediaDatagram
	for _, d := range tgt {
		if !d.At.After(switchAt.Add(captureAround)) {
			joined = append(joined, d)
		}
	}
	targetTS, targetLeftOut, err := r.m.cfg.MediaJudge.Capture(joined, true)
	if err != nil {
		r.recordHere(sideOutput, "the target's seam capture could not be made: "+err.Error(), nil)
		return
	}
	c := sim.SeamCapture{MigrationID: r.mig.ID, From: around[0].At, To: around[len(around)-1].At, Datagrams: len(around), TS: ts, TargetTS: targetTS,
		RTP: r.m.cfg.MediaJudge.CaptureRTP(around)}
	if err := store.SaveSeamCapture(ctx, c); err != nil {
		r.recordHere(sideOutput, "the seam capture could not be kept: "+err.Error(), nil)
		return
	}
	r.recordHere(sideOutput, captureNote(len(around), c.To.Sub(c.From), leftOut, targetLeftOut), nil)
}

// captureNote is the timeline's word on a seam capture of n datagrams
// over span, leftOut of which seam.ts does not hold (targetLeftOut of the
// target's alone): a player shows nothing of them, and a capture that
// holds only the source's pictures must not pass for the whole seam.
func captureNote(n int, span time.Duration, leftOut, targetLeftOut int) string {
	note := fmt.Sprintf("seam capture kept: %s, %.1f s around the switch (seam.ts)", sim.Plural(int64(n), "datagram"), span.Seconds())
	if leftOut > 0 || targetLeftOut > 0 {
		note += fmt.Sprintf("; left out as no player can read them (no known format, or RTP packets that gave no whole NAL unit): %d of seam.ts, %d of the target's alone (seam.ts?side=target)", leftOut, targetLeftOut)
	}
	return note
}

// SeamCapture is the stream the media receiver got around a migration's
// switch (GET /api/v1/migrations/{id}/seam.ts).
func (m *Manager) SeamCapture(ctx context.Context, migrationID string) (*sim.SeamCapture, error) {
	if _, err := m.MigrationSummary(ctx, migrationID); err != nil {
		return nil, err
	}
	if m.cfg.Captures == nil {
		return nil, sim.Errorf(sim.ENotFound, "migration %q has no seam capture: this normsim keeps none", migrationID)
	}
	return m.cfg.Captures.SeamCapture(ctx, migrationID)
}
