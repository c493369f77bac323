// Package media judges the seam of a job's real video output across a
// migration the way a receiver downstream would: it demuxes what the
// source and the target sent (MPEG-TS over UDP, MPEG-TS in RTP, or H.264
// in RTP per RFC 6184) and checks that presentation time goes on by
// exactly one frame, that the target starts on a keyframe, that the
// tables, PIDs and codec parameters stay, and that continuity counters,
// the PCR and RTP sequence numbers, timestamps and SSRC continue.
//
// Each defect is named by the check a broadcast engineer knows it by:
// the ETSI TR 101 290 item (Sync_byte_error 1.2, PAT_error 1.3a,
// Continuity_count_error 1.4, PMT_error 1.5a, PID_error 1.6,
// PCR_discontinuity_indicator_error 2.3) or RFC 3550 / RFC 6184 for RTP.
// Checks no standard names (PTS continuity, keyframe at join, codec
// parameters) are named plainly. The side at fault comes from the
// handover's moments, as in sim.AnalyzeSeam, and from which side a
// defect shows on.
package media

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/normsim/normsim/sim"
)

const (
	sourceSide = "source"
	targetSide = "target"
	// frameWindow: frames this far either side of the switch are drawn.
	frameWindow = 3 * time.Second
	maxFrames   = 400
)

// Analyze judges the seam between what the receiver got from the source
// (source) and from the target (target), each in arrival order, given the
// handover's moments (zero for strategies that promise none).
func Analyze(source, target []sim.MediaDatagram, at sim.SeamMoments) *sim.MediaReport {
	r := &sim.MediaReport{SourceDatagrams: int64(len(source)), TargetDatagrams: int64(len(target))}
	// What is neither MPEG-TS nor RTP is counted and left out of every
	// check, the moments' too: junk from another sender on the job's
	// port is not the job producing.
	var srcJunk, tgtJunk int64
	source, target = readable(source, &srcJunk), readable(target, &tgtJunk)
	src := readSide(sourceSide, source)
	tgt := readSideAfter(targetSide, target, src)
	src.unreadable, tgt.unreadable = srcJunk, tgtJunk // for the detail of a side that sent nothing readable
	r.Unreadable = srcJunk + tgtJunk
	r.NotRead, r.Ignored = src.interleaved()+tgt.interleaved(), src.ignoredNALs()+tgt.ignoredNALs()
	src.cutStart, tgt.cutEnd = true, true
	splitPESAtSwitch(src, tgt)
	src.buildTSTracks(tgt.ts.pmt)
	tgt.buildTSTracks(src.ts.pmt)
	src.ptsDefects()
	tgt.ptsDefects()
	src.transportErrors()
	tgt.transportErrors()
	src.behindDefects()
	tgt.behindDefects()
	r.Format = formatOf(src, tgt)
	if len(target) > 0 {
		sw := target[0].At
		r.SwitchAt = &sw
	}

	// The handover's promises about moments come first, whatever the
	// streams show.
	var faults []string
	cut := len(source) // source datagrams from cut on came after its stop
	if late := lateDatagrams(source, at); late > 0 && !inFlightByPTS(src, tgt, len(source)-late, source[len(source)-1].At, at) {
		cut = len(source) - late
		r.SourceAfterStop = int64(late)
		faults = append(faults, fmt.Sprintf("the source sent %s after source-stopped-output (the last %.1f ms after it)",
			sim.Plural(r.SourceAfterStop, "datagram"), ms(source[len(source)-1].At.Sub(at.SourceStopped))))
	}
	if !at.ApplySent.IsZero() {
		for _, dg := range target {
			if dg.At.Before(at.ApplySent) {
				r.TargetBeforeApply++
			}
		}
		if r.TargetBeforeApply > 0 {
			faults = append(faults, fmt.Sprintf("the target sent %s before cutover-apply", sim.Plural(r.TargetBeforeApply, "datagram")))
		}
	}
	momentFault := atFault(r.SourceAfterStop > 0, r.TargetBeforeApply > 0)

	if src.readable == 0 || tgt.readable == 0 {
		r.Verdict = sim.VerdictNoOutput
		r.Streams = streamsOneSided(src, tgt)
		r.Defects = append(src.defects, tgt.defects...)
		r.AtFault = momentFault
		parts := []string{fmt.Sprintf("the receiver got %s from the source and %s from the target", readableCount(src), readableCount(tgt))}
		r.Detail = finishDetail(append(parts, faults...), r)
		r.Frames = framesNearSwitch(src, tgt, r.SwitchAt)
		return r
	}

	c := &comparison{src: src, tgt: tgt, cut: cut, momentFault: momentFault}
	c.pairStreams()
	c.judgeStreams()
	c.checkJoin()
	c.checkTables()
	c.checkCounters()
	c.checkCutShort()
	c.checkPCR()
	c.checkRTP()
	c.checkArrival(source[:cut], target, at)
	if len(src.formats) > 0 && len(tgt.formats) > 0 && src.formats[0] != tgt.formats[0] {
		c.defect(sim.MediaCheckFormat, "", "", targetSide, fmt.Sprintf("the source sent %s and the target %s: a receiver set up for one cannot read the other", src.formats[0], tgt.formats[0]))
	}

	r.Streams = c.streams
	r.Defects = slices.Concat(src.defects, c.seamDefects, tgt.defects)
	if v := c.primary(); v != nil {
		r.GapMs, r.OverlapMs, r.FramesMissing, r.FramesRepeated = v.GapMs, v.OverlapMs, v.FramesMissing, v.FramesRepeated
	}
	r.KeyframeAtJoin, r.PictureMissingMs = c.keyframeAtJoin, c.pictureMissingMs

	// Without moments, output the source still sent after the target's
	// first is an overlap in time (as for the JSON seam).
	bothProduced := at.SourceStopped.IsZero() && source[len(source)-1].At.After(target[0].At)
	if bothProduced {
		faults = append(faults, fmt.Sprintf("source and target both sent for %.1f ms", ms(source[len(source)-1].At.Sub(target[0].At))))
	}
	// What normsim did not read may hold the very frames a check finds
	// missing: only the defects no such packet could explain are held
	// against a side then.
	held := r.Defects
	if r.NotRead > 0 {
		held = append(unreadCannotExplain(r.Defects), c.paramsChanged...)
	}
	r.AtFault = momentFault
	if r.AtFault == "" {
		r.AtFault = defectFault(held)
	}

	switch {
	case len(faults) > 0:
		r.Verdict = sim.VerdictOverlap
	case r.NotRead > 0 && len(held) > 0:
		r.Verdict = sim.VerdictGlitch
	case r.NotRead > 0:
		// No verdict on the pictures, and no blame.
		r.Verdict = sim.VerdictUnknown
	case c.anyVerdict(sim.VerdictOverlap):
		r.Verdict = sim.VerdictOverlap
	case c.anyVerdict(sim.VerdictGap):
		r.Verdict = sim.VerdictGap
	case len(r.Defects) > 0:
		r.Verdict = sim.VerdictGlitch
	case c.primary() == nil || c.anyJudgedUnknown() || c.unjudged:
		r.Verdict = sim.VerdictUnknown
	default:
		r.Verdict = sim.VerdictSeamless
	}
	r.Detail = finishDetail(append(faults, c.summary()...), r)
	r.Frames = framesNearSwitch(src, tgt, r.SwitchAt)
	return r
}

