package media

import "fmt"

// Audio access units: a PES of audio carries whole frames, each of a
// known number of samples, so the PES lasts exactly their sum and the
// next PES's PTS follows from it. A player hears a gap where it does not.

// audioFrames reads the audio frames of one PES: how long they play, in
// 90 kHz ticks, and the duration of one frame, 0, 0 when the frames
// cannot be read (another codec, a frame cut across PES, or garbage); and
// the codec parameters its first frame's header says (audioParams), read
// as that header is, whether the frames after it can be read or not.
func audioFrames(codec string, data []byte) (total, frame int64, params string) {
	var read func([]byte) (size int, samples, rate int)
	switch codec {
	case codecAAC:
		read = adtsFrame
	case codecMPEGAudio:
		read = mpegAudioFrame
	case codecAC3, codecEAC3:
		read = ac3Frame
	case codecOpus:
		read = opusFrame
	default:
		return 0, 0, ""
	}
	var samples int64
	rate := 0
	for off := 0; off < len(data); {
		size, n, r := read(data[off:])
		if off == 0 && size > 0 {
			params = audioParams(codec, data, n, r)
		}
		if size <= 0 || off+size > len(data) || rate != 0 && r != rate {
			return 0, 0, params
		}
		if frame == 0 && n > 0 { // an E-AC-3 dependent substream plays no time of its own
			frame = int64(n) * 90000 / int64(r)
		}
		samples += int64(n)
		rate = r
		off += size
	}
	if rate == 0 {
		return 0, 0, params
	}
	return samples * 90000 / int64(rate), frame, params
}

// adtsFrame reads an ADTS header (ISO 14496-3 1.A.2): its frame's size
// in bytes, its samples (1,024 per raw data block) and sample rate.
func adtsFrame(b []byte) (size, samples, rate int) {
	if len(b) < 7 || b[0] != 0xff || b[1]&0xf6 != 0xf0 {
		return 0, 0, 0
	}
	rates := [...]int{96000, 88200, 64000, 48000, 44100, 32000, 24000, 22050, 16000, 12000, 11025, 8000, 7350}
	idx := int(b[2]>>2) & 0x0f
	if idx >= len(rates) {
		return 0, 0, 0
	}
	size = int(b[3]&0x03)<<11 | int(b[4])<<3 | int(b[5]>>5)
	blocks := int(b[6]&0x03) + 1
	if size < 7 {
		return 0, 0, 0
	}
	return size, 1024 * blocks, rates[idx]
}

// mpegAudioFrame reads an MPEG-1/2/2.5 audio header (ISO 11172-3 2.4.2.3,
// 13818-3): its frame's size, samples and sample rate.
func mpegAudioFrame(b []byte) (size, samples, rate int) {
	if len(b) < 4 || b[0] != 0xff || b[1]&0xe0 != 0xe0 {
		return 0, 0, 0
	}
	version := (b[1] >> 3) & 0x03 // 3: MPEG-1, 2: MPEG-2, 0: MPEG-2.5
	layer := (b[1] >> 1) & 0x03   // 3: I, 2: II, 1: III
	bitrateIdx := int(b[2] >> 4)
	rateIdx := int(b[2]>>2) & 0x03
	padding := int(b[2]>>1) & 0x01
	if version == 1 || layer == 0 || bitrateIdx == 0 || bitrateIdx == 15 || rateIdx == 3 {
		return 0, 0, 0 // reserved, or free format (no size to read)
	}
	rate = [...]int{44100, 48000, 32000}[rateIdx]
	switch version {
	case 2:
		rate /= 2
	case 0:
		rate /= 4
	}
	var kbps int
	mpeg1 := version == 3
	switch {
	case mpeg1 && layer == 3:
		kbps = [...]int{0, 32, 64, 96, 128, 160, 192, 224, 256, 288, 320, 352, 384, 416, 448}[bitrateIdx]
	case mpeg1 && layer == 2:
		kbps = [...]int{0, 32, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320, 384}[bitrateIdx]
	case mpeg1:
		kbps = [...]int{0, 32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320}[bitrateIdx]
	case layer == 3:
		kbps = [...]int{0, 32, 48, 56, 64, 80, 96, 112, 128, 144, 160, 176, 192, 224, 256}[bitrateIdx]
	default:
		kbps = [...]int{0, 8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 144, 160}[bitrateIdx]
	}
	switch {
	case layer == 3: // Layer I: 384 samples in 4-byte slots
		return (12*kbps*1000/rate + padding) * 4, 384, rate
	case layer == 1 && !mpeg1: // Layer III of MPEG-2/2.5: 576 samples
		return 72*kbps*1000/rate + padding, 576, rate
	default:
		return 144*kbps*1000/rate + padding, 1152, rate
	}
}

