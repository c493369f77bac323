package media

import "github.com/normsim/normsim/sim"

// Judge is Analyze, and Remux of whole frames, as the manager's
// sim.MediaJudge.
type Judge struct{}

var _ sim.MediaJudge = Judge{}

// Analyze is the package's Analyze.
func (Judge) Analyze(source, target []sim.MediaDatagram, at sim.SeamMoments) *sim.MediaReport {
	return Analyze(source, target, at)
}

// Capture is the datagrams' whole frames as one MPEG-TS file: from the
// first keyframe, or, asJoined, from the first datagram.
func (Judge) Capture(dgs []sim.MediaDatagram, asJoined bool) ([]byte, error) {
	if asJoined {
		return Remux(WholeLastFrame(dgs))
	}
	return Remux(WholeFrames(dgs))
}