// unreadCannotExplain are the defects that no packet normsim did not read
// (interleaved-mode H.264) could explain away: those of the packets'
// numbering, SSRC, timestamps and arrival, of the format and of the TS
// layer. Missing frames, a join without a keyframe, a missing stream, a
// frame rate or fragments whose start never came may all be in packets
// it did not read (an FU-B starts an interleaved fragment).
func unreadCannotExplain(ds []sim.MediaDefect) []sim.MediaDefect {
	var out []sim.MediaDefect
	for _, d := range ds {
		switch d.Check {
		case sim.MediaCheckPTS, sim.MediaCheckKeyframe, sim.MediaCheckStreamMissing, sim.MediaCheckCodecParams, sim.MediaCheckRTPFragments:
		default:
			out = append(out, d)
		}
	}
	return out
}

// readable are the datagrams of a known format; the others are counted
// in unreadable.
func readable(dgs []sim.MediaDatagram, unreadable *int64) []sim.MediaDatagram {
	out := dgs[:0:0]
	for _, d := range dgs {
		if !isReadable(d.Data) {
			*unreadable++
			continue
		}
		out = append(out, d)
	}
	return out
}

// inFlightByPTS reports whether the source's datagrams from cut on, all
// arrived within sim.InFlightByNumber of its source-stopped-output, carry
// only frames presented before the target's first (or the rest of frames
// begun before cut): sent before the frame, and held back by a loaded
// machine, as sim.AnalyzeSeam forgives packets numbered below the
// target's first.
func inFlightByPTS(src, tgt *side, cut int, last time.Time, at sim.SeamMoments) bool {
	if last.Sub(at.SourceStopped) > sim.InFlightByNumber {
		return false
	}
	var first *unit
	var wrap int64
	for _, tr := range tgt.tracks {
		if tr.kind == "video" && len(tr.units) > 0 && tr.units[0].hasPTS {
			first, wrap = &tr.units[0], tr.wrap
			break
		}
	}
	if first == nil {
		return false
	}
	for _, tr := range src.tracks {
		if tr.kind != "video" {
			continue
		}
		for _, u := range tr.units {
			if u.dg >= cut && (!u.hasPTS || wrapDelta(u.pts-first.pts, wrap) >= 0) {
				return false
			}
		}
	}
	return true
}

// lateDatagrams counts the source's datagrams after its
// source-stopped-output once one of them came later than sim.InFlight
// (as sim.AnalyzeSeam's lateSource); 0 without the moment.
func lateDatagrams(src []sim.MediaDatagram, at sim.SeamMoments) int {
	if at.SourceStopped.IsZero() {
		return 0
	}
	cut := sort.Search(len(src), func(i int) bool { return src[i].At.After(at.SourceStopped) })
	if late := src[cut:]; len(late) > 0 && late[len(late)-1].At.Sub(at.SourceStopped) > sim.InFlight {
		return len(late)
	}
	return 0
}

func atFault(source, target bool) string {
	switch {
	case source && target:
		return "source and target"
	case source:
		return sourceSide
	case target:
		return targetSide
	}
	return ""
}

// defectFault is the side the defects name, when no moment was broken.
func defectFault(ds []sim.MediaDefect) string {
	var s, t bool
	for _, d := range ds {
		s = s || strings.Contains(d.AtFault, sourceSide)
		t = t || strings.Contains(d.AtFault, targetSide)
	}
	return atFault(s, t)
}

func formatOf(src, tgt *side) string {
	f := func(s *side) string { return strings.Join(s.formats, "+") }
	switch a, b := f(src), f(tgt); {
	case a == b || b == "":
		return a
	case a == "":
		return b
	default:
		return a + " → " + b
	}
}

