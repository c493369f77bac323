package media

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/asticode/go-astits"
	"github.com/pion/rtp"

	"github.com/normsim/normsim/sim"
)

// Real SPS NAL units from libx264: testsrc2 at 320x180 (High, level 1.2,
// height cropped from 192) and at 1280x720 with -profile:v main.
var (
	spsHigh320x180 = mustHex("6764000cacb202833f3e0220000003002000000641e28549")
	spsMain1280    = mustHex("674d401fd9005005bb011000000300100000030320f1832480")
	ppsNAL         = []byte{0x68, 0xce, 0x3c, 0x80} // CAVLC
	ppsCABAC       = []byte{0x68, 0xee, 0x3c, 0x80}
)

func mustHex(s string) []byte {
	b, err := hex.DecodeString(s)
	if err != nil {
		panic(err)
	}
	return b
}

const frameTicks25 = 3600 // 25 fps at 90 kHz

var t0 = time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)

// frameAt is when the receiver gets frame i: one every 40 ms.
func frameAt(i int) time.Time { return t0.Add(time.Duration(i) * 40 * time.Millisecond) }

// testFrame is one synthetic video frame.
type testFrame struct {
	pts      int64
	key      bool
	sps      []byte // on keyframes; spsHigh320x180 when nil
	pps      []byte // on keyframes; ppsNAL (CAVLC) when nil
	pcrShift int64  // 90 kHz ticks added to its PCR
	di       bool   // discontinuity indicator on its first packet
	h265     bool   // H.265 NAL units (muxTS then declares H.265 video)
	rai      bool   // random_access_indicator even on a non-keyframe
	// only: the PES carries these NAL units instead of a picture (an
	// access unit delimiter, parameter sets)
	only [][]byte
	sei  []byte // an SEI NAL unit sent before the picture
	// noPCR: its first packet carries no PCR (the next frame's does).
	noPCR bool
}

// gopFrames are n frames at 25 fps from pts0, a keyframe every gop.
func gopFrames(n, gop int, pts0 int64) []testFrame {
	fs := make([]testFrame, n)
	for i := range fs {
		fs[i] = testFrame{pts: pts0 + int64(i)*frameTicks25, key: i%gop == 0}
	}
	return fs
}

// nals are a frame's NAL units: SPS, PPS and a big IDR slice on a
// keyframe, a smaller non-IDR slice otherwise (payload bytes never form a
// start code).
func (f testFrame) nals() [][]byte {
	if f.only != nil {
		return f.only
	}
	if f.sei != nil {
		g := f
		g.sei = nil
		return append([][]byte{f.sei}, g.nals()...)
	}
	if f.h265 {
		// Two-byte headers, the type in bits 1–6 of the first: VPS 32,
		// SPS 33, PPS 34, IDR_W_RADL 19 (an IRAP picture), TRAIL_R 1.
		if !f.key {
			return [][]byte{append([]byte{0x02, 0x01}, bytes.Repeat([]byte{0xab}, 600)...)}
		}
		return [][]byte{{0x40, 0x01, 0x0c}, {0x42, 0x01, 0x01}, {0x44, 0x01, 0xc1},
			append([]byte{0x26, 0x01}, bytes.Repeat([]byte{0xcd}, 2500)...)}
	}
	if !f.key {
		return [][]byte{append([]byte{0x41, 0x9a}, bytes.Repeat([]byte{0xab}, 600)...)}
	}
	sps := f.sps
	if sps == nil {
		sps = spsHigh320x180
	}
	pps := f.pps
	if pps == nil {
		pps = ppsNAL
	}
	return [][]byte{sps, pps, append([]byte{0x65, 0x88}, bytes.Repeat([]byte{0xcd}, 2500)...)}
}

func annexB(nals [][]byte) []byte {
	var b []byte
	for _, n := range nals {
		b = append(append(b, 0, 0, 0, 1), n...)
	}
	return b
}

// muxed is a TS stream as packets, each with the frame it belongs to
// (tables written before a frame belong to it).
type muxed struct {
	packets [][]byte
	frameOf []int
}

