package web

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/normsim/normsim/sim"
)

// The migration page draws every timeline event on a real time axis, one
// swimlane per side. Layout happens here, in Go, so the page reads the same
// with or without JavaScript and the layout is testable; app.js only swaps
// in a fresh rendering when an event arrives.

// lanes are the swimlanes in the order they are drawn.
var lanes = []struct{ name, title string }{
	{"manager", "Manager"},
	{"source", "Source job"},
	{"target", "Target job"},
	{"output", "Output"},
}

// Layout constants. The track's width is not known on the server, so label
// widths are estimated for a track of trackPx pixels; a narrower window
// overlaps labels a little, a wider one spaces them out.
const (
	trackPx  = 780.0
	charPx   = 7.0
	labelPad = 20.0
	dotPx    = 14.0
	rowPx    = 26.0
	lanePad  = 8.0
	// maxRows is how many rows of whole labels a lane grows to; past it
	// labels are cut short (the whole one on hover) and take further rows
	// only where even those would collide. A handover's cutover puts a
	// dozen marks (frames and the lines each side printed) within a
	// millisecond in one lane: they read whole without the zoom.
	maxRows = 12
)

type timeline struct {
	SpanMs float64
	// Window is the stretch drawn when zoomed in; nil for the whole axis.
	Window *window
	Ticks  []tick
	Phases []phaseSpan
	Lanes  []lane
	// Ponr is the point of no return as a percentage of the axis, when the
	// migration reached it; Now is the present moment of a running one.
	Ponr *float64
	Now  *float64
	// Switch is where the seam happened for a receiver (Output.SwitchAt),
	// drawn across the output lane; Media the frames the receiver got
	// around it, drawn in that lane below its marks. Nil when not drawn.
	Switch      *float64
	SwitchTitle string
	Media       *mediaStrip
	Events      []timelineEvent
	// Logs are the sides' lines of the migration's record; LogsHidden
	// counts those not drawn in the lanes (outside the axis, or past
	// maxLogMarks), which the log table still lists.
	Logs       []timelineLog
	LogsHidden int
	LogsOmit   int
}

// timelineLog is one line a side printed, with its time on the axis.
type timelineLog struct {
	sim.MigrationLogLine
	Key string
	Ms  float64
}

// maxLogMarks bounds the log lines drawn per lane: a chatty job's
// thousands would bury the frames.
const maxLogMarks = 200

// logLabelChars is how much of a line its mark shows.
const logLabelChars = 32

// logLead is what most loggers put first and a short label can do
// without: a timestamp (bare or time=…) and a level.
var logLead = regexp.MustCompile(`^(?:time=)?"?\d{4}-\d\d-\d\d[T ][0-9:.,]+(?:Z|[+-]\d\d:?\d\d)?"?\s+(?:level=)?(?:(?i:debug|info|warn|warning|error)\s+)?`)

// logLabel is the part of a line worth its mark's few characters: the
// message after the logger's timestamp and level (msg= unquoted).
func logLabel(text string) string {
	t := logLead.ReplaceAllString(text, "")
	if rest, ok := strings.CutPrefix(t, "msg="); ok {
		if strings.HasPrefix(rest, `"`) {
			if end := strings.Index(rest[1:], `"`); end >= 0 {
				return rest[1 : end+1]
			}
		}
		t = rest
	}
	if t == "" {
		return text
	}
	return t
}

type tick struct {
	Left  float64
	Label string
}

type phaseSpan struct {
	Name        string
	Left, Width float64
	// Narrow: too narrow for its name, which then shows on hover only.
	Narrow bool
}

type lane struct {
	Name, Title string
	Height      float64
	Marks       []mark
}

type mark struct {
	Seq int
	// Key is what the page selects the mark by: the event's seq, or
	// "log-N" for log line N.
	Key       string
	Left, Top float64
	Label     string
	Class     string
	Title     string
	Flip      bool
	// lo and hi are the stretch of the track (in %) the mark and its
	// label are estimated to cover; no other mark in its row overlaps it.
	lo, hi float64
}