func readableCount(s *side) string {
	n := sim.Plural(s.readable, "readable datagram")
	if s.unreadable > 0 {
		n += fmt.Sprintf(" (and %d unreadable)", s.unreadable)
	}
	return n
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func ticksMs(ticks int64) float64 { return float64(ticks) / 90 }

// comparison holds what Analyze compares across the switch.
type comparison struct {
	src, tgt         *side
	cut              int // the source's datagrams before cut were sent up to its stop
	momentFault      string
	pairs            []streamPair
	streams          []sim.MediaStream
	seamDefects      []sim.MediaDefect
	keyframeAtJoin   *bool
	pictureMissingMs *float64
	// paramsChanged are the defects of a codec parameter set the target
	// sent that differs from the source's (not of a frame rate).
	paramsChanged []sim.MediaDefect
	// notes are what was not checked, and why, for the detail.
	notes []string
	// unjudged: a video stream's join could not be checked (a codec
	// normsim does not read, no random_access_indicator), which keeps the
	// verdict from seamless. A seam left unchecked needs no flag: its
	// stream's verdict is unknown (anyJudgedUnknown).
	unjudged bool
}

func codecOrUnknown(codec string) string {
	if codec == "" {
		return "a codec the PMT does not name"
	}
	return codec
}

// streamPair is one elementary stream as both sides sent it; either may
// be nil.
type streamPair struct {
	src, tgt *track
}

// pairStreams matches the sides' streams by PID or SSRC, then what is left
// by kind (a target that moved its video to another PID, or RTP under a
// new SSRC, still continues the source's video).
func (c *comparison) pairStreams() {
	used := map[*track]bool{}
	for _, s := range c.src.tracks {
		p := streamPair{src: s}
		for _, t := range c.tgt.tracks {
			if !used[t] && t.name == s.name {
				p.tgt, used[t] = t, true
				break
			}
		}
		c.pairs = append(c.pairs, p)
	}
	for i := range c.pairs {
		if c.pairs[i].tgt != nil {
			continue
		}
		for _, t := range c.tgt.tracks {
			if !used[t] && t.kind == c.pairs[i].src.kind && c.src.byName(t.name) == nil {
				c.pairs[i].tgt, used[t] = t, true
				break
			}
		}
	}
	for _, t := range c.tgt.tracks {
		if !used[t] {
			c.pairs = append(c.pairs, streamPair{tgt: t})
		}
	}
}

func (s *side) byName(name string) *track {
	for _, t := range s.tracks {
		if t.name == name {
			return t
		}
	}
	return nil
}

// judgeStreams compares each stream's presentation time across the
// switch: the target's first frame should be the source's last plus one
// frame duration.
func (c *comparison) judgeStreams() {
	clock := c.newTimeBase()
	for _, p := range c.pairs {
		st := streamOf(p)
		label := pairLabel(p)
		switch {
		case p.src == nil:
			st.Verdict, st.Detail = sim.VerdictUnknown, "only the target sent this stream"
			c.streams = append(c.streams, st)
			continue
		case p.tgt == nil && p.src.sparse:
			st.Verdict, st.Detail = sim.VerdictUnknown, "a sparse stream: the target sent none of it in the window judged, which it need not"
			c.streams = append(c.streams, st)
			continue
		case p.tgt != nil && (p.src.sparse || p.tgt.sparse):
			// Subtitles, cues, teletext: sent when there is something to
			// say, so a pause is no gap and their steps no frame rate.
			st.Verdict, st.Detail = sim.VerdictUnknown, "a sparse stream, sent only when it has something to say: not judged frame by frame"
			c.streams = append(c.streams, st)
			continue
		case p.tgt == nil:
			st.Verdict, st.Detail = sim.VerdictGap, "the target never sent this stream: it stops at the switch"
			c.defect(sim.MediaCheckStreamMissing, "", label, targetSide, fmt.Sprintf("the target never sent %s, which the source did", label))
			c.streams = append(c.streams, st)
			continue
		}
		// The frames at the switch: the source's last and the target's
		// first, each as many as reordering can shuffle. A leap further
		// in is the side's own (ptsDefects), not the seam's.
		steps := sortedSteps(p.src, p.tgt)
		st.FrameTicks = quantile(steps, 0.5)
		if srcFT, tgtFT := meanFrame(p.src), meanFrame(p.tgt); srcFT > 0 && tgtFT > 0 && p.src.kind == "video" && abs(srcFT-tgtFT)*100 > srcFT {
			// The source's next frame is due one of its own frames on;
			// a display or a downstream encoder set up for the source's
			// rate must adapt to the target's.
			st.FrameTicks = frameTicks(p.src)
			c.defect(sim.MediaCheckCodecParams, "", label, targetSide, fmt.Sprintf("frame rate on %s changed from %s to %s fps", label, fps(srcFT), fps(tgtFT)))
		}
		srcEnd := atSwitch(c.sentBeforeStop(p.src.units), p.src.wrap, st.FrameTicks, true)
		tgtStart := atSwitch(p.tgt.units, p.tgt.wrap, st.FrameTicks, false)
		end, lastOK := extremeUnit(srcEnd, p.src.wrap, true)
		start, firstOK := extremeUnit(tgtStart, p.tgt.wrap, false)
		last, first := end.pts, start.pts
		st.SourceParams, st.TargetParams = lastParams(p.src.units), firstParams(p.tgt.units)
		if st.SourceParams != "" && st.TargetParams != "" && st.SourceParams != st.TargetParams {
			// A decoder set up for the source's SPS must reinitialise.
			c.defect(sim.MediaCheckCodecParams, "", label, targetSide, fmt.Sprintf("codec parameters on %s changed from %s to %s", label, st.SourceParams, st.TargetParams))
			c.paramsChanged = append(c.paramsChanged, c.seamDefects[len(c.seamDefects)-1])
		}
		if !lastOK || !firstOK {
			st.Verdict, st.Detail = sim.VerdictUnknown, "no presentation time on one side"
			c.streams = append(c.streams, st)
			continue
		}
		if n := unplaced(srcEnd) + unplaced(tgtStart); n > 0 {
			st.Verdict = sim.VerdictUnknown
			st.Detail = fmt.Sprintf("%s next to the switch carried no PTS in a stream that reorders (B-frames): where a decoder shows them cannot be read, so the seam is not judged frame by frame", sim.Plural(int64(n), "frame"))
			c.streams = append(c.streams, st)
			continue
		}
		st.LastSourcePTS, st.FirstTargetPTS = &last, &first
		wrap := max(p.src.wrap, p.tgt.wrap)
		step := wrapDelta(first-last, wrap)
		ft := st.FrameTicks
		// The next frame is due one frame on, within a quarter frame; in a
		// stream with a cadence (3:2 pulldown, a variable rate) any step
		// its sides take is one frame.
		shortest, longest := min(ft, quantile(steps, 0.1)), max(ft, quantile(steps, 0.9))
		margin := ft / 4
		rebased := clock.rebased && p.tgt.pid != nil
		if p.src.kind == "audio" && end.dur > 0 && !rebased {
			// Sound is heard frame by frame (audioGaps): the source's last
			// packet plays for its frames' samples, and the target's first
			// is due exactly then, to within half an audio frame. Judged
			// by the packet's step instead, a quarter of a 15-frame PES
			// (80 ms) of sound missing or heard twice passed as seamless.
			ft = end.frame
			step += ft - end.dur // ft when the target is due
			shortest, longest, margin = ft, ft, ft/2
			st.FrameTicks = ft
		}
		if rebased {
			// A new time base: the decoder follows the target's clock, so
			// its first frame shows when that clock, as it arrived, says.
			// Arrival ties the clocks only as closely as the senders pace
			// their datagrams: to within a frame, and their spread.
			step = wrapDelta(first+clock.shift-last, wrap)
			margin = ft - 1 + clock.spread
		}
		stopped := fmt.Sprintf("source stopped at PTS %d (frame %.3f s)", last, float64(last)/90000)
		switch {
		case ft == 0 && step > 0:
			st.Verdict = sim.VerdictUnknown
			st.Detail = fmt.Sprintf("%s, target started at PTS %d, %.1f ms later; too few frames to know the frame duration", stopped, first, ticksMs(step))
		case ft > 0 && step >= shortest-margin && step <= longest+margin && rebased && clock.spread > ft/2:
			// Within what arrival can tell, which is more than a frame:
			// a seamless verdict would be a guess.
			st.Verdict = sim.VerdictUnknown
			st.Detail = fmt.Sprintf("%s, target started at PTS %d on a new clock, %+.1f ms from the next frame's time as arrival places it; the senders' pacing leaves that uncertain by %.0f ms, more than a frame", stopped, first, ticksMs(step-ft), ticksMs(clock.spread))
		case ft > 0 && step >= shortest-margin && step <= longest+margin:
			st.Verdict = sim.VerdictSeamless
			st.Detail = stopped + ", target continued at the next frame"
		case step > ft:
			gap := step - ft
			g := ticksMs(gap)
			n, _ := framesIn(gap, ft)
			st.GapMs, st.FramesMissing = &g, n
			st.Verdict = sim.VerdictGap
			st.Detail = fmt.Sprintf("%s, target started at PTS %d: %s (%.1f ms) missing", stopped, first, sim.Plural(st.FramesMissing, "frame"), g)
			if off := offGridBy(gap, ft); off != 0 && n > 0 {
				st.Detail += fmt.Sprintf(", and the frames after %.1f ms off the source's frame grid", ticksMs(off))
			}
			if st.FramesMissing == 0 {
				// Late by half a frame or less: no picture is missing,
				// but each one after shows that much later.
				st.Detail = fmt.Sprintf("%s, target started at PTS %d: %.1f ms late (less than a frame)", stopped, first, g)
			}
		default:
			over := ft - step
			o := ticksMs(over)
			st.OverlapMs = &o
			st.FramesRepeated, _ = framesIn(over, ft)
			st.Verdict = sim.VerdictOverlap
			st.Detail = fmt.Sprintf("%s, target started at PTS %d: %s (%.1f ms) presented again", stopped, first, sim.Plural(st.FramesRepeated, "frame"), o)
			if st.FramesRepeated == 0 {
				// Early by less than half a frame: its picture is due
				// while the source's last is still on screen (media.md:
				// earlier than the next frame's time is an overlap).
				st.Detail = fmt.Sprintf("%s, target started at PTS %d: %.1f ms early (less than a frame), while the source's last frame is still shown", stopped, first, o)
			}
		}
		if rebased {
			st.Detail += " (the target began a new time base with the discontinuity indicator: its frames judged by its clock as it arrived)"
		}
		if p.src.kind == "audio" && end.dur <= 0 && !rebased && st.Verdict == sim.VerdictSeamless {
			// Within a quarter of a PES's step, which for AC-3 is 56 ms
			// of sound missing or heard twice: not checked, and said so.
			st.Verdict = sim.VerdictUnknown
			why := fmt.Sprintf("its audio frames were not read (%s)", codecOrUnknown(p.src.codec))
			if end.cutShort {
				// Its rest, and with it how long it was to play, never came.
				why = "the source cut its last PES short, so how long that PES was to play is not known"
			}
			st.Detail = fmt.Sprintf("%s, target started at PTS %d, within a quarter of its PES's step (%.1f ms) of the next; %s, so sound missing or heard twice within that was not checked frame by frame", stopped, first, ticksMs(ft), why)
		}
		if st.Verdict == sim.VerdictGap || st.Verdict == sim.VerdictOverlap {
			what := "skipped ahead"
			if st.Verdict == sim.VerdictOverlap {
				what = "went back"
			}
			// A target's start is its own doing, unless the source went on
			// past its stop and so moved the point it should continue from.
			c.defect(sim.MediaCheckPTS, "", label, c.faultOr(targetSide), fmt.Sprintf("presentation time on %s %s at the switch: %s", label, what, st.Detail))
		}
		c.streams = append(c.streams, st)
	}
}

// faultOr is the side the moments blame, else def.
func (c *comparison) faultOr(def string) string {
	if c.momentFault != "" {
		return c.momentFault
	}
	return def
}

// sentBeforeStop are the units the source sent up to its stop (all, when
// nothing came late); its first unit when none did.
func (c *comparison) sentBeforeStop(us []unit) []unit {
	var before []unit
	for _, u := range us {
		if u.dg < c.cut {
			before = append(before, u)
		}
	}
	if len(before) == 0 && len(us) > 0 {
		return us[:1]
	}
	return before
}

// atSwitch are the units next to the switch whose presentation order
// reordering can shuffle: the source's last (end) or the target's first,
// at most maxReorder+1 of them, and none past a leap of the clock.
func atSwitch(us []unit, wrap, ft int64, end bool) []unit {
	if end {
		us = us[max(0, len(us)-maxReorder-1):]
	} else {
		us = us[:min(len(us), maxReorder+1)]
	}
	if ft <= 0 {
		return us
	}
	vals, idx := unwrapped(us, wrap)
	from := 0
	for k := 1; k < len(vals); k++ {
		if abs(vals[k]-vals[k-1]) > maxReorder*ft {
			if !end {
				return us[:idx[k]]
			}
			from = idx[k]
		}
	}
	return us[from:]
}

// unwrapped are the units' PTS made monotonic across the clock's wrap,
// relative to the first; -1 entries (no PTS) are left out.
func unwrapped(us []unit, wrap int64) (vals []int64, idx []int) {
	var prev, acc int64
	started := false
	for i, u := range us {
		if !u.hasPTS {
			continue
		}
		if started {
			acc += wrapDelta(u.pts-prev, wrap)
		}
		prev, started = u.pts, true
		vals, idx = append(vals, acc), append(idx, i)
	}
	return vals, idx
}

// extremeUnit is the unit presented last (last=true) or first among us
// (presentation order, not arrival: B-frames arrive before earlier
// pictures are shown).
func extremeUnit(us []unit, wrap int64, last bool) (unit, bool) {
	vals, idx := unwrapped(us, wrap)
	if len(vals) == 0 {
		return unit{}, false
	}
	best := 0
	for i, v := range vals {
		if last && v > vals[best] || !last && v < vals[best] {
			best = i
		}
	}
	return us[idx[best]], true
}

// frameTicks is the stream's frame duration: the median step between its
// presentation times on either side.
func frameTicks(tracks ...*track) int64 { return quantile(sortedSteps(tracks...), 0.5) }

// sortedSteps are the positive steps between the tracks' presentation
// times (each track in presentation order), sorted.
func sortedSteps(tracks ...*track) []int64 {
	var steps []int64
	for _, t := range tracks {
		vals, _ := unwrapped(t.units, t.wrap)
		slices.Sort(vals)
		for i := 1; i < len(vals); i++ {
			if d := vals[i] - vals[i-1]; d > 0 {
				steps = append(steps, d)
			}
		}
	}
	slices.Sort(steps)
	return steps
}

// meanFrame is a video track's mean frame duration in 90 kHz ticks, its
// steps under two frames long (a missing picture is not a slower rate;
// a cadence's or a variable rate's steps average out): 0 with fewer than
// three.
func meanFrame(tr *track) int64 {
	steps := sortedSteps(tr)
	// The cadence's steps: a step off it (a picture missing, a stream's
	// own step off its grid) is not its rate.
	lo, hi := quantile(steps, 0.1), quantile(steps, 0.9)
	var sum, n int64
	for _, s := range steps {
		if s >= lo && s <= hi {
			sum, n = sum+s, n+1
		}
	}
	if n < 3 {
		return 0
	}
	return sum / n
}

// fps is a frame duration in 90 kHz ticks as frames per second.
func fps(ticks int64) string { return fmt.Sprintf("%.4g", 90000/float64(ticks)) }

// quantile is the q-quantile of sorted steps; 0 for none.
func quantile(sorted []int64, q float64) int64 {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[int(q*float64(len(sorted)-1)+0.5)]
}

func lastParams(us []unit) string {
	for i := len(us) - 1; i >= 0; i-- {
		if us[i].params != "" {
			return us[i].params
		}
	}
	return ""
}

func firstParams(us []unit) string {
	for _, u := range us {
		if u.params != "" {
			return u.params
		}
	}
	return ""
}

func abs(v int64) int64 {
	if v < 0 {
		return -v
	}
	return v
}

func streamOf(p streamPair) sim.MediaStream {
	t := p.tgt
	if t == nil {
		t = p.src
	}
	return sim.MediaStream{PID: t.pid, SSRC: t.ssrc, Kind: t.kind, Codec: t.codec}
}

// pairLabel names a stream for a person: "video PID 256 H.264", and both
// names when the sides sent it under different ones.
func pairLabel(p streamPair) string {
	t := p.src
	if t == nil {
		t = p.tgt
	}
	name := t.name
	if p.src != nil && p.tgt != nil && p.src.name != p.tgt.name {
		name = p.src.name + " → " + p.tgt.name
	}
	return strings.TrimSpace(strings.Join([]string{t.kind, name, t.codec}, " "))
}

// primary is the video stream's seam (the first stream's without video).
func (c *comparison) primary() *sim.MediaStream {
	for i, p := range c.pairs {
		if p.src != nil && p.tgt != nil && p.src.kind == "video" {
			return &c.streams[i]
		}
	}
	for i, p := range c.pairs {
		if p.src != nil && p.tgt != nil {
			return &c.streams[i]
		}
	}
	return nil
}

// anyJudgedUnknown: a stream both sides sent has no verdict, its seam
// unread (a second video's as much as the first's): seamless would be a
// guess. A stream only one side sent is judged by the checks of streams.
func (c *comparison) anyJudgedUnknown() bool {
	for i, p := range c.pairs {
		if p.src != nil && p.tgt != nil && !p.src.sparse && !p.tgt.sparse && c.streams[i].Verdict == sim.VerdictUnknown {
			return true
		}
	}
	return false
}

func (c *comparison) anyVerdict(v string) bool {
	for _, s := range c.streams {
		if s.Verdict == v {
			return true
		}
	}
	return false
}

func (c *comparison) defect(check, standard, stream, fault, detail string) {
	c.seamDefects = append(c.seamDefects, sim.MediaDefect{Check: check, Standard: standard, Stream: stream, AtFault: fault, Detail: detail})
}

// checkJoin: a fresh encoder cannot continue the source's GOP, so each of
// the target's video streams must start on a frame a decoder can start
// from; otherwise its picture is missing until its first keyframe. A
// receiver tuned to any of the programs sees its own stream's join.
func (c *comparison) checkJoin() {
	var videos []*track
	for _, t := range c.tgt.tracks {
		if t.kind == "video" && len(t.units) > 0 {
			videos = append(videos, t)
		}
	}
	for _, v := range videos {
		c.checkJoinOf(v, len(videos) > 1)
	}
}

// missPicture counts ms of picture missing at the join: the longest of
// every stream's and the tables'.
func (c *comparison) missPicture(ms float64) {
	if c.pictureMissingMs == nil || *c.pictureMissingMs < ms {
		c.pictureMissingMs = &ms
	}
}

// joined records one video stream's join: keyframeAtJoin holds only when
// every stream's does.
func (c *comparison) joined(key bool) {
	if c.keyframeAtJoin == nil || !key {
		c.keyframeAtJoin = &key
	}
}

// checkJoinOf checks one video stream's join; named: the detail names
// the stream, as the target sent more than one.
func (c *comparison) checkJoinOf(video *track, named bool) {
	if neededSets(video.codec) == 0 && !slices.ContainsFunc(video.units, func(u unit) bool { return u.key }) {
		// Neither its pictures (a codec normsim does not read) nor the
		// muxer (no random_access_indicator) say where a decoder can
		// start: no verdict on the join, rather than a wrong one.
		c.unjudged = true
		c.notes = append(c.notes, fmt.Sprintf("the join on %s was not checked: normsim does not read %s pictures, and no packet of the target's carried the random_access_indicator", video.name, codecOrUnknown(video.codec)))
		return
	}
	ready, hasSets, setsMissing := startable(video)
	key := ready[0] && !c.leadingPicturesLost(video)
	c.joined(key)
	if ready[0] {
		// Joined where a decoder can start: whole, or with its leading
		// pictures lost (leadingPicturesLost said so).
		return
	}
	vals, idx := unwrapped(video.units, video.wrap)
	// Pictures a decoder cannot show are missing from the target's first
	// in presentation order: B-pictures that arrive after its first
	// picture are shown before it (an H.264 open GOP's leading pictures).
	// Only those reordering can put first: later the stream may loop to
	// a new time base, whose smaller PTS are shown after.
	shown := int64(0)
	if len(vals) > 0 {
		shown = slices.Min(vals[:min(len(vals), maxReorder+1)])
	}
	var missing int64
	until := "its first keyframe"
	switch video.codec {
	case codecH264:
		until = "its first IDR"
	case codecH265:
		until = "its first IRAP picture"
	case codecMPEG1Video, codecMPEG2Video, codecMPEGVideo:
		until = "its first I-picture"
	}
	if setsMissing {
		until += " after " + setNames(video.codec)
	}
	found := false
	for i, ui := range idx {
		if ready[ui] {
			missing, found = vals[i], true
			break
		}
	}
	// An intra-refresh stream has no IDR after its first: a decoder that
	// starts at a recovery point shows correct pictures recovery_frame_cnt
	// frames on, if that comes before a keyframe.
	for i, ui := range idx {
		u := video.units[ui]
		if !u.recovery || !hasSets[ui] {
			continue
		}
		if at := vals[i] + int64(u.recoveryFrames)*frameTicks(video); !found || at < missing {
			missing, found = at, true
			until = fmt.Sprintf("the recovery point at PTS %d is complete (%s on, an intra refresh)", u.pts, sim.Plural(int64(u.recoveryFrames), "frame"))
			if u.recoveryFrames == 0 {
				// x264's open GOP: an I-picture with a recovery point,
				// whose leading pictures refer to the GOP before it.
				until = fmt.Sprintf("the recovery point at PTS %d (an open GOP's I-picture: the pictures shown before it refer to the GOP before, which the target never sent)", u.pts)
			}
		}
		break
	}
	if !found && len(vals) > 0 {
		// Missing through the last frame it sent, that frame included.
		until = "the end of what it sent: no keyframe came"
		if setsMissing && !hasSets[len(video.units)-1] {
			until = "the end of what it sent: no " + setNames(video.codec) + " came"
		}
		missing = slices.Max(vals) + frameTicks(video)
	}
	missing = max(missing-shown, 0)
	m := ticksMs(missing)
	c.missPicture(m)
	how := "target joined mid-GOP"
	if video.units[0].key {
		how = "target joined on a keyframe without " + setNames(video.codec) + ", which MPEG-TS carries in the stream"
	}
	if named {
		how += " on " + video.name
	}
	c.defect(sim.MediaCheckKeyframe, "", video.name, targetSide, fmt.Sprintf("%s: picture missing %.0f ms until %s", how, m, until))
}

// leadingPicturesLost: an H.265 target that starts on a CRA (or BLA)
// followed by RASL pictures starts where a decoder can, but those
// pictures refer to ones before the CRA that a fresh encoder never sent:
// a decoder joining there drops them (H.265 8.1.3, NoRaslOutputFlag), and
// one going on from the source decodes them against the source's pictures.
// An MPEG-1/2 I-picture outside a closed GOP is the same: the B-pictures
// that follow it before the next I- or P-picture refer to the GOP before
// (ISO 13818-2 6.3.8, closed_gop). Their time, from the earliest to the
// keyframe, is picture missing.
func (c *comparison) leadingPicturesLost(video *track) bool {
	irap := video.units[0]
	mpeg := isMPEGVideo(video.codec)
	if (video.codec != codecH265 && !mpeg) || !irap.openIRAP {
		return false
	}
	var rasl []unit
	for _, u := range video.units[1:] {
		if u.key || (mpeg && !u.rasl) {
			break
		}
		if u.rasl {
			rasl = append(rasl, u)
		}
	}
	if len(rasl) == 0 {
		return false
	}
	earliest, _ := extremeUnit(rasl, video.wrap, false)
	latest, _ := extremeUnit(rasl, video.wrap, true)
	missing := wrapDelta(irap.pts-earliest.pts, video.wrap)
	if missing <= 0 || !earliest.hasPTS || !irap.hasPTS {
		missing = int64(len(rasl)) * frameTicks(video)
	}
	m := ticksMs(missing)
	c.missPicture(m)
	what := fmt.Sprintf("an open-GOP random-access picture (H.265 CRA or BLA) followed by %s", sim.Plural(int64(len(rasl)), "RASL picture"))
	if mpeg {
		what = fmt.Sprintf("an I-picture outside a closed GOP followed by %s", sim.Plural(int64(len(rasl)), "B-picture"))
	}
	c.defect(sim.MediaCheckKeyframe, "", video.name, targetSide, fmt.Sprintf(
		"target joined on %s (PTS %d to %d), which refer to pictures before it that the target never sent: a decoder joining there drops them, picture missing %.0f ms, and one going on from the source decodes them against the source's pictures",
		what, earliest.pts, latest.pts, m))
	return true
}

// startable says for each of a target's video units whether a decoder
// that joins at the target has its parameter sets by then (hasSets) and
// can start there (ready: a keyframe too). MPEG-TS carries the parameter
// sets in the stream; RTP may carry them out of band, in SDP, so there
// they are not asked for. setsMissing says that a keyframe came before
// its parameter sets did.
func startable(video *track) (ready, hasSets []bool, setsMissing bool) {
	need := neededSets(video.codec)
	if video.units[0].pkt < 0 {
		need = 0
	}
	var have uint8
	ready, hasSets = make([]bool, len(video.units)), make([]bool, len(video.units))
	for i, u := range video.units {
		have |= u.sets
		hasSets[i] = have&need == need
		ready[i] = u.key && hasSets[i]
		if u.key && !ready[i] {
			setsMissing = true
		}
	}
	return ready, hasSets, setsMissing
}

// setNames names the parameter sets a decoder of codec needs.
func setNames(codec string) string {
	switch codec {
	case codecH265:
		return "VPS, SPS and PPS"
	case codecMPEG1Video, codecMPEG2Video, codecMPEGVideo:
		return "a sequence header"
	}
	return "SPS and PPS"
}

// checkTables: a receiver finds the program through the PAT and PMT, so
// the target must send them before its first PES, with the source's PIDs
// and stream types, and send every PID its PMT names.
func (c *comparison) checkTables() {
	src, tgt := &c.src.ts, &c.tgt.ts
	if tgt.firstPES < 0 {
		return
	}
	patLate := tgt.firstPAT < 0 || tgt.firstPAT > tgt.firstPES
	pmtLate := tgt.firstPMT < 0 || tgt.firstPMT > tgt.firstPES
	after := ""
	if patLate || pmtLate {
		after = c.pictureAfterTables()
	}
	if patLate {
		c.defect(sim.MediaCheckPAT, "TR 101 290 1.3a", "PID 0", targetSide, "the target sent no PAT before its first PES"+after)
		after = "" // said once
	}
	if pmtLate {
		c.defect(sim.MediaCheckPMT, "TR 101 290 1.5a", "", targetSide, "the target sent no PMT before its first PES"+after)
	}
	for _, n := range src.programs {
		// A receiver is tuned to a program by its number.
		if len(tgt.programs) > 0 && !slices.Contains(tgt.programs, n) {
			c.defect(sim.MediaCheckPAT, "ISO 13818-1 2.4.4.3", "PID 0", targetSide, fmt.Sprintf("the target's PAT has no program %d, which the source's listed (the target's lists %s): a receiver tuned to program %d loses it", n, programList(tgt.programs), n))
		}
	}
	for _, pid := range src.pmtPIDs {
		if len(tgt.pmtPIDs) > 0 && !slices.Contains(tgt.pmtPIDs, pid) {
			c.defect(sim.MediaCheckPMT, "TR 101 290 1.5a", fmt.Sprintf("PID %d", pid), targetSide, fmt.Sprintf("the target never sent the PMT on PID %d that the source did: a receiver tuned to that program finds none", pid))
		}
	}
	if len(src.pmt) > 0 && len(tgt.pmt) > 0 && !slices.EqualFunc(sortedPMT(src.pmt), sortedPMT(tgt.pmt), func(a, b pmtStream) bool { return a.pid == b.pid && a.typ == b.typ }) {
		c.defect(sim.MediaCheckPIDs, "", "", targetSide, fmt.Sprintf("changed PIDs/stream types: the source's PMT listed %s, the target's %s", pmtText(src.pmt), pmtText(tgt.pmt)))
	}
	sent := func(ts *tsState) map[uint16]bool {
		pids := map[uint16]bool{}
		for _, p := range ts.pkts {
			pids[p.pid] = true
		}
		return pids
	}
	tgtSent, srcSent := sent(tgt), sent(src)
	for _, es := range tgt.pmt {
		_, srcNamed := streamType(es.pid, src.pmt, nil)
		switch {
		case tgtSent[es.pid]:
		case es.sparse():
			c.notes = append(c.notes, fmt.Sprintf("the target sent nothing on PID %d (%s), a sparse stream that sends only when it has something to say: not held to arrive within the window judged", es.pid, es.typ))
		case srcNamed && !srcSent[es.pid]:
			c.notes = append(c.notes, fmt.Sprintf("neither side sent PID %d (%s), which both PMTs name: nothing of it to continue", es.pid, es.typ))
		default:
			c.defect(sim.MediaCheckPID, "TR 101 290 1.6", fmt.Sprintf("PID %d", es.pid), targetSide, fmt.Sprintf("the target's PMT names PID %d (%s), which it never sent", es.pid, es.typ))
		}
	}
}

func programList(ns []uint16) string {
	parts := make([]string, len(ns))
	for i, n := range ns {
		parts[i] = strconv.Itoa(int(n))
	}
	return strings.Join(parts, ", ")
}

// pictureAfterTables is, for a target whose tables came after its first
// PES, what a receiver that joins at the target (tuning in then, or
// resetting at the switch as many do) shows: it finds the program only
// once it has the PAT and the PMT, and a picture from the first keyframe
// after both. It counts that time in pictureMissingMs (the longer of it
// and a join off a keyframe) and says it, for the defect's detail; "" when
// the target sent no video.
func (c *comparison) pictureAfterTables() string {
	ts := &c.tgt.ts
	var video *track
	for _, t := range c.tgt.tracks {
		if t.kind == "video" && len(t.units) > 0 && t.units[0].pkt >= 0 {
			video = t
			break
		}
	}
	if video == nil {
		return ""
	}
	vals, idx := unwrapped(video.units, video.wrap)
	if len(vals) == 0 {
		return ""
	}
	missing, until := int64(-1), ""
	if ts.firstPAT >= 0 && ts.firstPMT >= 0 {
		tables := max(ts.firstPAT, ts.firstPMT)
		for i, ui := range idx {
			if u := video.units[ui]; u.key && u.pkt > tables {
				missing, until = vals[i], "its first keyframe after them"
				break
			}
		}
	}
	if missing < 0 {
		missing, until = slices.Max(vals)+frameTicks(video), "the end of what it sent"
	}
	m := ticksMs(max(missing, 0))
	c.missPicture(m)
	return fmt.Sprintf(": a receiver joining at the target finds no program and shows no picture for %.0f ms, until %s", m, until)
}

func sortedPMT(ps []pmtStream) []pmtStream {
	out := slices.Clone(ps)
	slices.SortFunc(out, func(a, b pmtStream) int { return int(a.pid) - int(b.pid) })
	return out
}

func pmtText(ps []pmtStream) string {
	var parts []string
	for _, es := range sortedPMT(ps) {
		_, codec := describeStream(es)
		parts = append(parts, fmt.Sprintf("PID %d %s", es.pid, codec))
	}
	return strings.Join(parts, ", ")
}

// checkCounters: on each PID the target's first counter should follow the
// source's last, unless the target flags the discontinuity.
func (c *comparison) checkCounters() {
	last := map[uint16]uint8{}
	for _, p := range c.src.ts.pkts {
		if p.payload && p.pid != 0x1fff {
			last[p.pid] = p.cc
		}
	}
	cutShort := c.src.cutShortPES()
	seen := map[uint16]bool{}
	for _, p := range c.tgt.ts.pkts {
		if !p.payload || p.pid == 0x1fff || seen[p.pid] {
			continue
		}
		seen[p.pid] = true
		prev, ok := last[p.pid]
		want := (prev + 1) % 16
		if !ok || p.di || p.cc == want {
			continue
		}
		detail := fmt.Sprintf("continuity counter on PID %d went %d→%d (expected %d) without the discontinuity indicator", p.pid, prev, p.cc, want)
		fault := targetSide
		skipped := int((p.cc - want) & 0x0f)
		if pu, ok := cutShort[p.pid]; ok && packetsFor(pu.missing, skipped) {
			// The source stopped in a PES that declared its length, and
			// the target starts its own there: the packets the counter
			// skipped are as many as the rest of that PES needs, which
			// the source counted and never sent (checkCutShort).
			fault = sourceSide
			detail += fmt.Sprintf(": the %s it skipped are the %d bytes the source's last PES there lacked, which the source cut short", sim.Plural(int64(skipped), "packet"), pu.missing)
		}
		c.defect(sim.MediaCheckCC, "TR 101 290 1.4", fmt.Sprintf("PID %d", p.pid), fault, detail)
	}
}

// packetsFor says whether skipped, a counter's jump (modulo 16), is as
// many packets as missing bytes of a PES fill: 184 bytes of payload a
// packet, down to 176 in a packet that also carries a PCR.
func packetsFor(missing, skipped int) bool {
	for n := (missing + 183) / 184; n <= (missing+175)/176; n++ {
		if n%16 == skipped {
			return true
		}
	}
	return false
}

// cutShortPES are, by PID, the PES the side stopped in short of the
// length their headers declared, the target sending no rest that made
// them whole (splitPESAtSwitch).
func (s *side) cutShortPES() map[uint16]pesUnit {
	out := map[uint16]pesUnit{}
	for _, pu := range s.ts.pes {
		if pu.cutShort {
			out[pu.pid] = pu
		}
	}
	return out
}

// checkCutShort: a PES whose header declared its length (audio's, and
// video's from a muxer that declares it) and that the source stopped in
// before that many bytes came, the target starting a PES of its own
// there, is a frame the source cut short: a decoder gets it short
// (ffmpeg: "PES packet size mismatch") and plays or shows it damaged, if
// at all. So is one the target went on with by fewer bytes than it
// lacked, and those bytes are the target's damage: a decoder takes them
// into that PES, still short. Bytes the target went on with past what it
// lacked complete it, and the ones after are the target's damage too:
// no decoder reads them (splitPESAtSwitch). Where the length is 0,
// unbounded, as most muxers send video, a PES ends wherever the next
// begins, and a frame cut short cannot be told from a whole one.
func (c *comparison) checkCutShort() {
	byPID := map[uint16]pesUnit{}
	for _, pu := range c.src.ts.pes {
		if pu.cutShort || pu.rest > 0 {
			byPID[pu.pid] = pu
		}
	}
	for _, pid := range slices.Sorted(maps.Keys(byPID)) {
		pu, name := byPID[pid], fmt.Sprintf("PID %d", pid)
		label := name
		if tr := c.src.byName(name); tr != nil {
			label = pairLabel(streamPair{src: tr})
		}
		at := "without a PTS"
		if pu.hasPTS {
			at = fmt.Sprintf("at PTS %d", pu.pts)
		}
		if pu.cutShort {
			then := "the target started a PES of its own there"
			if pu.rest > 0 {
				then = fmt.Sprintf("the target's first packets there went on with it by %s only", sim.Plural(int64(pu.rest), "byte"))
			}
			c.defect(sim.MediaCheckUnreadable, "ISO 13818-1 2.4.3.7", name, sourceSide, fmt.Sprintf(
				"the source stopped in its last PES on %s (%s) %s short of the length its header declared, and %s: the source cut that frame short, and a decoder gets it short and plays or shows it damaged, if at all",
				label, at, sim.Plural(int64(pu.missing), "byte"), then))
		}
		switch {
		case pu.rest > 0 && pu.rest < pu.lacked:
			c.defect(sim.MediaCheckUnreadable, "ISO 13818-1 2.4.3.7", name, targetSide, fmt.Sprintf(
				"the target's first packets on %s went on with the source's last PES there (%s) by %s where it lacked %d: a rest that does not complete it, which a decoder takes into that PES, still short of its length, and decodes damaged, if at all",
				label, at, sim.Plural(int64(pu.rest), "byte"), pu.lacked))
		case pu.rest > pu.lacked:
			c.defect(sim.MediaCheckUnreadable, "ISO 13818-1 2.4.3.7", name, targetSide, fmt.Sprintf(
				"the target's first packets on %s went on with the source's last PES there (%s) by %s where it lacked %d: a decoder completes that PES with the first %d and reads none of the %s after them, which belong to no PES",
				label, at, sim.Plural(int64(pu.rest), "byte"), pu.lacked, pu.lacked, sim.Plural(int64(pu.rest-pu.lacked), "byte")))
		}
	}
}

// newTimeBase says whether the target began a new time base at the switch
// (the discontinuity indicator on its PCR PID, and a first PCR that
// continues the source's clock neither closely nor by the time between
// their arrivals), and if so what to add to the target's PTS to put it on
// the source's clock: a decoder rebases there and presents the target's
// frames by its new clock as it arrives, so the seam is where that puts
// the target's first frame after the source's last, in time. Each clock
// is tied to arrival by its latest PCR in a second next to the switch (a
// datagram carrying several frames brings the later ones early).
func (c *comparison) newTimeBase() (tb switchClock) {
	src, tgt := c.src.ts.clock, c.tgt.ts.clock
	if len(src) == 0 || len(tgt) == 0 || !tgt[0].flagged() {
		return tb
	}
	last, first := src[len(src)-1], tgt[0]
	src = src[sinceWindow(src, last.at.Add(-clockWindow)):]
	tgt = tgt[:sinceWindow(tgt, first.at.Add(clockWindow+1))]
	if pcrContinues(last.pcr, first.pcr) || clockRunsOn(src, first) {
		return tb
	}
	// Each reference PCR's clock instant came lag after it arrived (the
	// latest of a second: a datagram carrying several brings the later
	// ones early): a target PTS x shows at first.at + tgtLag + (x - first's
	// PCR), which the source's clock, from last.at + srcLag, reads as x +
	// shift. How much the lags spread is how closely arrival ties the
	// two clocks.
	srcLag, srcSpread := lagOf(src, last)
	tgtLag, tgtSpread := lagOf(tgt, first)
	arrival := int64(first.at.Sub(last.at)) * 90000 / int64(time.Second)
	return switchClock{rebased: true, shift: (last.pcr-first.pcr)/300 + arrival + tgtLag - srcLag, spread: srcSpread + tgtSpread}
}

// sinceWindow is the index of the first sample that arrived at or after t.
func sinceWindow(cs []clockSample, t time.Time) int {
	i, _ := slices.BinarySearchFunc(cs, t, func(c clockSample, t time.Time) int { return c.at.Compare(t) })
	return i
}

// switchClock is how the target's clock meets the source's at the switch
// (newTimeBase): rebased when the target began a new time base, shift
// what puts its PTS on the source's clock, spread (ticks) how far the
// senders' pacing leaves that uncertain.
type switchClock struct {
	rebased       bool
	shift, spread int64
}

// lagOf is how late, in 90 kHz ticks, the latest of ps arrived behind
// its clock, counted from ref; and how far the others spread below it.
func lagOf(ps []clockSample, ref clockSample) (lag, spread int64) {
	lo, hi := int64(math.MaxInt64), int64(math.MinInt64)
	for _, p := range ps {
		l := int64(p.at.Sub(ref.at))*90000/int64(time.Second) - wrapDelta(p.pcr-ref.pcr, pcrWrap)/300
		lo, hi = min(lo, l), max(hi, l)
	}
	return hi, hi - lo
}

// checkPCR: the target's first PCR should continue the source's clock
// (0–100 ms on), unless the target flags the discontinuity.
func (c *comparison) checkPCR() {
	src, tgt := c.src.ts.clock, c.tgt.ts.clock
	if len(src) == 0 || len(tgt) == 0 {
		return
	}
	last, first := src[len(src)-1], tgt[0]
	if !first.flagged() && !pcrContinues(last.pcr, first.pcr) {
		c.defect(sim.MediaCheckPCR, "TR 101 290 2.3", fmt.Sprintf("PID %d", first.pid), targetSide,
			fmt.Sprintf("the PCR jumped %s from the source's last to the target's first without the discontinuity indicator", pcrStep(last.pcr, first.pcr)))
	}
}

// checkRTP: across the switch a receiver wants the same SSRC, the next
// sequence number and a timestamp that goes on (RFC 3550).
func (c *comparison) checkRTP() {
	s, t := c.src.lastRTP, c.tgt.firstRTP
	if s == nil || t == nil {
		return
	}
	stream := fmt.Sprintf("SSRC 0x%08x", s.ssrc)
	if s.ssrc != t.ssrc {
		c.defect(sim.MediaCheckSSRC, "RFC 3550", stream, targetSide,
			fmt.Sprintf("the target sent SSRC 0x%08x where the source sent 0x%08x: a receiver takes it for a new source and resets", t.ssrc, s.ssrc))
		return
	}
	if t.seq != s.seq+1 {
		c.defect(sim.MediaCheckRTPSeq, "RFC 3550", stream, targetSide,
			fmt.Sprintf("RTP sequence number went %d→%d across the switch (%s)", s.seq, t.seq, seqJump(s.seq, t.seq)))
	}
	// H.264's timestamps are its PTS, judged as such; for MP2T the
	// timestamp is the sender's clock and must not run back or leap.
	if t.mp2t {
		d := wrapDelta(int64(t.ts)-int64(s.ts), rtpWrap)
		allowed := int64(ms(t.at.Sub(s.at))*90) + 100*90
		if d < 0 || d > allowed {
			c.defect(sim.MediaCheckRTPTimestamp, "RFC 3550", stream, targetSide,
				fmt.Sprintf("RTP timestamp went %d→%d across the switch (%+.1f ms)", s.ts, t.ts, ticksMs(d)))
		}
	}
}

// stallLimit is how much later than presentation time allows media may
// arrive before a live receiver's buffer runs dry and its picture
// freezes: players hold about half a second to a second of a live stream
// (VLC's network caching is 1 s); beyond half a second, many freeze.
const stallLimit = 500 * time.Millisecond

// checkArrival judges what a file cannot show: when the media came. The
// target's first datagram must come about when presentation time says
// its frame is due after the source's last, and the target must go on
// sending until the seam is judged (at.JudgedAt).
func (c *comparison) checkArrival(source, target []sim.MediaDatagram, at sim.SeamMoments) {
	if len(source) == 0 || len(target) == 0 {
		return
	}
	lastSrc, firstTgt := source[len(source)-1].At, target[0].At
	var due time.Duration // what presentation time allows between them
	if v := c.primary(); v != nil {
		due = time.Duration(v.FrameTicks) * time.Second / 90000
		if v.GapMs != nil && *v.GapMs > 0 {
			due += time.Duration(*v.GapMs * float64(time.Millisecond)) // frames missing: said as a gap already
		}
	}
	if late := firstTgt.Sub(lastSrc) - due; late > stallLimit {
		// The side that went quiet for longer: the source before its
		// source-stopped-output, or the target after its cutover-apply.
		fault := targetSide
		if !at.SourceStopped.IsZero() && !at.ApplySent.IsZero() && at.SourceStopped.Sub(lastSrc) > firstTgt.Sub(at.ApplySent) {
			fault = sourceSide
		}
		c.defect(sim.MediaCheckArrival, "", "", fault, fmt.Sprintf("the target's first datagram came %.0f ms after the source's last, %.0f ms later than presentation time allows: a live receiver holding less than that runs dry, and its picture freezes", ms(firstTgt.Sub(lastSrc)), ms(late)))
	}
	if !at.JudgedAt.IsZero() {
		last := target[len(target)-1].At
		if quiet := at.JudgedAt.Sub(last); quiet > stallLimit {
			c.defect(sim.MediaCheckArrival, "", "", targetSide, fmt.Sprintf("the target stopped sending %.0f ms after its first datagram, and sent nothing in the %.0f ms until the seam was judged: the picture freezes on its last frame", ms(last.Sub(firstTgt)), ms(quiet)))
		}
	}
}

func seqJump(from, to uint16) string {
	d := int16(to - from - 1)
	if d > 0 {
		return fmt.Sprintf("%d missing", d)
	}
	return fmt.Sprintf("back by %d", -int(d))
}

// summary is the report's detail line: the video seam, the join, the
// counters, then every other defect.
func (c *comparison) summary() []string {
	var parts []string
	primary := c.primary()
	var primaryLabel string
	if primary != nil {
		for i, p := range c.pairs {
			if &c.streams[i] == primary {
				primaryLabel = pairLabel(p)
			}
		}
		parts = append(parts, primaryLabel+": "+primary.Detail)
	}
	if c.keyframeAtJoin != nil && *c.keyframeAtJoin {
		parts = append(parts, "keyframe at join")
	}
	for _, d := range c.allDefects() {
		if d.Check == sim.MediaCheckPTS && d.Stream == primaryLabel && slices.Contains(c.seamDefects, d) {
			continue // the seam's own, said above; a break within a side is not
		}
		s := d.Detail
		if d.Standard != "" {
			s += " (" + d.Standard + ")"
		}
		parts = append(parts, s)
	}
	if len(c.src.ts.pkts) > 0 && len(c.tgt.ts.pkts) > 0 && !c.hasCheck(sim.MediaCheckCC) {
		parts = append(parts, "counters continue")
	}
	parts = append(parts, c.notes...)
	for _, sd := range []*side{c.src, c.tgt} {
		if n := sd.ts.duplicates; n > 0 {
			parts = append(parts, fmt.Sprintf("the %s sent %s twice, identical; the copies were dropped, as a receiver drops them (ISO 13818-1 2.4.3.3)", sd.name, sim.Plural(int64(n), "TS packet")))
		}
		copies := 0
		for _, rt := range sd.rtp {
			copies += rt.copies
		}
		if copies > 0 {
			parts = append(parts, fmt.Sprintf("the %s sent %s twice, identical; the copies were dropped, as a receiver's jitter buffer drops them (RFC 3550)", sd.name, sim.Plural(int64(copies), "RTP packet")))
		}
	}
	return parts
}

func (c *comparison) allDefects() []sim.MediaDefect {
	return slices.Concat(c.src.defects, c.seamDefects, c.tgt.defects)
}

func (c *comparison) hasCheck(check string) bool {
	return slices.ContainsFunc(c.allDefects(), func(d sim.MediaDefect) bool { return d.Check == check })
}

// finishDetail joins the parts and says what could not be read.
func finishDetail(parts []string, r *sim.MediaReport) string {
	if r.Unreadable > 0 {
		parts = append(parts, fmt.Sprintf("%s neither MPEG-TS nor RTP, not judged", sim.Plural(r.Unreadable, "datagram")))
	}
	if r.NotRead > 0 {
		parts = append(parts, fmt.Sprintf("%s of H.264's interleaved mode (STAP-B, MTAP or FU-B: packetization-mode 2) not read: normsim reads modes 0 and 1 only, so the pictures are not judged",
			sim.Plural(r.NotRead, "RTP packet")))
	}
	if r.Ignored > 0 {
		parts = append(parts, fmt.Sprintf("%s of a NAL unit type RFC 6184 leaves undefined (0, 30, 31) ignored, as a receiver does", sim.Plural(r.Ignored, "RTP packet")))
	}
	return strings.Join(parts, "; ")
}

// streamsOneSided lists the streams when only one side sent anything.
func streamsOneSided(src, tgt *side) []sim.MediaStream {
	var out []sim.MediaStream
	for _, s := range []*side{src, tgt} {
		for _, t := range s.tracks {
			st := sim.MediaStream{PID: t.pid, SSRC: t.ssrc, Kind: t.kind, Codec: t.codec, FrameTicks: frameTicks(t), Verdict: sim.VerdictNoOutput}
			if s == src {
				if u, ok := extremeUnit(t.units, t.wrap, true); ok {
					st.LastSourcePTS = &u.pts
				}
			} else if u, ok := extremeUnit(t.units, t.wrap, false); ok {
				st.FirstTargetPTS = &u.pts
			}
			st.Detail = "only the " + s.name + " sent this stream"
			out = append(out, st)
		}
	}
	return out
}

// framesNearSwitch are both sides' frames within frameWindow of the
// switch, the nearest maxFrames of them.
func framesNearSwitch(src, tgt *side, switchAt *time.Time) []sim.MediaFrame {
	var frames []sim.MediaFrame
	for _, s := range []*side{src, tgt} {
		for _, t := range s.tracks {
			for _, u := range t.units {
				if switchAt != nil && (u.at.Before(switchAt.Add(-frameWindow)) || u.at.After(switchAt.Add(frameWindow))) {
					continue
				}
				frames = append(frames, sim.MediaFrame{Side: s.name, At: u.at, Stream: t.name, PTS: u.pts, Key: u.key})
			}
		}
	}
	slices.SortStableFunc(frames, func(a, b sim.MediaFrame) int { return a.At.Compare(b.At) })
	if len(frames) <= maxFrames {
		return frames
	}
	// Keep the frames nearest the switch, half on either side of it.
	at := len(frames)
	if switchAt != nil {
		at = sort.Search(len(frames), func(i int) bool { return !frames[i].At.Before(*switchAt) })
	}
	lo := max(0, min(at-maxFrames/2, len(frames)-maxFrames))
	return frames[lo : lo+maxFrames]
}
