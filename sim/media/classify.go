package media

import (
	"github.com/pion/rtp"

	"github.com/normsim/normsim/sim"
)

const tsPacketSize = 188

// RTP payload types (RFC 3551): 33 is MPEG-TS; 96–127 are dynamic, which a
// job streaming H.264 per RFC 6184 uses.
const (
	ptMP2T       = 33
	ptDynamicMin = 96
	ptDynamicMax = 127
)

// Classify tells one datagram's format by its content: MPEG-TS packets
// straight in UDP, RTP carrying MPEG-TS, RTP carrying H.264, or unknown.
func Classify(data []byte) string {
	if isTS(data) {
		return sim.MediaMPEGTS
	}
	p, ok := parseRTP(data)
	switch {
	case !ok:
		return sim.MediaUnknown
	case p.PayloadType == ptMP2T && isTS(p.Payload):
		return sim.MediaRTPMP2T
	case p.PayloadType >= ptDynamicMin && p.PayloadType <= ptDynamicMax:
		return sim.MediaRTPH264
	}
	return sim.MediaUnknown
}

// isTS: whole 188-byte packets, each starting with the sync byte.
func isTS(b []byte) bool {
	if len(b) == 0 || len(b)%tsPacketSize != 0 {
		return false
	}
	for i := 0; i < len(b); i += tsPacketSize {
		if b[i] != 0x47 {
			return false
		}
	}
	return true
}

// looksTS is isTS for a datagram that may be damaged: whole packets, most
// with the sync byte. Analyze reads it as TS and counts the packets that
// lost their sync byte, as a stream analyser would (TR 101 290 1.2),
// rather than dropping the datagram as unreadable.
func looksTS(b []byte) bool {
	if len(b) == 0 || len(b)%tsPacketSize != 0 {
		return false
	}
	synced := 0
	for i := 0; i < len(b); i += tsPacketSize {
		if b[i] == 0x47 {
			synced++
		}
	}
	return synced*2 > len(b)/tsPacketSize
}

// parseRTP reads an RTP version 2 packet.
func parseRTP(data []byte) (*rtp.Packet, bool) {
	if len(data) < 12 || data[0]>>6 != 2 {
		return nil, false
	}
	var p rtp.Packet
	if err := p.Unmarshal(data); err != nil || p.Version != 2 {
		return nil, false
	}
	return &p, true
}

// readDatagram is one datagram as Analyze reads it: its format, and the
// RTP packet when there is one.
func readDatagram(data []byte) (string, *rtp.Packet) {
	if looksTS(data) {
		return sim.MediaMPEGTS, nil
	}
	p, ok := parseRTP(data)
	switch {
	case !ok:
		return sim.MediaUnknown, nil
	case p.PayloadType == ptMP2T && looksTS(p.Payload):
		return sim.MediaRTPMP2T, p
	case p.PayloadType >= ptDynamicMin && p.PayloadType <= ptDynamicMax:
		return sim.MediaRTPH264, p
	}
	return sim.MediaUnknown, nil
}

// rtpCodec tells H.265 (RFC 7798) from H.264 (RFC 6184) on a dynamic
// payload type by an SSRC's first packet, as no SDP says which. H.265's
// payload header is two bytes: F, a 6-bit type, a 6-bit layer id (0 in a
// base layer, so its first byte is even) and a temporal id of at least 1
// (almost always 1: a second byte of 0x01). An odd first byte, a second
// byte no base layer has, or a type H.265 reserves, is H.264. Read as
// H.264's, the header's type 0 or 2–4 is none an H.264 packetizer sends
// (0 is unspecified, 2–4 the Extended profile's data partitions), so it is
// H.265; where both readings are plausible (an H.265 IDR, CRA, AUD or SEI
// reads as an H.264 SEI or end of sequence), the second byte 0x01
// decides for H.265.
func rtpCodec(payload []byte) string {
	if len(payload) < 3 || payload[0]&0x81 != 0 || payload[1]>>3 != 0 || payload[1]&0x07 == 0 {
		return codecH264
	}
	switch t := payload[0] >> 1 & 0x3f; {
	case t >= 10 && t <= 15, t >= 22 && t <= 31, t >= 41 && t <= 47, t >= 51:
		return codecH264 // reserved or unspecified in H.265
	}
	if t264 := payload[0] & 0x1f; t264 == 0 || t264 >= 2 && t264 <= 4 || payload[1] == 0x01 {
		return codecH265
	}
	return codecH264
}

// rtpVideo turns one SSRC's payloads of a dynamic payload type into
// access units: the codec its first packet says (rtpCodec), the
// depacketizer for it, and the gatherer of each timestamp's NAL units.
type rtpVideo struct {
	codec  string
	depack depacketizer
	units  auGatherer
}

