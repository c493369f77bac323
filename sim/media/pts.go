package media

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/normsim/normsim/sim"
)

// maxReorder is how many frames a picture may be presented before one
// decoded ahead of it: H.264's and H.265's decoded picture buffer holds
// at most 16, so a PTS further back than that in arrival order is a jump.
const maxReorder = 16

// ptsDefects checks presentation time within each of the side's streams,
// as a player does between frames: the first frame of the target and
// the last of the source say nothing about a leap after them. In
// presentation order a video stream's frames are one frame duration
// apart, so a wider step is pictures missing and a repeated time is a
// picture shown twice; in arrival order a step back beyond the reorder
// window is time going back. Audio is held to the jumps alone (a PES
// may carry several audio frames). The discontinuity indicator starts
// a new time base.
func (s *side) ptsDefects() {
	for _, tr := range s.tracks {
		steps := sortedSteps(tr)
		ft := quantile(steps, 0.5)
		if ft <= 0 || tr.kind != "video" && tr.kind != "audio" {
			continue
		}
		// Pictures are missing where a step is wider than the stream's
		// short one allows: with 3:2 pulldown's cadence the median is a
		// frame and a half. A stream of one step (a fixed rate) is held
		// to it: a step off its grid is a picture shown too long or too
		// briefly.
		j := ptsJumps{frame: quantile(steps, 0.1), regular: regularSteps(steps)}
		segs := segments(tr.units)
		for k, seg := range segs {
			j.unplaced = unplaced(seg)
			j.check(seg, tr.wrap, ft, tr.kind == "video", s.cutStart && k == 0, s.cutEnd && k == len(segs)-1)
			if tr.kind == "audio" {
				j.audioGaps(seg, tr.wrap)
			}
		}
		if d := j.describe(); d != "" {
			label := tr.label()
			s.defect(sim.MediaCheckPTS, "", label, fmt.Sprintf("the %s's presentation time on %s broke within its own stream: %s", s.name, label, d))
		}
		if tr.longestNoPTS > noPTSLimit {
			label := tr.label()
			s.defect(sim.MediaCheckPTSError, "TR 101 290 2.5", label, fmt.Sprintf("the %s sent %d of its PES on %s without a PTS, for up to %.0f ms in a row: ISO 13818-1 allows 700 ms between two", s.name, tr.noPTS, label, ticksMs(tr.longestNoPTS)))
		}
	}
}

// A PES need not carry a PTS: ISO 13818-1 2.7.4 asks one at least every
// 0.7 s, and TR 101 290 2.5 PTS_error is a stream without one for longer.
const noPTSLimit = 700 * 90 // ticks

// implyPTS gives each audio or video unit sent without a PTS the one its
// place implies, as a decoder presents it: one frame (an audio unit's own
// length, when its frames were read) after the unit before, or before the
// unit after, within its time base. A frame without a PTS is still a
// frame; counted as missing, it made a gap of frames that were all sent.
// In a stream that reorders (B-frames) its place in presentation order
// cannot be read from arrival, so it keeps none (unplaced); the checks
// then say so. It also measures the longest time without a PTS.
func (tr *track) implyPTS() {
	if tr.kind != "video" && tr.kind != "audio" {
		return
	}
	ft := frameTicks(tr)
	vals, _ := unwrapped(tr.units, tr.wrap)
	place := ft > 0 && reorderDepth(vals) == 0
	step := func(u unit) int64 {
		if u.dur > 0 {
			return u.dur
		}
		return ft
	}
	for _, seg := range segments(tr.units) {
		run := 0 // units without a PTS since the last that had one
		for i := range seg {
			if seg[i].hasPTS {
				tr.longestNoPTS = max(tr.longestNoPTS, int64(run+1)*ft)
				run = 0
				continue
			}
			tr.noPTS++
			run++
			if place && i > 0 && seg[i-1].hasPTS {
				prev := seg[i-1]
				seg[i].pts, seg[i].hasPTS = (prev.pts+step(prev))%tr.wrap, true
			}
		}
		tr.longestNoPTS = max(tr.longestNoPTS, int64(run)*ft)
		if !place {
			continue
		}
		// The units before the segment's first PTS, back from it.
		for i := len(seg) - 2; i >= 0; i-- {
			if !seg[i].hasPTS && seg[i+1].hasPTS {
				seg[i].pts, seg[i].hasPTS = ((seg[i+1].pts-step(seg[i]))%tr.wrap+tr.wrap)%tr.wrap, true
			}
		}
	}
}

// unplaced counts the units sent without a PTS that none could be
// implied for (implyPTS).
func unplaced(us []unit) int {
	n := 0
	for _, u := range us {
		if !u.hasPTS {
			n++
		}
	}
	return n
}

