package media

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/asticode/go-astits"
	"github.com/pion/rtp"

	"github.com/normsim/normsim/sim"
)

// Codec names, as the PMT's stream type or the RTP payload says.
const (
	codecH264       = "H.264"
	codecH265       = "H.265"
	codecMPEG1Video = "MPEG-1 video"
	codecMPEG2Video = "MPEG-2 video"
	codecAAC        = "AAC"
	codecMPEGAudio  = "MPEG audio"
	codecAC3        = "AC-3"
	codecEAC3       = "E-AC-3"
	codecOpus       = "Opus"
)

// codecMPEGVideo is MPEG-1 or MPEG-2 video known by its start codes
// alone: no PMT said which, nor a sequence header (mpegVideoCodec).
const codecMPEGVideo = "MPEG-1/2 video"

// Clock wraps: a PES PTS has 33 bits, an RTP timestamp 32; a PCR is a
// 33-bit base at 90 kHz times 300 plus a 27 MHz extension.
const (
	ptsWrap = int64(1) << 33
	rtpWrap = int64(1) << 32
	pcrWrap = ptsWrap * 300
)

// unit is one access unit (frame) a side sent.
type unit struct {
	at time.Time
	dg int // index of the datagram it began in
	// ownsStart: the unit's first byte is its datagram's first, so
	// cutting the stream before that datagram leaves the units before it
	// whole.
	ownsStart bool
	// pkt is the index of its first TS packet on the side, -1 for a
	// unit RTP carried as NAL units.
	pkt int
	pts int64
	// hasPTS: it was sent with one, or one its place implies (implyPTS).
	hasPTS bool
	key    bool
	params string
	// sets are the parameter sets sent with it or since the picture
	// before (setSPS…).
	sets uint8
	// di: the discontinuity indicator on its first packet says its time
	// base may jump.
	di bool
	// recovery: a recovery point SEI says a decoder starting here shows
	// correct pictures recoveryFrames frames on (intra refresh).
	recovery       bool
	recoveryFrames int
	// openIRAP, rasl: an H.265 CRA or BLA that RASL pictures may follow,
	// and such a picture (codecUnit).
	openIRAP, rasl bool
	// dur is how long an audio unit's frames play, and frame one frame's
	// duration, in 90 kHz ticks; 0 where they cannot be read.
	dur, frame int64
	// cutShort: the source's last PES on its stream, which its sender
	// stopped in before its declared length (pesUnit.cutShort).
	cutShort bool
}

// track is one elementary stream of one side: a TS PID or an RTP SSRC.
type track struct {
	name  string // "PID 256", "SSRC 0x1234abcd"
	pid   *uint16
	ssrc  *uint32
	kind  string // video, audio, data
	codec string
	wrap  int64
	units []unit
	// noPTS counts the units sent without a PTS; longestNoPTS is the
	// longest time, in 90 kHz ticks, the stream went without one.
	noPTS        int
	longestNoPTS int64
	// sparse: a PMT names it as a stream that sends only now and then
	// (pmtStream.sparse).
	sparse bool
}

// tsPacket is what the receiver needs of one TS packet of a side.
type tsPacket struct {
	dg      int
	at      time.Time
	pid     uint16
	cc      uint8
	payload bool
	di, rai bool
	pcr     int64 // 27 MHz, -1 when the packet carries none
	// tei: the transport_error_indicator is set, the packet marked errored.
	tei bool
}

// pesUnit is one PES the demuxer assembled, kept until the side's stream
// types are known (a target may lack the PMT the source had).
type pesUnit struct {
	pid      uint16
	first    int // index of its first TS packet
	pts      int64
	hasPTS   bool
	streamID uint8
	data     []byte
	// missing: the bytes its PES_packet_length declared that never came,
	// the side's last PES on its PID having stopped short of it (0 for a
	// whole PES, and for one that declared no length: unbounded, as most
	// video's, it ends wherever the next begins).
	missing int
	// cutShort: the source stopped in it, and the target did not send
	// its rest (splitPESAtSwitch): the source cut that frame short.
	cutShort bool
	// lacked, rest: where the target's first packets on the PID went on
	// with the source's PES by other than the bytes it lacked
	// (splitPESAtSwitch), how many it lacked and how many the target
	// sent: fewer, and the source cut it short; more, and it was made
	// whole by the first of them, the rest of them read by no receiver.
	// Either way the target's bytes that do not fit are its damage
	// (checkCutShort). Both 0 otherwise.
	lacked, rest int
}

// pmtStream is one elementary stream a PMT names: its PID and stream
// type, and what its descriptors say of a type that names no codec of
// its own (0x06, private PES).
type pmtStream struct {
	pid uint16
	typ astits.StreamType
	// format is its registration descriptor's format_identifier ("Opus",
	// "CUEI"), 0 without one.
	format uint32
	// ac3, eac3: a DVB AC-3 or E-AC-3 descriptor; subtitles: a DVB
	// subtitling, teletext or VBI one.
	ac3, eac3, subtitles bool
}

func newPMTStream(es *astits.PMTElementaryStream) pmtStream {
	ps := pmtStream{pid: es.ElementaryPID, typ: es.StreamType}
	for _, d := range es.ElementaryStreamDescriptors {
		switch {
		case d.Registration != nil:
			ps.format = d.Registration.FormatIdentifier
		case d.AC3 != nil:
			ps.ac3 = true
		case d.EnhancedAC3 != nil:
			ps.eac3 = true
		case d.Subtitling != nil || d.Teletext != nil || d.VBITeletext != nil || d.VBIData != nil:
			ps.subtitles = true
		}
	}
	return ps
}

// Registration descriptors' format identifiers (SMPTE RA): SCTE 35 cues
// and ID3 timed metadata, and audio carried as private PES (stream type
// 0x06).
const (
	formatCUEI = 0x43554549 // "CUEI"
	formatID3  = 0x49443320 // "ID3 "
	formatOpus = 0x4f707573 // "Opus"
	formatAC3  = 0x41432d33 // "AC-3"
	formatEAC3 = 0x45414333 // "EAC3"
)

