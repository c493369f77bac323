package media

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/normsim/normsim/sim"
)

// TestCaptureRTPFramesEachPacket: each RTP datagram (MP2T or H.264) comes
// out as it came behind its 2-byte length (RFC 4571); TS straight in UDP
// and what is neither are left out; no RTP at all is nil.
func TestCaptureRTPFramesEachPacket(t *testing.T) {
	ts := bytes.Repeat(append([]byte{0x47}, make([]byte, 187)...), 7)
	mp2t := append([]byte{0x80, ptMP2T, 0, 1, 0, 0, 0, 9, 0xaa, 0xbb, 0xcc, 0xdd}, ts...)
	h264 := []byte{0x80, 96, 0, 2, 0, 0, 0, 9, 0xaa, 0xbb, 0xcc, 0xdd, 0x65, 1, 2, 3}
	dgs := []sim.MediaDatagram{{Data: ts}, {Data: mp2t}, {Data: []byte("not media")}, {Data: h264}}
	got := Judge{}.CaptureRTP(dgs)
	var want []byte
	for _, p := range [][]byte{mp2t, h264} {
		want = binary.BigEndian.AppendUint16(want, uint16(len(p)))
		want = append(want, p...)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("got %d bytes, want %d: %x", len(got), len(want), got[:min(len(got), 32)])
	}
	if got := (Judge{}).CaptureRTP(dgs[:1]); got != nil {
		t.Errorf("TS alone: %d bytes, want nil", len(got))
	}
}
