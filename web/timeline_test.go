package web

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/normsim/normsim/sim"
)

func TestNiceStep(t *testing.T) {
	for _, tc := range []struct{ span, want float64 }{
		{1, 0.2}, {8, 1}, {9, 2}, {100, 20}, {190, 50}, {1000, 200}, {4000, 500}, {12000, 2000}, {0, 1},
	} {
		if got := niceStep(tc.span, 8); got != tc.want {
			t.Errorf("niceStep(%v) = %v, want %v", tc.span, got, tc.want)
		}
	}
}

func TestTickLabel(t *testing.T) {
	for _, tc := range []struct {
		v, step float64
		want    string
	}{
		{0, 50, "0"}, {50, 50, "50 ms"}, {2000, 1000, "2 s"}, {2500, 500, "2500 ms"}, {0.4, 0.2, "0.4 ms"}, {3000, 2000, "3 s"},
	} {
		if got := tickLabel(tc.v, tc.step); got != tc.want {
			t.Errorf("tickLabel(%v, %v) = %q, want %q", tc.v, tc.step, got, tc.want)
		}
	}
}

func TestFmtMs(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	for _, tc := range []struct {
		in   *float64
		want string
	}{
		{nil, "—"}, {f(0.84), "0.8 ms"}, {f(9.96), "10.0 ms"}, {f(412.4), "412.4 ms"}, {f(9999), "9999.0 ms"}, {f(34210), "34.210 s"},
	} {
		if got := fmtMs(tc.in); got != tc.want {
			t.Errorf("fmtMs(%v) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestFieldErrors(t *testing.T) {
	got := fieldErrors(`params.RATE: must be at most 1000; got "5000"; params.MODE: is required and the template gives no default; params.RATE: again`)
	if len(got) != 2 || got["RATE"] != `must be at most 1000; got "5000"; again` || got["MODE"] != "is required and the template gives no default" {
		t.Fatalf("fieldErrors = %q", got)
	}
	if len(fieldErrors(`node "z" not found`)) != 0 {
		t.Fatal("a message naming no parameter gave field errors")
	}
}

func TestShortLabel(t *testing.T) {
	for detail, want := range map[string]string{
		"handover of counter-1 from node a to node b":                   "requested",
		"target counter-2 created on node b (process runtime)":          "created",
		"connected (hello accepted)":                                    "connected",
		"point of no return: the source stopped its output":             "point of no return",
		"output seamless: source stopped at 41, target continued at 42": "seamless",
		"output gap: 3 packets lost":                                    "gap",
		"migration aborted: timed out":                                  "aborted",
		"hello-ack and initial-state sent":                              "hello-ack and ini…",
		"resumed":                                                       "resumed",
		"paused for 1s":                                                 "paused for 1s",
		"state is lost with the source":                                 "state is lost wit…",
		"late state from the source: it crossed the end":                "late state from t…",
	} {
		if got := shortLabel(detail); got != want {
			t.Errorf("shortLabel(%q) = %q, want %q", detail, got, want)
		}
	}
}

func TestLayoutTimeline(t *testing.T) {
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(ms float64) time.Time { return t0.Add(time.Duration(ms * float64(time.Millisecond))) }
	frame := func(dir, typ string) *sim.FrameInfo { return &sim.FrameInfo{Direction: dir, Type: typ, Size: 40} }
	end := at(200)
	m := &sim.Migration{StartedAt: t0, EndedAt: &end, Events: []sim.MigrationEvent{
		{Seq: 1, At: at(0), Side: "manager", Detail: "handover of x from node a to node b"},
		{Seq: 2, At: at(1), Phase: "get-state", Side: "source", Frame: frame("out", "get-state")},
		{Seq: 3, At: at(1.2), Phase: "get-state", Side: "source", Frame: frame("in", "state")},
		{Seq: 4, At: at(1.3), Phase: "get-state", Side: "source", Frame: frame("in", "abort")},
		{Seq: 5, At: at(100), Phase: "cutover-apply", Side: "manager", Detail: "point of no return: the source stopped its output"},
		{Seq: 6, At: at(199.9), Phase: "cutover-apply", Side: "target", Frame: frame("in", "target-applied")},
		{Seq: 7, At: at(200), Phase: "stop-source", Side: "somewhere", Detail: "migration completed"},
	}}
	tl := layoutTimeline(m, at(10_000), nil)
	if tl.SpanMs < 200 || tl.SpanMs > 220 || tl.Now != nil {
		t.Fatalf("span %v (now %v): a finished migration's axis ends at its end", tl.SpanMs, tl.Now)
	}
	if len(tl.Ticks) < 4 || tl.Ticks[0].Label != "0" || tl.Ticks[1].Label != "50 ms" {
		t.Fatalf("ticks = %+v", tl.Ticks)
	}
	if tl.Ponr == nil || *tl.Ponr < 45 || *tl.Ponr > 50 {
		t.Fatalf("ponr at %v%%", tl.Ponr)
	}
	var phases []string
	for _, p := range tl.Phases {
		phases = append(phases, p.Name)
	}
	if strings.Join(phases, ",") != "requested,get-state,cutover-apply,stop-source" {
		t.Fatalf("phases = %v", phases)
	}
	lanes := map[string]lane{}
	for _, l := range tl.Lanes {
		lanes[l.Name] = l
	}
	src := lanes["source"]
	if len(src.Marks) != 3 {
		t.Fatalf("source marks = %+v", src.Marks)
	}
	// Three frames within 0.3 ms cannot share a row.
	tops := map[float64]bool{}
	for _, mk := range src.Marks {
		tops[mk.Top] = true
	}
	if len(tops) != 3 || src.Height < 3*rowPx {
		t.Fatalf("overlapping marks share rows: %+v (lane height %v)", src.Marks, src.Height)
	}
	if src.Marks[0].Label != "→ get-state" || src.Marks[1].Label != "← state" || !strings.Contains(src.Marks[2].Class, "bad") {
		t.Fatalf("source labels = %+v", src.Marks)
	}
	// A frame label at the right edge opens to the left.
	tgt := lanes["target"].Marks[0]
	if !tgt.Flip || tgt.Class != "frame in" {
		t.Fatalf("target mark = %+v", tgt)
	}
	// An event on an unknown side lands on the manager lane.
	mgr := lanes["manager"].Marks
	if last := mgr[len(mgr)-1]; last.Seq != 7 || !strings.Contains(last.Class, "ok") || last.Label != "completed" {
		t.Fatalf("manager marks = %+v", mgr)
	}
	if len(tl.Events) != 7 || tl.Events[2].Dir != "job → worker" || tl.Events[1].Dir != "worker → job" {
		t.Fatalf("events = %+v", tl.Events)
	}

	// Zoomed on the cutover: only that stretch is drawn, with its own ticks;
	// the table keeps every event.
	w := cutoverWindow(m, at(10_000))
	if w != nil {
		t.Fatalf("cutover window %+v of a migration without target-ready", w)
	}
	m.Events = append(m.Events[:5:5], sim.MigrationEvent{Seq: 6, At: at(150), Phase: "target-ready", Side: "target", Frame: frame("in", "target-ready")},
		sim.MigrationEvent{Seq: 7, At: at(152), Phase: "cutover-apply", Side: "target", Frame: frame("in", "target-applied")},
		sim.MigrationEvent{Seq: 8, At: at(200), Phase: "stop-source", Side: "manager", Detail: "migration completed"})
	w = cutoverWindow(m, at(10_000))
	if w == nil || w.From != 149.5 || w.To != 152.5 {
		t.Fatalf("cutover window = %+v, want 149.5–152.5", w)
	}
	zt := layoutTimeline(m, at(10_000), w)
	if zt.Window != w || len(zt.Events) != 8 || zt.Ponr != nil {
		t.Fatalf("zoomed: window %+v, %d events, ponr %v", zt.Window, len(zt.Events), zt.Ponr)
	}
	var drawn []int
	for _, l := range zt.Lanes {
		for _, mk := range l.Marks {
			drawn = append(drawn, mk.Seq)
		}
	}
	if len(drawn) != 2 || zt.Ticks[0].Label != "149.5 ms" || zt.Ticks[len(zt.Ticks)-1].Label != "152.5 ms" {
		t.Fatalf("zoomed: marks %v, ticks %+v", drawn, zt.Ticks)
	}

	// A running migration's axis reaches the present.
	m.EndedAt = nil
	tl = layoutTimeline(m, at(1000), nil)
	if tl.Now == nil || tl.SpanMs < 1000 || *tl.Now < 90 || *tl.Now > 100 {
		t.Fatalf("running: span %v now %v", tl.SpanMs, tl.Now)
	}
}

// TestLayoutTimelineWithManyEventsStaysInBounds: sixty frames within six
// milliseconds, and a crowd of events at one instant, all stay on the
// track, each with a label, none over another in its row.
func TestLayoutTimelineWithManyEventsStaysInBounds(t *testing.T) {
	t0 := time.Now()
	m := &sim.Migration{StartedAt: t0}
	for i := range 60 {
		m.Events = append(m.Events, sim.MigrationEvent{Seq: i + 1, At: t0.Add(time.Duration(i) * 100 * time.Microsecond), Side: "source",
			Frame: &sim.FrameInfo{Direction: "in", Type: "frame-" + strconv.Itoa(i)}})
	}
	for i, d := range []string{"fault: kill the source (armed on state)", "state is lost with the source", "socket closed by normsim",
		"rolling back: the source is gone", "target removed", "source left running", "paused for 1s", "resumed", "migration aborted: gone"} {
		m.Events = append(m.Events, sim.MigrationEvent{Seq: 61 + i, At: t0.Add(3 * time.Millisecond), Side: "manager", Detail: d})
	}
	tl := layoutTimeline(m, t0.Add(10*time.Millisecond), nil)
	for _, l := range tl.Lanes {
		byRow := map[float64][]mark{}
		for _, mk := range l.Marks {
			if mk.Left < 0 || mk.Left > 100 || mk.lo < 0 || mk.hi > 100 {
				t.Fatalf("%s: mark out of bounds: %+v", l.Name, mk)
			}
			if strings.TrimSpace(mk.Label) == "" {
				t.Errorf("%s: mark %d has no label", l.Name, mk.Seq)
			}
			if mk.Top+rowPx > l.Height {
				t.Errorf("%s: mark %d below its lane (top %v, lane %v)", l.Name, mk.Seq, mk.Top, l.Height)
			}
			for _, o := range byRow[mk.Top] {
				if mk.lo < o.hi && o.lo < mk.hi {
					t.Errorf("%s: mark %d (%q) overlaps mark %d (%q) in its row", l.Name, mk.Seq, mk.Label, o.Seq, o.Label)
				}
			}
			byRow[mk.Top] = append(byRow[mk.Top], mk)
		}
	}
}

func TestCSRFTokens(t *testing.T) {
	c := newCSRF([]byte("k1"))
	tok := c.Token()
	if !c.Valid(tok) {
		t.Fatal("a fresh token is invalid")
	}
	if newCSRF([]byte("k2")).Valid(tok) {
		t.Fatal("a token signed with another key is valid")
	}
	past := strconv.FormatInt(time.Now().Add(-time.Minute).Unix(), 10)
	if c.Valid(past + "." + c.sign(past)) {
		t.Fatal("an expired token is valid")
	}
	for _, bad := range []string{"", ".", "abc", tok + "x", "x" + tok} {
		if c.Valid(bad) {
			t.Errorf("token %q is valid", bad)
		}
	}
}

func TestLogLabel(t *testing.T) {
	for in, want := range map[string]string{
		`time=2026-12-01T12:58:52.921Z level=INFO msg="cutover-ready: output stopped" last=5`: "cutover-ready: output stopped",
		`2026-12-01 12:58:52,921+01:00 ERROR boom at 82`:                                      "boom at 82",
		`time=2026-12-01T12:58:52Z level=WARN msg=plain k=v`:                                  "plain k=v",
		`Traceback (most recent call last):`:                                                  "Traceback (most recent call last):",
		`applying cutover at 82`:                                                              "applying cutover at 82",
	} {
		if got := logLabel(in); got != want {
			t.Errorf("logLabel(%q) = %q, want %q", in, got, want)
		}
	}
}

// mediaMigration is a handover whose receiver got MPEG-TS: the target's
// first packet arrived at 150 ms, the verdicts were recorded at 190 ms.
func mediaMigration() (*sim.Migration, func(ms float64) time.Time) {
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(ms float64) time.Time { return t0.Add(time.Duration(ms * float64(time.Millisecond))) }
	end, switchAt := at(200), at(150)
	frames := []sim.MediaFrame{
		// Before the request: off the axis.
		{Side: "source", At: at(-40), Stream: "PID 256", PTS: 896400, Key: true},
		{Side: "source", At: at(100), Stream: "PID 256", PTS: 900000, Key: true},
		{Side: "source", At: at(140), Stream: "PID 256", PTS: 903600},
		{Side: "target", At: at(150), Stream: "PID 256", PTS: 907200},
		{Side: "target", At: at(170), Stream: "PID 257", PTS: 908000},
		{Side: "target", At: at(190), Stream: "PID 256", PTS: 910800, Key: true},
	}
	return &sim.Migration{StartedAt: t0, EndedAt: &end, State: sim.MigrationCompleted,
		Output: &sim.OutputReport{Verdict: sim.VerdictGlitch, SwitchAt: &switchAt,
			Media: &sim.MediaReport{Verdict: sim.VerdictGlitch, SwitchAt: &switchAt, Frames: frames}},
		Events: []sim.MigrationEvent{
			{Seq: 1, At: at(0), Side: "manager", Detail: "handover of x from node a to node b"},
			{Seq: 2, At: at(120), Side: "manager", Detail: "point of no return: the source stopped its output"},
			{Seq: 3, At: at(190), Side: "output", Detail: "output seamless: source stopped at 41, target continued at 42"},
			{Seq: 4, At: at(190), Side: "output", Detail: "media glitch: the target joined off a keyframe"},
			{Seq: 5, At: at(200), Side: "manager", Detail: "migration completed"},
		}}, at
}

func TestLayoutTimelineDrawsTheMediaSeamWhereItHappened(t *testing.T) {
	m, at := mediaMigration()
	tl := layoutTimeline(m, at(10_000), nil)
	pct := func(ms float64) float64 { return ms / tl.SpanMs * 100 }
	near := func(a, b float64) bool { return a-b < 1e-9 && b-a < 1e-9 }

	if tl.Switch == nil || !near(*tl.Switch, pct(150)) || !strings.Contains(tl.SwitchTitle, "+150.0 ms") {
		t.Fatalf("switch line at %v (%q), want %v%%", tl.Switch, tl.SwitchTitle, pct(150))
	}
	// Both verdicts sit at the switch, not at 190 ms where they were
	// recorded; the table keeps 190 ms.
	var out lane
	for _, l := range tl.Lanes {
		if l.Name == "output" {
			out = l
		}
	}
	if len(out.Marks) != 2 {
		t.Fatalf("output marks = %+v", out.Marks)
	}
	for _, mk := range out.Marks {
		if !near(mk.Left, pct(150)) || !strings.HasPrefix(mk.Title, "seam at +150.0 ms · output · ") || !strings.Contains(mk.Title, "recorded at +190.0 ms") {
			t.Errorf("verdict mark %d at %v%% (%q), want at the switch, %v%%", mk.Seq, mk.Left, mk.Title, pct(150))
		}
	}
	if out.Marks[0].Label != "seamless" || !strings.Contains(out.Marks[0].Class, "ok") ||
		out.Marks[1].Label != "media glitch" || !strings.Contains(out.Marks[1].Class, "bad") {
		t.Errorf("verdict labels and tones = %+v", out.Marks)
	}
	if tl.Events[2].Ms != 190 || tl.Events[3].Ms != 190 || tl.Events[3].Tone != "bad" {
		t.Errorf("the table's verdicts: %+v", tl.Events[2:4])
	}

	// The frames: by arrival, source above target, keyframes marked, the
	// one before the request not drawn.
	s := tl.Media
	if s == nil || len(s.Source) != 2 || len(s.Target) != 3 || s.Hidden != 1 {
		t.Fatalf("media strip = %+v", s)
	}
	for i, want := range []float64{100, 140} {
		if !near(s.Source[i].Left, pct(want)) {
			t.Errorf("source frame %d at %v%%, want %v%%", i, s.Source[i].Left, pct(want))
		}
	}
	for i, want := range []float64{150, 170, 190} {
		if !near(s.Target[i].Left, pct(want)) {
			t.Errorf("target frame %d at %v%%, want %v%%", i, s.Target[i].Left, pct(want))
		}
	}
	if !s.Source[0].Key || s.Source[1].Key || s.Target[0].Key || !s.Target[2].Key {
		t.Errorf("keyframes: source %+v target %+v", s.Source, s.Target)
	}
	if got, want := s.Target[2].Title, "target · PID 256 · PTS 910800 (10.120 s) · keyframe · arrived at +190.0 ms"; got != want {
		t.Errorf("frame title %q, want %q", got, want)
	}
	if strings.Contains(s.Target[1].Title, "keyframe") {
		t.Errorf("a frame that is no keyframe says it is: %q", s.Target[1].Title)
	}
	// Below the lane's marks, and the lane grown to hold it.
	if s.Top < lanePad+rowPx || out.Height != s.Top+lanePad+stripPx {
		t.Errorf("strip top %v in a lane %v high", s.Top, out.Height)
	}

	// Zoomed on 145–160 ms: only the frame and the switch inside it.
	zt := layoutTimeline(m, at(10_000), &window{From: 145, To: 160})
	if zt.Media == nil || len(zt.Media.Source) != 0 || len(zt.Media.Target) != 1 || zt.Media.Hidden != 5 || zt.Switch == nil {
		t.Fatalf("zoomed strip = %+v, switch %v", zt.Media, zt.Switch)
	}
	// Zoomed off the switch: no line, no verdicts.
	zt = layoutTimeline(m, at(10_000), &window{From: 160, To: 200})
	for _, l := range zt.Lanes {
		if l.Name == "output" && len(l.Marks) != 0 {
			t.Errorf("verdicts drawn outside the window: %+v", l.Marks)
		}
	}
	if zt.Switch != nil {
		t.Errorf("switch line at %v outside the window", *zt.Switch)
	}
}

func TestLayoutTimelineWithoutMediaDrawsNoStrip(t *testing.T) {
	m, at := mediaMigration()
	m.Output = &sim.OutputReport{Verdict: sim.VerdictSeamless}
	tl := layoutTimeline(m, at(10_000), nil)
	if tl.Media != nil || tl.Switch != nil {
		t.Fatalf("strip %+v, switch %v without media or a switch", tl.Media, tl.Switch)
	}
	for _, l := range tl.Lanes {
		if l.Name != "output" {
			continue
		}
		// Without a switch, a verdict is where it was recorded.
		if want := 190 / tl.SpanMs * 100; len(l.Marks) != 2 || l.Marks[0].Left != want || strings.HasPrefix(l.Marks[0].Title, "seam at") {
			t.Fatalf("output marks = %+v, want at %v%%", l.Marks, want)
		}
		if l.Height != rowPx*2+2*lanePad {
			t.Errorf("output lane %v high, want two rows of marks", l.Height)
		}
	}

	// A switch without media (JSON packets): the verdict moves, no frames.
	sw := at(150)
	m.Output.SwitchAt = &sw
	tl = layoutTimeline(m, at(10_000), nil)
	if tl.Media != nil || tl.Switch == nil {
		t.Fatalf("strip %+v, switch %v with a switch and no media", tl.Media, tl.Switch)
	}
}

func TestEventToneOfMediaVerdicts(t *testing.T) {
	for detail, want := range map[string]string{
		"media seamless: PID 256 continues":      "ok",
		"media glitch: the target joined late":   "bad",
		"media gap: 2 frames missing":            "bad",
		"output glitch: media: continuity error": "bad",
	} {
		if got := eventTone(sim.MigrationEvent{Side: "output", Detail: detail}); got != want {
			t.Errorf("eventTone(%q) = %q, want %q", detail, got, want)
		}
	}
}