// muxTS writes the frames on videoPID with the astits muxer (PCR on the
// video PID a little behind the PTS, RAI on keyframes, which also makes
// the muxer send PAT and PMT first); extra streams are listed in the PMT.
func muxTS(t *testing.T, fs []testFrame, videoPID uint16, extra ...astits.PMTElementaryStream) muxed {
	t.Helper()
	var buf bytes.Buffer
	mx := astits.NewMuxer(context.Background(), &buf)
	videoType := astits.StreamTypeH264Video
	if len(fs) > 0 && fs[0].h265 {
		videoType = astits.StreamTypeH265Video
	}
	if err := mx.AddElementaryStream(astits.PMTElementaryStream{ElementaryPID: videoPID, StreamType: videoType}); err != nil {
		t.Fatal(err)
	}
	for _, es := range extra {
		if err := mx.AddElementaryStream(es); err != nil {
			t.Fatal(err)
		}
	}
	mx.SetPCRPID(videoPID)
	var m muxed
	for i, f := range fs {
		_, err := mx.WriteData(&astits.MuxerData{
			PID: videoPID,
			AdaptationField: &astits.PacketAdaptationField{
				HasPCR: !f.noPCR, PCR: &astits.ClockReference{Base: f.pts - 9000 + f.pcrShift},
				RandomAccessIndicator: f.key || f.rai, DiscontinuityIndicator: f.di,
			},
			PES: pes(0xE0, f.pts, annexB(f.nals())),
		})
		if err != nil {
			t.Fatal(err)
		}
		m.take(&buf, i)
	}
	return m
}

// writeAudio adds one AAC access unit on pid to m, as frame i's: two
// ADTS frames at 48 kHz, 42.7 ms, which normsim reads as a decoder does
// (audio whose frames cannot be read is not judged seamless). The
// frames are a little longer than the video's 40 ms the PES follow, and
// within half an AAC frame of it.
func writeAudio(t *testing.T, mx *astits.Muxer, buf *bytes.Buffer, m *muxed, pid uint16, pts int64, frame int) {
	t.Helper()
	const size = 150
	adts := append([]byte{0xff, 0xf1, 0x4c, 0x80 | size>>11, byte(size >> 3 & 0xff), byte(size&7)<<5 | 0x1f, 0xfc}, bytes.Repeat([]byte{0x21}, size-7)...)
	if _, err := mx.WriteData(&astits.MuxerData{PID: pid, PES: pes(0xC0, pts, append(slices.Clone(adts), adts...))}); err != nil {
		t.Fatal(err)
	}
	m.take(buf, frame)
}

func pes(streamID uint8, pts int64, data []byte) *astits.PESData {
	return &astits.PESData{
		Header: &astits.PESHeader{StreamID: streamID, OptionalHeader: &astits.PESOptionalHeader{
			MarkerBits: 2, DataAlignmentIndicator: true,
			PTSDTSIndicator: astits.PTSDTSIndicatorOnlyPTS, PTS: &astits.ClockReference{Base: pts},
		}},
		Data: data,
	}
}

func (m *muxed) take(buf *bytes.Buffer, frame int) {
	b := buf.Bytes()
	for off := 0; off+tsPacketSize <= len(b); off += tsPacketSize {
		m.packets = append(m.packets, bytes.Clone(b[off:off+tsPacketSize]))
		m.frameOf = append(m.frameOf, frame)
	}
	buf.Reset()
}

// paced packs the packets of the frames keep picks as a sender that
// paces by frame does: each frame's packets in datagrams of their own (at
// most seven packets), sent at its frame's time (shifted by delay), or at
// the time at gives it when at is not nil.
func (m muxed) paced(keep func(frame int) bool, delay time.Duration, at func(frame int) time.Time) []sim.MediaDatagram {
	if at == nil {
		at = frameAt
	}
	var dgs []sim.MediaDatagram
	for i, p := range m.packets {
		f := m.frameOf[i]
		if !keep(f) {
			continue
		}
		t := at(f).Add(delay)
		if n := len(dgs); n == 0 || !dgs[n-1].At.Equal(t) || len(dgs[n-1].Data) == 7*tsPacketSize {
			dgs = append(dgs, sim.MediaDatagram{At: t, From: "10.0.0.1:5000"})
		}
		dgs[len(dgs)-1].Data = append(dgs[len(dgs)-1].Data, p...)
	}
	return dgs
}

// datagrams packs the packets of the frames keep picks, seven to a
// datagram as a real sender does, each arriving when its first packet's
// frame does (shifted by delay).
func (m muxed) datagrams(keep func(frame int) bool, delay time.Duration) []sim.MediaDatagram {
	var dgs []sim.MediaDatagram
	var cur []byte
	curFrame := -1
	flush := func() {
		if len(cur) > 0 {
			dgs = append(dgs, sim.MediaDatagram{At: frameAt(curFrame).Add(delay), From: "10.0.0.1:5000", Data: cur})
		}
		cur = nil
	}
	for i, p := range m.packets {
		if !keep(m.frameOf[i]) {
			continue
		}
		if len(cur) == 0 {
			curFrame = m.frameOf[i]
		}
		cur = append(cur, p...)
		if len(cur) == 7*tsPacketSize {
			flush()
		}
	}
	flush()
	return dgs
}

// without is m less n packets from the first that pick says.
func (m muxed) without(n int, pick func(i int) bool) muxed {
	for i := range m.packets {
		if pick(i) {
			end := min(i+n, len(m.packets))
			return muxed{slices.Concat(m.packets[:i], m.packets[end:]), slices.Concat(m.frameOf[:i], m.frameOf[end:])}
		}
	}
	panic("no packet picked")
}