// sparse says the stream sends only when it has something to say: SCTE
// 35 cues, private sections, DSM-CC, timed metadata, subtitles and
// teletext. TR 101 290's PID_error leaves its period to the user for
// these; a window of seconds without a packet is no fault.
func (es pmtStream) sparse() bool {
	switch es.typ {
	case astits.StreamTypePrivateSection, astits.StreamTypeSCTE35, astits.StreamTypeMetadata, 0x0b, 0x0c, 0x0d:
		return true
	}
	return es.subtitles || es.format == formatCUEI || es.format == formatID3
}

// tsState is a side's transport stream.
type tsState struct {
	raw                          [][]byte // packets with their sync byte, as fed to the demuxer
	rawDg                        []int
	pkts                         []tsPacket
	syncErrors                   int
	parseErrors                  int
	firstPAT, firstPMT, firstPES int         // packet indexes, -1 when none
	pmt                          []pmtStream // every program's streams
	pmtPIDs                      []uint16    // the PIDs PMTs came on, in order
	programs                     []uint16    // the program numbers PATs listed, in order (0, the NIT's, left out)
	pcrPID                       int         // -1 when no PMT named one
	pes                          []pesUnit
	// lastWithPayload is each PID's last packet with payload, for telling
	// a duplicate (ISO 13818-1 2.4.3.3) from a counter that stopped.
	lastWithPayload map[uint16]lastPacket
	// duplicates counts the copies dropped so, for the report.
	duplicates int
	// clock is the side's PCRs (clockSamples), read once the PMT named
	// the PCR PID.
	clock []clockSample
}

// clockSample is one PCR of a side's clock: flagAt is the packet that set
// the discontinuity indicator on the PCR PID since the PCR before (ISO
// 13818-1: the flag speaks for that PID's next PCR), -1 when none did.
type clockSample struct {
	tsPacket
	flagAt int
}

func (c clockSample) flagged() bool { return c.flagAt >= 0 }

// clockSamples are the side's PCRs on its PCR PID, or on any PID when no
// PMT named one, in order.
func (st *tsState) clockSamples() []clockSample {
	var out []clockSample
	flagAt := -1
	for i, p := range st.pkts {
		if p.pid == 0x1fff || st.pcrPID >= 0 && int(p.pid) != st.pcrPID {
			continue
		}
		if p.di && flagAt < 0 {
			flagAt = i
		}
		if p.pcr < 0 {
			continue
		}
		out = append(out, clockSample{p, flagAt})
		flagAt = -1
	}
	return out
}

// lastPacket is a PID's last packet with payload and whether it was
// already sent twice.
type lastPacket struct {
	data     []byte
	repeated bool
}

// rtpTrack is one SSRC's RTP packets on a side.
type rtpTrack struct {
	ssrc       uint32
	recv       rtpReceive
	mp2t       bool
	packets    int
	lastTS     uint32
	lastAt     time.Time
	seqBreaks  int
	firstBreak string
	// copies are packets sent twice, byte for byte, which a receiver's
	// jitter buffer drops; reused, a sequence number sent again with
	// other contents (dropped as well, and what it carried lost).
	copies, reused int
	firstReuse     string
	// otherPT counts packets of another payload type than the stream's,
	// which a receiver set up for the stream's drops.
	otherPT      int
	firstOtherPT string
	// tsLeaps: an MP2T stream's timestamps (the sender's clock) ran back
	// or leaped ahead of the time between the packets.
	tsLeaps   int
	firstLeap string
	rtpVideo         // of a video stream; unused for MP2T
	media     *track // the video stream, nil for MP2T
}

// rtpReceive is what a receiver keeps of one SSRC's stream to drop the
// packets it drops: the stream's payload type (its first packet's; a
// receiver is set up for one) and the packet before.
type rtpReceive struct {
	started  bool
	pt       uint8
	lastSeq  uint16
	lastData []byte
}

// rtpDrop is what a receiver makes of an RTP packet.
type rtpDrop int

const (
	rtpKeep    rtpDrop = iota
	rtpCopy            // the packet before, sent twice: the jitter buffer drops it
	rtpReused          // its sequence number again, other contents: dropped as well
	rtpOtherPT         // not the stream's payload type: no depayloader for it
)

func (r *rtpReceive) take(p *rtp.Packet, data []byte) rtpDrop {
	if r.started && p.SequenceNumber == r.lastSeq {
		if bytes.Equal(data, r.lastData) {
			return rtpCopy
		}
		return rtpReused
	}
	if !r.started {
		r.started, r.pt = true, p.PayloadType
	}
	r.lastSeq, r.lastData = p.SequenceNumber, data
	if p.PayloadType != r.pt {
		return rtpOtherPT
	}
	return rtpKeep
}

// rtpUnit gathers the NAL units of one RTP timestamp.
type rtpUnit struct {
	ts   uint32
	dg   int
	at   time.Time
	nals [][]byte
}

// auGatherer gathers one RTP H.264 stream's NAL units into access units
// by their timestamp (RFC 6184 5.1). The NAL units of a timestamp that
// carried no picture (a delimiter, SEI, parameter sets) go with the next
// picture's, as a receiver's parser joins them: they are no frame.
type auGatherer struct {
	codec   string
	pending *rtpUnit
	carry   [][]byte
}

// maxCarried bounds the NAL units held for the next picture: a stream of
// delimiters alone must not grow without end.
const maxCarried = 64

// push adds the NAL units of a packet, and returns the access unit the
// packet's timestamp ended, if it held a picture.
func (g *auGatherer) push(ts uint32, dg int, at time.Time, nals [][]byte) *rtpUnit {
	var done *rtpUnit
	if g.pending != nil && g.pending.ts != ts {
		done = g.flush()
	}
	if g.pending == nil {
		g.pending = &rtpUnit{ts: ts, dg: dg, at: at, nals: g.carry}
		g.carry = nil
	}
	g.pending.nals = append(g.pending.nals, nals...)
	return done
}

// flush ends the access unit being gathered, and returns it if it held
// a picture.
func (g *auGatherer) flush() *rtpUnit {
	au := g.pending
	g.pending = nil
	if au == nil {
		return nil
	}
	if !inspectNALs(g.codec, au.nals).slices {
		g.carry = au.nals[max(0, len(au.nals)-maxCarried):]
		return nil
	}
	return au
}