// mediaStrip is the frames a receiver got around the switch, one row per
// side, on the timeline's axis.
type mediaStrip struct {
	// Top is where the strip starts in the output lane, in px.
	Top            float64
	Source, Target []frameTick
	// Hidden counts the frames outside the axis drawn.
	Hidden int
}

// frameTick is one frame of the media strip.
type frameTick struct {
	Left  float64
	Key   bool
	Title string
}

// The media strip's rows: a frame is a tick in its side's row, a
// keyframe one as tall as the row.
const (
	stripRowPx = 16.0
	stripPx    = 2*stripRowPx + 6
)

type timelineEvent struct {
	sim.MigrationEvent
	Ms      float64
	Dir     string // "worker → job" | "job → worker" | ""
	Payload string
	Tone    string
}

// direction names a frame's direction for people.
func direction(d string) string {
	switch d {
	case "in":
		return "job → worker"
	case "out":
		return "worker → job"
	}
	return d
}

// eventTone says how an event should stand out: ok, bad, ponr or "".
func eventTone(ev sim.MigrationEvent) string {
	d := ev.Detail
	switch {
	case strings.HasPrefix(d, "point of no return"):
		return "ponr"
	case strings.HasPrefix(d, "migration completed"):
		return "ok"
	case strings.HasPrefix(d, "migration "), strings.HasPrefix(d, "rolling back"), strings.HasPrefix(d, "could not"),
		strings.HasPrefix(d, "failed"), strings.HasPrefix(d, "refused"), strings.HasPrefix(d, "fault"),
		strings.HasPrefix(d, "socket closed"), strings.HasPrefix(d, "abort"):
		return "bad"
	case strings.HasPrefix(d, "output seamless"), ev.Side == sideOutput && strings.HasPrefix(d, "media seamless"):
		return "ok"
	case strings.HasPrefix(d, "output "), ev.Side == sideOutput && strings.HasPrefix(d, "media "):
		return "bad"
	}
	if ev.Frame != nil && (ev.Frame.Type == "abort" || ev.Frame.Type == "state-refused") {
		return "bad"
	}
	return ""
}

// sideOutput is the lane of the output sink's and media receiver's verdicts.
const sideOutput = "output"

// seamVerdict reports whether ev is a verdict on the seam ("output
// <verdict>: …" or "media <verdict>: …"): recorded when the migration
// ended, but about the moment the target's output took over.
func seamVerdict(ev sim.MigrationEvent) bool {
	return ev.Side == sideOutput && (strings.HasPrefix(ev.Detail, "output ") || strings.HasPrefix(ev.Detail, "media "))
}

// window is a stretch of the time axis, in ms from the migration's start.
type window struct{ From, To float64 }

// cutoverWindow is the stretch from the target's target-ready to its
// target-applied (or the present, or the last event), padded a little: the
// few milliseconds of a handover that a whole-migration axis squeezes into a
// line. Nil when the migration has no cutover.
func cutoverWindow(m *sim.Migration, now time.Time) *window {
	msOf := func(t time.Time) float64 { return float64(t.Sub(m.StartedAt)) / float64(time.Millisecond) }
	from, to := -1.0, -1.0
	for _, ev := range m.Events {
		if ev.Frame == nil {
			continue
		}
		switch {
		case from < 0 && ev.Frame.Type == "target-ready":
			from = msOf(ev.At)
		case ev.Frame.Type == "target-applied":
			to = msOf(ev.At)
		}
	}
	if from < 0 {
		return nil
	}
	if to < from {
		if m.EndedAt != nil {
			to = msOf(m.Events[len(m.Events)-1].At)
		} else {
			to = msOf(now)
		}
	}
	pad := math.Max((to-from)*0.15, 0.5)
	return &window{From: math.Max(from-pad, 0), To: to + pad}
}

