package media

// Audio access units: a PES of audio carries whole frames, each of a
// known number of samples, so the PES lasts exactly their sum and the
// next PES's PTS follows from it. A player hears a gap where it does not.

// audioDuration is how long the audio frames of one PES play, in 90 kHz
// ticks, and the duration of one frame; 0, 0 when the frames cannot be
// read (another codec, a frame cut across PES, or garbage).
func audioDuration(codec string, data []byte) (total, frame int64) {
	var read func([]byte) (size int, samples, rate int)
	switch codec {
	case "AAC":
		read = adtsFrame
	case "MPEG audio":
		read = mpegAudioFrame
	default:
		return 0, 0
	}
	var samples int64
	rate := 0
	for off := 0; off < len(data); {
		size, n, r := read(data[off:])
		if size <= 0 || off+size > len(data) || rate != 0 && r != rate {
			return 0, 0
		}
		if frame == 0 {
			frame = int64(n) * 90000 / int64(r)
		}
		samples += int64(n)
		rate = r
		off += size
	}
	if rate == 0 {
		return 0, 0
	}
	return samples * 90000 / int64(rate), frame
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