// repeat sends the first packet pick says n more times, right after it.
func (m muxed) repeat(n int, pick func(i int) bool) muxed {
	for i := range m.packets {
		if pick(i) {
			var out muxed
			out.packets, out.frameOf = slices.Clone(m.packets[:i+1]), slices.Clone(m.frameOf[:i+1])
			for range n {
				out.packets, out.frameOf = append(out.packets, bytes.Clone(m.packets[i])), append(out.frameOf, m.frameOf[i])
			}
			out.packets, out.frameOf = append(out.packets, m.packets[i+1:]...), append(out.frameOf, m.frameOf[i+1:]...)
			return out
		}
	}
	panic("no packet picked")
}

// withoutPIDs is m less the packets on pids.
func (m muxed) withoutPIDs(pids ...uint16) muxed {
	var out muxed
	for i, p := range m.packets {
		drop := false
		for _, pid := range pids {
			drop = drop || packetPID(p) == pid
		}
		if !drop {
			out.packets = append(out.packets, p)
			out.frameOf = append(out.frameOf, m.frameOf[i])
		}
	}
	return out
}

// withoutPIDsIn is m without the packets of pids in the frames in picks.
func (m muxed) withoutPIDsIn(in func(frame int) bool, pids ...uint16) muxed {
	var out muxed
	for i, p := range m.packets {
		drop := false
		for _, pid := range pids {
			drop = drop || packetPID(p) == pid && in(m.frameOf[i])
		}
		if !drop {
			out.packets = append(out.packets, p)
			out.frameOf = append(out.frameOf, m.frameOf[i])
		}
	}
	return out
}

// muxAV writes the frames on PID 256 and, after each frame i for which
// audio says so, one AAC access unit on PID 258 at the PTS it gives.
func muxAV(t *testing.T, fs []testFrame, audio func(i int, f testFrame) (pts int64, ok bool)) muxed {
	t.Helper()
	var buf bytes.Buffer
	mx := astits.NewMuxer(context.Background(), &buf)
	_ = mx.AddElementaryStream(astits.PMTElementaryStream{ElementaryPID: 256, StreamType: astits.StreamTypeH264Video})
	_ = mx.AddElementaryStream(astits.PMTElementaryStream{ElementaryPID: 258, StreamType: astits.StreamTypeAACAudio})
	mx.SetPCRPID(256)
	var m muxed
	for i, f := range fs {
		if _, err := mx.WriteData(&astits.MuxerData{PID: 256, AdaptationField: &astits.PacketAdaptationField{HasPCR: true, PCR: &astits.ClockReference{Base: f.pts - 9000}, RandomAccessIndicator: f.key}, PES: pes(0xE0, f.pts, annexB(f.nals()))}); err != nil {
			t.Fatal(err)
		}
		m.take(&buf, i)
		if pts, ok := audio(i, f); ok {
			writeAudio(t, mx, &buf, &m, 258, pts, i)
		}
	}
	return m
}

func from(k int) func(int) bool   { return func(i int) bool { return i >= k } }
func before(k int) func(int) bool { return func(i int) bool { return i < k } }

// rtpSender packetizes H.264 per RFC 6184: SPS and PPS in a STAP-A, big
// NAL units in FU-A fragments, small ones alone.
type rtpSender struct {
	ssrc uint32
	seq  uint16
}

func (s *rtpSender) frame(f testFrame, at time.Time) []sim.MediaDatagram {
	if f.h265 {
		return s.frameH265(f, at)
	}
	var payloads [][]byte
	nals := f.nals()
	if f.key {
		stap := []byte{0x18}
		for _, n := range nals[:2] {
			stap = append(append(stap, byte(len(n)>>8), byte(len(n))), n...)
		}
		payloads = append(payloads, stap)
		nals = nals[2:]
	}
	for _, n := range nals {
		if len(n) <= 1000 {
			payloads = append(payloads, n)
			continue
		}
		body := n[1:]
		for off := 0; off < len(body); off += 1000 {
			end := min(off+1000, len(body))
			fu := []byte{n[0]&0xe0 | h264FUA, n[0] & 0x1f}
			if off == 0 {
				fu[1] |= 0x80
			}
			if end == len(body) {
				fu[1] |= 0x40
			}
			payloads = append(payloads, append(fu, body[off:end]...))
		}
	}
	var dgs []sim.MediaDatagram
	for i, pl := range payloads {
		dgs = append(dgs, s.packet(96, uint32(f.pts), i == len(payloads)-1, pl, at))
	}
	return dgs
}