// rtpRef is one RTP packet's place in the sequence, for the checks
// across the switch.
type rtpRef struct {
	ssrc uint32
	seq  uint16
	ts   uint32
	at   time.Time
	mp2t bool
}

// side is what the receiver got from one sender, demuxed.
type side struct {
	name       string
	dgs        []sim.MediaDatagram
	formats    []string
	readable   int64
	unreadable int64
	tracks     []*track
	ts         tsState
	rtp        []*rtpTrack
	firstRTP   *rtpRef
	lastRTP    *rtpRef
	defects    []sim.MediaDefect
	// cutStart, cutEnd: the receiver's window began or ended the side,
	// not its sender, so frames were sent beyond it (the source's first
	// seconds are cut from a stream that ran before; the target runs on).
	cutStart, cutEnd bool
	// rtpBefore is, by SSRC, the receiver's state at the end of the side
	// heard before this one (readSideAfter).
	rtpBefore map[uint32]rtpReceive
}

// readSide reads every datagram of one side in arrival order: RTP
// headers and H.264 depacketization here, the TS packets gathered for
// demuxTS.
func readSide(name string, dgs []sim.MediaDatagram) *side { return readSideAfter(name, dgs, nil) }

// readSideAfter is readSide for a side whose datagrams the receiver got
// after before's, as one flow: an RTP packet this side sends first on an
// SSRC that is before's last on it, byte for byte, is a copy the jitter
// buffer drops (a target re-sending the source's last packet).
func readSideAfter(name string, dgs []sim.MediaDatagram, before *side) *side {
	s := &side{name: name, dgs: dgs}
	if before != nil {
		s.rtpBefore = map[uint32]rtpReceive{}
		for _, rt := range before.rtp {
			s.rtpBefore[rt.ssrc] = rt.recv
		}
	}
	s.ts.firstPAT, s.ts.firstPMT, s.ts.firstPES, s.ts.pcrPID = -1, -1, -1, -1
	for i, dg := range dgs {
		format, p := readDatagram(dg.Data)
		if format == sim.MediaUnknown {
			s.unreadable++
			continue
		}
		s.readable++
		if !slices.Contains(s.formats, format) {
			s.formats = append(s.formats, format)
		}
		switch format {
		case sim.MediaMPEGTS:
			s.addTSPackets(dg.Data, i)
		case sim.MediaRTPMP2T:
			if s.addRTP(p, dg.Data, i, dg.At, true) {
				s.addTSPackets(p.Payload, i)
			}
		case sim.MediaRTPH264:
			s.addRTP(p, dg.Data, i, dg.At, false)
		}
	}
	for _, rt := range s.rtp {
		rt.addUnit(rt.units.flush())
	}
	s.demuxTS()
	s.withinSideDefects()
	return s
}

func (s *side) addTSPackets(b []byte, dg int) {
	st := &s.ts
	if st.lastWithPayload == nil {
		st.lastWithPayload = map[uint16]lastPacket{}
	}
	for off := 0; off+tsPacketSize <= len(b); off += tsPacketSize {
		pkt := b[off : off+tsPacketSize]
		if pkt[0] != 0x47 {
			st.syncErrors++
			continue
		}
		if pkt[3]&0x10 != 0 && packetPID(pkt) != nullPID { // has payload; null packets' counters mean nothing
			pid := packetPID(pkt)
			last, seen := st.lastWithPayload[pid]
			if seen && !last.repeated && duplicatePacket(last.data, pkt) {
				// A receiver drops the copy; the demuxer must not see it
				// (astits would throw away the PES it falls in).
				st.lastWithPayload[pid] = lastPacket{data: last.data, repeated: true}
				st.duplicates++
				continue
			}
			st.lastWithPayload[pid] = lastPacket{data: pkt}
		}
		st.raw = append(st.raw, pkt)
		st.rawDg = append(st.rawDg, dg)
	}
}

// duplicatePacket: ISO 13818-1 2.4.3.3 lets a packet be sent twice, the
// copy the same byte for byte but for a PCR, which may be the current
// one. Anything else with the same counter is packets lost.
func duplicatePacket(prev, p []byte) bool {
	if !bytes.Equal(prev[:4], p[:4]) {
		return false
	}
	off := 4
	if p[3]&0x20 != 0 { // adaptation field
		n := int(p[4])
		if n != int(prev[4]) || 5+n > tsPacketSize {
			return false
		}
		af, paf := p[5:5+n], prev[5:5+n]
		if n > 0 && af[0]&0x10 != 0 && n >= 7 { // PCR flag: bytes 1–6 are the PCR
			if af[0] != paf[0] || !bytes.Equal(af[7:], paf[7:]) {
				return false
			}
		} else if !bytes.Equal(af, paf) {
			return false
		}
		off = 5 + n
	}
	return bytes.Equal(prev[off:], p[off:])
}

