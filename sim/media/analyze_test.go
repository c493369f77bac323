package media

import (
	"bytes"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/asticode/go-astits"

	"github.com/normsim/normsim/sim"
)

func TestClassify(t *testing.T) {
	ts := muxTS(t, gopFrames(2, 25, 90000), 256).datagrams(func(int) bool { return true }, 0)[0].Data
	s := &rtpSender{ssrc: 1}
	cases := []struct {
		name string
		data []byte
		want string
	}{
		{"TS datagram", ts, sim.MediaMPEGTS},
		{"one TS packet", ts[:tsPacketSize], sim.MediaMPEGTS},
		{"TS with a broken sync byte", append(bytes.Clone(ts[:tsPacketSize]), append([]byte{0x48}, ts[tsPacketSize+1:2*tsPacketSize]...)...), sim.MediaUnknown},
		{"TS cut short", ts[:200], sim.MediaUnknown},
		{"RTP MP2T", s.packet(33, 0, false, ts, t0).Data, sim.MediaRTPMP2T},
		{"RTP PT 33 without TS", s.packet(33, 0, false, []byte("hello"), t0).Data, sim.MediaUnknown},
		{"RTP H.264", s.packet(96, 0, true, []byte{0x65, 1, 2}, t0).Data, sim.MediaRTPH264},
		{"RTP PT 127", s.packet(127, 0, true, []byte{0x41, 1}, t0).Data, sim.MediaRTPH264},
		{"RTP PT 0 (PCMU)", s.packet(0, 0, true, []byte{1, 2, 3}, t0).Data, sim.MediaUnknown},
		{"RTP version 1", append([]byte{0x40}, s.packet(96, 0, true, []byte{0x65}, t0).Data[1:]...), sim.MediaUnknown},
		{"JSON", []byte(`{"seq":1}`), sim.MediaUnknown},
		{"empty", nil, sim.MediaUnknown},
	}
	for _, c := range cases {
		if got := Classify(c.data); got != c.want {
			t.Errorf("%s: Classify = %q, want %q", c.name, got, c.want)
		}
	}
}

func TestParseSPS(t *testing.T) {
	cases := []struct {
		sps  []byte
		want string
	}{
		{spsHigh320x180, "High@1.2 320x180"},
		{spsMain1280, "Main@3.1 1280x720"},
	}
	for _, c := range cases {
		s, err := parseSPS(c.sps)
		if err != nil || s.String() != c.want {
			t.Errorf("parseSPS(%x) = %q, %v; want %q", c.sps, s, err, c.want)
		}
	}
	if _, err := parseSPS(spsHigh320x180[:6]); err == nil {
		t.Error("a truncated SPS parsed without error")
	}
}

func TestSplitAnnexB(t *testing.T) {
	got := splitAnnexB([]byte{0, 0, 0, 1, 0x67, 1, 2, 0, 0, 1, 0x68, 3, 0, 0, 0, 1, 0x65, 4})
	want := [][]byte{{0x67, 1, 2}, {0x68, 3}, {0x65, 4}}
	if len(got) != len(want) {
		t.Fatalf("splitAnnexB = %x, want %x", got, want)
	}
	for i := range want {
		if !bytes.Equal(got[i], want[i]) {
			t.Errorf("NAL %d = %x, want %x", i, got[i], want[i])
		}
	}
}

// A handover done right: the source stops at the end of a GOP, the target
// sends PAT and PMT, then an IDR one frame on, with counters and PCR
// continuing.
func TestAnalyzeSeamlessTS(t *testing.T) {
	m := muxTS(t, gopFrames(50, 25, 900000), 256)
	r := Analyze(m.datagrams(before(25), 0), m.datagrams(from(25), 0), sim.SeamMoments{})
	if r.Verdict != sim.VerdictSeamless || len(r.Defects) > 0 {
		t.Fatalf("verdict %s, defects %s; detail: %s", r.Verdict, checks(r), r.Detail)
	}
	if r.Format != sim.MediaMPEGTS || r.KeyframeAtJoin == nil || !*r.KeyframeAtJoin || r.FramesMissing != 0 || r.GapMs != nil || r.OverlapMs != nil {
		t.Errorf("report %+v", r)
	}
	if len(r.Streams) != 1 {
		t.Fatalf("streams %+v", r.Streams)
	}
	st := r.Streams[0]
	if *st.PID != 256 || st.Kind != "video" || st.Codec != "H.264" || st.FrameTicks != 3600 ||
		*st.LastSourcePTS != 900000+24*3600 || *st.FirstTargetPTS != 900000+25*3600 ||
		st.SourceParams != "High@1.2 320x180, CAVLC" || st.TargetParams != st.SourceParams {
		t.Errorf("stream %+v", st)
	}
	for _, want := range []string{"video PID 256 H.264: source stopped at PTS 986400 (frame 10.960 s), target continued at the next frame", "keyframe at join", "counters continue"} {
		if !strings.Contains(r.Detail, want) {
			t.Errorf("detail %q lacks %q", r.Detail, want)
		}
	}
	if r.SwitchAt == nil || !r.SwitchAt.Equal(frameAt(25)) || len(r.Frames) != 50 || r.Frames[25].Side != "target" || !r.Frames[25].Key || r.Frames[25].Stream != "PID 256" {
		t.Errorf("switch %v, frames %d: %+v", r.SwitchAt, len(r.Frames), r.Frames)
	}
}

