package media

import (
	"encoding/binary"

	"github.com/normsim/normsim/sim"
)

// Judge is Analyze, and Remux of whole frames, as the manager's
// sim.MediaJudge.
type Judge struct{}

var _ sim.MediaJudge = Judge{}

// Analyze is the package's Analyze.
func (Judge) Analyze(source, target []sim.MediaDatagram, at sim.SeamMoments) *sim.MediaReport {
	return Analyze(source, target, at)
}

// Readable says whether Analyze reads data (it also reads a TS datagram
// with some packets out of sync, to count them).
func (Judge) Readable(data []byte) bool { return isReadable(data) }

// isReadable is Readable: what Analyze keeps of a window.
func isReadable(data []byte) bool {
	f, _ := readDatagram(data)
	return f != sim.MediaUnknown
}

// CaptureRTP is the RTP packets among the datagrams, as they came, each
// framed by its 2-byte big-endian length (RFC 4571, what GStreamer's
// rtpstreamdepay and RTP-over-TCP tools read); nil when none is RTP.
func (Judge) CaptureRTP(dgs []sim.MediaDatagram) []byte {
	var out []byte
	for _, d := range dgs {
		if f := Classify(d.Data); f != sim.MediaRTPMP2T && f != sim.MediaRTPH264 || len(d.Data) > 0xffff {
			continue // not RTP (a UDP payload is never over 64 KiB)
		}
		out = binary.BigEndian.AppendUint16(out, uint16(len(d.Data)))
		out = append(out, d.Data...)
	}
	return out
}

// Capture is the datagrams' whole frames as one MPEG-TS file: from the
// first keyframe, or, asJoined, from the first datagram.
func (Judge) Capture(dgs []sim.MediaDatagram, asJoined bool) ([]byte, int, error) {
	if asJoined {
		return Remux(WholeLastFrame(dgs))
	}
	return Remux(WholeFrames(dgs))
}