// addRTP reads one RTP packet (data, as it came) as a receiver does, and
// reports whether its payload goes on to the stream: a copy of the packet
// before, a sequence number used again, or a packet of another payload
// type than the stream's is dropped.
func (s *side) addRTP(p *rtp.Packet, data []byte, dg int, at time.Time, mp2t bool) bool {
	var rt *rtpTrack
	for _, t := range s.rtp {
		if t.ssrc == p.SSRC {
			rt = t
		}
	}
	if rt == nil {
		rt = &rtpTrack{ssrc: p.SSRC, mp2t: mp2t}
		if !mp2t {
			ssrc := p.SSRC
			rt.rtpVideo = newRTPVideo(p.Payload)
			rt.media = &track{name: fmt.Sprintf("SSRC 0x%08x", ssrc), ssrc: &ssrc, kind: "video", codec: rt.codec, wrap: rtpWrap}
			s.tracks = append(s.tracks, rt.media)
		}
		s.rtp = append(s.rtp, rt)
	}
	if prev, ok := s.rtpBefore[p.SSRC]; ok && !rt.recv.started && prev.started && p.SequenceNumber == prev.lastSeq && bytes.Equal(data, prev.lastData) {
		rt.copies++
		return false
	}
	prevSeq := rt.recv.lastSeq
	switch rt.recv.take(p, data) {
	case rtpCopy:
		rt.copies++
		return false
	case rtpReused:
		rt.reused++
		if rt.firstReuse == "" {
			rt.firstReuse = fmt.Sprintf("%d", p.SequenceNumber)
		}
		return false
	}
	first := rt.packets == 0
	rt.packets++
	if !first && p.SequenceNumber != prevSeq+1 {
		rt.seqBreaks++
		if rt.firstBreak == "" {
			rt.firstBreak = fmt.Sprintf("%d→%d", prevSeq, p.SequenceNumber)
		}
	}
	if p.PayloadType != rt.recv.pt {
		rt.otherPT++
		if rt.firstOtherPT == "" {
			rt.firstOtherPT = fmt.Sprintf("payload type %d at sequence number %d", p.PayloadType, p.SequenceNumber)
		}
		return false
	}
	if rt.mp2t && !first {
		// The MP2T timestamp is the sender's clock (RFC 2250): it runs on
		// with the time between the packets, as across the switch.
		if d := wrapDelta(int64(p.Timestamp)-int64(rt.lastTS), rtpWrap); d < 0 || d > int64(ms(at.Sub(rt.lastAt))*90)+100*90 {
			rt.tsLeaps++
			if rt.firstLeap == "" {
				rt.firstLeap = fmt.Sprintf("%+.1f ms in %.1f ms, at sequence number %d", ticksMs(d), ms(at.Sub(rt.lastAt)), p.SequenceNumber)
			}
		}
	}
	rt.lastTS, rt.lastAt = p.Timestamp, at
	ref := &rtpRef{ssrc: p.SSRC, seq: p.SequenceNumber, ts: p.Timestamp, at: at, mp2t: mp2t}
	if s.firstRTP == nil {
		s.firstRTP = ref
	}
	s.lastRTP = ref
	if mp2t {
		return true
	}
	if nals := rt.depack.push(p.Payload); len(nals) > 0 {
		rt.addUnit(rt.units.push(p.Timestamp, dg, at, nals))
	}
	return true
}

// addUnit adds an access unit of an H.264 stream as its frame.
func (rt *rtpTrack) addUnit(au *rtpUnit) {
	if au == nil || rt.media == nil {
		return
	}
	u := inspectNALs(rt.media.codec, au.nals)
	rt.media.units = append(rt.media.units, unit{at: au.at, dg: au.dg, pkt: -1, ownsStart: true, pts: int64(au.ts), hasPTS: true, key: u.key, params: u.params,
		recovery: u.recovery >= 0, recoveryFrames: u.recovery, openIRAP: u.openIRAP, rasl: u.rasl})
}

// demuxTS runs the side's TS packets through astits. The packet skipper
// sees every packet in order (also those without payload, which the
// demuxer drops), so it records counters, flags and PCRs; the packets
// parser is handed the packets of each payload unit just before astits
// parses them, so the data NextData returns next began with its first one.
func (s *side) demuxTS() {
	st := &s.ts
	if len(st.raw) == 0 {
		return
	}
	// The demuxer reads a copy whose counters run on without a break:
	// astits throws away the PES being gathered at a counter jump, even
	// one already whole, and a receiver does not (withinSideDefects
	// counts the jump from the packets as sent).
	feed := bytes.Join(st.raw, nil)
	counters := map[uint16]uint8{}
	for off := 0; off < len(feed); off += tsPacketSize {
		h := feed[off : off+4]
		pid := packetPID(h)
		cc, seen := counters[pid]
		if h[3]&0x10 != 0 && seen {
			cc = (cc + 1) % 16
		} else if !seen {
			cc = h[3] & 0x0f
		}
		counters[pid] = cc
		h[3] = h[3]&0xf0 | cc
		// astits throws a packet marked errored away, and the PES with
		// it; a receiver gets the frame and decodes it marked corrupt
		// (transportErrors says so).
		h[1] &^= 0x80
	}
	index := make(map[*astits.Packet]int, len(st.raw))
	ccFed := map[uint16]uint8{} // the counter astits last saw per PID
	next := 0
	skipper := func(p *astits.Packet) bool {
		// A packet whose adaptation field fails to parse never reaches
		// here: step over it by its PID and counter.
		for next < len(st.raw) && (packetPID(st.raw[next]) != p.Header.PID || feed[next*tsPacketSize+3]&0x0f != p.Header.ContinuityCounter) {
			next++
		}
		if next >= len(st.raw) {
			return true
		}
		dg := st.rawDg[next]
		tp := tsPacket{dg: dg, at: s.dgs[dg].At, pid: p.Header.PID, cc: st.raw[next][3] & 0x0f, payload: p.Header.HasPayload, pcr: -1, tei: st.raw[next][1]&0x80 != 0}
		if af := p.AdaptationField; p.Header.HasAdaptationField && af != nil {
			tp.di, tp.rai = af.DiscontinuityIndicator, af.RandomAccessIndicator
			if af.HasPCR && af.PCR != nil {
				tp.pcr = af.PCR.Base*300 + af.PCR.Extension
			}
		}
		for len(st.pkts) < next {
			st.pkts = append(st.pkts, tsPacket{dg: st.rawDg[len(st.pkts)], pid: 0x1fff, pcr: -1}) // unparsed: out of every check
		}
		st.pkts = append(st.pkts, tp)
		index[p] = next
		next++
		if p.Header.HasPayload {
			// astits lets go of the payload unit it is gathering on a
			// discontinuity indicator or a counter jump, even where this
			// packet starts the next: the unit before is whole then, and
			// a decoder decodes it (the jump is a defect of its own,
			// withinSideDefects). Shown continuous, it is kept.
			if last, ok := ccFed[p.Header.PID]; ok && p.Header.PayloadUnitStartIndicator {
				p.Header.ContinuityCounter = (last + 1) % 16
				if p.AdaptationField != nil {
					p.AdaptationField.DiscontinuityIndicator = false
				}
			}
			ccFed[p.Header.PID] = p.Header.ContinuityCounter
		}
		return false
	}
	// Each PID's last payload unit: the one the side may have stopped in.
	lastStart := map[uint16]int{}
	for i, p := range st.raw {
		if p[1]&0x40 != 0 && p[3]&0x10 != 0 {
			lastStart[packetPID(p)] = i
		}
	}
	missing := map[int]int{} // by a PES's first packet
	current := -1
	parser := func(ps []*astits.Packet) ([]*astits.DemuxerData, bool, error) {
		current = -1
		if i, ok := index[ps[0]]; ok {
			current = i
			if lastStart[ps[0].Header.PID] == i {
				missing[i] = unfinishedPES(ps)
			}
		}
		return nil, false, nil
	}
	dmx := astits.NewDemuxer(context.Background(), bytes.NewReader(feed),
		astits.DemuxerOptPacketSize(tsPacketSize), astits.DemuxerOptPacketSkipper(skipper), astits.DemuxerOptPacketsParser(parser))
	for range 2*len(st.raw) + 16 { // every call consumes a packet or ends
		d, err := dmx.NextData()
		if errors.Is(err, astits.ErrNoMorePackets) {
			break
		}
		if err != nil {
			st.parseErrors++
			continue
		}
		if current < 0 {
			continue
		}
		switch {
		case d.PAT != nil:
			if st.firstPAT < 0 {
				st.firstPAT = current
			}
			for _, p := range d.PAT.Programs {
				if p.ProgramNumber != 0 && !slices.Contains(st.programs, p.ProgramNumber) {
					st.programs = append(st.programs, p.ProgramNumber)
				}
			}
		case d.PMT != nil:
			// Every program's first PMT: a receiver tuned to program 2
			// needs program 2's.
			if slices.Contains(st.pmtPIDs, d.PID) {
				break
			}
			st.pmtPIDs = append(st.pmtPIDs, d.PID)
			if st.firstPMT < 0 {
				st.firstPMT = current
				st.pcrPID = int(d.PMT.PCRPID)
			}
			for _, es := range d.PMT.ElementaryStreams {
				st.pmt = append(st.pmt, newPMTStream(es))
			}
		case d.PES != nil:
			if st.firstPES < 0 {
				st.firstPES = current
			}
			pu := pesUnit{pid: d.PID, first: current, data: d.PES.Data, missing: missing[current]}
			if d.PES.Header != nil {
				pu.streamID = d.PES.Header.StreamID
				if oh := d.PES.Header.OptionalHeader; oh != nil && oh.PTS != nil {
					pu.pts, pu.hasPTS = oh.PTS.Base, true
				}
			}
			st.pes = append(st.pes, pu)
		}
	}
	for len(st.pkts) < len(st.raw) {
		st.pkts = append(st.pkts, tsPacket{dg: st.rawDg[len(st.pkts)], pid: 0x1fff, pcr: -1})
	}
	st.clock = st.clockSamples()
}