// Each defect, in a stream that has it; TestAnalyzeSeamlessTS is the
// same stream without.
func TestAnalyzeTSDefects(t *testing.T) {
	shift := func(fs []testFrame, k int, f func(*testFrame)) []testFrame {
		for i := k; i < len(fs); i++ {
			f(&fs[i])
		}
		return fs
	}
	type sides struct{ src, tgt []sim.MediaDatagram }
	split := func(m muxed, k int) sides { return sides{m.datagrams(before(k), 0), m.datagrams(from(k), 0)} }
	// fresh muxes the target anew: its counters start again.
	fresh := func(t *testing.T, fs []testFrame, k int, pid uint16) sides {
		return sides{muxTS(t, fs, 256).datagrams(before(k), 0), muxTS(t, fs[k:], pid).datagrams(func(int) bool { return true }, 25*40*time.Millisecond)}
	}
	cases := []struct {
		name    string
		build   func(t *testing.T) sides
		verdict string
		want    []string // checks that must be there, as Check[Stream,AtFault]
		absent  []string // checks that must not
		check   func(t *testing.T, r *sim.MediaReport)
	}{
		{
			name: "gap of two frames",
			build: func(t *testing.T) sides {
				return split(muxTS(t, shift(gopFrames(50, 25, 900000), 25, func(f *testFrame) { f.pts += 2 * 3600 }), 256), 25)
			},
			verdict: sim.VerdictGap,
			want:    []string{"PTS continuity[video PID 256 H.264,target]"},
			absent:  []string{"Continuity_count_error"},
			check: func(t *testing.T, r *sim.MediaReport) {
				if r.FramesMissing != 2 || r.GapMs == nil || *r.GapMs != 80 || !strings.Contains(r.Detail, "2 frames (80.0 ms) missing") {
					t.Errorf("missing %d, gap %v: %s", r.FramesMissing, r.GapMs, r.Detail)
				}
			},
		},
		{
			name: "target repeats two frames",
			build: func(t *testing.T) sides {
				return split(muxTS(t, shift(gopFrames(50, 25, 900000), 25, func(f *testFrame) { f.pts -= 2 * 3600 }), 256), 25)
			},
			verdict: sim.VerdictOverlap,
			want:    []string{"PTS continuity[video PID 256 H.264,target]", "PCR_discontinuity_indicator_error[PID 256,target]"},
			check: func(t *testing.T, r *sim.MediaReport) {
				if r.FramesRepeated != 2 || r.OverlapMs == nil || *r.OverlapMs != 80 {
					t.Errorf("repeated %d, overlap %v: %s", r.FramesRepeated, r.OverlapMs, r.Detail)
				}
			},
		},
		{
			// Issue 34: a target 12 ms early was "0 frames (12.0 ms)
			// presented again"; no whole frame is, its picture is due
			// while the source's last is still shown.
			name: "target starts less than a frame early",
			build: func(t *testing.T) sides {
				return split(muxTS(t, shift(gopFrames(50, 25, 900000), 25, func(f *testFrame) { f.pts -= 1080 }), 256), 25)
			},
			verdict: sim.VerdictOverlap,
			want:    []string{"PTS continuity[video PID 256 H.264,target]"},
			check: func(t *testing.T, r *sim.MediaReport) {
				if r.FramesRepeated != 0 || r.OverlapMs == nil || *r.OverlapMs != 12 || !strings.Contains(r.Detail, "12.0 ms early (less than a frame), while the source's last frame is still shown") {
					t.Errorf("repeated %d, overlap %v: %s", r.FramesRepeated, r.OverlapMs, r.Detail)
				}
			},
		},
		{
			name: "target starts less than a frame late",
			build: func(t *testing.T) sides {
				return split(muxTS(t, shift(gopFrames(50, 25, 900000), 25, func(f *testFrame) { f.pts += 1080 }), 256), 25)
			},
			verdict: sim.VerdictGap,
			want:    []string{"PTS continuity[video PID 256 H.264,target]"},
			check: func(t *testing.T, r *sim.MediaReport) {
				if r.FramesMissing != 0 || r.GapMs == nil || *r.GapMs != 12 || !strings.Contains(r.Detail, "12.0 ms late (less than a frame)") {
					t.Errorf("missing %d, gap %v: %s", r.FramesMissing, r.GapMs, r.Detail)
				}
			},
		},
		{
			name:    "target joins mid-GOP",
			build:   func(t *testing.T) sides { return split(muxTS(t, gopFrames(75, 25, 900000), 256), 30) },
			verdict: sim.VerdictGlitch,
			// The tables came with the source's keyframe, not again before frame 30.
			want:   []string{"keyframe at join[PID 256,target]", "PAT_error[PID 0,target]", "PMT_error[,target]"},
			absent: []string{"PTS continuity", "Continuity_count_error"},
			check: func(t *testing.T, r *sim.MediaReport) {
				if r.KeyframeAtJoin == nil || *r.KeyframeAtJoin || r.PictureMissingMs == nil || *r.PictureMissingMs != 800 {
					t.Errorf("keyframe %v, missing %v", r.KeyframeAtJoin, r.PictureMissingMs)
				}
				if !strings.Contains(r.Detail, "target joined mid-GOP: picture missing 800 ms until its first IDR") {
					t.Errorf("detail %s", r.Detail)
				}
			},
		},
		{
			name:    "target never sends a keyframe",
			build:   func(t *testing.T) sides { return split(muxTS(t, gopFrames(50, 25, 900000), 256), 30) },
			verdict: sim.VerdictGlitch,
			want:    []string{"keyframe at join[PID 256,target]"},
			check: func(t *testing.T, r *sim.MediaReport) {
				if r.PictureMissingMs == nil || *r.PictureMissingMs != 800 || !strings.Contains(r.Detail, "no keyframe came") {
					t.Errorf("missing %v: %s", r.PictureMissingMs, r.Detail)
				}
			},
		},
		{
			// Issue 34 round 7 (L1): an intra-refresh target (a recovery
			// point SEI, recovery_frame_cnt 18, and no IDR) was "picture
			// missing until the end of what it sent"; a decoder shows
			// correct pictures 18 frames after the recovery point.
			name: "target joins at an intra refresh's recovery point",
			build: func(t *testing.T) sides {
				fs := gopFrames(75, 100, 900000)
				for i := 30; i < 75; i += 18 {
					// With its parameter sets, as x264 repeats them at each
					// recovery point; the muxer sends the tables with it.
					fs[i].only = [][]byte{spsHigh320x180, ppsNAL, seiRecovery18, fs[i].nals()[0]}
					fs[i].rai = true
				}
				return split(muxTS(t, fs, 256), 30)
			},
			verdict: sim.VerdictGlitch,
			want:    []string{"keyframe at join[PID 256,target]"},
			check: func(t *testing.T, r *sim.MediaReport) {
				if r.PictureMissingMs == nil || *r.PictureMissingMs != 720 || !strings.Contains(r.Detail, "is complete (18 frames on, an intra refresh)") {
					t.Errorf("missing %v: %s", r.PictureMissingMs, r.Detail)
				}
			},
		},
		{
			// Round 8 (L4): the SEI in a PES of its own, before the
			// picture's, lost the recovery point (picture missing until
			// the end of what the target sent).
			name: "target joins at a recovery point whose SEI has a PES of its own",
			build: func(t *testing.T) sides {
				var fs []testFrame
				for i, f := range gopFrames(75, 100, 900000) {
					if i >= 30 && (i-30)%18 == 0 {
						fs = append(fs, testFrame{pts: f.pts, only: [][]byte{spsHigh320x180, ppsNAL, seiRecovery18}, rai: true})
					}
					fs = append(fs, f)
				}
				// The SEI-only PES of frame 30 is index 30 in fs.
				return split(muxTS(t, fs, 256), 30)
			},
			verdict: sim.VerdictGlitch,
			want:    []string{"keyframe at join[PID 256,target]"},
			check: func(t *testing.T, r *sim.MediaReport) {
				if r.PictureMissingMs == nil || *r.PictureMissingMs != 720 {
					t.Errorf("missing %v: %s", r.PictureMissingMs, r.Detail)
				}
			},
		},
		{
			name: "target sends no PAT or PMT",
			build: func(t *testing.T) sides {
				m := muxTS(t, gopFrames(50, 25, 900000), 256)
				return sides{m.datagrams(before(25), 0), m.withoutPIDs(0, 0x1000).datagrams(from(25), 0)}
			},
			verdict: sim.VerdictGlitch,
			want:    []string{"PAT_error[PID 0,target]", "PMT_error[,target]"},
			absent:  []string{"keyframe at join", "Continuity_count_error", "PTS continuity"},
			check: func(t *testing.T, r *sim.MediaReport) {
				// A receiver joining at the target never finds the program.
				if r.PictureMissingMs == nil || *r.PictureMissingMs != 1000 || !strings.Contains(r.Detail, "shows no picture for 1000 ms, until the end of what it sent") {
					t.Errorf("missing %v: %s", r.PictureMissingMs, r.Detail)
				}
			},
		},
		{
			name: "target sends its tables a GOP late",
			build: func(t *testing.T) sides {
				m := muxTS(t, gopFrames(100, 25, 900000), 256)
				late := m.withoutPIDsIn(func(f int) bool { return f < 50 }, 0, 0x1000)
				return sides{m.datagrams(before(25), 0), late.datagrams(from(25), 0)}
			},
			verdict: sim.VerdictGlitch,
			// The tables' own counters skip the packets dropped here.
			want:   []string{"PAT_error[PID 0,target]", "PMT_error[,target]"},
			absent: []string{"keyframe at join", "Continuity_count_error[PID 256", "PTS continuity"},
			check: func(t *testing.T, r *sim.MediaReport) {
				// The tables come with the IDR of frame 50: a receiver that
				// joined at frame 25 shows its first picture a second on.
				if r.KeyframeAtJoin == nil || !*r.KeyframeAtJoin || r.PictureMissingMs == nil || *r.PictureMissingMs != 1000 ||
					!strings.Contains(r.Detail, "the target sent no PAT before its first PES: a receiver joining at the target finds no program and shows no picture for 1000 ms, until its first keyframe after them") {
					t.Errorf("keyframe at join %v, missing %v: %s", r.KeyframeAtJoin, r.PictureMissingMs, r.Detail)
				}
				if strings.Count(r.Detail, "shows no picture") != 1 {
					t.Errorf("said more than once: %s", r.Detail)
				}
			},
		},
		{
			name: "target restarts its counters",
			build: func(t *testing.T) sides {
				return fresh(t, gopFrames(50, 25, 900000), 25, 256)
			},
			verdict: sim.VerdictGlitch,
			want:    []string{"Continuity_count_error[PID 256,target]", "Continuity_count_error[PID 0,target]"},
			absent:  []string{"PTS continuity", "PCR_discontinuity_indicator_error", "PAT_error"},
			check: func(t *testing.T, r *sim.MediaReport) {
				if !strings.Contains(r.Detail, "continuity counter on PID 256 went") || !strings.Contains(r.Detail, "→0 (expected 14) without the discontinuity indicator (TR 101 290 1.4)") {
					t.Errorf("detail %s", r.Detail)
				}
				if strings.Contains(r.Detail, "counters continue") {
					t.Errorf("detail says counters continue: %s", r.Detail)
				}
			},
		},
		{
			name: "target restarts its counters with the discontinuity indicator",
			build: func(t *testing.T) sides {
				fs := gopFrames(50, 25, 900000)
				fs[25].di = true
				return fresh(t, fs, 25, 256)
			},
			verdict: sim.VerdictGlitch, // PAT and PMT still jump: only the video packet says so
			absent:  []string{"Continuity_count_error[PID 256,target]"},
		},
		{
			name: "counter jumps inside the source",
			build: func(t *testing.T) sides {
				m := muxTS(t, gopFrames(50, 25, 900000), 256)
				for i := range m.packets { // drop frame 10's second packet
					if m.frameOf[i] == 10 && packetPID(m.packets[i]) == 256 && m.packets[i][1]&0x40 == 0 {
						m.packets = append(m.packets[:i], m.packets[i+1:]...)
						m.frameOf = append(m.frameOf[:i], m.frameOf[i+1:]...)
						break
					}
				}
				return split(m, 25)
			},
			verdict: sim.VerdictGlitch,
			want:    []string{"Continuity_count_error[PID 256,source]"},
		},
		{
			// Issue 34 round 5, F1: a repeat is allowed once, and only of
			// the same packet (ISO 13818-1 2.4.3.3); a counter that stops
			// counting is packets lost, whatever the value.
			name: "target's counter stops counting",
			build: func(t *testing.T) sides {
				m := muxTS(t, gopFrames(50, 25, 900000), 256)
				stuck := -1
				for i, p := range m.packets {
					if packetPID(p) != 256 {
						continue
					}
					switch f := m.frameOf[i]; {
					case f == 29:
						stuck = int(p[3] & 0x0f)
					case f >= 30:
						p[3] = p[3]&0xf0 | byte(stuck)
					}
				}
				return split(m, 25)
			},
			verdict: sim.VerdictGlitch,
			want:    []string{"Continuity_count_error[PID 256,target]"},
			check: func(t *testing.T, r *sim.MediaReport) {
				if strings.Contains(r.Detail, "counters continue") {
					t.Errorf("detail says counters continue: %s", r.Detail)
				}
			},
		},
		{
			// F2: sixteen packets on, the counter has the value it had:
			// without comparing the packets it looked like a duplicate.
			name: "15 packets lost inside the target",
			build: func(t *testing.T) sides {
				m := muxTS(t, gopFrames(75, 25, 900000), 256)
				return split(m.without(15, func(i int) bool {
					return m.frameOf[i] == 50 && packetPID(m.packets[i]) == 256 && m.packets[i][1]&0x40 == 0
				}), 25)
			},
			verdict: sim.VerdictGlitch,
			want:    []string{"Continuity_count_error[PID 256,target]"},
		},
		{
			name: "a packet the source sends twice, identical",
			build: func(t *testing.T) sides {
				m := muxTS(t, gopFrames(50, 25, 900000), 256)
				return split(m.repeat(1, func(i int) bool {
					return m.frameOf[i] == 10 && packetPID(m.packets[i]) == 256 && m.packets[i][1]&0x40 == 0
				}), 25)
			},
			verdict: sim.VerdictSeamless,
			check: func(t *testing.T, r *sim.MediaReport) {
				// Dropped as a receiver drops it, and counted.
				if !strings.Contains(r.Detail, "the source sent 1 TS packet twice, identical; the copies were dropped") {
					t.Errorf("detail %s", r.Detail)
				}
			},
		},
		{
			name: "a packet the source sends three times",
			build: func(t *testing.T) sides {
				m := muxTS(t, gopFrames(50, 25, 900000), 256)
				return split(m.repeat(2, func(i int) bool {
					return m.frameOf[i] == 10 && packetPID(m.packets[i]) == 256 && m.packets[i][1]&0x40 == 0
				}), 25)
			},
			verdict: sim.VerdictGlitch,
			want:    []string{"Continuity_count_error[PID 256,source]"},
		},
		{
			// F3: the target's first frame is right and the seam fine;
			// after it the PTS leaps 10 s while the PCR runs on.
			name: "PTS jumps inside the target, the PCR runs on",
			build: func(t *testing.T) sides {
				return split(muxTS(t, shift(gopFrames(50, 25, 900000), 27, func(f *testFrame) { f.pts += 900000; f.pcrShift -= 900000 }), 256), 25)
			},
			verdict: sim.VerdictGlitch,
			want:    []string{"PTS continuity[video PID 256 H.264,target]"},
			absent:  []string{"PCR_discontinuity_indicator_error", "Continuity_count_error"},
			check: func(t *testing.T, r *sim.MediaReport) {
				d := defectNamed(r, "PTS continuity")
				if d == nil || !strings.Contains(d.Detail, "skipped ahead 10000.0 ms") || !strings.Contains(d.Detail, "within its own stream") {
					t.Errorf("defect %+v", d)
				}
			},
		},
		{
			name: "the target's encoder skips three frames, the PCR runs on",
			build: func(t *testing.T) sides {
				return split(muxTS(t, shift(gopFrames(50, 25, 900000), 30, func(f *testFrame) { f.pts += 3 * 3600; f.pcrShift -= 3 * 3600 }), 256), 25)
			},
			verdict: sim.VerdictGlitch,
			want:    []string{"PTS continuity[video PID 256 H.264,target]"},
			absent:  []string{"PCR_discontinuity_indicator_error", "Continuity_count_error"},
			check: func(t *testing.T, r *sim.MediaReport) {
				if d := defectNamed(r, "PTS continuity"); d == nil || !strings.Contains(d.Detail, "3 frames missing, 120.0 ms in all") {
					t.Errorf("defect %+v", d)
				}
			},
		},
		{
			name: "PTS goes back 10 s inside the target",
			build: func(t *testing.T) sides {
				return split(muxTS(t, shift(gopFrames(50, 25, 900000), 30, func(f *testFrame) { f.pts -= 900000; f.pcrShift += 900000 }), 256), 25)
			},
			verdict: sim.VerdictGlitch,
			want:    []string{"PTS continuity[video PID 256 H.264,target]"},
			check: func(t *testing.T, r *sim.MediaReport) {
				if d := defectNamed(r, "PTS continuity"); d == nil || !strings.Contains(d.Detail, "went back 10000.0 ms") {
					t.Errorf("defect %+v", d)
				}
			},
		},
		{
			// The clock and presentation time leap together: a new time
			// base, which a decoder follows.
			name: "a PTS jump the discontinuity indicator announces",
			build: func(t *testing.T) sides {
				fs := shift(gopFrames(50, 25, 900000), 30, func(f *testFrame) { f.pts += 900000 })
				fs[30].di = true
				return split(muxTS(t, fs, 256), 25)
			},
			verdict: sim.VerdictSeamless,
		},
		{
			// Issue 34 round 7 (H1): the flag on a frame after ten frames
			// the target never sent, its PCR running on: no time base
			// began (ISO 13818-1: the PCR after the flag continues the
			// old one), so the decoder freezes 400 ms. It was seamless.
			name: "the discontinuity indicator on a PCR that runs on hides nothing",
			build: func(t *testing.T) sides {
				fs := gopFrames(60, 25, 900000)
				fs[40].di = true
				m := muxTS(t, fs, 256)
				// The sender pauses while the frames are not sent.
				return sides{m.datagrams(before(25), 0), m.paced(func(f int) bool { return f >= 25 && (f < 30 || f >= 40) }, 0, nil)}
			},
			verdict: sim.VerdictGlitch,
			want:    []string{"PTS continuity[video PID 256 H.264,target]"},
			check: func(t *testing.T, r *sim.MediaReport) {
				if d := defectNamed(r, "PTS continuity"); d == nil || !strings.Contains(d.Detail, "10 frames") {
					t.Errorf("defect %+v", d)
				}
			},
		},
		{
			// A PTS leap under a flagged PCR that runs on is a leap.
			name: "a PTS jump the flag announces but the clock does not make",
			build: func(t *testing.T) sides {
				fs := shift(gopFrames(50, 25, 900000), 30, func(f *testFrame) { f.pts += 900000; f.pcrShift -= 900000 })
				fs[30].di = true
				return split(muxTS(t, fs, 256), 25)
			},
			verdict: sim.VerdictGlitch,
			want:    []string{"PTS continuity[video PID 256 H.264,target]"},
		},
		{
			// F4: the flag says decoding can start; the slice says P.
			name: "target joins on a P-frame flagged random access",
			build: func(t *testing.T) sides {
				fs := shift(gopFrames(75, 25, 900000), 0, func(f *testFrame) { f.rai = true })
				return split(muxTS(t, fs, 256), 30)
			},
			verdict: sim.VerdictGlitch,
			want:    []string{"keyframe at join[PID 256,target]"},
			check: func(t *testing.T, r *sim.MediaReport) {
				if r.KeyframeAtJoin == nil || *r.KeyframeAtJoin || r.PictureMissingMs == nil || *r.PictureMissingMs != 800 {
					t.Errorf("keyframe at join %v, missing %v", r.KeyframeAtJoin, r.PictureMissingMs)
				}
			},
		},
		{
			name: "PCR jumps at the switch",
			build: func(t *testing.T) sides {
				return split(muxTS(t, shift(gopFrames(50, 25, 900000), 25, func(f *testFrame) { f.pcrShift = 45000 }), 256), 25)
			},
			verdict: sim.VerdictGlitch,
			want:    []string{"PCR_discontinuity_indicator_error[PID 256,target]"},
			absent:  []string{"PTS continuity"},
			check: func(t *testing.T, r *sim.MediaReport) {
				if !strings.Contains(r.Detail, "PCR jumped +540.0 ms") {
					t.Errorf("detail %s", r.Detail)
				}
			},
		},
		{
			// The flag starts a new clock 500 ms ahead, and the PTS stayed
			// on the old one: on the new clock the target's frames are
			// due before the source's last has been shown.
			name: "PCR jumps at the switch with the discontinuity indicator, PTS not",
			build: func(t *testing.T) sides {
				fs := shift(gopFrames(50, 25, 900000), 25, func(f *testFrame) { f.pcrShift = 45000 })
				fs[25].di = true
				return split(muxTS(t, fs, 256), 25)
			},
			verdict: sim.VerdictOverlap,
			want:    []string{"PTS continuity[video PID 256 H.264,target]"},
			absent:  []string{"PCR_discontinuity_indicator_error"},
		},
		{
			// Issue 34 round 7 (M2): a target that restarts its clock and
			// its PTS at 1 s, and says so with the flag, was "200 frames
			// (8000 ms) presented again", the target blamed; a decoder
			// rebases and shows the next picture on time.
			name: "target restarts its clock with the discontinuity indicator",
			build: func(t *testing.T) sides {
				fs := shift(gopFrames(50, 25, 900000), 25, func(f *testFrame) { f.pts -= 900000 - 90000 - 25*3600 })
				fs[25].di = true
				m := muxTS(t, fs, 256)
				return sides{m.paced(before(25), 0, nil), m.paced(from(25), 0, nil)}
			},
			verdict: sim.VerdictSeamless,
			check: func(t *testing.T, r *sim.MediaReport) {
				if !strings.Contains(r.Detail, "target continued at the next frame (the target began a new time base") {
					t.Errorf("detail %s", r.Detail)
				}
			},
		},
		{
			// Round 8 (H1): a sender in 200 ms bursts that leaves out ten
			// frames and flags the next, its clock running on, was
			// seamless: the PCR step (440 ms) was held against the
			// arrival gap between two PCRs (600 ms). The clock is now held
			// against every PCR of the second before.
			name: "a bursty sender's flag over a clock that runs on hides nothing",
			build: func(t *testing.T) sides {
				fs := gopFrames(60, 25, 900000)
				fs[40].di = true
				m := muxTS(t, fs, 256)
				// Each burst of five frames leaves at its last frame's time.
				burst := func(f int) time.Time { return frameAt(f/5*5 + 4) }
				return sides{m.datagrams(before(25), 0), m.paced(func(f int) bool { return f >= 25 && (f < 30 || f >= 40) }, 0, burst)}
			},
			verdict: sim.VerdictGlitch,
			want:    []string{"PTS continuity[video PID 256 H.264,target]"},
		},
		{
			// Round 8 (M2): 3:2 pulldown's cadence (4505, 3003, …) went on
			// exactly at the switch and was an overlap: the seam took the
			// median step for the only one.
			name: "3:2 pulldown goes on across the switch",
			build: func(t *testing.T) sides {
				fs := gopFrames(50, 25, 900000)
				for i := 1; i < len(fs); i++ {
					fs[i].pts = fs[i-1].pts + []int64{4505, 3003}[i%2]
				}
				return split(muxTS(t, fs, 256), 25)
			},
			verdict: sim.VerdictSeamless,
		},
		{
			// Round 8 (M1): frames of 3000 or 3150 ticks at random on
			// both sides flipped each side's median and read as a frame
			// rate change.
			name: "a variable frame rate is no change of rate",
			build: func(t *testing.T) sides {
				fs := gopFrames(50, 25, 900000)
				for i := 1; i < len(fs); i++ {
					fs[i].pts = fs[i-1].pts + []int64{3000, 3150, 3150, 3000, 3150, 3000, 3000}[i%7]
				}
				return split(muxTS(t, fs, 256), 25)
			},
			verdict: sim.VerdictSeamless,
		},
		{
			// Round 8 (M3): the flag on a packet without a PCR speaks for
			// the PCR PID's next PCR; that PCR on the new clock was a
			// PCR_discontinuity_indicator_error.
			name: "target restarts its clock, the flag a frame before its first PCR",
			build: func(t *testing.T) sides {
				fs := shift(gopFrames(50, 25, 900000), 25, func(f *testFrame) { f.pts -= 900000 - 90000 - 25*3600 })
				fs[25].di, fs[25].noPCR = true, true
				m := muxTS(t, fs, 256)
				return sides{m.paced(before(25), 0, nil), m.paced(from(25), 0, nil)}
			},
			verdict: sim.VerdictSeamless,
			absent:  []string{"PCR_discontinuity_indicator_error"},
		},
		{
			// Round 8 (L2): datagrams that each carry several frames tie
			// the clocks to arrival only to within their span; more than
			// a frame, and a seamless verdict would be a guess.
			name: "a restart whose senders bundle frames cannot be placed within a frame",
			build: func(t *testing.T) sides {
				fs := shift(gopFrames(50, 25, 900000), 25, func(f *testFrame) { f.pts -= 900000 - 90000 - 25*3600 })
				fs[25].di = true
				return split(muxTS(t, fs, 256), 25)
			},
			verdict: sim.VerdictUnknown,
			check: func(t *testing.T, r *sim.MediaReport) {
				if !strings.Contains(r.Detail, "the senders' pacing leaves that uncertain by") {
					t.Errorf("detail %s", r.Detail)
				}
			},
		},
		{
			// The same restart with two frames left out is a gap, on the
			// new clock.
			name: "target restarts its clock with the flag, two frames missing",
			build: func(t *testing.T) sides {
				fs := shift(gopFrames(50, 25, 900000), 25, func(f *testFrame) { f.pts -= 900000 - 90000 - 25*3600 })
				fs[25].di = true
				m := muxTS(t, fs, 256)
				return sides{m.paced(before(25), 0, nil), m.paced(from(25), 80*time.Millisecond, nil)}
			},
			verdict: sim.VerdictGap,
			check: func(t *testing.T, r *sim.MediaReport) {
				if r.FramesMissing != 2 {
					t.Errorf("missing %d: %s", r.FramesMissing, r.Detail)
				}
			},
		},
		{
			// Issue 34 round 7 (L2): 25 → 30 fps at the switch was named
			// only through the level its SPS changed with.
			name: "frame rate change",
			build: func(t *testing.T) sides {
				fs := gopFrames(50, 25, 900000)
				for i := 25; i < 50; i++ {
					fs[i].pts = fs[24].pts + 3600 + int64(i-25)*3000
				}
				return split(muxTS(t, fs, 256), 25)
			},
			verdict: sim.VerdictGlitch,
			want:    []string{"codec parameters[video PID 256 H.264,target]"},
			absent:  []string{"PTS continuity"},
			check: func(t *testing.T, r *sim.MediaReport) {
				if d := defectNamed(r, "codec parameters"); d == nil || !strings.Contains(d.Detail, "frame rate on video PID 256 H.264 changed from 25 to 30 fps") {
					t.Errorf("defect %+v", d)
				}
			},
		},
		{
			name: "entropy coding change",
			build: func(t *testing.T) sides {
				return split(muxTS(t, shift(gopFrames(50, 25, 900000), 25, func(f *testFrame) { f.pps = ppsCABAC }), 256), 25)
			},
			verdict: sim.VerdictGlitch,
			want:    []string{"codec parameters[video PID 256 H.264,target]"},
			check: func(t *testing.T, r *sim.MediaReport) {
				if d := defectNamed(r, "codec parameters"); d == nil || !strings.Contains(d.Detail, "from High@1.2 320x180, CAVLC to High@1.2 320x180, CABAC") {
					t.Errorf("defect %+v", d)
				}
			},
		},
		{
			name: "codec parameters change",
			build: func(t *testing.T) sides {
				return split(muxTS(t, shift(gopFrames(50, 25, 900000), 25, func(f *testFrame) { f.sps = spsMain1280 }), 256), 25)
			},
			verdict: sim.VerdictGlitch,
			want:    []string{"codec parameters[video PID 256 H.264,target]"},
			check: func(t *testing.T, r *sim.MediaReport) {
				if d := defectNamed(r, "codec parameters"); d == nil || !strings.Contains(d.Detail, "from High@1.2 320x180, CAVLC to Main@3.1 1280x720, CAVLC") {
					t.Errorf("defect %+v", d)
				}
				if r.Streams[0].TargetParams != "Main@3.1 1280x720, CAVLC" {
					t.Errorf("stream %+v", r.Streams[0])
				}
			},
		},
		{
			name: "target moves the video to another PID",
			build: func(t *testing.T) sides {
				return fresh(t, gopFrames(50, 25, 900000), 25, 300)
			},
			verdict: sim.VerdictGlitch,
			want:    []string{"PIDs/stream types changed[,target]"},
			absent:  []string{"PTS continuity"},
			check: func(t *testing.T, r *sim.MediaReport) {
				if !strings.Contains(r.Detail, "changed PIDs/stream types: the source's PMT listed PID 256 H.264, the target's PID 300 H.264") ||
					!strings.Contains(r.Detail, "video PID 256 → PID 300 H.264: source stopped") {
					t.Errorf("detail %s", r.Detail)
				}
			},
		},
		{
			name: "target's PMT names an audio PID it never sends",
			build: func(t *testing.T) sides {
				src := muxTS(t, gopFrames(25, 25, 900000), 256)
				tgt := muxTS(t, gopFrames(50, 25, 900000)[25:], 256, astits.PMTElementaryStream{ElementaryPID: 258, StreamType: astits.StreamTypeAACAudio})
				return sides{src.datagrams(before(25), 0), tgt.datagrams(func(int) bool { return true }, time.Second)}
			},
			verdict: sim.VerdictGlitch,
			want:    []string{"PID_error[PID 258,target]", "PIDs/stream types changed[,target]"},
		},
		{
			name: "audio stops at the switch",
			build: func(t *testing.T) sides {
				return split(muxAV(t, gopFrames(50, 25, 900000), func(i int, f testFrame) (int64, bool) { return f.pts, i < 25 }), 25)
			},
			verdict: sim.VerdictGap,
			want:    []string{"stream missing[audio PID 258 AAC,target]", "PID_error[PID 258,target]"},
			check: func(t *testing.T, r *sim.MediaReport) {
				if len(r.Streams) != 2 || r.Streams[0].Verdict != sim.VerdictSeamless || r.Streams[1].Kind != "audio" || r.Streams[1].Codec != "AAC" {
					t.Errorf("streams %+v", r.Streams)
				}
				if r.FramesMissing != 0 || r.GapMs != nil {
					t.Errorf("the report's seam is the video's: %+v", r)
				}
			},
		},
		{
			// Audio is judged on its own PTS, beside the video's.
			name: "audio continues across the switch",
			build: func(t *testing.T) sides {
				return split(muxAV(t, gopFrames(50, 25, 900000), func(i int, f testFrame) (int64, bool) { return f.pts + 1800, true }), 25)
			},
			verdict: sim.VerdictSeamless,
			check: func(t *testing.T, r *sim.MediaReport) {
				if len(r.Streams) != 2 || r.Streams[1].Kind != "audio" || r.Streams[1].Verdict != sim.VerdictSeamless {
					t.Errorf("streams %+v", r.Streams)
				}
			},
		},
		{
			name: "audio skips three frames at the switch while the video goes on",
			build: func(t *testing.T) sides {
				return split(muxAV(t, gopFrames(50, 25, 900000), func(i int, f testFrame) (int64, bool) {
					if i >= 25 {
						return f.pts + 1800 + 3*3600, true
					}
					return f.pts + 1800, true
				}), 25)
			},
			verdict: sim.VerdictGap,
			want:    []string{"PTS continuity[audio PID 258 AAC,target]"},
			absent:  []string{"PTS continuity[video"},
			check: func(t *testing.T, r *sim.MediaReport) {
				if len(r.Streams) != 2 || r.Streams[0].Verdict != sim.VerdictSeamless || r.Streams[1].Verdict != sim.VerdictGap {
					t.Errorf("streams %+v", r.Streams)
				}
			},
		},
		{
			name: "audio repeats two frames at the switch",
			build: func(t *testing.T) sides {
				return split(muxAV(t, gopFrames(50, 25, 900000), func(i int, f testFrame) (int64, bool) {
					if i >= 25 {
						return f.pts + 1800 - 2*3600, true
					}
					return f.pts + 1800, true
				}), 25)
			},
			verdict: sim.VerdictOverlap,
			want:    []string{"PTS continuity[audio PID 258 AAC,target]"},
			absent:  []string{"PTS continuity[video"},
		},
		{
			name: "H.265 handed over at an IRAP picture",
			build: func(t *testing.T) sides {
				return split(muxTS(t, shift(gopFrames(50, 25, 900000), 0, func(f *testFrame) { f.h265 = true }), 256), 25)
			},
			verdict: sim.VerdictSeamless,
			check: func(t *testing.T, r *sim.MediaReport) {
				if len(r.Streams) != 1 || r.Streams[0].Codec != "H.265" || r.KeyframeAtJoin == nil || !*r.KeyframeAtJoin {
					t.Errorf("streams %+v, keyframe at join %v", r.Streams, r.KeyframeAtJoin)
				}
			},
		},
		{
			name: "H.265 target joins off an IRAP picture",
			build: func(t *testing.T) sides {
				return split(muxTS(t, shift(gopFrames(75, 25, 900000), 0, func(f *testFrame) { f.h265 = true }), 256), 30)
			},
			verdict: sim.VerdictGlitch,
			want:    []string{"keyframe at join[PID 256,target]"},
			check: func(t *testing.T, r *sim.MediaReport) {
				if r.PictureMissingMs == nil || *r.PictureMissingMs != 800 || !strings.Contains(r.Detail, "until its first IRAP picture") {
					t.Errorf("missing %v: %s", r.PictureMissingMs, r.Detail)
				}
			},
		},
		{
			name: "a source packet lost its sync byte",
			build: func(t *testing.T) sides {
				s := split(muxTS(t, gopFrames(50, 25, 900000), 256), 25)
				s.src[3].Data[2*tsPacketSize] = 0x00
				return s
			},
			verdict: sim.VerdictGlitch,
			want:    []string{"Sync_byte_error[,source]", "Continuity_count_error[PID 256,source]"},
			check: func(t *testing.T, r *sim.MediaReport) {
				if d := defectNamed(r, "Sync_byte_error"); d.Standard != "TR 101 290 1.1/1.2" {
					t.Errorf("defect %+v", d)
				}
				if r.Unreadable != 0 {
					t.Errorf("a damaged TS datagram counted unreadable")
				}
			},
		},
		{
			name: "unreadable datagrams are counted, not judged",
			build: func(t *testing.T) sides {
				s := split(muxTS(t, gopFrames(50, 25, 900000), 256), 25)
				junk := sim.MediaDatagram{At: frameAt(26), From: "10.0.0.2:1", Data: []byte(`{"seq":7}`)}
				s.tgt = append(s.tgt[:2], append([]sim.MediaDatagram{junk}, s.tgt[2:]...)...)
				return s
			},
			verdict: sim.VerdictSeamless,
			check: func(t *testing.T, r *sim.MediaReport) {
				if r.Unreadable != 1 || !strings.Contains(r.Detail, "1 datagram neither MPEG-TS nor RTP, not judged") {
					t.Errorf("unreadable %d: %s", r.Unreadable, r.Detail)
				}
			},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := c.build(t)
			r := Analyze(s.src, s.tgt, sim.SeamMoments{})
			t.Logf("%s: %s [%s]", r.Verdict, r.Detail, checks(r))
			if r.Verdict != c.verdict {
				t.Errorf("verdict %s, want %s; defects %s; detail: %s", r.Verdict, c.verdict, checks(r), r.Detail)
			}
			got := checks(r)
			for _, w := range c.want {
				if !strings.Contains(" "+got+" ", " "+w+" ") {
					t.Errorf("defects %s lack %s", got, w)
				}
			}
			for _, a := range c.absent {
				if strings.Contains(got, a) {
					t.Errorf("defects %s have %s", got, a)
				}
			}
			if c.verdict == sim.VerdictSeamless && len(r.Defects) > 0 {
				t.Errorf("seamless with defects %s", got)
			}
			if c.check != nil {
				c.check(t, r)
			}
		})
	}
}

