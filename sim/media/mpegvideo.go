package media

import "fmt"

// MPEG-1 and MPEG-2 video (ISO 11172-2, ISO 13818-2) start codes a seam
// check reads. They share H.264's 00 00 01 prefix but not its syntax:
// read as NAL units, a slice start code (0x01–0xAF) passes for an IDR.
const (
	mpegPictureStart  = 0x00
	mpegSliceFirst    = 0x01
	mpegSliceLast     = 0xAF
	mpegSequenceStart = 0xB3
	mpegExtension     = 0xB5
	mpegGOPStart      = 0xB8

	mpegSequenceExtension = 1 // extension_start_code_identifier

	mpegPictureI = 1 // picture_coding_type
	mpegPictureB = 3
)

// mpegSequence is what a receiver compares of two encoders' sequence
// headers: a change of size, aspect or chroma format makes a decoder
// reinitialise (ffmpeg logs "sequence header changed").
type mpegSequence struct {
	mpeg2         bool
	width, height int
	aspect        int // aspect_ratio_information
	// From the sequence extension (MPEG-2 only).
	profileLevel int
	chroma       int
	progressive  bool
}

func (s mpegSequence) String() string {
	if !s.mpeg2 {
		return fmt.Sprintf("MPEG-1 %dx%d pel aspect code %d", s.width, s.height, s.aspect)
	}
	str := fmt.Sprintf("MPEG-2 %s %dx%d %s", mpegProfileLevel(s.profileLevel), s.width, s.height, mpegAspect(s.aspect))
	switch s.chroma {
	case 2:
		str += " 4:2:2"
	case 3:
		str += " 4:4:4"
	}
	if !s.progressive {
		str += " interlaced"
	}
	return str
}

// mpegAspect names ISO 13818-2 table 6-3's aspect_ratio_information.
func mpegAspect(code int) string {
	switch code {
	case 1:
		return "SAR 1:1"
	case 2:
		return "DAR 4:3"
	case 3:
		return "DAR 16:9"
	case 4:
		return "DAR 2.21:1"
	}
	return fmt.Sprintf("aspect code %d", code)
}

// ISO 13818-2 tables 8-2 and 8-3: profile_and_level_indication's
// profile (3 bits) and level (4 bits); "" is reserved.
var (
	mpegProfiles = [8]string{1: "High", 2: "Spatially Scalable", 3: "SNR Scalable", 4: "Main", 5: "Simple"}
	mpegLevels   = [16]string{4: "High", 6: "High 1440", 8: "Main", 10: "Low"}
)

// mpegProfileLevel names profile_and_level_indication (ISO 13818-2
// 8.1, tables 8-2 and 8-3, and the 4:2:2 and multiview escapes).
func mpegProfileLevel(pl int) string {
	if pl&0x80 != 0 {
		switch pl {
		case 0x82:
			return "4:2:2@High"
		case 0x85:
			return "4:2:2@Main"
		}
		return fmt.Sprintf("profile-and-level 0x%02X", pl)
	}
	p, l := mpegProfiles[pl>>4&7], mpegLevels[pl&15]
	if p == "" || l == "" {
		return fmt.Sprintf("profile-and-level 0x%02X", pl)
	}
	return p + "@" + l
}

// inspectMPEGVideo reads one MPEG-1 or MPEG-2 video access unit, cut at
// its start codes (each unit without the 00 00 01 prefix): a picture is
// a keyframe when it is an I-picture, and its sequence header is the
// parameter set a decoder needs first. An I-picture not in a closed GOP
// may be followed by B-pictures that refer to the GOP before it: a
// decoder joining at the I-picture drops them (ffmpeg outputs none), as
// H.265's RASL pictures. closedGOP: the PES before left a GOP header
// with closed_gop set for the next picture (its codecUnit's closedGOP;
// no GOP header is as open as one with closed_gop unset). A muxer may
// send the sequence and GOP headers in a PES of their own and the
// I-picture in the next, and a decoder, reading the elementary stream,
// takes the GOP header for that picture all the same.
func inspectMPEGVideo(units [][]byte, closedGOP bool) codecUnit {
	u := codecUnit{recovery: -1}
	var seq *mpegSequence
	for _, b := range units {
		if len(b) == 0 {
			continue
		}
		r := &bitReader{b: b[1:]}
		switch code := b[0]; {
		case code == mpegSequenceStart:
			u.sets |= setSPS
			s := mpegSequence{width: r.bits(12), height: r.bits(12), aspect: r.bits(4), progressive: true}
			if r.err == nil {
				seq = &s
			}
		case code == mpegExtension && seq != nil:
			if r.bits(4) != mpegSequenceExtension {
				continue
			}
			pl, progressive, chroma := r.bits(8), r.bit(), r.bits(2)
			hExt, vExt := r.bits(2), r.bits(2)
			if r.err == nil {
				seq.mpeg2, seq.profileLevel, seq.progressive, seq.chroma = true, pl, progressive == 1, chroma
				seq.width |= hExt << 12
				seq.height |= vExt << 12
			}
		case code == mpegGOPStart:
			r.bits(25) // time_code
			// Unreadable, it has no closed_gop to go by.
			closedGOP = r.bit() == 1 && r.err == nil
		case code == mpegPictureStart:
			r.bits(10) // temporal_reference
			switch r.bits(3) {
			case mpegPictureI:
				u.key = true
				u.openIRAP = !closedGOP
			case mpegPictureB:
				u.rasl = true
			}
			// The GOP header speaks for the first picture after it; the
			// next comes under none until another GOP header.
			closedGOP = false
		case code >= mpegSliceFirst && code <= mpegSliceLast:
			u.slices = true
		}
	}
	u.closedGOP = closedGOP
	if seq != nil {
		u.params = seq.String()
	}
	return u
}

// looksMPEGVideo: an elementary stream that opens on an MPEG-1/2 video
// start code, which no H.264 NAL header can be (its first bit is zero,
// and type 0 is unspecified), for a PES whose PMT never came.
func looksMPEGVideo(b []byte) bool {
	units := splitAnnexB(b)
	if len(units) == 0 || len(units[0]) == 0 {
		return false
	}
	switch units[0][0] {
	case mpegSequenceStart, mpegGOPStart, mpegPictureStart:
		return true
	}
	return false
}

// isMPEGVideo: codec is MPEG-1 or MPEG-2 video, read by inspectMPEGVideo.
func isMPEGVideo(codec string) bool {
	return codec == codecMPEG1Video || codec == codecMPEG2Video || codec == codecMPEGVideo
}

// mpegVideoCodec names the MPEG video a side sent on pid with no PMT to
// say which: by its first sequence header, MPEG-2 where a sequence
// extension follows it (ISO 13818-2 6.2.2: always, in MPEG-2) and MPEG-1
// where none does; MPEG-1/2 when no sequence header says.
func mpegVideoCodec(pes []pesUnit, pid uint16) string {
	for _, pu := range pes {
		if pu.pid != pid {
			continue
		}
		units := splitAnnexB(pu.data)
		for i, u := range units {
			if len(u) == 0 || u[0] != mpegSequenceStart || i+1 == len(units) {
				continue // what follows it is in the PES after, if anywhere
			}
			next := units[i+1]
			if len(next) >= 2 && next[0] == mpegExtension && next[1]>>4 == mpegSequenceExtension {
				return codecMPEG2Video
			}
			return codecMPEG1Video
		}
	}
	return codecMPEGVideo
}
