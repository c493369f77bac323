package media

import (
	"errors"
	"fmt"
)

// H.264 NAL unit types a seam check cares about (ITU-T H.264 table 7-1).
const (
	h264NonIDR = 1
	h264IDR    = 5
	h264SEI    = 6
	h264SPS    = 7
	h264PPS    = 8
	h264STAPA  = 24 // RFC 6184 aggregation packet
	h264FUA    = 28 // RFC 6184 fragmentation unit
	// Interleaved mode's (packetization-mode 2), which normsim does not read.
	h264STAPB  = 25
	h264MTAP16 = 26
	h264MTAP24 = 27
	h264FUB    = 29
)

// H.265 NAL unit types of pictures a join may lose (ITU-T H.265 table
// 7-1): RASL pictures lead a CRA or a BLA_W_LP.
const (
	h265RASLN          = 8
	h265RASLR          = 9
	h265BLAWithLeading = 16
	h265CRA            = 21
)

// splitAnnexB cuts an Annex B byte stream (00 00 01 / 00 00 00 01 start
// codes) into its NAL units, without the start codes.
func splitAnnexB(b []byte) [][]byte {
	var nals [][]byte
	start := -1
	for i := 0; i+2 < len(b); i++ {
		if b[i] != 0 || b[i+1] != 0 || b[i+2] != 1 {
			continue
		}
		if start >= 0 {
			end := i
			// A four-byte start code's leading zero is not part of the NAL.
			for end > start && b[end-1] == 0 {
				end--
			}
			nals = append(nals, b[start:end])
		}
		start = i + 3
		i += 2
	}
	if start >= 0 && start < len(b) {
		nals = append(nals, b[start:])
	}
	return nals
}

// codecUnit is what an access unit's NAL units say: whether a decoder can
// start there, and the codec parameters when it carries them.
type codecUnit struct {
	key    bool
	params string
	// slices: it carries a picture's coded slices, so key is read from
	// them rather than guessed.
	slices bool
	// sets are the parameter sets it carries (setSPS, setPPS, setVPS),
	// whether normsim could read them or not.
	sets uint8
	// recovery is an H.264 recovery point SEI's recovery_frame_cnt: a
	// decoder starting here shows correct pictures that many frames on
	// (intra refresh, with no IDR); -1 when the unit has none.
	recovery int
	// openIRAP: an H.265 CRA or BLA_W_LP picture, which RASL pictures may
	// follow; rasl: such a picture, which refers to pictures before its
	// IRAP, so a decoder that starts at that IRAP drops it.
	openIRAP, rasl bool
	// closedGOP: of MPEG-1/2 video, the GOP header its last picture left
	// for the next (one after its last picture, or in a unit with none)
	// has closed_gop set.
	closedGOP bool
}

// The parameter sets a decoder needs before its first picture (setSPS
// stands for MPEG-1/2 video's sequence header).
const (
	setSPS uint8 = 1 << iota
	setPPS
	setVPS
)

// neededSets are the parameter sets a decoder of codec must have before
// it can start; 0 for a codec normsim does not read.
func neededSets(codec string) uint8 {
	switch codec {
	case codecH264:
		return setSPS | setPPS
	case codecH265:
		return setVPS | setSPS | setPPS
	case codecMPEG1Video, codecMPEG2Video, codecMPEGVideo:
		return setSPS // the sequence header
	}
	return 0
}

