package scenario

import (
	"bytes"
	"context"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/normsim/normsim/internal/testenv"
	"github.com/normsim/normsim/normsimtest"
	"github.com/normsim/normsim/normsimtest/normsimdocker"
	"github.com/normsim/normsim/sim"
)

// TestVideoExamplesAgreeWithADecoder runs the video scenarios (real H.264
// in MPEG-TS, handed over by the example job and its misbehaving
// variants), each of which states normsim's media verdict, then has a
// real decoder referee the seam capture normsim kept: what normsim calls
// seamless decodes without a word and with presentation time going on
// frame by frame, whole or as a receiver that joined at the target got
// it; each defect shows to ffmpeg/ffprobe as what normsim named (a join
// mid-GOP only to a receiver that joined there: the whole capture holds
// the pictures the P-frames refer to). A second referee, GStreamer's
// demuxer, is a receiver joining at the target: the picture it does not
// show is what normsim says is missing, which is how tables a second late
// show (ffmpeg's probe buffer rides them out). A new SSRC leaves no trace
// in the capture (it strips RTP) and is judged by its standard alone
// (docs/media.md).
func TestVideoExamplesAgreeWithADecoder(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real video jobs")
	}
	ffmpeg, ffprobe := testenv.RequireFFmpeg(t)
	gst := testenv.RequireGStreamer(t)
	var paths []string
	for _, name := range videoFiles {
		paths = append(paths, examplePath(name))
	}
	s := normsimtest.Start(t, normsimtest.Options{Runtime: sim.RuntimeProcess,
		Templates: []string{templatesDir, filepath.Join("..", "examples", "templates")}})
	rep, out := runAll(t, s, context.Background(), parseAll(t, paths...))
	if !rep.Passed || rep.Counts.Scenarios != len(videoFiles) {
		t.Fatalf("the video examples failed (counts %+v):\n%s", rep.Counts, out)
	}
	for _, sc := range rep.Scenarios {
		for _, st := range sc.Steps {
			m := st.Migration
			if st.Kind != KindMigrate || m == nil {
				continue
			}
			if m.Output == nil || m.Output.Media == nil || len(m.Output.Media.Streams) == 0 {
				t.Fatalf("%s: migration %s has no media seam: %+v", sc.Template, m.ID, m.Output)
			}
			capture := fetchCapture(t, s.URL, m.ID, "")
			errs := decodeErrors(t, ffmpeg, capture)
			pkts := probePackets(t, ffprobe, capture)
			joined := fetchCapture(t, s.URL, m.ID, "target")
			joinedErrs := decodeErrors(t, ffmpeg, joined)
			joinedPkts := probePackets(t, ffprobe, joined)
			t.Logf("%s: %s; ffmpeg on the whole capture: %q; on the target's alone: %q", sc.Template, m.Output.Media.Verdict, errs, joinedErrs)
			// A receiver that joins at the target (GStreamer's demuxer and
			// parser) shows nothing before it has the PAT, the PMT and a
			// keyframe: the frames of the target's it never shows are the
			// picture normsim says is missing there (none for a clean join).
			shown := gstFrames(t, gst, joined)
			lostMs := float64(len(joinedPkts)-shown) * 40
			saysMs := 0.0
			if p := m.Output.Media.PictureMissingMs; p != nil {
				saysMs = *p
			}
			t.Logf("%s: joined at the target, GStreamer shows %d of its %d frames; normsim says %.0f ms of picture missing", sc.Template, shown, len(joinedPkts), saysMs)
			if math.Abs(lostMs-saysMs) > 40 {
				t.Errorf("%s: a receiver joining at the target (GStreamer) shows %d of the target's %d frames, %.0f ms without a picture; normsim says %.0f ms (%s)",
					sc.Template, shown, len(joinedPkts), lostMs, saysMs, m.Output.Media.Detail)
			}
			first := m.Output.Media.Streams[0].FirstTargetPTS
			if first == nil {
				t.Fatalf("%s: no first target PTS: %s", sc.Template, m.Output.Media.Detail)
			}
			at := -1
			for i, p := range pkts {
				if p.pts == *first {
					at = i
				}
			}
			if at < 1 {
				t.Fatalf("%s: ffprobe saw no packet with the target's first PTS %d, or none before it, in %d packets", sc.Template, *first, len(pkts))
			}
			step := pkts[at].pts - pkts[at-1].pts
			if rtp := fetchRTP(t, s.URL, m.ID); rtp != "" {
				// A receiver that follows the source's SSRC (rtpssrcdemux,
				// as rtpbin separates sources) shows the whole seam when
				// the target keeps it, and none of the target's frames
				// when normsim says the SSRC changed.
				all, followed := gstRTPFrames(t, gst, rtp, false), gstRTPFrames(t, gst, rtp, true)
				newSSRC := false
				for _, d := range m.Output.Media.Defects {
					newSSRC = newSSRC || d.Check == "SSRC change"
				}
				// seam.rtp is the whole window, seam.ts cut to whole frames
				// from a keyframe: they differ by a frame or two at the ends.
				unseen, targets := all-followed, len(pkts)-at
				t.Logf("%s: seam.rtp: GStreamer shows %d frames taking every packet, %d following the source's SSRC; seam.ts holds %d of the source's and %d of the target's; normsim says the SSRC changed: %v", sc.Template, all, followed, at, targets, newSSRC)
				switch {
				case !newSSRC && (unseen != 0 || all < len(pkts)-3):
					t.Errorf("%s: normsim says the target kept the source's SSRC, but a receiver following it (GStreamer) shows %d of %d frames (seam.ts holds %d) (%s)", sc.Template, followed, all, len(pkts), m.Output.Media.Detail)
				case newSSRC && (followed < at-3 || followed > at+3 || unseen < targets-3):
					t.Errorf("%s: normsim says the SSRC changed; a receiver following the source's (GStreamer) shows %d frames and misses %d, not the source's %d and the target's %d (%s)", sc.Template, followed, unseen, at, targets, m.Output.Media.Detail)
				}
			} else if strings.Contains(sc.Name, "RTP") {
				t.Errorf("%s: %s sent RTP, but its capture has no seam.rtp", sc.Template, sc.Name)
			}
			switch sc.Template {
			case "video", "video-no-psi", "video-rtp-new-ssrc":
				if len(joinedPkts) == 0 || joinedPkts[0].pts != *first || !joinedPkts[0].key || joinedErrs != "" {
					t.Errorf("%s: joined at the target, ffprobe reads %d packets (the first keyframe %v; the target's first PTS is %d) and ffmpeg says %q", sc.Template, len(joinedPkts), len(joinedPkts) > 0 && joinedPkts[0].key, *first, joinedErrs)
				}
				if errs != "" {
					t.Errorf("%s: normsim's verdict is %s, ffmpeg says:\n%s", sc.Template, m.Output.Media.Verdict, errs)
				}
				for i := 1; i < len(pkts); i++ {
					if d := pkts[i].pts - pkts[i-1].pts; d != 3600 {
						t.Errorf("%s: ffprobe: PTS went %d → %d at packet %d of %d; normsim says the time went on", sc.Template, pkts[i-1].pts, pkts[i].pts, i, len(pkts))
						break
					}
				}
				if !pkts[at].key {
					t.Errorf("%s: ffprobe: the target's first packet (PTS %d) is no keyframe; normsim says it is", sc.Template, *first)
				}
			case "video-mid-gop":
				if pkts[at].key || step != 3600 {
					t.Errorf("video-mid-gop: ffprobe: the target's first packet (PTS %d) keyframe %v, %d ticks after the source's last; normsim says a P-frame on time", *first, pkts[at].key, step)
				}
				// A receiver that joined at the target has no picture to
				// predict from: the decoder says so.
				if joinedErrs == "" {
					t.Errorf("video-mid-gop: normsim says the picture is missing %v ms from the join; ffmpeg decoding the target's stream alone says nothing", m.Output.Media.PictureMissingMs)
				}
			case "video-pts-restart":
				if step >= 0 {
					t.Errorf("video-pts-restart: ffprobe: PTS went %d → %d at the switch; normsim says it went back", pkts[at-1].pts, pkts[at].pts)
				}
			case "video-cc-restart":
				// ffmpeg checks the counters of the elementary streams only,
				// not the tables': it must complain exactly when normsim
				// found the video PID's counter broken (restarted at 0, it
				// continues by chance one time in 16).
				videoBroken := false
				for _, d := range m.Output.Media.Defects {
					videoBroken = videoBroken || d.Check == "Continuity_count_error" && d.Stream == "PID 256"
				}
				complained := strings.Contains(errs, "Packet corrupt") || strings.Contains(strings.ToLower(errs), "continuity")
				if complained != videoBroken {
					t.Errorf("video-cc-restart: normsim found the video PID's counter broken: %v; ffmpeg says:\n%s\n(media: %s)", videoBroken, errs, m.Output.Media.Detail)
				}
			default:
				t.Fatalf("no referee for %s", sc.Template)
			}
		}
	}
}

