package media

import (
	"bytes"
	"context"
	"fmt"
	"math"

	"github.com/asticode/go-astits"

	"github.com/normsim/normsim/sim"
)

// remuxPID is where Remux puts H.264 it took out of RTP.
const remuxPID = 256

// Remux writes what the receiver got as one MPEG-TS file a player can
// open: TS datagrams as they came, RTP/MP2T without the RTP headers, and
// RTP/H.264 depacketized to Annex B and muxed on PID 256 with the RTP
// timestamps as PTS. Datagrams of no known format are left out, and so
// are RTP packets that give no NAL unit a player reads (a fragment whose
// start was lost, interleaved mode, an undefined type): leftOut counts
// both. What a receiver drops (a copy, another payload type) is not in
// what it got, and not counted.
func Remux(dgs []sim.MediaDatagram) (ts []byte, leftOut int, err error) {
	var out bytes.Buffer
	var mux *astits.Muxer
	type stream struct {
		recv rtpReceive
		rtpVideo
	}
	streams := map[uint32]*stream{}
	var order []*stream

	writeAU := func(au *rtpUnit, codec string) error {
		if au == nil {
			return nil
		}
		if mux == nil {
			// The first stream's codec is the PID's.
			mux = astits.NewMuxer(context.Background(), &out)
			st := astits.StreamTypeH264Video
			if codec == codecH265 {
				st = astits.StreamTypeH265Video
			}
			if err := mux.AddElementaryStream(astits.PMTElementaryStream{ElementaryPID: remuxPID, StreamType: st}); err != nil {
				return err
			}
			mux.SetPCRPID(remuxPID)
		}
		var es []byte
		for _, n := range au.nals {
			es = append(append(es, 0, 0, 0, 1), n...)
		}
		pts := int64(au.ts) % ptsWrap
		key := inspectNALs(codec, au.nals).key
		// The PCR runs a little ahead of presentation so a player buffers.
		pcr := (pts - 9000 + ptsWrap) % ptsWrap
		_, err := mux.WriteData(&astits.MuxerData{
			PID:             remuxPID,
			AdaptationField: &astits.PacketAdaptationField{HasPCR: true, PCR: &astits.ClockReference{Base: pcr}, RandomAccessIndicator: key},
			PES: &astits.PESData{
				Header: &astits.PESHeader{
					StreamID: 0xE0,
					OptionalHeader: &astits.PESOptionalHeader{
						MarkerBits:             2,
						DataAlignmentIndicator: true,
						PTSDTSIndicator:        astits.PTSDTSIndicatorOnlyPTS,
						PTS:                    &astits.ClockReference{Base: pts},
					},
				},
				Data: es,
			},
		})
		return err
	}

	for i, dg := range dgs {
		format, p := readDatagram(dg.Data)
		if format == sim.MediaMPEGTS {
			out.Write(dg.Data)
			continue
		}
		if p == nil {
			leftOut++
			continue
		}
		// What a receiver drops (a copy, another payload type) is not
		// in what it got.
		st := streams[p.SSRC]
		if st == nil {
			st = &stream{rtpVideo: newRTPVideo(p.Payload)}
			streams[p.SSRC] = st
			order = append(order, st)
		}
		if st.recv.take(p, dg.Data) != rtpKeep {
			continue
		}
		switch format {
		case sim.MediaRTPMP2T:
			out.Write(p.Payload)
		case sim.MediaRTPH264:
			if nals := st.depack.push(p.Payload); len(nals) > 0 {
				if err := writeAU(st.units.push(p.Timestamp, i, dg.At, nals), st.codec); err != nil {
					return nil, 0, fmt.Errorf("muxing the %s of datagram %d: %w", st.codec, i, err)
				}
			}
		}
	}
	for _, st := range order {
		if err := writeAU(st.units.flush(), st.codec); err != nil {
			return nil, 0, fmt.Errorf("muxing the last %s frame: %w", st.codec, err)
		}
		d := st.depack
		leftOut += d.lostFU + d.lostPACI + d.interleaved + d.ignored
	}
	return out.Bytes(), leftOut, nil
}

// WholeFrames cuts a capture to what a player decodes without a word:
// from the datagram the first video keyframe begins in (a frame before it
// refers to pictures the capture does not hold) to before the last
// datagram a video frame begins at the start of (the capture's end may cut
// the frames after it short). A capture without a keyframe, or without
// such a boundary after it, is left whole.
func WholeFrames(dgs []sim.MediaDatagram) []sim.MediaDatagram {
	from, to := frameBounds(dgs)
	if from < 0 || to <= from {
		return dgs
	}
	return dgs[from:to]
}

// WholeLastFrame cuts only the end of a capture, as WholeFrames does: what
// a receiver that tuned in at its first datagram got, up to the last frame
// the capture holds whole.
func WholeLastFrame(dgs []sim.MediaDatagram) []sim.MediaDatagram {
	if _, to := frameBounds(dgs); to > 0 {
		return dgs[:to]
	}
	return dgs
}

// frameBounds are the datagram the first video keyframe begins in and
// the last one a video frame begins at the start of; -1 when none.
func frameBounds(dgs []sim.MediaDatagram) (from, to int) {
	s := readSide("capture", dgs)
	s.buildTSTracks(nil)
	from, to = -1, -1
	for _, tr := range s.tracks {
		if tr.kind != "video" {
			continue
		}
		for _, u := range tr.units {
			if u.key {
				if from < 0 || u.dg < from {
					from = u.dg
				}
				break
			}
		}
		// The end is cut before a frame that every frame before it is
		// presented before: cut between a B-frame's references and the
		// B-frame, the capture would end on a picture missing.
		vals, idx := unwrapped(tr.units, tr.wrap)
		later := make([]int64, len(vals)+1) // the least PTS from k on
		later[len(vals)] = math.MaxInt64
		for k := len(vals) - 1; k >= 0; k-- {
			later[k] = min(vals[k], later[k+1])
		}
		earlier := int64(math.MinInt64)
		last := -1
		for k := range vals {
			if k > 0 && tr.units[idx[k]].ownsStart && earlier < later[k] {
				last = tr.units[idx[k]].dg
			}
			earlier = max(earlier, vals[k])
		}
		if last >= 0 && (to < 0 || last > to) {
			to = last
		}
	}
	return from, to
}
