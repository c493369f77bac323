package videojob

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"

	"github.com/asticode/go-astits"
	"github.com/pion/rtp"
)

// The stream's layout: one program, H.264 video on PID 256 carrying the
// PCR, its PMT on PID 4096 (go-astits's defaults, spelled out so the
// position and the tests can name them).
const (
	PIDPAT   uint16 = 0
	PIDPMT   uint16 = 0x1000
	PIDVideo uint16 = 0x100

	// FrameTicks is one frame at 25 fps on the 90 kHz clock.
	FrameTicks = 3600
	// FreshPTSBase is the PTS of frame 0 of a fresh start (1 s, so the
	// PCR, 100 ms behind, never starts negative).
	FreshPTSBase = 90000
	// pcrDelay is how far the PCR runs behind the PTS (90 kHz): the
	// decoder's buffering time.
	pcrDelay = 9000
	// tablesEvery is how many frames apart PAT and PMT are repeated
	// (12 frames = 480 ms, inside the 500 ms receivers expect); they are
	// sent before every IDR as well.
	tablesEvery = 12
	// packetsPerDatagram TS packets go in one UDP datagram or RTP packet
	// (7 × 188 = 1,316 bytes, the usual size).
	packetsPerDatagram = 7
	// rtpPayloadMP2T is RTP's static payload type for MPEG-TS (RFC 3551).
	rtpPayloadMP2T = 33

	pts33 = 1 << 33
	tsLen = astits.MpegTsPacketSize
)

// Position is what a source reports when it stops (source-stopped-output)
// and a target continues from (cutover-apply): everything the target
// needs so that a receiver cannot tell where one ended and the other
// began.
type Position struct {
	// Frame is the next frame number to send, counted from 0 over the
	// job's life (the clip frame shown is Frame mod 50). A well-behaved
	// source stops at a GOP end, so Frame is a multiple of 25: an IDR.
	Frame int64 `json:"frame"`
	// PTSBase is the PTS of frame 0 (90 kHz): frame n has PTS
	// PTSBase + n×3600, modulo 2^33.
	PTSBase int64 `json:"ptsBase"`
	// NextPTS is the PTS Frame will have; for people reading logs.
	NextPTS int64 `json:"nextPts"`
	// CC is the continuity counter of the last packet sent on each PID
	// (the key is the PID in decimal): the target's first packet on that
	// PID carries CC+1 mod 16.
	CC map[uint16]uint8 `json:"cc"`
	// RTP is set when the job sends RTP.
	RTP *RTPPosition `json:"rtp,omitempty"`
}

// RTPPosition is an RTP sender's state: the stream's SSRC, the sequence
// number of the next packet, and the RTP timestamp of frame 0 (frame n's
// packets carry TimestampBase + n×3600, modulo 2^32).
type RTPPosition struct {
	SSRC          uint32 `json:"ssrc"`
	NextSeq       uint16 `json:"nextSeq"`
	TimestampBase uint32 `json:"timestampBase"`
}

// Stream is a job's media output: it muxes the clip's frames into
// MPEG-TS (or RTP carrying MPEG-TS) and writes them to out, one datagram
// per Write. It is not safe for concurrent use.
//
// go-astits muxes (PES packets, PAT/PMT sections with their CRCs, PCR,
// stuffing), but its Muxer keeps the continuity counters to itself,
// starting every PID at 0, and a target must continue the source's. So
// Stream runs a fresh astits Muxer into a buffer for every start and then
// stamps each packet's continuity counter from its own per-PID counters,
// which a position can seed. The rest of what astits wrote is kept as is.
type Stream struct {
	clip      []AccessUnit
	out       io.Writer
	rtp       bool
	misbehave string

	mux *astits.Muxer
	buf bytes.Buffer

	next    int64
	ptsBase int64
	cc      map[uint16]uint8 // last CC sent per PID
	ssrc    uint32
	seq     uint16
	tsBase  uint32
	// sinceStart counts the frames sent since Start; psiAfter, when
	// positive, holds back PAT and PMT until that many were sent.
	sinceStart int64
	psiAfter   int64
	// sent counts frames and datagrams over the stream's life.
	sentFrames, sentDatagrams int64
}