// Steps of one and a half frames (3:2 pulldown shown at 29.97 fps) are a
// cadence, not pictures missing; two frames are one missing.
func TestPTSWithinASideAllowsPulldownsCadence(t *testing.T) {
	var fs []testFrame
	pts := int64(900000)
	for i := range 60 {
		fs = append(fs, testFrame{pts: pts, key: i%30 == 0})
		pts += []int64{3003, 4504}[i%2]
	}
	s := readSide(sourceSide, muxTS(t, fs, 256).datagrams(func(int) bool { return true }, 0))
	s.buildTSTracks(nil)
	s.ptsDefects()
	if len(s.defects) > 0 {
		t.Errorf("defects %+v", s.defects)
	}
	fs = append(fs[:40:40], fs[41:]...) // the encoder drops one
	s = readSide(sourceSide, muxTS(t, fs, 256).datagrams(func(int) bool { return true }, 0))
	s.buildTSTracks(nil)
	s.ptsDefects()
	if len(s.defects) != 1 || !strings.Contains(s.defects[0].Detail, "skipped ahead 1 time") {
		t.Errorf("defects %+v", s.defects)
	}
}

// TestPTSStepsOffTheFrameGridAreSaidAsTheyAre (attack round 11, C5): at
// 25 fps a step of half a frame within a side passed; the target starting
// 20 ms late at the switch read "1 frame (20.0 ms) missing", 60 ms late
// "2 frames"; and the source's own step of 70 ms read as the target
// changing the frame rate. A fixed rate is held to its grid: frames
// missing are whole frames (half a frame rounds down), and a step off the
// grid by more than a quarter frame is said, of the side that took it.
func TestPTSStepsOffTheFrameGridAreSaidAsTheyAre(t *testing.T) {
	at := func(t *testing.T, fromFrame int, ms int64) *sim.MediaReport {
		fs := gopFrames(100, 25, 900000)
		for i := fromFrame; i < len(fs); i++ {
			fs[i].pts += ms * 90
		}
		m := muxTS(t, fs, 256)
		return Analyze(m.datagrams(before(50), 0), m.datagrams(from(50), 0), sim.SeamMoments{})
	}
	for _, tc := range []struct {
		name      string
		from      int
		ms        int64
		verdict   string
		missing   int64 // of the switch
		says      string
		notSaying string
		fault     string // of the PTS continuity defect
	}{
		{"the target starts half a frame late", 50, 20, sim.VerdictGap, 0, "20.0 ms late (less than a frame)", "1 frame", "target"},
		{"the target starts a frame and a half late", 50, 60, sim.VerdictGap, 1, "1 frame (60.0 ms) missing, and the frames after 20.0 ms off the source's frame grid", "2 frames", "target"},
		{"the target starts half a frame early", 50, -20, sim.VerdictOverlap, 0, "20.0 ms early (less than a frame)", "1 frame", "target"},
		{"the source steps half a frame late within its stream", 20, 20, sim.VerdictGlitch, 0, "off its frame grid by +20.0 ms", "", "source"},
		{"the source steps 30 ms late within its stream", 20, 30, sim.VerdictGlitch, 0, "skipped ahead 1 time (1 frame missing, 30.0 ms in all)", "frame rate", "source"},
		{"the source steps a quarter frame late within its stream", 20, 10, sim.VerdictSeamless, 0, "target continued at the next frame", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := at(t, tc.from, tc.ms)
			switch {
			case r.Verdict != tc.verdict || r.FramesMissing != tc.missing:
				t.Errorf("verdict %s, %d frames missing; want %s, %d: %s", r.Verdict, r.FramesMissing, tc.verdict, tc.missing, r.Detail)
			case !strings.Contains(r.Detail, tc.says) || tc.notSaying != "" && strings.Contains(r.Detail, tc.notSaying):
				t.Errorf("detail %q, want %q and not %q", r.Detail, tc.says, tc.notSaying)
			case tc.fault != "" && (defectNamed(r, sim.MediaCheckPTS) == nil || defectNamed(r, sim.MediaCheckPTS).AtFault != tc.fault || r.AtFault != tc.fault):
				t.Errorf("at fault %q, defects %s, want the %s's PTS continuity", r.AtFault, checks(r), tc.fault)
			}
		})
	}
}