// inspectNALs reads one access unit of codec, cut at its start codes: for
// H.264 and H.265 the NAL headers, and for H.264 also the SPS, the PPS and
// a recovery point SEI; for MPEG-1/2 video its headers
// (inspectMPEGVideo). Of another codec it reads nothing: its slices are
// not H.264's, whatever their start codes look like.
func inspectNALs(codec string, nals [][]byte) codecUnit {
	u := codecUnit{recovery: -1}
	switch codec {
	case codecH264, codecH265:
	case codecMPEG1Video, codecMPEG2Video, codecMPEGVideo:
		return inspectMPEGVideo(nals, false)
	default:
		return u
	}
	for _, n := range nals {
		if len(n) == 0 {
			continue
		}
		switch codec {
		case codecH265:
			// IRAP pictures (BLA, IDR, CRA) are types 16–23; 0–31 are
			// the coded slices.
			t := (n[0] >> 1) & 0x3f
			if t >= 16 && t <= 23 {
				u.key = true
			}
			switch t {
			case h265BLAWithLeading, h265CRA:
				u.openIRAP = true
			case h265RASLN, h265RASLR:
				u.rasl = true
			case 32:
				u.sets |= setVPS
			case 33:
				u.sets |= setSPS
			case 34:
				u.sets |= setPPS
			}
			u.slices = u.slices || t <= 31
		default:
			switch n[0] & 0x1f {
			case h264NonIDR:
				u.slices = true
			case h264IDR:
				u.key, u.slices = true, true
			case h264SEI:
				if n, ok := recoveryPoint(n); ok {
					u.recovery = n
				}
			case h264SPS:
				u.sets |= setSPS
				if sps, err := parseSPS(n); err == nil {
					u.params = joinParams(sps.String(), u.params)
				}
			case h264PPS:
				u.sets |= setPPS
				if entropy, err := parsePPS(n); err == nil {
					u.params = joinParams(u.params, entropy)
				}
			}
		}
	}
	return u
}

// joinParams puts an access unit's SPS (first) and PPS summaries together.
func joinParams(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "":
		return a
	}
	return a + ", " + b
}

// parsePPS reads what a receiver compares of an H.264 PPS: its entropy
// coding (CABAC or CAVLC), which a decoder set up for the source's
// pictures must change to decode the target's.
func parsePPS(nal []byte) (string, error) {
	if len(nal) < 2 || nal[0]&0x1f != h264PPS {
		return "", errShortSPS
	}
	r := &bitReader{b: unescapeRBSP(nal[1:])}
	r.ue() // pic_parameter_set_id
	r.ue() // seq_parameter_set_id
	cabac := r.bit() == 1
	if r.err != nil {
		return "", r.err
	}
	if cabac {
		return "CABAC", nil
	}
	return "CAVLC", nil
}

// spsInfo is what a receiver compares of two encoders' H.264 SPS.
type spsInfo struct {
	profile, level int
	constraintSet1 bool
	width, height  int
	// sarW:sarH is the VUI's sample aspect ratio, 0:0 when unsaid;
	// fullRange its video_full_range_flag. Both change how every
	// picture is shown: stretched, or black and white levels shifted.
	sarW, sarH int
	fullRange  bool
	// chroma is chroma_format_idc (1 is 4:2:0) and bitDepth the luma's:
	// the High profiles above High allow more than one of each, and a
	// decoder set up for one must reinitialise for another.
	chroma, bitDepth, chromaDepth int
}

func (s spsInfo) String() string {
	str := fmt.Sprintf("%s@%d.%d %dx%d", profileName(s.profile, s.constraintSet1), s.level/10, s.level%10, s.width, s.height)
	if s.sarW > 0 && s.sarH > 0 && s.sarW != s.sarH {
		str += fmt.Sprintf(" SAR %d:%d", s.sarW, s.sarH)
	}
	if s.fullRange {
		str += " full range"
	}
	switch s.chroma {
	case 0:
		str += " 4:0:0"
	case 2:
		str += " 4:2:2"
	case 3:
		str += " 4:4:4"
	}
	switch {
	case s.chromaDepth != s.bitDepth:
		str += fmt.Sprintf(" %d-bit luma %d-bit chroma", s.bitDepth, s.chromaDepth)
	case s.bitDepth != 8:
		str += fmt.Sprintf(" %d-bit", s.bitDepth)
	}
	return str
}

// sarTable is H.264 table E-1: the sample aspect ratios aspect_ratio_idc
// 1–16 name.
var sarTable = [...][2]int{{1, 1}, {12, 11}, {10, 11}, {16, 11}, {40, 33}, {24, 11}, {20, 11}, {32, 11}, {80, 33}, {18, 11}, {15, 11}, {64, 33}, {160, 99}, {4, 3}, {3, 2}, {2, 1}}