// layoutTimeline places a migration's events. now is the present, used to
// extend the axis of a migration that is still running. With a window only
// that stretch of the axis is drawn (every event stays in the table).
func layoutTimeline(m *sim.Migration, now time.Time, win *window) timeline {
	var tl timeline
	msOf := func(t time.Time) float64 { return float64(t.Sub(m.StartedAt)) / float64(time.Millisecond) }
	maxMs := 0.0
	for _, ev := range m.Events {
		maxMs = math.Max(maxMs, msOf(ev.At))
	}
	var switchAt *time.Time
	var media *sim.MediaReport
	if m.Output != nil {
		switchAt, media = m.Output.SwitchAt, m.Output.Media
	}
	switchMs := 0.0
	if switchAt != nil {
		switchMs = msOf(*switchAt)
		maxMs = math.Max(maxMs, switchMs)
	}
	if m.EndedAt != nil {
		maxMs = math.Max(maxMs, msOf(*m.EndedAt))
	} else {
		n := msOf(now)
		if n > maxMs {
			maxMs = n
		}
	}
	span := math.Max(maxMs*1.04, 1)
	tl.SpanMs = span
	lo, hi := 0.0, span
	if win != nil && win.To > win.From {
		lo, hi = win.From, win.To
		tl.Window = win
	}
	width := hi - lo
	pct := func(ms float64) float64 { return math.Max(0, math.Min(100, (ms-lo)/width*100)) }
	shown := func(ms float64) bool { return ms >= lo && ms <= hi }

	step := niceStep(width, 8)
	first := math.Ceil(lo/step) * step
	for i := 0; first+float64(i)*step <= hi; i++ {
		v := first + float64(i)*step
		tl.Ticks = append(tl.Ticks, tick{Left: pct(v), Label: tickLabel(v, step)})
	}

	// Phases: consecutive events in one phase make a band.
	type band struct {
		name       string
		start, end float64
	}
	var bands []band
	for _, ev := range m.Events {
		p := string(ev.Phase)
		if p == "" {
			p = "requested"
		}
		ms := msOf(ev.At)
		if len(bands) > 0 && bands[len(bands)-1].name == p {
			continue
		}
		if len(bands) > 0 {
			bands[len(bands)-1].end = ms
		}
		bands = append(bands, band{name: p, start: ms})
	}
	if len(bands) > 0 {
		bands[len(bands)-1].end = maxMs
	}
	for _, b := range bands {
		if b.end < lo || b.start > hi {
			continue
		}
		w := math.Max(pct(b.end)-pct(b.start), 0.4)
		need := (float64(len(b.name))*charPx*0.95 + 10) / trackPx * 100
		tl.Phases = append(tl.Phases, phaseSpan{Name: b.name, Left: pct(b.start), Width: w, Narrow: w < need})
	}

	if m.EndedAt == nil && shown(msOf(now)) {
		v := pct(msOf(now))
		tl.Now = &v
	}

	laneIdx := map[string]int{}
	for i, l := range lanes {
		laneIdx[l.name] = i
		tl.Lanes = append(tl.Lanes, lane{Name: l.name, Title: l.title})
	}
	// rows[lane][row] is the right edge (in %) of the last mark placed there.
	rows := make([][]float64, len(lanes))
	// place puts a mark widthPx wide in lane li, in the first row where it
	// does not overlap the mark before it. Past maxRows a shorter label
	// (the whole one on hover; widthOf sizes it) is tried first, and a
	// row of its own is added if it must: never over another mark.
	place := func(li int, mk mark, widthPx float64, widthOf func(label string) float64) {
		extent := func(px float64) (lo, hi float64, flip bool) {
			w := px / trackPx * 100
			if mk.Left+w > 100 {
				return mk.Left - w, mk.Left, true
			}
			return mk.Left, mk.Left + w, false
		}
		free := func(lo float64) int {
			for r, right := range rows[li] {
				if right <= lo {
					return r
				}
			}
			return -1
		}
		lo, hi, flip := extent(widthPx)
		row := free(lo)
		if row < 0 && len(rows[li]) >= maxRows {
			if short := clipLabel(mk.Label, crowdedRunes); short != mk.Label {
				mk.Label = short
				mk.Class += " crowded"
				lo, hi, flip = extent(widthOf(short))
			}
			row = free(lo)
		}
		if row < 0 {
			rows[li] = append(rows[li], 0)
			row = len(rows[li]) - 1
		}
		mk.Flip, mk.lo, mk.hi = flip, lo, hi
		rows[li][row] = hi + 0.3
		mk.Top = lanePad + float64(row)*rowPx
		tl.Lanes[li].Marks = append(tl.Lanes[li].Marks, mk)
	}
	frameWidth := func(label string) float64 { return float64(len([]rune(label)))*charPx + labelPad }
	logWidth := func(label string) float64 { return float64(len([]rune(label)))*charPx*0.85 + labelPad }
	for _, ev := range m.Events {
		ms := msOf(ev.At)
		te := timelineEvent{MigrationEvent: ev, Ms: ms, Tone: eventTone(ev)}
		if ev.Frame != nil {
			te.Dir = direction(ev.Frame.Direction)
			te.Payload = prettyJSON(ev.Frame.Payload)
		}
		tl.Events = append(tl.Events, te)
		// A seam verdict is drawn where the seam happened; the table
		// keeps when it was recorded.
		atSwitch := switchAt != nil && seamVerdict(ev)
		markMs := ms
		if atSwitch {
			markMs = switchMs
		}
		if !shown(markMs) {
			continue
		}
		if te.Tone == "ponr" {
			v := pct(ms)
			tl.Ponr = &v
		}

		li, ok := laneIdx[ev.Side]
		if !ok {
			li = 0
		}
		mk := mark{Seq: ev.Seq, Key: strconv.Itoa(ev.Seq), Left: pct(markMs), Title: fmt.Sprintf("%s · %s · %s", fmtMs(&ms), ev.Side, ev.Detail)}
		if atSwitch {
			mk.Title = fmt.Sprintf("seam at +%s · %s · %s (recorded at +%s)", fmtMs(&switchMs), ev.Side, ev.Detail, fmtMs(&ms))
		}
		widthOf := dotLabelPx
		if ev.Frame != nil {
			arrow := "→"
			if ev.Frame.Direction == "in" {
				arrow = "←"
			}
			mk.Label = arrow + " " + ev.Frame.Type
			mk.Class = "frame " + ev.Frame.Direction
			widthOf = frameWidth
			size := "size not recorded"
			if ev.Frame.Size > 0 {
				size = fmtBytes(ev.Frame.Size)
			}
			mk.Title = fmt.Sprintf("%s · %s %s · %s · %s", fmtMs(&ms), ev.Frame.Type, te.Dir, size, ev.Side)
		} else {
			// Every dot says what it is; the whole detail is in its title.
			mk.Class = "dot labelled"
			mk.Label = shortLabel(ev.Detail)
		}
		if te.Tone != "" {
			mk.Class += " " + te.Tone
		}
		place(li, mk, widthOf(mk.Label), widthOf)
	}
	drawn := map[int]int{}
	if lg := m.Logs; lg != nil {
		tl.LogsOmit = lg.Omitted
		for _, l := range lg.Lines {
			ms := msOf(l.At)
			key := fmt.Sprintf("log-%d", l.Seq)
			tl.Logs = append(tl.Logs, timelineLog{MigrationLogLine: l, Key: key, Ms: ms})
			li, ok := laneIdx[l.Side]
			if !ok || !shown(ms) || ms < 0 || ms > span || drawn[li] >= maxLogMarks {
				tl.LogsHidden++
				continue
			}
			drawn[li]++
			label := logLabel(l.Text)
			if r := []rune(label); len(r) > logLabelChars {
				label = string(r[:logLabelChars-1]) + "…"
			}
			mk := mark{Key: key, Left: pct(ms), Label: "▤ " + label, Class: "logline " + l.Stream,
				Title: fmt.Sprintf("%s · %s %s · %s | %s", fmtMs(&ms), l.Side, l.Stream, l.Service, l.Text)}
			place(li, mk, logWidth(mk.Label), logWidth)
		}
	}
	for i := range tl.Lanes {
		n := math.Max(float64(len(rows[i])), 1)
		tl.Lanes[i].Height = n*rowPx + 2*lanePad
	}
	if switchAt != nil && shown(switchMs) {
		v := pct(switchMs)
		tl.Switch = &v
		tl.SwitchTitle = fmt.Sprintf("seam at +%s: the receiver got the target's first packet", fmtMs(&switchMs))
	}
	if media != nil && len(media.Frames) > 0 {
		out := &tl.Lanes[laneIdx[sideOutput]]
		strip := &mediaStrip{Top: out.Height - lanePad}
		for _, f := range media.Frames {
			ms := msOf(f.At)
			if !shown(ms) {
				strip.Hidden++
				continue
			}
			ft := frameTick{Left: pct(ms), Key: f.Key, Title: frameTitle(f, ms)}
			if f.Side == "target" {
				strip.Target = append(strip.Target, ft)
			} else {
				strip.Source = append(strip.Source, ft)
			}
		}
		tl.Media = strip
		out.Height += stripPx
	}
	return tl
}