// ac3Frame reads an AC-3 or E-AC-3 sync frame's header (ATSC A/52
// 5.3 and E.1.2): its size, samples and sample rate. An AC-3 frame is 6
// blocks of 256 samples; an E-AC-3 one says its size and blocks itself,
// and a dependent substream (strmtyp 1) extends the independent one
// before it, adding no samples.
func ac3Frame(b []byte) (size, samples, rate int) {
	if len(b) < 6 || b[0] != 0x0b || b[1] != 0x77 {
		return 0, 0, 0
	}
	bsid := int(b[5] >> 3)
	fscod := int(b[4] >> 6)
	rates := [...]int{48000, 44100, 32000}
	if bsid <= 10 {
		frmsizecod := int(b[4] & 0x3f)
		if fscod == 3 || frmsizecod > 37 {
			return 0, 0, 0
		}
		kbps := [...]int{32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320, 384, 448, 512, 576, 640}[frmsizecod/2]
		// 16-bit words of 1,536 samples at the bit rate; 44.1 kHz pads
		// the odd codes by a word.
		words := kbps * 1000 * 1536 / rates[fscod] / 16
		if fscod == 1 {
			words += frmsizecod % 2
		}
		return words * 2, 1536, rates[fscod]
	}
	if bsid > 16 {
		return 0, 0, 0
	}
	strmtyp := int(b[2] >> 6)
	size = (int(b[2]&0x07)<<8 | int(b[3]) + 1) * 2
	blocks := 6
	if fscod == 3 {
		fscod2 := int(b[4]>>4) & 0x03
		if fscod2 == 3 {
			return 0, 0, 0
		}
		rate = rates[fscod2] / 2
	} else {
		rate = rates[fscod]
		blocks = [...]int{1, 2, 3, 6}[int(b[4]>>4)&0x03]
	}
	if strmtyp == 1 {
		return size, 0, rate
	}
	return size, 256 * blocks, rate
}