// readVUI reads the VUI's sample aspect ratio and colour range (H.264
// E.1.1), the fields before them skipped.
func (s *spsInfo) readVUI(r *bitReader) {
	if r.bit() == 0 { // vui_parameters_present_flag
		return
	}
	if r.bit() == 1 { // aspect_ratio_info_present_flag
		switch idc := r.bits(8); {
		case idc == 255: // Extended_SAR
			s.sarW, s.sarH = r.bits(16), r.bits(16)
		case idc >= 1 && idc <= len(sarTable):
			s.sarW, s.sarH = sarTable[idc-1][0], sarTable[idc-1][1]
		}
	}
	if r.bit() == 1 { // overscan_info_present_flag
		r.bit()
	}
	if r.bit() == 1 { // video_signal_type_present_flag
		r.bits(3) // video_format
		s.fullRange = r.bit() == 1
	}
}

func profileName(idc int, constrained bool) string {
	switch idc {
	case 66:
		if constrained {
			return "Constrained Baseline"
		}
		return "Baseline"
	case 77:
		return "Main"
	case 88:
		return "Extended"
	case 100:
		return "High"
	case 110:
		return "High 10"
	case 122:
		return "High 4:2:2"
	case 244:
		return "High 4:4:4"
	}
	return fmt.Sprintf("profile %d", idc)
}

var errShortSPS = errors.New("SPS ends early")

// bitReader reads an RBSP bit by bit, with the Exp-Golomb codes of
// H.264 clause 9.1.
type bitReader struct {
	b   []byte
	pos int // in bits
	err error
}

func (r *bitReader) bit() int {
	if r.pos >= len(r.b)*8 {
		r.err = errShortSPS
		return 0
	}
	v := int(r.b[r.pos/8]>>(7-r.pos%8)) & 1
	r.pos++
	return v
}

func (r *bitReader) bits(n int) int {
	v := 0
	for range n {
		v = v<<1 | r.bit()
	}
	return v
}

func (r *bitReader) ue() int {
	zeros := 0
	for r.bit() == 0 && r.err == nil {
		zeros++
		if zeros > 31 {
			r.err = errShortSPS
			return 0
		}
	}
	return (1<<zeros - 1) + r.bits(zeros)
}

func (r *bitReader) se() int {
	k := r.ue()
	if k%2 == 1 {
		return (k + 1) / 2
	}
	return -k / 2
}

// unescapeRBSP drops the emulation prevention bytes (00 00 03 → 00 00).
func unescapeRBSP(b []byte) []byte {
	out := make([]byte, 0, len(b))
	zeros := 0
	for _, c := range b {
		if zeros >= 2 && c == 3 {
			zeros = 0
			continue
		}
		if c == 0 {
			zeros++
		} else {
			zeros = 0
		}
		out = append(out, c)
	}
	return out
}