func packetPID(p []byte) uint16 { return uint16(p[1]&0x1f)<<8 | uint16(p[2]) }

// unfinishedPES is how many bytes the PES in ps (a side's last on its
// PID) lacks of the length its header declares, 0 when it has them all
// or declares none (0: unbounded). ISO 13818-1 2.4.3.7: the length counts
// the bytes after the field. A PES short of it is refused whole by
// astits; a receiver gets what came, so the field is set to 0 here and
// astits reads that.
func unfinishedPES(ps []*astits.Packet) int {
	h := ps[0].Payload
	if len(h) < 6 || h[0] != 0 || h[1] != 0 || h[2] != 1 {
		return 0 // no PES (a section), or a header cut across packets
	}
	declared := int(h[4])<<8 | int(h[5])
	got := -6
	for _, p := range ps {
		got += len(p.Payload)
	}
	if declared == 0 || got >= declared {
		return 0
	}
	h[4], h[5] = 0, 0
	return declared - got
}

// tsPayload is a TS packet's payload, past its adaptation field; nil
// when it has none.
func tsPayload(p []byte) []byte {
	if p[3]&0x10 == 0 {
		return nil
	}
	off := 4
	if p[3]&0x20 != 0 {
		off += 1 + int(p[4])
	}
	if off > len(p) {
		return nil
	}
	return p[off:]
}

// splitPESAtSwitch settles each PES the source stopped in before its
// declared length. Where the target's first packets on that PID carry
// the rest, byte for byte, the receiver got it whole across the switch:
// it is joined, as a demuxer joins it. Where the target starts a PES of
// its own there instead (or never sends the PID), the rest never came,
// and the source is the one that cut the frame short. Where the target's
// first packets there go on with it by fewer bytes than it lacked, the
// source cut it short all the same, and a decoder takes those bytes into
// it, still short (ffmpeg: "PES packet size mismatch"); by more, a
// demuxer completes it with the first of them and reads none after
// (ffmpeg skips them up to the next PES), so it is joined so. Bytes of
// the target's that do not fit are the target's damage (lacked, rest:
// checkCutShort); none is dropped uncounted.
// A PES that declares no length (video, as most muxers send it) ends
// wherever the next begins, and a cut one cannot be told from a whole.
func splitPESAtSwitch(src, tgt *side) {
	for i := range src.ts.pes {
		pu := &src.ts.pes[i]
		if pu.missing == 0 {
			continue
		}
		var rest []byte
		continued := false
		for _, p := range tgt.ts.raw {
			if packetPID(p) != pu.pid || p[3]&0x10 == 0 {
				continue
			}
			if p[1]&0x40 != 0 {
				break // the target's own first PES there
			}
			continued = true
			rest = append(rest, tsPayload(p)...)
		}
		if continued && len(rest) != pu.missing {
			pu.lacked, pu.rest = pu.missing, len(rest)
		}
		switch {
		case continued && len(rest) >= pu.missing:
			pu.data, pu.missing = append(slices.Clip(pu.data), rest[:pu.missing]...), 0
		default:
			pu.cutShort = true
		}
	}
}

// nullPID is the null packets': stuffing a constant-bitrate mux sends,
// whose counter is undefined (ISO 13818-1 2.4.3.3).
const nullPID = 0x1fff