// Issue 34 round 6 (F1, F6, F7) in MPEG-TS: a PES that carries no
// picture (only a delimiter, or parameter sets sent ahead of their
// keyframe) is no frame, and null packets, which every constant-bitrate
// mux sends with one counter, are no copies.
func TestAnalyzeTSReadAsAReceiverDoes(t *testing.T) {
	aud := []byte{0x09, 0xf0}
	t.Run("a frame whose PES holds only its delimiter", func(t *testing.T) {
		fs := gopFrames(50, 25, 900000)
		fs[35].only = [][]byte{aud}
		m := muxTS(t, fs, 256)
		r := Analyze(m.datagrams(before(25), 0), m.datagrams(from(25), 0), sim.SeamMoments{})
		if r.Verdict == sim.VerdictSeamless || !hasDefect(r, "PTS continuity", "") || !strings.Contains(r.Detail, "(1 frame missing, 40.0 ms in all)") {
			t.Errorf("verdict %s, defects %s: %s", r.Verdict, checks(r), r.Detail)
		}
	})
	t.Run("parameter sets in a PES of their own before the keyframe", func(t *testing.T) {
		fs := gopFrames(50, 25, 900000)
		params := testFrame{pts: fs[25].pts, key: true, only: [][]byte{aud, spsHigh320x180, ppsNAL}} // key: the tables come before it
		fs = slices.Insert(fs, 25, params)
		m := muxTS(t, fs, 256)
		r := Analyze(m.datagrams(before(25), 0), m.datagrams(from(25), 0), sim.SeamMoments{})
		if r.Verdict != sim.VerdictSeamless || r.KeyframeAtJoin == nil || !*r.KeyframeAtJoin {
			t.Errorf("verdict %s, keyframe at join %v, defects %s: %s", r.Verdict, r.KeyframeAtJoin, checks(r), r.Detail)
		}
	})
	t.Run("null packets", func(t *testing.T) {
		m := muxTS(t, gopFrames(50, 25, 900000), 256)
		null := make([]byte, tsPacketSize)
		null[0], null[1], null[2], null[3] = 0x47, 0x1f, 0xff, 0x10
		pad := func(dgs []sim.MediaDatagram) []sim.MediaDatagram {
			for i := range dgs {
				dgs[i].Data = append(slices.Clone(dgs[i].Data), append(slices.Clone(null), null...)...)
			}
			return dgs
		}
		r := Analyze(pad(m.datagrams(before(25), 0)), pad(m.datagrams(from(25), 0)), sim.SeamMoments{})
		if r.Verdict != sim.VerdictSeamless || strings.Contains(r.Detail, "twice") {
			t.Errorf("verdict %s, defects %s: %s", r.Verdict, checks(r), r.Detail)
		}
	})
}