// frameTitle is what hovering a frame of the media strip says.
func frameTitle(f sim.MediaFrame, ms float64) string {
	t := fmt.Sprintf("%s · %s · PTS %d (%.3f s)", f.Side, f.Stream, f.PTS, float64(f.PTS)/90000)
	if f.Key {
		t += " · keyframe"
	}
	return t + " · arrived at +" + fmtMs(&ms)
}

// shortLabels name the events worth a word on the timeline; the rest are
// dots whose detail shows on hover, on selection and in the table.
var shortLabels = []struct{ prefix, label string }{
	{"point of no return", "point of no return"},
	{"connected", "connected"},
	{"socket closed", "socket closed"},
	{"target started", "started"},
	{"target running", "running"},
	{"stopping the source", "stopping"},
	{"source stopped", "stopped"},
	{"source left running", "left running"},
	{"target removed", "removed"},
	{"rolling back", "rolling back"},
	{"refused", "refused"},
	{"fault", "fault"},
	{"could not", "error"},
	{"failed after", "failed"},
	{"migration completed", "completed"},
	{"migration aborted", "aborted"},
	{"migration failed", "failed"},
	{"migration refused", "refused"},
}

// crowdedRunes is the length of a label cut short in a crowded lane.
const crowdedRunes = 8

// dotLabelPx estimates the width of a dot and its label.
func dotLabelPx(label string) float64 {
	return dotPx + float64(len([]rune(label)))*charPx*0.9 + 6
}