// frameH265 packetizes per RFC 7798: VPS, SPS and PPS in an aggregation
// packet (48), big NAL units in fragmentation units (49), small ones alone.
func (s *rtpSender) frameH265(f testFrame, at time.Time) []sim.MediaDatagram {
	var payloads [][]byte
	nals := f.nals()
	if f.key {
		ap := []byte{48 << 1, 0x01}
		for _, n := range nals[:3] {
			ap = append(append(ap, byte(len(n)>>8), byte(len(n))), n...)
		}
		payloads = append(payloads, ap)
		nals = nals[3:]
	}
	for _, n := range nals {
		if len(n) <= 1000 {
			payloads = append(payloads, n)
			continue
		}
		body := n[2:]
		for off := 0; off < len(body); off += 1000 {
			end := min(off+1000, len(body))
			fu := []byte{n[0]&0x81 | 49<<1, n[1], n[0] >> 1 & 0x3f}
			if off == 0 {
				fu[2] |= 0x80
			}
			if end == len(body) {
				fu[2] |= 0x40
			}
			payloads = append(payloads, append(fu, body[off:end]...))
		}
	}
	var dgs []sim.MediaDatagram
	for i, pl := range payloads {
		dgs = append(dgs, s.packet(96, uint32(f.pts), i == len(payloads)-1, pl, at))
	}
	return dgs
}

func (s *rtpSender) packet(pt uint8, ts uint32, marker bool, payload []byte, at time.Time) sim.MediaDatagram {
	p := rtp.Packet{Header: rtp.Header{Version: 2, PayloadType: pt, SequenceNumber: s.seq, Timestamp: ts, SSRC: s.ssrc, Marker: marker}, Payload: payload}
	s.seq++
	b, err := p.Marshal()
	if err != nil {
		panic(err)
	}
	return sim.MediaDatagram{At: at, From: "10.0.0.1:5004", Data: b}
}

// frames sends frames [lo, hi) of fs, each arriving at its frameAt.
func (s *rtpSender) frames(fs []testFrame, lo, hi int) []sim.MediaDatagram {
	var dgs []sim.MediaDatagram
	for i := lo; i < hi; i++ {
		dgs = append(dgs, s.frame(fs[i], frameAt(i))...)
	}
	return dgs
}

// wrapMP2T puts TS datagrams into RTP, payload type 33, timestamps from
// the arrival time on a 90 kHz clock.
func (s *rtpSender) wrapMP2T(dgs []sim.MediaDatagram) []sim.MediaDatagram {
	out := make([]sim.MediaDatagram, len(dgs))
	for i, dg := range dgs {
		out[i] = s.packet(ptMP2T, uint32(dg.At.Sub(t0)/time.Microsecond*9/100), false, dg.Data, dg.At)
	}
	return out
}

func hasDefect(r *sim.MediaReport, check, stream string) bool {
	for _, d := range r.Defects {
		if d.Check == check && (stream == "" || d.Stream == stream) {
			return true
		}
	}
	return false
}

func defectNamed(r *sim.MediaReport, check string) *sim.MediaDefect {
	for i, d := range r.Defects {
		if d.Check == check {
			return &r.Defects[i]
		}
	}
	return nil
}

func checks(r *sim.MediaReport) string {
	var cs []string
	for _, d := range r.Defects {
		cs = append(cs, d.Check+"["+d.Stream+","+d.AtFault+"]")
	}
	return strings.Join(cs, " ")
}

// renumbered is m with the program its PAT lists, and its PMT's
// program_number, changed to number, in the packets of the frames pick
// says; each section's CRC is made again.
func (m muxed) renumbered(number uint16, pick func(frame int) bool) muxed {
	out := muxed{frameOf: m.frameOf}
	for i, p := range m.packets {
		p = slices.Clone(p)
		pid := uint16(p[1]&0x1f)<<8 | uint16(p[2])
		if pick(m.frameOf[i]) && p[1]&0x40 != 0 && (pid == 0 || pid == 0x1000) {
			sec := section(p)
			length := int(binary.BigEndian.Uint16(sec[1:3]) & 0xfff)
			if pid == 0 {
				for k := 8; k+4 <= 3+length-4; k += 4 {
					if binary.BigEndian.Uint16(sec[k:]) != 0 {
						binary.BigEndian.PutUint16(sec[k:], number)
					}
				}
			} else {
				binary.BigEndian.PutUint16(sec[3:], number)
			}
			binary.BigEndian.PutUint32(sec[3+length-4:], crc32MPEG2(sec[:3+length-4]))
		}
		out.packets = append(out.packets, p)
	}
	return out
}

// crc32MPEG2 is the CRC of ISO 13818-1's sections.
func crc32MPEG2(b []byte) uint32 {
	crc := uint32(0xffffffff)
	for _, c := range b {
		crc ^= uint32(c) << 24
		for range 8 {
			if crc&0x80000000 != 0 {
				crc = crc<<1 ^ 0x04c11db7
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}