// streamType is what a PID carries: this side's PMT says, else the other
// side's (a target that sent no PMT still sends the same streams).
func streamType(pid uint16, own, other []pmtStream) (pmtStream, bool) {
	for _, tables := range [][]pmtStream{own, other} {
		for _, es := range tables {
			if es.pid == pid {
				return es, true
			}
		}
	}
	return pmtStream{}, false
}

func describeStream(es pmtStream) (kind, codec string) {
	t := es.typ
	switch {
	case t == astits.StreamTypeH264Video:
		return "video", codecH264
	case t == astits.StreamTypeH265Video:
		return "video", codecH265
	case t == astits.StreamTypeMPEG1Video:
		return "video", codecMPEG1Video
	case t == astits.StreamTypeMPEG2Video:
		return "video", codecMPEG2Video
	case t == astits.StreamTypeAACAudio:
		return "audio", codecAAC
	case t == astits.StreamTypeMPEG1Audio, t == astits.StreamTypeMPEG2Audio:
		return "audio", codecMPEGAudio
	case t == astits.StreamTypeAC3Audio, t == astits.StreamTypePrivateData && (es.ac3 || es.format == formatAC3):
		return "audio", codecAC3
	case t == astits.StreamTypeEAC3Audio, t == astits.StreamTypePrivateData && (es.eac3 || es.format == formatEAC3):
		return "audio", codecEAC3
	case t == astits.StreamTypePrivateData && es.format == formatOpus:
		return "audio", codecOpus
	}
	switch {
	case t.IsVideo():
		return "video", t.String()
	case t.IsAudio():
		return "audio", t.String()
	}
	return "data", fmt.Sprintf("stream type 0x%02X", uint8(t))
}

// buildTSTracks turns the side's PES into access units per PID, once the
// stream types are known (other: the other side's PMT).
func (s *side) buildTSTracks(other []pmtStream) {
	st := &s.ts
	byPID := map[uint16]*track{}
	carried := map[uint16]string{} // parameters a PES without a picture carried
	carriedSets := map[uint16]uint8{}
	recovery := map[uint16]int{}   // and a recovery point SEI's frame count
	closedGOP := map[uint16]bool{} // and whether an MPEG-1/2 PES left a closed GOP header for the next picture
	rebases := st.timeBaseChanges()
	lastFirst := map[uint16]int{} // each PID's previous unit's first packet
	for _, pu := range st.pes {
		if pu.missing > 0 && !pu.cutShort {
			// Never whole, and not the sender's doing: the target's last
			// PES, cut by the window's end (the source's are settled by
			// splitPESAtSwitch: joined, or cut short).
			continue
		}
		tr := byPID[pu.pid]
		if tr == nil {
			pid := pu.pid
			tr = &track{name: fmt.Sprintf("PID %d", pid), pid: &pid, wrap: ptsWrap}
			if es, ok := streamType(pid, st.pmt, other); ok {
				tr.kind, tr.codec = describeStream(es)
				tr.sparse = es.sparse()
			} else {
				// No PMT on either side: the PES stream_id still says
				// video (0xE0–0xEF) or audio (0xC0–0xDF).
				switch {
				case pu.streamID>>4 == 0xE && looksMPEGVideo(pu.data):
					// Which of the two its sequence header says, as a
					// decoder learns it: MPEG-2 sends an extension after
					// it, MPEG-1 none.
					tr.kind, tr.codec = "video", mpegVideoCodec(st.pes, pid)
				case pu.streamID>>4 == 0xE:
					tr.kind, tr.codec = "video", codecH264
				case pu.streamID>>5 == 0x6:
					tr.kind = "audio"
				default:
					tr.kind = "data"
				}
			}
			byPID[pid] = tr
			s.tracks = append(s.tracks, tr)
		}
		first := st.pkts[pu.first]
		u := unit{at: first.at, dg: first.dg, pkt: pu.first, pts: pu.pts, hasPTS: pu.hasPTS,
			ownsStart: pu.first == 0 || st.pkts[pu.first-1].dg != first.dg, cutShort: pu.cutShort}
		if prev, ok := lastFirst[pu.pid]; ok {
			u.di = rebases.between(prev, pu.first, first.di)
		}
		lastFirst[pu.pid] = pu.first
		if tr.kind == "video" {
			nals := splitAnnexB(pu.data)
			var cu codecUnit
			if isMPEGVideo(tr.codec) {
				// The GOP header may have come in the PES before, with
				// the sequence header and no picture: its closed_gop is
				// the next picture's, here as for a decoder.
				cu = inspectMPEGVideo(nals, closedGOP[pu.pid])
				closedGOP[pu.pid] = cu.closedGOP
			} else {
				cu = inspectNALs(tr.codec, nals)
			}
			if !cu.slices && len(nals) > 0 && neededSets(tr.codec) != 0 {
				// No picture (a delimiter, SEI, parameter sets ahead of
				// their keyframe): no frame; its parameters go with the
				// next picture's, as a decoder takes them.
				carried[pu.pid] = joinParams(carried[pu.pid], cu.params)
				carriedSets[pu.pid] |= cu.sets
				if cu.recovery >= 0 {
					recovery[pu.pid] = cu.recovery
				}
				continue
			}
			if r, ok := recovery[pu.pid]; ok && cu.recovery < 0 {
				cu.recovery = r // an SEI sent in a PES of its own
			}
			delete(recovery, pu.pid)
			// The picture's own slices say whether a decoder can start
			// there; the random_access_indicator speaks only for one
			// whose slices cannot be read (a muxer may set it on every
			// frame).
			u.key, u.params, u.sets = cu.key, cu.params, cu.sets|carriedSets[pu.pid]
			delete(carriedSets, pu.pid)
			u.recovery, u.recoveryFrames = cu.recovery >= 0, cu.recovery
			u.openIRAP, u.rasl = cu.openIRAP, cu.rasl
			if u.params == "" {
				u.params = carried[pu.pid]
			}
			delete(carried, pu.pid)
			if !cu.slices {
				u.key = first.rai
			}
		}
		if tr.kind == "audio" {
			u.dur, u.frame, u.params = audioFrames(tr.codec, pu.data)
			if u.cutShort {
				// How long its frames were to play went with its rest.
				u.dur = 0
			}
		}
		tr.units = append(tr.units, u)
	}
	for _, tr := range s.tracks {
		tr.implyPTS()
	}
	slices.SortStableFunc(s.tracks, func(a, b *track) int {
		if a.pid != nil && b.pid != nil {
			return int(*a.pid) - int(*b.pid)
		}
		return 0
	})
}