// What a file cannot show, a live receiver sees: a target whose first
// frame comes long after its presentation time says, or that stops
// sending soon after it began, freezes the picture though every PTS
// continues (issue 34 round 6c, H1 and H2: both were seamless).
func TestAnalyzeArrivalTime(t *testing.T) {
	m := muxTS(t, gopFrames(100, 25, 900000), 256)
	src := m.datagrams(before(25), 0)
	t.Run("on time", func(t *testing.T) {
		tgt := m.datagrams(from(25), 0)
		r := Analyze(src, tgt, sim.SeamMoments{JudgedAt: tgt[len(tgt)-1].At.Add(100 * time.Millisecond)})
		if r.Verdict != sim.VerdictSeamless {
			t.Errorf("verdict %s, defects %s: %s", r.Verdict, checks(r), r.Detail)
		}
	})
	t.Run("the target's first frame 1.5 s late", func(t *testing.T) {
		r := Analyze(src, m.datagrams(from(25), 1500*time.Millisecond), sim.SeamMoments{})
		d := defectNamed(r, sim.MediaCheckArrival)
		if r.Verdict == sim.VerdictSeamless || d == nil || d.AtFault != "target" || !strings.Contains(d.Detail, "ms later than presentation time allows") {
			t.Errorf("verdict %s, defects %s: %s", r.Verdict, checks(r), r.Detail)
		}
	})
	t.Run("the target stops after five frames", func(t *testing.T) {
		tgt := m.datagrams(func(i int) bool { return i >= 25 && i < 30 }, 0)
		r := Analyze(src, tgt, sim.SeamMoments{JudgedAt: frameAt(75)})
		d := defectNamed(r, sim.MediaCheckArrival)
		if r.Verdict == sim.VerdictSeamless || d == nil || d.AtFault != "target" || !strings.Contains(d.Detail, "the target stopped sending") {
			t.Errorf("verdict %s, defects %s: %s", r.Verdict, checks(r), r.Detail)
		}
	})
}