// parseSPS reads profile, level and the cropped picture size from an
// H.264 SPS NAL unit (header byte included), per H.264 clause 7.3.2.1.1.
func parseSPS(nal []byte) (spsInfo, error) {
	var s spsInfo
	if len(nal) < 4 || nal[0]&0x1f != h264SPS {
		return s, errShortSPS
	}
	rbsp := unescapeRBSP(nal[1:])
	if len(rbsp) < 4 {
		// 00 00 03 unescapes to two bytes: a 4-byte SPS can be shorter
		// than its fixed fields.
		return s, errShortSPS
	}
	s.profile, s.level = int(rbsp[0]), int(rbsp[2])
	s.constraintSet1 = rbsp[1]&0x40 != 0
	r := &bitReader{b: rbsp[3:]}
	r.ue() // seq_parameter_set_id
	s.chroma, s.bitDepth, s.chromaDepth = 1, 8, 8
	separateColourPlane := false
	switch s.profile {
	case 100, 110, 122, 244, 44, 83, 86, 118, 128, 138, 139, 134, 135:
		s.chroma = r.ue()
		if s.chroma == 3 {
			separateColourPlane = r.bit() == 1
		}
		s.bitDepth = 8 + r.ue()    // bit_depth_luma_minus8
		s.chromaDepth = 8 + r.ue() // bit_depth_chroma_minus8
		r.bit()                    // qpprime_y_zero_transform_bypass_flag
		if r.bit() == 1 {          // seq_scaling_matrix_present_flag
			lists := 8
			if s.chroma == 3 {
				lists = 12
			}
			for i := range lists {
				if r.bit() == 0 {
					continue
				}
				size := 16
				if i >= 6 {
					size = 64
				}
				last, next := 8, 8
				for range size {
					if next != 0 {
						next = (last + r.se() + 256) % 256
					}
					if next != 0 {
						last = next
					}
				}
			}
		}
	}
	r.ue()          // log2_max_frame_num_minus4
	switch r.ue() { // pic_order_cnt_type
	case 0:
		r.ue() // log2_max_pic_order_cnt_lsb_minus4
	case 1:
		r.bit() // delta_pic_order_always_zero_flag
		r.se()  // offset_for_non_ref_pic
		r.se()  // offset_for_top_to_bottom_field
		for n := r.ue(); n > 0 && r.err == nil; n-- {
			r.se()
		}
	}
	r.ue()  // max_num_ref_frames
	r.bit() // gaps_in_frame_num_value_allowed_flag
	widthMbs := r.ue() + 1
	heightMapUnits := r.ue() + 1
	frameMbsOnly := r.bit()
	if frameMbsOnly == 0 {
		r.bit() // mb_adaptive_frame_field_flag
	}
	r.bit() // direct_8x8_inference_flag
	s.width = widthMbs * 16
	s.height = (2 - frameMbsOnly) * heightMapUnits * 16
	if r.bit() == 1 { // frame_cropping_flag
		left, right, top, bottom := r.ue(), r.ue(), r.ue(), r.ue()
		// Crop units depend on the chroma subsampling (H.264 7.4.2.1.1).
		cropX, cropY := 1, 2-frameMbsOnly
		if s.chroma != 0 && !separateColourPlane {
			subW, subH := 2, 2
			switch s.chroma {
			case 2:
				subH = 1
			case 3:
				subW, subH = 1, 1
			}
			cropX, cropY = subW, subH*(2-frameMbsOnly)
		}
		s.width -= cropX * (left + right)
		s.height -= cropY * (top + bottom)
	}
	if r.err != nil {
		return s, r.err
	}
	if s.readVUI(r); r.err != nil {
		// An SPS cut short in its VUI still says what came before.
		s.sarW, s.sarH, s.fullRange = 0, 0, false
	}
	return s, nil
}

// recoveryPoint reads an H.264 SEI NAL unit's recovery point message
// (payload type 6, H.264 D.1.8): its recovery_frame_cnt.
func recoveryPoint(nal []byte) (int, bool) {
	b := unescapeRBSP(nal[1:])
	for len(b) > 2 && b[0] != 0x80 { // 0x80: the RBSP trailing bits
		var typ, size int
		var ok bool
		if typ, b, ok = seiNumber(b); !ok {
			return 0, false
		}
		if size, b, ok = seiNumber(b); !ok || size > len(b) {
			return 0, false
		}
		if typ == 6 {
			r := &bitReader{b: b[:size]}
			n := r.ue()
			return n, r.err == nil
		}
		b = b[size:]
	}
	return 0, false
}

// seiNumber reads an SEI message's payload type or size: 0xFF bytes of
// 255 each, then the last byte.
func seiNumber(b []byte) (n int, rest []byte, ok bool) {
	for len(b) > 0 && b[0] == 0xff {
		n += 255
		b = b[1:]
	}
	if len(b) == 0 {
		return 0, nil, false
	}
	return n + int(b[0]), b[1:], true
}