// transportErrors says which packets the side sent marked errored (the
// transport_error_indicator, TR 101 290 2.1), and the frames they fall
// in: received, but marked errored, so a decoder decodes them as corrupt
// (ffmpeg: "Packet corrupt").
func (s *side) transportErrors() {
	n, firstPID := 0, uint16(0)
	var frames []string
	for i, p := range s.ts.pkts {
		if !p.tei {
			continue
		}
		if n++; n == 1 {
			firstPID = p.pid
		}
		for _, tr := range s.tracks {
			if tr.pid == nil || *tr.pid != p.pid {
				continue
			}
			k, _ := slices.BinarySearchFunc(tr.units, i+1, func(u unit, i int) int { return u.pkt - i })
			if k > 0 && len(frames) < 3 {
				// A frame spans many packets: each frame hit is named once.
				if u := tr.units[k-1]; u.hasPTS {
					if f := fmt.Sprintf("the %s frame at PTS %d", tr.kind, u.pts); !slices.Contains(frames, f) {
						frames = append(frames, f)
					}
				}
			}
		}
	}
	if n == 0 {
		return
	}
	where := fmt.Sprintf("first on PID %d", firstPID)
	if len(frames) > 0 {
		where += ", in " + strings.Join(frames, ", ")
	}
	s.defect(sim.MediaCheckTransport, "TR 101 290 2.1", fmt.Sprintf("PID %d", firstPID), fmt.Sprintf("the %s sent %s marked errored (transport_error_indicator; %s): what they carry was received but marked errored, and a decoder decodes it as corrupt", s.name, sim.Plural(int64(n), "TS packet"), where))
}

// timeBases are the packets where a side's system time base really
// changed: a discontinuity indicator on the PCR PID whose next PCR does
// not continue the clock, neither closely nor by the time that passed
// (clockRunsOn: a sender that paused, or sends in bursts, sends a PCR on
// its old clock). ISO 13818-1 gives the indicator that meaning only on
// the PCR PID; on another it excuses a continuity counter jump, and a PCR
// that runs on says no new time base began whatever a packet claims.
// known is false when the side named no PCR PID or sent no PCR, and then
// a unit's own indicator is taken at its word.
type timeBases struct {
	known bool
	at    []int // packet indexes, ascending
}

func (st *tsState) timeBaseChanges() timeBases {
	tb := timeBases{known: st.pcrPID >= 0 && len(st.clock) > 0}
	var recent []clockSample // the clock's PCRs of the last second
	for _, c := range st.clock {
		if c.flagged() && len(recent) > 0 && !pcrContinues(recent[len(recent)-1].pcr, c.pcr) && !clockRunsOn(recent, c) {
			tb.at = append(tb.at, c.flagAt)
			recent = recent[:0] // a new clock: its own PCRs from here
		}
		recent = recentPCRs(recent, c)
	}
	return tb
}

// between says whether a new time base began after packet prev, up to
// and including packet first (a unit's first); flagged is that packet's
// own indicator, the answer where the PCR cannot tell.
func (tb timeBases) between(prev, first int, flagged bool) bool {
	if !tb.known {
		return flagged
	}
	i, _ := slices.BinarySearch(tb.at, prev+1)
	return i < len(tb.at) && tb.at[i] <= first
}