// In MPEG-TS the parameter sets travel in the stream: a receiver that
// joins at the target (tuning in then, or resetting at the switch) decodes
// nothing until it has SPS and PPS and then a keyframe (issue 34 round 11,
// C2: a target that never sent them was seamless, and ffmpeg decoded none
// of its pictures: "non-existing PPS 0 referenced").
func TestAnalyzeTargetWithoutParameterSets(t *testing.T) {
	idr := append([]byte{0x65, 0x88}, bytes.Repeat([]byte{0xcd}, 2500)...)
	fs := gopFrames(100, 25, 900000)
	stripped := func(upTo int) []testFrame {
		out := slices.Clone(fs)
		for i := 25; i < upTo; i++ {
			if out[i].key {
				out[i].only = [][]byte{idr}
			}
		}
		return out
	}
	for _, tt := range []struct {
		name    string
		frames  []testFrame
		missing float64 // ms; 0 for a seamless join
		until   string
	}{
		{"with them", fs, 0, ""},
		{"never", stripped(100), 3000, "no SPS and PPS came"},
		{"from its second IDR on", stripped(50), 1000, "its first IDR after SPS and PPS"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			m := muxTS(t, tt.frames, 256)
			r := Analyze(m.datagrams(before(25), 0), m.datagrams(from(25), 0), sim.SeamMoments{})
			if tt.missing == 0 {
				if r.Verdict != sim.VerdictSeamless {
					t.Fatalf("verdict %s, defects %s: %s", r.Verdict, checks(r), r.Detail)
				}
				return
			}
			d := defectNamed(r, sim.MediaCheckKeyframe)
			if r.Verdict != sim.VerdictGlitch || d == nil || d.AtFault != "target" || !strings.Contains(d.Detail, tt.until) ||
				r.PictureMissingMs == nil || *r.PictureMissingMs != tt.missing {
				t.Fatalf("verdict %s, picture missing %v, defects %s: %s", r.Verdict, r.PictureMissingMs, checks(r), r.Detail)
			}
		})
	}
}

