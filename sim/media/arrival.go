package media

import (
	"fmt"
	"time"

	"github.com/normsim/normsim/sim"
)

// behindDefects checks each of the side's streams as a live receiver
// plays it: from the side's first frame, each frame is due when its
// presentation time says, and one that comes more than stallLimit after
// that has run a receiver's buffer dry, though every PTS continues (a
// sender slower than real time, one that stalls and then bursts). Frames
// that come early only fill the buffer. The clock starts again where the
// PTS leaps or a new time base begins, each judged by ptsDefects; the
// switch itself is checkArrival's.
func (s *side) behindDefects() {
	for _, tr := range s.tracks {
		ft := quantile(sortedSteps(tr), 0.5)
		if ft <= 0 || tr.kind != "video" && tr.kind != "audio" {
			continue
		}
		var worst behind
		for _, seg := range segments(tr.units) {
			vals, idx := unwrapped(seg, tr.wrap)
			for _, r := range leapRuns(vals, ft) {
				if b := runBehind(seg, vals[r[0]:r[1]], idx[r[0]:r[1]]); b.late > worst.late {
					worst = b
				}
			}
		}
		if worst.late <= stallLimit {
			continue
		}
		label := tr.label()
		s.defect(sim.MediaCheckArrival, "", label, fmt.Sprintf(
			"the %s fell behind real time on %s: a frame came %.0f ms later than its presentation time says, counted from the %s's first frame (%.2f s of media took %.2f s to arrive): a live receiver holding less than that runs dry, and its picture freezes",
			s.name, label, ms(worst.late), s.name, ticksMs(worst.media)/1000, worst.took.Seconds()))
	}
}

// behind is how far one run of frames fell behind its presentation time
// at worst (late), and the media up to that frame against the time it
// took to arrive.
type behind struct {
	late  time.Duration
	media int64 // 90 kHz ticks
	took  time.Duration
}

// runBehind measures one run of a stream's frames (vals their unwrapped
// PTS in arrival order, idx their units in us). A frame presented before
// one that arrived earlier (reordering) is due with that one.
func runBehind(us []unit, vals []int64, idx []int) behind {
	var worst behind
	if len(vals) == 0 {
		return worst
	}
	first, top := us[idx[0]].at, vals[0]
	for k := 1; k < len(vals); k++ {
		top = max(top, vals[k])
		media := top - vals[0]
		took := us[idx[k]].at.Sub(first)
		if late := took - time.Duration(media)*time.Second/90000; late > worst.late {
			worst = behind{late: late, media: media, took: took}
		}
	}
	return worst
}