// NewStream returns a stream of clip to out; Start it before sending.
// rtp wraps the TS packets in RTP; misbehave is the VIDEO_MISBEHAVE mode.
func NewStream(clip []AccessUnit, out io.Writer, rtp bool, misbehave string) *Stream {
	return &Stream{clip: clip, out: out, rtp: rtp, misbehave: misbehave, cc: map[uint16]uint8{}}
}

// Start (re)starts the output: from frame 0 with fresh counters when from
// is nil, or as a handover target continuing exactly from a source's
// position (or, in a misbehaving mode, with that mode's bug). Each start
// sends PAT and PMT before its first frame.
func (s *Stream) Start(from *Position) {
	s.mux = astits.NewMuxer(context.Background(), &s.buf, astits.MuxerOptTablesRetransmitPeriod(tablesEvery))
	s.mux.AddElementaryStream(astits.PMTElementaryStream{ElementaryPID: PIDVideo, StreamType: astits.StreamTypeH264Video})
	s.mux.SetPCRPID(PIDVideo)
	s.sinceStart, s.psiAfter = 0, 0
	if from == nil {
		s.next, s.ptsBase = 0, FreshPTSBase
		s.cc = map[uint16]uint8{}
		s.ssrc, s.seq, s.tsBase = rand.Uint32(), uint16(rand.Uint32()), rand.Uint32()
		return
	}
	s.next, s.ptsBase = from.Frame, from.PTSBase
	s.cc = map[uint16]uint8{}
	for pid, c := range from.CC {
		s.cc[pid] = c & 0xf
	}
	if from.RTP != nil {
		s.ssrc, s.seq, s.tsBase = from.RTP.SSRC, from.RTP.NextSeq, from.RTP.TimestampBase
	} else {
		s.ssrc, s.seq, s.tsBase = rand.Uint32(), uint16(rand.Uint32()), rand.Uint32()
	}
	switch s.misbehave {
	case "pts-restart":
		// The bug: a fresh muxer's clock, frame n shown at PTS 0.
		s.ptsBase = mod(-s.next*FrameTicks, pts33)
	case "cc-restart":
		// The bug: fresh counters, and no discontinuity_indicator.
		s.cc = map[uint16]uint8{}
	case "no-psi":
		// The bug: tables only on the muxer's own schedule, after 1 s.
		s.psiAfter = 25
	case "rtp-new-ssrc":
		// The bug: a new RTP session instead of the source's.
		s.ssrc, s.seq, s.tsBase = rand.Uint32(), uint16(rand.Uint32()), rand.Uint32()
	}
}

// Next is the number of the next frame to send.
func (s *Stream) Next() int64 { return s.next }

// AtGOPEnd reports whether the next frame is an IDR: stopping here
// leaves a target a keyframe to start on.
func (s *Stream) AtGOPEnd() bool { return s.frame(s.next).Key }

// AfterKeyframe reports whether the frame sent last was a keyframe: where
// the mid-gop variant's author thought a GOP ends.
func (s *Stream) AfterKeyframe() bool { return s.next > 0 && s.frame(s.next-1).Key }

// Sent is the number of frames and datagrams sent since NewStream.
func (s *Stream) Sent() (frames, datagrams int64) { return s.sentFrames, s.sentDatagrams }

func (s *Stream) frame(n int64) AccessUnit { return s.clip[n%int64(len(s.clip))] }

// PTS is frame n's presentation time (90 kHz, 33 bits).
func (s *Stream) PTS(n int64) int64 { return mod(s.ptsBase+n*FrameTicks, pts33) }