// opusFrame reads one Opus access unit as MPEG-TS carries it (the Opus
// project's "Encapsulation of Opus in MPEG-2 Transport Stream" 6.1): a
// control header (the 0x7FE prefix, trim and extension flags, the
// packet's size in bytes of 255 and a last one below), then the Opus
// packet, whose TOC byte and frame count (RFC 6716 3.1) give its samples
// at 48 kHz, less what the trims cut.
func opusFrame(b []byte) (size, samples, rate int) {
	if len(b) < 3 || b[0] != 0x7f || b[1]&0xe0 != 0xe0 {
		return 0, 0, 0
	}
	startTrim, endTrim, extension := b[1]&0x10 != 0, b[1]&0x08 != 0, b[1]&0x04 != 0
	off, n := 2, 0
	for off < len(b) && b[off] == 0xff {
		n += 255
		off++
	}
	if off >= len(b) {
		return 0, 0, 0
	}
	n += int(b[off])
	off++
	trim := 0
	for _, on := range []bool{startTrim, endTrim} {
		if on {
			if off+2 > len(b) {
				return 0, 0, 0
			}
			trim += int(b[off]&0x1f)<<8 | int(b[off+1])
			off += 2
		}
	}
	if extension {
		if off >= len(b) {
			return 0, 0, 0
		}
		off += 1 + int(b[off])
	}
	if n == 0 || off+n > len(b) {
		return 0, 0, 0
	}
	toc := b[off]
	// Frame sizes in 48 kHz samples: SILK 10/20/40/60 ms, hybrid 10/20,
	// CELT 2.5/5/10/20.
	config := int(toc >> 3)
	var per int
	switch {
	case config < 12:
		per = [...]int{480, 960, 1920, 2880}[config%4]
	case config < 16:
		per = [...]int{480, 960}[config%2]
	default:
		per = [...]int{120, 240, 480, 960}[config%4]
	}
	frames := 1
	switch toc & 0x03 {
	case 1, 2:
		frames = 2
	case 3:
		if n < 2 {
			return 0, 0, 0
		}
		frames = int(b[off+1] & 0x3f)
	}
	return off + n, max(per*frames-trim, 0), 48000
}

// audioParams is what a receiver set up for one audio stream must
// reinitialise for when it changes, read from the frame header b begins
// with, which audioFrames has read (its samples and rate): the codec's
// profile, sample rate and channels. "" when they cannot be read
// (another codec, an E-AC-3 dependent substream first). Opus is left
// out: its TOC's stereo flag may change from packet to packet, the
// decoder's channels being set by the stream's descriptor.
func audioParams(codec string, b []byte, samples, rate int) string {
	switch codec {
	case codecAAC:
		profile := [...]string{"Main", "LC", "SSR", "LTP"}[b[2]>>6]
		channels := int(b[2]&0x01)<<2 | int(b[3]>>6)
		layout := [...]string{"channels set in the bitstream", "mono", "stereo", "3.0", "4.0", "5.0", "5.1", "7.1"}[channels]
		return fmt.Sprintf("AAC %s %d Hz %s", profile, rate, layout)
	case codecMPEGAudio:
		// Version 1 is reserved, and mpegAudioFrame read no frame of it.
		version := [...]string{0: "MPEG-2.5", 2: "MPEG-2", 3: "MPEG-1"}[(b[1]>>3)&0x03]
		layer := [...]string{"", "Layer III", "Layer II", "Layer I"}[(b[1]>>1)&0x03]
		// Joint stereo is a coding choice, not other channels.
		mode := [...]string{"stereo", "stereo", "dual channel", "mono"}[b[3]>>6]
		return fmt.Sprintf("%s %s %d Hz %s", version, layer, rate, mode)
	case codecAC3, codecEAC3:
		if samples == 0 || len(b) < 8 {
			return ""
		}
		var acmod int
		var lfe bool
		if bsid := int(b[5] >> 3); bsid <= 10 {
			acmod = int(b[6] >> 5)
			// lfeon follows the mix levels acmod asks for (A/52 5.3.2).
			bits := 3
			if acmod&1 != 0 && acmod != 1 {
				bits += 2 // cmixlev
			}
			if acmod&4 != 0 {
				bits += 2 // surmixlev
			}
			if acmod == 2 {
				bits += 2 // dsurmod
			}
			bsi := int(b[6])<<8 | int(b[7])
			lfe = bsi>>(15-bits)&1 == 1
		} else {
			acmod, lfe = int(b[4]>>1)&0x07, b[4]&0x01 == 1
		}
		// A/52 table 5.8's channel layouts: front/rear.
		layout := [...]string{"1+1 (dual mono)", "1/0 (mono)", "2/0 (stereo)", "3/0", "2/1", "3/1", "2/2", "3/2"}[acmod]
		if lfe {
			layout += " + LFE"
		}
		return fmt.Sprintf("%s %d Hz %s", codec, rate, layout)
	}
	return ""
}