// segments cuts a stream's units where the discontinuity indicator
// announces a new time base.
func segments(us []unit) [][]unit {
	var out [][]unit
	start := 0
	for i, u := range us {
		if u.di && i > start {
			out = append(out, us[start:i])
			start = i
		}
	}
	return append(out, us[start:])
}

// ptsJumps gathers one stream's breaks in presentation time.
type ptsJumps struct {
	frame int64 // the short step, for counting pictures missing
	// regular: the stream has one step, its frame (regularSteps).
	regular bool
	// unplaced counts the frames sent without a PTS in a stream that
	// reorders (implyPTS): a hole in presentation order may be theirs.
	unplaced                       int
	ahead, back, repeated, offGrid int
	missing                        int64 // frames
	missingTicks                   int64 // the time they took
	first                          string
}

// regularSteps says whether a stream's steps (sorted) are all one frame
// duration, to within a 50th: 29.97 fps at 90 kHz is 3003 ticks, 59.94
// alternates 1501 and 1502. Pulldown's cadence (3003 and 4505) and a
// variable rate are not.
func regularSteps(sorted []int64) bool {
	lo, hi := quantile(sorted, 0.1), quantile(sorted, 0.9)
	return lo > 0 && hi-lo <= max(1, lo/50)
}

// framesIn is how many whole frames of ft ticks make up ticks (ticks ≥
// 0), rounding half a frame down, and what is left over, from -ft/2 to
// ft/2: 60 ms of 40 ms frames is one frame and 20 ms over; 20 ms is none
// and 20 ms over.
func framesIn(ticks, ft int64) (n, off int64) {
	if ft <= 0 {
		return 0, ticks
	}
	n = (ticks + (ft-1)/2) / ft
	return n, ticks - n*ft
}

// offGridBy is how far a step of one frame and extra ticks is from a
// whole number of frames of ft, when that is more than a quarter frame:
// the picture shown before it stays that much too long (positive) or
// too briefly; 0 when it is on the grid.
func offGridBy(extra, ft int64) int64 {
	off := extra
	if extra >= 0 {
		_, off = framesIn(extra, ft)
	}
	if abs(off) > ft/4 {
		return off
	}
	return 0
}

func (j *ptsJumps) note(what string) {
	if j.first == "" {
		j.first = what
	}
}

// check judges one time base's units; cutStart and cutEnd say the
// receiver's window, not the sender, began or ended the units.
func (j *ptsJumps) check(us []unit, wrap, ft int64, video, cutStart, cutEnd bool) {
	vals, idx := unwrapped(us, wrap)
	for _, r := range leapRuns(vals, ft) {
		lo, hi := r[0], r[1]
		if lo > 0 {
			step := vals[lo] - vals[lo-1]
			if step < 0 {
				j.back++
				j.note(fmt.Sprintf("went back %.1f ms at PTS %d", ticksMs(-step+ft), us[idx[lo]].pts))
			} else {
				j.ahead++
				j.note(fmt.Sprintf("skipped ahead %.1f ms at PTS %d", ticksMs(step-ft), us[idx[lo]].pts))
			}
		}
		if video {
			j.gaps(us, vals[lo:hi], idx[lo:hi], cutStart && lo == 0, cutEnd && hi == len(vals))
		}
	}
}

// leapRuns cuts a stream's PTS, in arrival order, where a step goes
// beyond the reorder window either way: a leap of the clock, after which
// a new run is judged on its own. Each run is [lo, hi) of vals; ft is the
// stream's frame duration.
func leapRuns(vals []int64, ft int64) [][2]int {
	var runs [][2]int
	start := 0
	for i := 1; i <= len(vals); i++ {
		if i < len(vals) {
			if step := vals[i] - vals[i-1]; step >= -maxReorder*ft && step <= maxReorder*ft {
				continue
			}
		}
		runs = append(runs, [2]int{start, i})
		start = i
	}
	return runs
}

// label names a track in a defect: "video PID 256 H.264".
func (tr *track) label() string {
	if tr.codec == "" {
		return tr.kind + " " + tr.name
	}
	return tr.kind + " " + tr.name + " " + tr.codec
}