// fetchCapture is the migration's seam.ts (of side, "" for both), as a
// user downloads it, saved to a file for the decoder.
func fetchCapture(t *testing.T, base, id, side string) string {
	t.Helper()
	url := base + "/api/v1/migrations/" + id + "/seam.ts"
	if side != "" {
		url += "?side=" + side
	}
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "video/mp2t" || len(b) < 188*50 {
		t.Fatalf("seam.ts of %s: %d %s, %d bytes, %v", id, resp.StatusCode, resp.Header.Get("Content-Type"), len(b), err)
	}
	path := filepath.Join(t.TempDir(), id+side+".ts")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// decodeErrors is what ffmpeg warns of decoding the file: nothing for a
// clean stream ("Packet corrupt" is a warning, so errors alone are not
// enough).
func decodeErrors(t *testing.T, ffmpeg, path string) string {
	t.Helper()
	var stderr bytes.Buffer
	cmd := exec.Command(ffmpeg, "-hide_banner", "-v", "warning", "-i", path, "-f", "null", "-")
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("ffmpeg %s: %v: %s", path, err, stderr.String())
	}
	return strings.TrimSpace(stderr.String())
}

// fetchRTP is the migration's seam.rtp saved to a file, "" when the
// capture holds no RTP (404).
func fetchRTP(t *testing.T, base, id string) string {
	t.Helper()
	resp, err := http.Get(base + "/api/v1/migrations/" + id + "/seam.rtp")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if resp.StatusCode == http.StatusNotFound {
		return ""
	}
	if err != nil || resp.StatusCode != http.StatusOK || len(b) < 100 {
		t.Fatalf("seam.rtp of %s: %d, %d bytes, %v: %.200s", id, resp.StatusCode, len(b), err, b)
	}
	path := filepath.Join(t.TempDir(), id+".rtp")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// gstRTPFrames is how many video frames GStreamer gives out of an RFC 4571
// RTP file (MP2T payloads): taking every packet as one stream, or, with
// followOne, as a receiver that follows the first source it hears
// (rtpssrcdemux gives each SSRC a stream of its own, as rtpbin does, and
// only the first is played: a later one has no link, which ends the
// pipeline there).
func gstRTPFrames(t *testing.T, gst, path string, followOne bool) int {
	t.Helper()
	dir := t.TempDir()
	args := []string{"-q", "filesrc", "location=" + path, "!",
		"application/x-rtp-stream,media=video,clock-rate=90000,encoding-name=MP2T,payload=33", "!", "rtpstreamdepay", "!"}
	if followOne {
		args = append(args, "rtpssrcdemux", "!")
	}
	args = append(args, "rtpmp2tdepay", "!", "tsdemux", "!", "h264parse", "!", "multifilesink", "location="+filepath.Join(dir, "%06d.h264"))
	out, err := exec.Command(gst, args...).CombinedOutput()
	files, _ := os.ReadDir(dir)
	if err != nil && !(followOne && strings.Contains(string(out), "not-linked")) {
		t.Fatalf("gst-launch-1.0 on %s: %v: %s", path, err, out)
	}
	return len(files)
}

// gstFrames is how many video frames GStreamer's MPEG-TS demuxer and H.264
// parser give out of the file, as a receiver that starts reading there
// would: none before the program's tables, none before a keyframe.
func gstFrames(t *testing.T, gst, path string) int {
	t.Helper()
	dir := t.TempDir()
	out, err := exec.Command(gst, "-q", "filesrc", "location="+path, "!", "tsdemux", "!", "h264parse", "!",
		"multifilesink", "location="+filepath.Join(dir, "%06d.h264")).CombinedOutput()
	files, _ := os.ReadDir(dir)
	// With no frame to give, the pipeline fails to preroll: none shown.
	if err != nil && (len(files) > 0 || !strings.Contains(string(out), "preroll")) {
		t.Fatalf("gst-launch-1.0 on %s: %v: %s", path, err, out)
	}
	return len(files)
}

type probed struct {
	pts int64
	key bool
}

// probePackets is the video packets ffprobe reads from the file: PTS in
// 90 kHz ticks and whether it is a keyframe.
func probePackets(t *testing.T, ffprobe, path string) []probed {
	t.Helper()
	out, err := exec.Command(ffprobe, "-v", "error", "-select_streams", "v", "-show_entries", "packet=pts,flags", "-of", "csv=p=0", path).Output()
	if err != nil {
		t.Fatalf("ffprobe %s: %v", path, err)
	}
	var pkts []probed
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		pts, flags, ok := strings.Cut(line, ",")
		n, err := strconv.ParseInt(pts, 10, 64)
		if !ok || err != nil {
			continue // a packet without a PTS
		}
		pkts = append(pkts, probed{pts: n, key: strings.Contains(flags, "K")})
	}
	return pkts
}

// TestVideoHandsOverOnDocker: the video example as FROM-scratch
// containers, which reach the media receiver through host.docker.internal
// and are told apart by their container addresses, hands over seamlessly.
func TestVideoHandsOverOnDocker(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real containers")
	}
	testenv.RequireDocker(t)
	normsimdocker.BuildSourceImage(t, "normsim/video", filepath.Join("..", "examples", "jobs", "video"))
	s := normsimdocker.Start(t, normsimtest.Options{Runtime: sim.RuntimeDocker,
		Templates: []string{filepath.Join("..", "examples", "templates")}})
	rep, out := runAll(t, s, context.Background(), parseAll(t, examplePath("video-handover.yaml")))
	if !rep.Passed {
		t.Fatalf("the video example failed on docker:\n%s", out)
	}
	for _, st := range rep.Scenarios[0].Steps {
		if m := st.Migration; m != nil {
			src, tgt := m.Output.Media.SourceDatagrams, m.Output.Media.TargetDatagrams
			if src == 0 || tgt == 0 {
				t.Errorf("migration %s: %d datagrams from the source container, %d from the target's", m.ID, src, tgt)
			}
		}
	}
}