// A receiver is tuned to a program by its number: a target whose PAT
// lists the same PMT PID under another number loses it, though every PID
// and stream is the same (issue 34 round 11, C6: seamless).
func TestAnalyzeProgramNumber(t *testing.T) {
	m := muxTS(t, gopFrames(50, 25, 900000), 256)
	src := m.datagrams(before(25), 0)
	if r := Analyze(src, m.renumbered(1, from(25)).datagrams(from(25), 0), sim.SeamMoments{}); r.Verdict != sim.VerdictSeamless {
		t.Fatalf("the same number written again: verdict %s, defects %s: %s", r.Verdict, checks(r), r.Detail)
	}
	r := Analyze(src, m.renumbered(2, from(25)).datagrams(from(25), 0), sim.SeamMoments{})
	d := defectNamed(r, sim.MediaCheckPAT)
	if r.Verdict == sim.VerdictSeamless || d == nil || d.AtFault != "target" || !strings.Contains(d.Detail, "no program 1") {
		t.Errorf("verdict %s, defects %s: %s", r.Verdict, checks(r), r.Detail)
	}
}

// A side that falls behind real time runs a live receiver dry though its
// first frame came on time and every PTS continues: a target sending at
// half speed, one that stalls and then bursts, a source that stalls
// before its stop (issue 34 round 11, C1: all three were seamless).
// Frames that come early, in a burst, keep a receiver fed.
func TestAnalyzeFallingBehindRealTime(t *testing.T) {
	m := muxTS(t, gopFrames(100, 25, 900000), 256)
	at := func(slow func(i int) time.Duration) func(int) time.Time {
		return func(i int) time.Time { return frameAt(i).Add(slow(i)) }
	}
	for _, tt := range []struct {
		name    string
		src     func(i int) time.Duration // each frame's delay past its presentation time
		tgt     func(i int) time.Duration
		atFault string // "" for seamless
		detail  string
	}{
		{"paced", func(int) time.Duration { return 0 }, func(int) time.Duration { return 0 }, "", ""},
		{"a target at half speed", func(int) time.Duration { return 0 },
			func(i int) time.Duration { return time.Duration(i-25) * 40 * time.Millisecond }, "target", "ms later than its presentation time"},
		{"a target that stalls 900 ms and bursts", func(int) time.Duration { return 0 },
			func(i int) time.Duration {
				if i >= 35 && i < 57 {
					return time.Duration(57-i) * 40 * time.Millisecond
				}
				return 0
			}, "target", "ms later than its presentation time"},
		{"a source that stalls 700 ms before its stop", func(i int) time.Duration {
			if i >= 5 && i < 23 {
				return time.Duration(23-i) * 40 * time.Millisecond
			}
			return 0
		}, func(int) time.Duration { return 0 }, "source", "ms later than its presentation time"},
		{"a target that stalls 300 ms, within what a receiver holds", func(int) time.Duration { return 0 },
			func(i int) time.Duration {
				if i >= 35 && i < 43 {
					return time.Duration(43-i) * 40 * time.Millisecond
				}
				return 0
			}, "", ""},
		{"a target that sends a second ahead in a burst", func(int) time.Duration { return 0 },
			func(i int) time.Duration { return -time.Duration(min(i-25, 25)) * 40 * time.Millisecond }, "", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			src := m.paced(before(25), 0, at(tt.src))
			tgt := m.paced(from(25), 0, at(tt.tgt))
			r := Analyze(src, tgt, sim.SeamMoments{JudgedAt: tgt[len(tgt)-1].At.Add(100 * time.Millisecond)})
			d := defectNamed(r, sim.MediaCheckArrival)
			if tt.atFault == "" {
				if r.Verdict != sim.VerdictSeamless {
					t.Errorf("verdict %s, defects %s: %s", r.Verdict, checks(r), r.Detail)
				}
				return
			}
			if r.Verdict == sim.VerdictSeamless || d == nil || d.AtFault != tt.atFault || !strings.Contains(d.Detail, tt.detail) {
				t.Errorf("verdict %s, defects %s: %s", r.Verdict, checks(r), r.Detail)
			}
		})
	}
}