// gaps checks a run of video frames in presentation order: one frame
// duration apart, else pictures are missing or shown twice. Where a
// window cut the run (cutStart, cutEnd), the pictures the cut left out
// are not missing: a frame sent before the window is presented before
// one of the window's first depth+1 frames (depth: how far the stream
// reorders), and one sent after it after one of the last depth+1.
func (j *ptsJumps) gaps(us []unit, vals []int64, idx []int, cutStart, cutEnd bool) {
	ft := j.frame
	lo, hi := int64(math.MinInt64), int64(math.MaxInt64)
	if n := len(vals); n > 0 && (cutStart || cutEnd) {
		depth := min(reorderDepth(vals), n-1)
		if cutStart {
			lo = slices.Max(vals[:depth+1])
		}
		if cutEnd {
			hi = slices.Min(vals[n-1-depth:])
		}
	}
	order := make([]int, len(vals))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(vals[a], vals[b]) })
	for k := 1; k < len(order); k++ {
		prev, cur := order[k-1], order[k]
		switch step := vals[cur] - vals[prev]; {
		case step == 0:
			j.repeated++
			j.note(fmt.Sprintf("PTS %d sent twice", us[idx[cur]].pts))
		case vals[cur] <= lo || vals[prev] >= hi:
			// Sent outside the window (lo and hi are frames' own times,
			// so a hole lies wholly on one side of each).
		case j.regular:
			j.fixedRateStep(step, us[idx[prev]].pts)
		case step > ft*7/4: // a frame and a half is pulldown's cadence; two are a frame missing
			n, ticks := j.fill(step - ft)
			if n == 0 {
				continue
			}
			j.ahead++
			j.missing += n
			j.missingTicks += ticks
			j.note(fmt.Sprintf("skipped ahead %.1f ms after PTS %d", ticksMs(step-ft), us[idx[prev]].pts))
		}
	}
}

// fixedRateStep judges a step of a regular stream (one frame duration)
// after the frame at PTS after: whole frames missing, and a step off its
// grid by more than a quarter frame, a picture shown too long or too
// briefly, whether frames are missing or not.
func (j *ptsJumps) fixedRateStep(step, after int64) {
	ft := j.frame
	if n, ticks := j.fill(max(step-ft, 0)); n > 0 {
		j.ahead++
		j.missing += n
		j.missingTicks += ticks
		j.note(fmt.Sprintf("skipped ahead %.1f ms after PTS %d", ticksMs(step-ft), after))
	}
	if off := offGridBy(step-ft, ft); off != 0 {
		j.offGrid++
		j.note(fmt.Sprintf("stepped %.1f ms after PTS %d, where its frames are %.1f ms apart: off its frame grid by %+.1f ms", ticksMs(step), after, ticksMs(ft), ticksMs(off)))
	}
}

// fill is how many frames of a hole of gap ticks are missing, and for
// how long, once the frames sent without a PTS that a reordering stream
// could not place (unplaced) have taken their share of it.
func (j *ptsJumps) fill(gap int64) (n, ticks int64) {
	n, _ = framesIn(gap, j.frame)
	placed := min(n, int64(j.unplaced))
	j.unplaced -= int(placed)
	return n - placed, gap - placed*j.frame
}

// audioGaps checks audio as a player hears it: each unit's frames play
// for a known time (dur), so the next unit is due exactly then; later is
// sound missing. Units whose frames cannot be read are not judged.
func (j *ptsJumps) audioGaps(us []unit, wrap int64) {
	for i := 1; i < len(us); i++ {
		prev, cur := us[i-1], us[i]
		if prev.dur <= 0 || !prev.hasPTS || !cur.hasPTS {
			continue
		}
		step := wrapDelta(cur.pts-prev.pts, wrap)
		if late := step - prev.dur; late > prev.frame/2 && step <= maxReorder*prev.dur {
			n := (late + prev.frame/2) / prev.frame
			j.frame = prev.frame
			j.ahead++
			j.missing += n
			j.missingTicks += late
			j.note(fmt.Sprintf("skipped ahead %.1f ms after PTS %d, where its frames end", ticksMs(late), prev.pts))
		}
	}
}

// reorderDepth is how many frames arriving after one are presented
// before it, at most, over the run (0 without B-frames).
func reorderDepth(vals []int64) int {
	depth := 0
	for i, v := range vals {
		n := 0
		for _, w := range vals[i+1 : min(len(vals), i+1+maxReorder)] {
			if w < v {
				n++
			}
		}
		depth = max(depth, n)
	}
	return depth
}

func (j *ptsJumps) describe() string {
	var parts []string
	if j.ahead > 0 {
		p := "skipped ahead " + sim.Plural(int64(j.ahead), "time")
		if j.missing > 0 {
			p += fmt.Sprintf(" (%s missing, %.1f ms in all)", sim.Plural(j.missing, "frame"), ticksMs(j.missingTicks))
		}
		parts = append(parts, p)
	}
	if j.offGrid > 0 {
		parts = append(parts, "stepped off its frame grid "+sim.Plural(int64(j.offGrid), "time"))
	}
	if j.back > 0 {
		parts = append(parts, "went back "+sim.Plural(int64(j.back), "time"))
	}
	if j.repeated > 0 {
		parts = append(parts, "repeated "+sim.Plural(int64(j.repeated), "picture"))
	}
	if len(parts) == 0 {
		return ""
	}
	return fmt.Sprintf("%s; first %s", strings.Join(parts, ", "), j.first)
}