// withinSideDefects are what a receiver sees go wrong inside one side's
// stream, switch or not: lost sync, counter and clock jumps, RTP loss.
func (s *side) withinSideDefects() {
	st := &s.ts
	if st.syncErrors > 0 {
		s.defect(sim.MediaCheckSync, "TR 101 290 1.1/1.2", "", fmt.Sprintf("the %s sent %s without the 0x47 sync byte (TS_sync_loss once several follow)", s.name, sim.Plural(int64(st.syncErrors), "TS packet")))
	}
	if st.parseErrors > 0 {
		s.defect(sim.MediaCheckUnreadable, "", "", fmt.Sprintf("%s of the %s's stream could not be parsed", sim.Plural(int64(st.parseErrors), "TS payload unit"), s.name))
	}
	// Continuity counters per PID: +1 on each packet with payload,
	// anything else an error unless the discontinuity indicator says so.
	// The one repeat allowed, an identical copy, never got this far
	// (addTSPackets).
	type ccState struct {
		last   uint8
		seen   bool
		errors int
		first  string
	}
	cc := map[uint16]*ccState{}
	var pids []uint16
	pcrJumps, firstPCRJump := 0, ""
	for _, p := range st.pkts {
		if p.pid == 0x1fff {
			continue
		}
		if p.payload {
			c := cc[p.pid]
			if c == nil {
				c = &ccState{}
				cc[p.pid] = c
				pids = append(pids, p.pid)
			}
			if c.seen && !p.di && p.cc != (c.last+1)%16 {
				c.errors++
				if c.first == "" {
					c.first = fmt.Sprintf("%d→%d", c.last, p.cc)
				}
			}
			c.last, c.seen = p.cc, true
		}
	}
	for k := 1; k < len(st.clock); k++ {
		prev, c := st.clock[k-1], st.clock[k]
		if !c.flagged() && !pcrContinues(prev.pcr, c.pcr) {
			pcrJumps++
			if firstPCRJump == "" {
				firstPCRJump = fmt.Sprintf("by %s", pcrStep(prev.pcr, c.pcr))
			}
		}
	}
	for _, pid := range pids {
		if c := cc[pid]; c.errors > 0 {
			s.defect(sim.MediaCheckCC, "TR 101 290 1.4", fmt.Sprintf("PID %d", pid),
				fmt.Sprintf("the %s's continuity counter on PID %d jumped %s within its own stream (first %s)", s.name, pid, sim.Plural(int64(c.errors), "time"), c.first))
		}
	}
	if pcrJumps > 0 {
		s.defect(sim.MediaCheckPCR, "TR 101 290 2.3", "", fmt.Sprintf("the %s's PCR jumped %s within its own stream without the discontinuity indicator (first %s)", s.name, sim.Plural(int64(pcrJumps), "time"), firstPCRJump))
	}
	for _, rt := range s.rtp {
		if rt.seqBreaks > 0 {
			s.defect(sim.MediaCheckRTPSeq, "RFC 3550", fmt.Sprintf("SSRC 0x%08x", rt.ssrc), fmt.Sprintf("the %s's RTP sequence numbers broke %s (first %s): packets lost or reordered", s.name, sim.Plural(int64(rt.seqBreaks), "time"), rt.firstBreak))
		}
		if rt.reused > 0 {
			s.defect(sim.MediaCheckRTPSeq, "RFC 3550", fmt.Sprintf("SSRC 0x%08x", rt.ssrc), fmt.Sprintf("the %s sent %s again with other contents (first %s): a receiver drops each as a duplicate, and what it carried is lost", s.name, sim.Plural(int64(rt.reused), "RTP sequence number"), rt.firstReuse))
		}
		if rt.otherPT > 0 {
			s.defect(sim.MediaCheckFormat, "RFC 3550", fmt.Sprintf("SSRC 0x%08x", rt.ssrc), fmt.Sprintf("the %s's RTP stream of payload type %d carried %s of another (first %s): a receiver set up for payload type %d drops them", s.name, rt.recv.pt, sim.Plural(int64(rt.otherPT), "packet"), rt.firstOtherPT, rt.recv.pt))
		}
		if rt.tsLeaps > 0 {
			s.defect(sim.MediaCheckRTPTimestamp, "RFC 3550", fmt.Sprintf("SSRC 0x%08x", rt.ssrc), fmt.Sprintf("the %s's RTP timestamps ran back or leaped %s within its own stream (first %s): a receiver's jitter buffer paces the packets by them", s.name, sim.Plural(int64(rt.tsLeaps), "time"), rt.firstLeap))
		}
		if rt.depack.lostFU > 0 {
			rfc, fu := "RFC 6184", "FU-A fragment"
			if rt.depack.h265 {
				rfc, fu = "RFC 7798", "FU fragment"
			}
			s.defect(sim.MediaCheckRTPFragments, rfc, fmt.Sprintf("SSRC 0x%08x", rt.ssrc), fmt.Sprintf("the %s sent %s whose NAL unit's start never came", s.name, sim.Plural(int64(rt.depack.lostFU), fu)))
		}
		if rt.depack.lostPACI > 0 {
			s.defect(sim.MediaCheckRTPFragments, "RFC 7798", fmt.Sprintf("SSRC 0x%08x", rt.ssrc), fmt.Sprintf("the %s sent %s that carried no readable payload", s.name, sim.Plural(int64(rt.depack.lostPACI), "PACI packet")))
		}
	}
	if len(s.rtp) > 1 {
		s.defect(sim.MediaCheckSSRC, "RFC 3550", "", fmt.Sprintf("the %s's own stream changed SSRC %s: a receiver resets at each new source", s.name, ssrcList(s.rtp)))
	}
}

func ssrcList(rts []*rtpTrack) string {
	var b bytes.Buffer
	for i, rt := range rts {
		if i > 0 {
			b.WriteString("→")
		}
		fmt.Fprintf(&b, "0x%08x", rt.ssrc)
	}
	return b.String()
}

// interleaved counts the side's H.264 packets of interleaved mode, which
// normsim does not read; ignoredNALs those of undefined NAL types.
func (s *side) interleaved() (n int64) {
	for _, rt := range s.rtp {
		n += int64(rt.depack.interleaved)
	}
	return n
}

func (s *side) ignoredNALs() (n int64) {
	for _, rt := range s.rtp {
		n += int64(rt.depack.ignored)
	}
	return n
}

func (s *side) defect(check, standard, stream, detail string) {
	s.defects = append(s.defects, sim.MediaDefect{Check: check, Standard: standard, Stream: stream, AtFault: s.name, Detail: detail})
}

// pcrContinues: TR 101 290 2.3 wants consecutive PCRs 0–100 ms apart.
func pcrContinues(prev, next int64) bool {
	d := wrapDelta(next-prev, pcrWrap)
	return d >= 0 && d <= 100*27000
}

// clockWindow is how far back a clock's PCRs are kept to judge whether a
// later PCR continues it: a second, more than a bursty sender's pacing.
const clockWindow = time.Second

// clockRunsOn says whether next continues the clock the PCRs of recent
// (those of the clockWindow before it) ran on: arriving, as any of them
// says the clock's time should, within 100 ms of network jitter. Each
// recent PCR arrived some time after its clock's instant (later, the
// more of a burst it waited in); so may next, and no later than the
// latest of them allows. A sender that paused, or sends in bursts, sends
// a PCR on its old clock; a new time base puts it far off every one.
func clockRunsOn(recent []clockSample, next clockSample) bool {
	if len(recent) == 0 {
		return false
	}
	lo, hi := time.Duration(math.MaxInt64), time.Duration(math.MinInt64)
	for _, p := range recent {
		// When next should arrive, by p's arrival and the clock's step.
		due := p.at.Sub(next.at) + time.Duration(wrapDelta(next.pcr-p.pcr, pcrWrap))*time.Second/27_000_000
		lo, hi = min(lo, due), max(hi, due)
	}
	// next.at is 0 here: within [lo, hi] widened by the jitter.
	return lo <= 100*time.Millisecond && hi >= -100*time.Millisecond
}

// recentPCRs keeps the PCRs of the clockWindow up to the newest.
func recentPCRs(recent []clockSample, p clockSample) []clockSample {
	recent = append(recent, p)
	i := 0
	for i < len(recent)-1 && p.at.Sub(recent[i].at) > clockWindow {
		i++
	}
	return recent[i:]
}

func pcrStep(prev, next int64) string {
	return fmt.Sprintf("%+.1f ms", float64(wrapDelta(next-prev, pcrWrap))/27000)
}

// wrapDelta is d modulo wrap, as the signed step nearest zero.
func wrapDelta(d, wrap int64) int64 {
	d %= wrap
	if d < 0 {
		d += wrap
	}
	if d >= wrap/2 {
		d -= wrap
	}
	return d
}
