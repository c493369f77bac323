package videojob

import (
	_ "embed"
	"fmt"
)

// clipH264 is the test clip scripts/encode-clip made: 50 frames of
// testsrc2, 320x180 at 25 fps, H.264 baseline in Annex B, a GOP of 25, an
// AUD before every frame and SPS+PPS before every IDR.
//
//go:embed clip.h264
var clipH264 []byte

// H.264 NAL unit types the job cares about.
const (
	nalSlice = 1
	nalIDR   = 5
	nalSEI   = 6
	nalSPS   = 7
	nalPPS   = 8
	nalAUD   = 9
)

// AccessUnit is one frame of the clip: its NAL units in Annex B (start
// codes included), and whether it is a random-access point (an IDR, with
// the SPS and PPS before it).
type AccessUnit struct {
	Data []byte
	Key  bool
}

// Clip is the embedded clip split into access units, frame 0 first.
func Clip() ([]AccessUnit, error) { return SplitAnnexB(clipH264) }

// ClipFrames is the number of frames in the clip; GOP the frames from one
// IDR to the next. The job loops the clip, so ClipFrames is a multiple of
// GOP and the loop point is an IDR.
const (
	ClipFrames = 50
	GOP        = 25
)

// nal is one NAL unit found in an Annex B stream: where its start code
// begins and its type.
type nal struct {
	at  int // offset of the start code
	typ byte
}

// nals finds the NAL units of an Annex B stream (3- and 4-byte start codes).
func nals(b []byte) []nal {
	var out []nal
	for i := 0; i+3 < len(b); i++ {
		if b[i] != 0 || b[i+1] != 0 || b[i+2] != 1 {
			continue
		}
		at := i
		if i > 0 && b[i-1] == 0 {
			at = i - 1 // 00 00 00 01
		}
		out = append(out, nal{at: at, typ: b[i+3] & 0x1f})
		i += 2
	}
	return out
}

// SplitAnnexB splits an H.264 Annex B stream into access units: a new
// one begins at an AUD, or, in a stream without AUDs, at an SPS, PPS or
// SEI that follows a slice, or at a slice whose first_mb_in_slice is 0
// that follows a slice. A unit with an IDR slice is a keyframe; it must
// carry an SPS and a PPS before the slice, so a receiver can start there.
func SplitAnnexB(b []byte) ([]AccessUnit, error) {
	ns := nals(b)
	if len(ns) == 0 {
		return nil, fmt.Errorf("no H.264 NAL units")
	}
	var starts []int
	sawSlice := false
	for i, n := range ns {
		begin := i == 0
		switch n.typ {
		case nalAUD:
			begin = true
		case nalSPS, nalPPS, nalSEI:
			begin = begin || sawSlice
		case nalSlice, nalIDR:
			// first_mb_in_slice is the first ue(v) of the header: it
			// is 0 exactly when the byte after the NAL header starts
			// with a 1 bit.
			hdr := n.at + 4
			if b[n.at+2] == 1 {
				hdr = n.at + 3
			}
			if sawSlice && hdr+1 < len(b) && b[hdr+1]&0x80 != 0 {
				begin = true
			}
		}
		if begin && (len(starts) == 0 || starts[len(starts)-1] != n.at) {
			starts = append(starts, n.at)
			sawSlice = false
		}
		if n.typ == nalSlice || n.typ == nalIDR {
			sawSlice = true
		}
	}
	var aus []AccessUnit
	for i, s := range starts {
		end := len(b)
		if i+1 < len(starts) {
			end = starts[i+1]
		}
		data := b[s:end]
		var sps, pps, idr, slice bool
		for _, n := range nals(data) {
			switch n.typ {
			case nalSPS:
				sps = true
			case nalPPS:
				pps = true
			case nalIDR:
				idr = true
				if !sps || !pps {
					return nil, fmt.Errorf("access unit %d: an IDR without SPS and PPS before it", i)
				}
			case nalSlice:
				slice = true
			}
		}
		if !idr && !slice {
			return nil, fmt.Errorf("access unit %d has no slice", i)
		}
		aus = append(aus, AccessUnit{Data: data, Key: idr})
	}
	return aus, nil
}
