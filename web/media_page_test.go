package web_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/normsim/normsim/sim"
)

// mediaSeamMigration is completedMigration whose job also sent MPEG-TS: the
// target's first packet reached the receiver at 140 ms, 14 ms after the
// point of no return; it joined off a keyframe, so the verdict is a
// glitch. The verdicts were recorded at 186 ms.
func mediaSeamMigration() *sim.Migration {
	m := completedMigration()
	m.ID = "mig-media"
	at := func(ms float64) time.Time { return m.StartedAt.Add(time.Duration(ms * float64(time.Millisecond))) }
	switchAt := at(140)
	video, audio := uint16(256), uint16(257)
	no := false
	var frames []sim.MediaFrame
	// 25 frames/s of video with a keyframe each second, and AAC audio,
	// from 3 s before the switch to 3 s after it. The source's last
	// keyframe came 80 ms before its last frame; the target's first
	// 920 ms after its first.
	for i := -75; i < 75; i++ {
		side, pts := "source", int64(900000+i*3600)
		if i >= 0 {
			side = "target"
		}
		frames = append(frames, sim.MediaFrame{Side: side, At: at(140 + float64(i)*40), Stream: "PID 256", PTS: pts, Key: (i < 0 && (i+2)%25 == 0) || (i > 0 && (i-23)%25 == 0)})
		frames = append(frames, sim.MediaFrame{Side: side, At: at(150 + float64(i)*40), Stream: "PID 257", PTS: pts + 900})
	}
	last, first := int64(896400), int64(900000)
	m.Output = &sim.OutputReport{Verdict: sim.VerdictGlitch, LastSource: seq(41), FirstTarget: seq(42), SwitchAt: &switchAt,
		Detail: "source stopped at 41, target continued at 42; media: the target joined off a keyframe",
		Media: &sim.MediaReport{
			Verdict: sim.VerdictGlitch, Format: sim.MediaMPEGTS, SwitchAt: &switchAt, SourceDatagrams: 520, TargetDatagrams: 508,
			Streams: []sim.MediaStream{
				{PID: &video, Kind: "video", Codec: "H.264", LastSourcePTS: &last, FirstTargetPTS: &first, FrameTicks: 3600, GapMs: ms(0),
					Verdict: sim.VerdictGlitch, Detail: "the target's first frame is no keyframe"},
				{PID: &audio, Kind: "audio", Codec: "AAC", LastSourcePTS: &last, FirstTargetPTS: &first, FrameTicks: 1920, GapMs: ms(40), FramesMissing: 1,
					Verdict: sim.VerdictGap, Detail: "one audio frame missing"},
			},
			KeyframeAtJoin: &no, PictureMissingMs: ms(920), GapMs: ms(0),
			Defects: []sim.MediaDefect{
				{Check: "keyframe at join", Stream: "PID 256", AtFault: "target", Detail: "the target's first video frame is no random-access point; the picture is missing for 920.0 ms"},
				{Check: "Continuity_count_error", Standard: "TR 101 290 1.4", Stream: "PID 257", AtFault: "target", Detail: "continuity counter on PID 257 went 3→9 (expected 4)"},
			},
			AtFault: "target", Frames: frames, Detail: "the target joined off a keyframe",
		}}
	m.Events = append(m.Events[:7:7],
		sim.MigrationEvent{Seq: 8, At: at(186.5), Phase: "stop-source", Side: "output", Detail: "media glitch: the target joined off a keyframe"},
		sim.MigrationEvent{Seq: 9, At: at(190), Phase: "stop-source", Side: "manager", Detail: "migration completed"})
	return m
}

// TestMigrationPageShowsTheMediaSeam: a migration with a media report
// draws its frames in the output lane and lists the seam, its streams
// and defects, with the received stream one click away; one without
// shows none of it.
func TestMigrationPageShowsTheMediaSeam(t *testing.T) {
	f := newFake()
	f.addMig(mediaSeamMigration())
	f.addMig(completedMigration())
	h := newServer(t, f, nil)

	r := get(t, h, "/migrations/mig-media")
	if r.Status != http.StatusOK {
		t.Fatalf("GET = %d", r.Status)
	}
	mustContain(t, r,
		// the timeline: the switch, the frames, the verdicts at the switch
		`id="switch-line"`, `id="media-strip"`, `class="media-row source"`, `class="media-row target"`, `class="fr key"`,
		"target · PID 256 · PTS 900000 (10.000 s) · arrived at +140.0 ms", "source · PID 256 · PTS 892800 (9.920 s) · keyframe · arrived at +60.0 ms",
		"seam at +140.0 ms · output · media glitch: the target joined off a keyframe (recorded at +186.5 ms)",
		"seam at +140.0 ms · output · output seamless", ">media glitch</button>",
		// the tile
		`data-verdict="glitch"`, "Glitch at the seam · 2 defects", `href="#media-seam"`,
		// the panel
		`id="media-live" data-live`, `<h2 id="media-h">Media seam</h2>`, `id="media-verdict" data-verdict="glitch"`, ">mpegts<",
		"no · the picture is missing for 920.0 ms", "520 from the source · 508 from the target",
		`data-stream="PID 256"`, "H.264", "896400 (9.960 s)", "900000 (10.000 s)", ">40.0 ms<", "continuous",
		`data-stream="PID 257"`, "AAC", ">21.3 ms<", "gap of 40.0 ms · 1 frame missing",
		`id="media-defects"`, "keyframe at join", "Continuity_count_error", "TR 101 290 1.4", `<span class="lane-tag target">target</span>`,
		"continuity counter on PID 257 went 3→9 (expected 4)",
		`href="/api/v1/migrations/mig-media/seam.ts"`, "seam.ts — the received stream around the switch (open in ffplay or VLC)",
		"outside the axis shown",
	)
	// Nothing of the kind without media: the live region stays, empty,
	// so a refresh can fill it in.
	r = get(t, h, "/migrations/mig-ok")
	mustContain(t, r, `id="media-live" data-live`, `data-verdict="seamless"`)
	mustNotContain(t, r, "Media seam", "seam.ts", `id="media-strip"`, `id="switch-line"`, `class="fr `, `class="fr key`, "seam at +", `id="seam-media"`, "source frame")
}