// Position is where the stream is now: what a source that stopped here
// hands to its target.
func (s *Stream) Position() Position {
	p := Position{Frame: s.next, PTSBase: s.ptsBase, NextPTS: s.PTS(s.next), CC: map[uint16]uint8{}}
	for pid, c := range s.cc {
		p.CC[pid] = c
	}
	if s.rtp {
		p.RTP = &RTPPosition{SSRC: s.ssrc, NextSeq: s.seq, TimestampBase: s.tsBase}
	}
	return p
}

// SendFrame muxes the next frame, with PAT and PMT before it when they
// are due (before every IDR and at least every 12 frames), and writes it
// out in datagrams of up to 7 TS packets.
func (s *Stream) SendFrame() error {
	if s.mux == nil {
		return fmt.Errorf("stream not started")
	}
	n := s.next
	au := s.frame(n)
	pts := s.PTS(n)
	s.buf.Reset()
	_, err := s.mux.WriteData(&astits.MuxerData{
		PID: PIDVideo,
		AdaptationField: &astits.PacketAdaptationField{
			HasPCR:                true,
			PCR:                   &astits.ClockReference{Base: mod(pts-pcrDelay, pts33)},
			RandomAccessIndicator: au.Key,
		},
		PES: &astits.PESData{
			Header: &astits.PESHeader{OptionalHeader: &astits.PESOptionalHeader{
				MarkerBits:             2,
				DataAlignmentIndicator: true,
				PTSDTSIndicator:        astits.PTSDTSIndicatorOnlyPTS,
				PTS:                    &astits.ClockReference{Base: pts},
			}},
			Data: au.Data,
		},
	})
	if err != nil {
		return fmt.Errorf("frame %d: mux: %w", n, err)
	}
	pkts := s.stamp(s.buf.Bytes())
	s.next++
	s.sinceStart++
	s.sentFrames++
	ts := uint32(int64(s.tsBase) + n*FrameTicks)
	var werr error
	for len(pkts) > 0 {
		k := min(len(pkts), packetsPerDatagram*tsLen)
		if err := s.write(pkts[:k], ts); err != nil && werr == nil {
			werr = err
		}
		pkts = pkts[k:]
	}
	return werr
}

// stamp sets the continuity counter of every packet from the stream's own
// counters (and holds back the tables while psiAfter says so). It returns
// the packets to send, in place.
func (s *Stream) stamp(b []byte) []byte {
	out := b[:0]
	for i := 0; i+tsLen <= len(b); i += tsLen {
		p := b[i : i+tsLen]
		pid := uint16(p[1]&0x1f)<<8 | uint16(p[2])
		if (pid == PIDPAT || pid == PIDPMT) && s.sinceStart < s.psiAfter {
			continue
		}
		if p[3]&0x10 != 0 { // has payload: the counter moves on
			c, ok := s.cc[pid]
			if ok {
				c = (c + 1) & 0xf
			}
			s.cc[pid] = c
			p[3] = p[3]&0xf0 | c
		} else if c, ok := s.cc[pid]; ok { // adaptation only: repeats it
			p[3] = p[3]&0xf0 | c
		}
		out = append(out, p...)
	}
	return out
}

func (s *Stream) write(pkts []byte, ts uint32) error {
	s.sentDatagrams++
	if !s.rtp {
		_, err := s.out.Write(pkts)
		return err
	}
	p := rtp.Packet{
		Header: rtp.Header{
			Version:        2,
			PayloadType:    rtpPayloadMP2T,
			SequenceNumber: s.seq,
			Timestamp:      ts,
			SSRC:           s.ssrc,
		},
		Payload: pkts,
	}
	s.seq++
	b, err := p.Marshal()
	if err != nil {
		return err
	}
	_, err = s.out.Write(b)
	return err
}

func mod(a, m int64) int64 {
	a %= m
	if a < 0 {
		a += m
	}
	return a
}