// clipLabel cuts a label to at most n runes, ending it with "…".
func clipLabel(label string, n int) string {
	r := []rune(label)
	if len(r) <= n {
		return label
	}
	return strings.TrimRight(string(r[:n-1]), " ·:,") + "…"
}

// shortLabel is a dot's label: a word for the events named above, else
// the start of the detail (its first clause, cut short).
func shortLabel(detail string) string {
	if l := knownLabel(detail); l != "" {
		return l
	}
	head := detail
	if i := strings.IndexAny(head, ":(;"); i > 0 {
		head = head[:i]
	}
	return clipLabel(strings.TrimSpace(head), 18)
}

func knownLabel(detail string) string {
	if strings.HasPrefix(detail, "target ") && strings.Contains(detail, " created on node ") {
		return "created"
	}
	if rest, ok := strings.CutPrefix(detail, "output "); ok {
		verdict, _, _ := strings.Cut(rest, ":")
		return verdict
	}
	// Beside the output verdict, the media's says which it is.
	if rest, ok := strings.CutPrefix(detail, "media "); ok {
		verdict, _, _ := strings.Cut(rest, ":")
		return "media " + verdict
	}
	if strings.Contains(detail, " of ") && strings.Contains(detail, " from node ") {
		return "requested"
	}
	for _, l := range shortLabels {
		if strings.HasPrefix(detail, l.prefix) {
			return l.label
		}
	}
	return ""
}

// niceStep picks a tick step of 1, 2 or 5 times a power of ten giving at
// most maxTicks ticks over span.
func niceStep(span float64, maxTicks int) float64 {
	if span <= 0 {
		return 1
	}
	raw := span / float64(maxTicks)
	p := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= raw {
			return m * p
		}
	}
	return 10 * p
}

func tickLabel(v, step float64) string {
	switch {
	case v == 0:
		return "0"
	case step >= 1000:
		return trimZeros(fmt.Sprintf("%.3f", v/1000)) + " s"
	case step >= 1:
		return fmt.Sprintf("%.0f ms", v)
	default:
		return trimZeros(fmt.Sprintf("%.3f", v)) + " ms"
	}
}

func trimZeros(s string) string {
	if strings.Contains(s, ".") {
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	}
	return s
}