func newRTPVideo(first []byte) rtpVideo {
	codec := rtpCodec(first)
	return rtpVideo{codec: codec, depack: depacketizer{h265: codec == codecH265}, units: auGatherer{codec: codec}}
}

// depacketizer undoes RFC 6184 packetization for one SSRC: single NAL
// unit packets, STAP-A and FU-A (non-interleaved mode); with h265 set,
// RFC 7798's: single NAL unit packets, aggregation packets (48) and
// fragmentation units (49), without DONL fields.
type depacketizer struct {
	h265     bool
	fragment []byte // the FU-A NAL being reassembled, nil when none
	lostFU   int    // FU-A fragments dropped because their start was lost
	lostPACI int    // H.265 PACI packets that carried nothing readable
	// interleaved counts H.264 packets of interleaved mode (STAP-B, MTAP16,
	// MTAP24, FU-B: packetization-mode 2), which normsim does not read;
	// ignored, those of the types RFC 6184 leaves undefined (0, 30, 31),
	// which a receiver ignores too.
	interleaved, ignored int
}

func (d *depacketizer) push(payload []byte) [][]byte {
	if len(payload) == 0 {
		return nil
	}
	if d.h265 {
		return d.pushH265(payload)
	}
	switch t := payload[0] & 0x1f; {
	case t >= 1 && t <= 23:
		d.fragment = nil
		return [][]byte{payload}
	case t == h264STAPA:
		d.fragment = nil
		return aggregated(payload[1:])
	case t == h264FUA:
		if len(payload) < 2 {
			d.lostFU++ // no FU header: nothing of it can be placed
			return nil
		}
		// The NAL header: F and NRI from the indicator, type from the FU header.
		return d.fragmentUnit(payload[1], []byte{payload[0]&0xe0 | payload[1]&0x1f}, payload[2:])
	case t == h264STAPB || t == h264MTAP16 || t == h264MTAP24 || t == h264FUB:
		d.fragment = nil
		d.interleaved++
		return nil
	}
	d.ignored++ // 0, 30, 31: RFC 6184 5.2, receivers ignore them
	return nil
}

// pushH265 is push for RFC 7798.
func (d *depacketizer) pushH265(payload []byte) [][]byte {
	if len(payload) < 3 {
		return nil
	}
	switch t := payload[0] >> 1 & 0x3f; t {
	case 48: // aggregation packet
		d.fragment = nil
		return aggregated(payload[2:])
	case 49: // fragmentation unit
		// The NAL header: the payload header's with the FU's type.
		return d.fragmentUnit(payload[2], []byte{payload[0]&0x81 | (payload[2]&0x3f)<<1, payload[1]}, payload[3:])
	case 50: // PACI: the payload it carries (a NAL unit, an AP or an FU), after its header extension
		if len(payload) < 4 {
			d.lostPACI++
			return nil
		}
		phs := int(payload[2]&0x01)<<4 | int(payload[3]>>4)
		if len(payload) < 4+phs+1 {
			d.lostPACI++
			return nil
		}
		cType := payload[2] >> 1 & 0x3f
		inner := append([]byte{payload[0]&0x81 | cType<<1, payload[1]}, payload[4+phs:]...)
		if cType == 50 {
			d.lostPACI++ // a PACI may not carry a PACI (RFC 7798 4.4.4)
			return nil
		}
		return d.pushH265(inner)
	default:
		d.fragment = nil
		return [][]byte{payload}
	}
}

// aggregated splits an aggregation packet's body (STAP-A, H.265's AP):
// NAL units, each after its 16-bit size.
func aggregated(b []byte) [][]byte {
	var nals [][]byte
	for len(b) >= 2 {
		n := int(b[0])<<8 | int(b[1])
		if n == 0 || 2+n > len(b) {
			break
		}
		nals = append(nals, b[2:2+n])
		b = b[2+n:]
	}
	return nals
}

// fragmentUnit adds one fragment (FU-A, H.265's FU) to the NAL unit being
// rebuilt: fu is the FU header (start and end bits), header the NAL
// header a start restores. It returns the NAL unit the end bit completes.
func (d *depacketizer) fragmentUnit(fu byte, header, data []byte) [][]byte {
	start, end := fu&0x80 != 0, fu&0x40 != 0
	switch {
	case start:
		d.fragment = append(header, data...)
	case d.fragment != nil:
		d.fragment = append(d.fragment, data...)
	default:
		d.lostFU++
		return nil
	}
	if !end {
		return nil
	}
	nal := d.fragment
	d.fragment = nil
	return [][]byte{nal}
}