// Junk on the job's port from another sender is counted and left out of
// every check, the moments' too (issue 34 round 6c, M2: 1-byte datagrams
// from an address heard before the target were "the source sent 889
// datagrams after source-stopped-output", the source blamed).
func TestJunkIsNotTheJobProducing(t *testing.T) {
	m := muxTS(t, gopFrames(50, 25, 900000), 256)
	src, tgt := m.datagrams(before(25), 0), m.datagrams(from(25), 0)
	stopped := tgt[0].At.Add(-time.Millisecond)
	for i := range 50 {
		junk := sim.MediaDatagram{At: stopped.Add(time.Duration(i) * 10 * time.Millisecond), From: "10.9.9.9:1", Data: []byte{0}}
		src = append(src, junk)
		tgt = append(tgt, junk)
	}
	slices.SortStableFunc(tgt, func(a, b sim.MediaDatagram) int { return a.At.Compare(b.At) })
	r := Analyze(src, tgt, sim.SeamMoments{SourceStopped: stopped, ApplySent: stopped})
	if r.Verdict != sim.VerdictSeamless || r.SourceAfterStop != 0 || r.TargetBeforeApply != 0 || r.Unreadable != 100 {
		t.Errorf("verdict %s, after stop %d, before apply %d, unreadable %d: %s", r.Verdict, r.SourceAfterStop, r.TargetBeforeApply, r.Unreadable, r.Detail)
	}
}

// A side that sent only junk says so: the detail of a no-output seam
// counts each side's unreadable datagrams.
func TestNoOutputCountsEachSidesJunk(t *testing.T) {
	m := muxTS(t, gopFrames(25, 25, 900000), 256)
	junk := []sim.MediaDatagram{{At: frameAt(30), From: "10.0.0.2:5000", Data: []byte{0}}, {At: frameAt(31), From: "10.0.0.2:5000", Data: []byte{1}}}
	r := Analyze(m.datagrams(before(25), 0), junk, sim.SeamMoments{})
	if r.Verdict != sim.VerdictNoOutput || r.Unreadable != 2 || !strings.Contains(r.Detail, "0 readable datagrams (and 2 unreadable) from the target") {
		t.Errorf("verdict %s, unreadable %d: %s", r.Verdict, r.Unreadable, r.Detail)
	}
}

// The manager asks the judge what is readable (the overlap wait) by the
// rule Analyze leaves junk out by: a TS datagram with a packet out of
// sync is still read, to count it; junk is not.
func TestReadableIsAnalyzesRule(t *testing.T) {
	m := muxTS(t, gopFrames(5, 25, 900000), 256)
	dg := m.datagrams(before(5), 0)[0].Data
	if len(dg) < 3*tsPacketSize {
		t.Fatalf("a datagram of %d bytes", len(dg))
	}
	unsynced := slices.Clone(dg)
	unsynced[tsPacketSize] = 0 // one packet of seven out of sync
	for _, c := range []struct {
		data []byte
		want bool
	}{{dg, true}, {unsynced, true}, {[]byte{0}, false}, {make([]byte, 188), false}} {
		if got := (Judge{}).Readable(c.data); got != c.want {
			t.Errorf("Readable(%d bytes) = %v, want %v", len(c.data), got, c.want)
		}
	}
}

// seiRecovery18 is an H.264 SEI NAL unit holding one recovery point
// message: recovery_frame_cnt 18, exact_match_flag 1, broken_link_flag 0,
// changing_slice_group_idc 0.
var seiRecovery18 = []byte{0x06, 0x06, 0x02, 0x09, 0xc4, 0x80}

func TestRecoveryPoint(t *testing.T) {
	if n, ok := recoveryPoint(seiRecovery18); !ok || n != 18 {
		t.Errorf("recoveryPoint = %d, %v; want 18", n, ok)
	}
	// Another message first (user data unregistered, 17 bytes), then the
	// recovery point.
	two := append([]byte{0x06, 0x05, 0x11}, make([]byte, 17)...)
	two = append(two, 0x06, 0x02, 0x09, 0xc4, 0x80)
	if n, ok := recoveryPoint(two); !ok || n != 18 {
		t.Errorf("after another message: %d, %v", n, ok)
	}
	if _, ok := recoveryPoint([]byte{0x06, 0x05, 0x20, 1, 2}); ok {
		t.Error("a cut message read as a recovery point")
	}
}

// Round 15, C1: a 4-byte SPS whose emulation prevention byte unescapes it
// to two bytes read past its end, and one such datagram killed normsim.
func TestAShortSPSIsRefusedNotReadPastItsEnd(t *testing.T) {
	for _, nal := range [][]byte{{0x67, 0, 0, 3}, {0x67, 0, 0, 3, 0}, {0x67, 1, 2, 3}} {
		if _, err := parseSPS(nal); err == nil {
			t.Errorf("parseSPS(% x) read an SPS from %d bytes", nal, len(unescapeRBSP(nal[1:])))
		}
		inspectNALs(codecH264, [][]byte{nal})
	}
}
