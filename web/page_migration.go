package web

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/normsim/normsim/sim"
)

// The migration pages: one migration's timeline and the history.

type migrationPage struct {
	pageBase
	M *sim.Migration
	// Zoom is "cutover" when the axis shows the cutover only; CanZoom says
	// the migration has one.
	Zoom    string
	CanZoom bool
	TL      timeline
	Seam    seamView
	// Media is the media seam's panel; nil without a media report.
	Media     *mediaView
	Verdict   verdictView
	TargetEnv string
	// CanAbort: the migration runs and has not passed the point of no
	// return as far as its timeline shows; AbortErr is why an abort the
	// page asked for was refused.
	CanAbort  bool
	AbortErr  string
	Highlight bool
	// Rolled is what an aborted migration's rollback did and left, from
	// its record.
	Rolled string
}

// seamView is the output verdict as the page states it.
type seamView struct {
	Verdict  string
	Tone     string
	Headline string
	Detail   string
	Measured bool
	Report   *sim.OutputReport
}

// rolledBack says what an aborted migration's rollback did to each side,
// as its record says: the source is not said to have kept running when it
// had exited or been killed.
func rolledBack(m *sim.Migration) string {
	target := "no target had been placed"
	switch {
	case m.Rollback != nil && m.Rollback.TargetDetail != "":
		target = "the " + m.Rollback.TargetDetail
	case m.Target.Instance != "":
		target = "the target was removed"
	}
	how := "Rolled back before the point of no return: "
	if m.Rollback != nil && m.Rollback.AtRestart {
		how = "normsim was killed while the migration ran, before its point of no return; its next start rolled it back, telling no job (each had lost its socket): "
	}
	return how + target + "; " + sourceAfterRollback(m) + "."
}

// sourceAfterRollback is what a rollback left of the source. A record
// written before rollbacks were recorded says nothing of it.
func sourceAfterRollback(m *sim.Migration) string {
	switch {
	case m.Rollback == nil:
		return "what became of the source is not recorded"
	case m.Rollback.Source == sim.SourceRunning:
		return "the source was left running"
	}
	return m.Rollback.SourceDetail
}

func seam(m *sim.Migration) seamView {
	o := m.Output
	if o == nil {
		v := seamView{Verdict: "not measured", Tone: "muted", Headline: "Not measured"}
		switch {
		case !m.State.Ended():
			v.Headline, v.Detail = "Waiting", "The seam is judged when the migration ends."
		case m.State == sim.MigrationRefused:
			v.Detail = "Nothing was cut over: the source declined to hand over."
		case m.State == sim.MigrationAborted:
			v.Detail = "Nothing was cut over: " + sourceAfterRollback(m) + "."
		default:
			v.Detail = "The output sink saw no packets from this job, so there is no seam to judge."
		}
		return v
	}
	v := seamView{Verdict: o.Verdict, Measured: true, Report: o}
	if o.LastSource == nil || o.FirstTarget == nil || o.AtFault != "" || o.Unreadable != nil {
		// No positions to show, a side to blame, or packets not read:
		// the detail says which.
		v.Detail = o.Detail
	}
	switch o.Verdict {
	case sim.VerdictSeamless:
		v.Tone, v.Headline = "ok", "Seamless"
	case sim.VerdictGap:
		v.Tone, v.Headline = "bad", fmt.Sprintf("Gap of %s · %d lost", fmtMs(o.GapMs), o.Lost)
	case sim.VerdictOverlap:
		v.Tone, v.Headline = "bad", fmt.Sprintf("Overlap of %s · %d duplicated", fmtMs(o.OverlapMs), o.Duplicated)
		if o.AtFault != "" {
			v.Headline = fmt.Sprintf("Overlap · %s at fault · %d duplicated", o.AtFault, o.Duplicated)
		}
	case sim.VerdictUnknown:
		v.Tone, v.Headline = "muted", "Not proven: some packets could not be read"
	case sim.VerdictDuplicate:
		v.Tone, v.Headline = "bad", fmt.Sprintf("%d duplicated", o.Duplicated)
	case sim.VerdictGlitch:
		v.Tone, v.Headline = "bad", "Glitch at the seam"
		if o.Media != nil && len(o.Media.Defects) > 0 {
			v.Headline += " · " + sim.Plural(int64(len(o.Media.Defects)), "defect")
		}
	case sim.VerdictNoOutput:
		v.Tone, v.Headline = "muted", "No output to compare"
	default:
		v.Tone, v.Headline = "muted", o.Verdict
	}
	if expected(m.Strategy, o) {
		v.Tone = "ok"
		v.Headline += " · as " + string(m.Strategy) + " promises"
	}
	return v
}

// expected says whether a seam that is not seamless is what the
// migration's strategy promises, not a broken promise: a stopThenStart's
// gap (the source stops before the target starts, so the picture stops
// for a moment), an overlap's overlap and duplicates (both produce for a
// moment). Nobody at fault, or it is not.
func expected(st sim.Strategy, o *sim.OutputReport) bool {
	if o == nil || o.AtFault != "" {
		return false
	}
	switch st {
	case sim.StopThenStart:
		return o.Verdict == sim.VerdictGap || o.Verdict == sim.VerdictGlitch
	case sim.Overlap:
		return o.Verdict == sim.VerdictOverlap || o.Verdict == sim.VerdictDuplicate
	}
	return false
}

// seamTone is the colour family of a seam: ok when seamless or what the
// strategy promises, bad when it broke the promise, muted when not known.
func seamTone(st sim.Strategy, o *sim.OutputReport) string {
	switch {
	case o == nil:
		return "muted"
	case o.Verdict == sim.VerdictSeamless || expected(st, o):
		return "ok"
	case o.Verdict == sim.VerdictGap, o.Verdict == sim.VerdictDuplicate, o.Verdict == sim.VerdictOverlap, o.Verdict == sim.VerdictGlitch:
		return "bad"
	}
	return "muted"
}

// mediaView is the media seam as the Media seam panel states it: what a
// receiver of the job's MPEG-TS or RTP saw where the target took over.
type mediaView struct {
	Report  *sim.MediaReport
	Tone    string
	Streams []mediaStreamRow
	// Keyframe says whether the target joined on a keyframe: yes, no
	// (with how long the picture is missing) or not known.
	Keyframe string
	// Capture is the address of the received stream around the switch.
	Capture string
	// Drawn and Hidden count the frames on the timeline and outside it.
	Drawn, Hidden int
}

// mediaStreamRow is one elementary stream's seam, formatted.
type mediaStreamRow struct {
	Name, Kind, Codec       string
	LastSource, FirstTarget string
	FrameMs                 string
	Seam                    string
	Verdict, Tone, Detail   string
}

func mediaPanel(m *sim.Migration, tl timeline) *mediaView {
	if m.Output == nil || m.Output.Media == nil {
		return nil
	}
	r := m.Output.Media
	v := &mediaView{Report: r, Tone: mediaTone(r.Verdict), Keyframe: "not known",
		Capture: "/api/v1/migrations/" + url.PathEscape(m.ID) + "/seam.ts"}
	if k := r.KeyframeAtJoin; k != nil {
		v.Keyframe = "yes"
		switch {
		case !*k:
			v.Keyframe = "no"
			if r.PictureMissingMs != nil {
				v.Keyframe += " · the picture is missing for " + fmtMs(r.PictureMissingMs)
			}
		case r.PictureMissingMs != nil:
			// A keyframe first, but the tables came after it.
			v.Keyframe += " · but without tables first: a receiver joining there has no picture for " + fmtMs(r.PictureMissingMs)
		}
	}
	for _, st := range r.Streams {
		row := mediaStreamRow{Name: streamName(st), Kind: st.Kind, Codec: st.Codec, LastSource: fmtPTS(st.LastSourcePTS),
			FirstTarget: fmtPTS(st.FirstTargetPTS), FrameMs: "—", Seam: seamOf(st.GapMs, st.OverlapMs, st.FramesMissing, st.FramesRepeated),
			Verdict: st.Verdict, Tone: mediaTone(st.Verdict), Detail: st.Detail}
		if st.FrameTicks > 0 {
			row.FrameMs = sim.FormatMs(float64(st.FrameTicks) / 90)
		}
		v.Streams = append(v.Streams, row)
	}
	if tl.Media != nil {
		v.Drawn, v.Hidden = len(tl.Media.Source)+len(tl.Media.Target), tl.Media.Hidden
	} else {
		v.Hidden = len(r.Frames)
	}
	return v
}

// mediaTone: only seamless is good; unknown and no-output prove nothing.
func mediaTone(verdict string) string {
	switch verdict {
	case sim.VerdictSeamless:
		return "ok"
	case sim.VerdictUnknown, sim.VerdictNoOutput, "":
		return "muted"
	}
	return "bad"
}

func streamName(st sim.MediaStream) string {
	switch {
	case st.PID != nil:
		return fmt.Sprintf("PID %d", *st.PID)
	case st.SSRC != nil:
		return fmt.Sprintf("SSRC 0x%08x", *st.SSRC)
	}
	return "—"
}

// fmtPTS is a presentation time in 90 kHz ticks and in seconds.
func fmtPTS(pts *int64) string {
	if pts == nil {
		return "—"
	}
	return fmt.Sprintf("%d (%.3f s)", *pts, float64(*pts)/90000)
}

// seamOf says how far apart the two sides' presentation times are.
func seamOf(gapMs, overlapMs *float64, missing, repeated int64) string {
	switch {
	case gapMs != nil && *gapMs > 0:
		return fmt.Sprintf("gap of %s · %s missing", fmtMs(gapMs), sim.Plural(missing, "frame"))
	case overlapMs != nil && *overlapMs > 0:
		return fmt.Sprintf("overlap of %s · %s repeated", fmtMs(overlapMs), sim.Plural(repeated, "frame"))
	case gapMs != nil || overlapMs != nil:
		return "continuous"
	}
	return "—"
}

// verdictView is normsim's judgement of an ended migration and what its
// target reported in target-applied, as the summary shows them beside the
// seam: the same judgement migrate --wait, ci, conform and normsimtest
// print.
type verdictView struct {
	// Judgement is nil while the migration runs.
	Judgement *sim.Judgement
	AtFault   string // "none" when no side is blamed
	Tone      string
	// Applied says the target sent target-applied; Result is what it
	// reported, Skew its skewMs as sent.
	Applied bool
	Result  sim.MigrationResult
	Skew    string
}

func verdict(m *sim.Migration) verdictView {
	v := verdictView{Applied: sim.AppliedReported(m), Result: m.Result, Skew: "not reported"}
	if m.Result.SkewMs != nil {
		v.Skew = strconv.FormatFloat(*m.Result.SkewMs, 'f', -1, 64) + " ms"
	}
	if m.State.Ended() {
		j := m.Judged()
		v.Judgement, v.AtFault, v.Tone = &j, cmp.Or(j.AtFault, "none"), gradeTone(string(j.Grade))
	}
	return v
}

// withJudgement is an ended migration with its judgement in the record,
// for one stored before normsim judged at the end: the API answers with
// the judgement every tool prints. A copy: m may be shared.
func withJudgement(m *sim.Migration) *sim.Migration {
	if m == nil || m.Judgement != nil || !m.State.Ended() {
		return m
	}
	c := *m
	j := m.Judged()
	c.Judgement = &j
	return &c
}

func (s *Server) migrationPage(w http.ResponseWriter, r *http.Request) {
	s.renderMigration(w, r, http.StatusOK, pathParam(r, "id"), "")
}

// uiAbort is the migration page's Abort button.
func (s *Server) uiAbort(w http.ResponseWriter, r *http.Request) {
	id := pathParam(r, "id")
	if _, err := s.svc.AbortMigration(r.Context(), id, r.PostFormValue("reason")); err != nil {
		s.logFormError("abort", err)
		if sim.ErrorCode(err) == sim.ENotFound {
			s.renderServiceError(w, r, err, "The migrations page lists every migration this normsim remembers.")
			return
		}
		s.renderMigration(w, r, statusOf(sim.ErrorCode(err)), id, sim.ErrorMessage(err))
		return
	}
	seeOther(w, r, "/migrations/"+url.PathEscape(id))
}

// abortable says whether the page offers to abort m: it runs, and its
// timeline shows no point of no return.
func abortable(m *sim.Migration) bool {
	return !m.State.Ended() && !slices.ContainsFunc(m.Events, func(e sim.MigrationEvent) bool {
		return e.Kind == sim.TimelinePointOfNoReturn || e.Kind == sim.TimelineAbortRequested
	})
}

func (s *Server) renderMigration(w http.ResponseWriter, r *http.Request, status int, id, abortErr string) {
	m, err := s.svc.Migration(r.Context(), id)
	if err != nil {
		s.renderServiceError(w, r, err, "The migrations page lists every migration this normsim remembers.")
		return
	}
	if err := s.svc.MigrationLogs(r.Context(), m, sim.DefaultLogTail); err != nil {
		s.log.Warn("read a migration's logs", "migration", m.ID, "err", err)
	}
	refresh := "/migrations/" + url.PathEscape(m.ID)
	now := time.Now()
	cut := cutoverWindow(m, now)
	p := migrationPage{M: m, CanZoom: cut != nil}
	var win *window
	if r.URL.Query().Get("zoom") == "cutover" && cut != nil {
		p.Zoom, win = "cutover", cut
		refresh += "?zoom=cutover"
	}
	p.pageBase = s.base(r, "Migration "+m.ID, "migrations", "migration", refresh)
	p.Migration = m.ID
	p.Ended = m.State.Ended()
	p.TL = layoutTimeline(m, now, win)
	p.Seam = seam(m)
	p.Media = mediaPanel(m, p.TL)
	p.Verdict = verdict(m)
	p.Highlight = m.State == sim.MigrationAborted || m.State == sim.MigrationFailed || m.State == sim.MigrationRefused
	if m.State == sim.MigrationAborted {
		p.Rolled = rolledBack(m)
	}
	if m.Target.Runtime == sim.RuntimeExternal && m.Target.Env != nil {
		p.TargetEnv, _ = pasteEnv(m.Target.Env)
	}
	p.CanAbort, p.AbortErr = abortable(m), abortErr
	s.render(w, status, "migration", p)
}

type migrationsPage struct {
	pageBase
	List []*sim.Migration
	// Total is how many match the filter; Pager pages them.
	Total  int
	Pager  pager
	Job    string
	State  string
	States []sim.MigrationState
	Jobs   []string
	Error  string
	// Unreadable counts the page's records the store could not read,
	// left out; Damage says what the first was and what to do.
	Unreadable int
	Damage     string
}

// migrationsPage is the history, newest first, a page at a time (page=N),
// of one job or in one state when the filter says so.
func (s *Server) migrationsPage(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	p := migrationsPage{pageBase: s.base(r, "Migrations", "migrations", "migrations", r.URL.RequestURI()), Job: strings.TrimSpace(q.Get("job")), State: q.Get("state"), States: sim.MigrationStates}
	status := http.StatusOK
	asked, err := pageParam(q, "page")
	switch {
	case p.State != "" && !slices.Contains(sim.MigrationStates, sim.MigrationState(p.State)):
		p.Error = fmt.Sprintf("state: must be one of %s; got %q", stateList(), p.State)
		status = http.StatusBadRequest
	case err != nil:
		p.Error = sim.ErrorMessage(err)
		status = http.StatusBadRequest
	default:
		f := sim.MigrationFilter{JobID: p.Job, State: sim.MigrationState(p.State), Limit: migrationsPageSize, Offset: pageOffset(asked, migrationsPageSize)}
		list, err := s.svc.MigrationPage(r.Context(), f)
		if err == nil && len(list.Items) == 0 && f.Offset > 0 {
			// Past the last page (the list shrank, or the address was
			// made up): the last one.
			asked, _, f.Offset = pageOf(asked, list.Total, migrationsPageSize)
			list, err = s.svc.MigrationPage(r.Context(), f)
		}
		if err != nil {
			s.renderServiceError(w, r, err, "")
			return
		}
		p.List, p.Total, p.Unreadable, p.Damage = list.Items, list.Total, list.Unreadable, list.Damage
		page, pages, _ := pageOf(asked, list.Total, migrationsPageSize)
		p.Pager = newPager("history-pages", "Pages of the migration history", page, pages, list.Total, migrationsPageSize, len(list.Items),
			func(n int) string { return withPage("/migrations", q, "page", n) })
	}
	p.Jobs = s.knownJobs(r.Context(), p.List)
	s.render(w, status, "migrations", p)
}

// knownJobs lists job ids for the filter's suggestions: those of the
// migrations shown and of the newest instances.
func (s *Server) knownJobs(ctx context.Context, list []*sim.Migration) []string {
	seen := map[string]bool{}
	if counts, err := s.svc.InstanceCounts(ctx); err == nil {
		total := 0
		for _, n := range counts {
			total += n
		}
		if insts, err := s.svc.InstancePage(ctx, sim.InstanceFilter{Offset: max(0, total-jobSuggestions), Limit: jobSuggestions}); err == nil {
			for _, in := range insts.Items {
				seen[in.JobID] = true
			}
		}
	}
	for _, m := range list {
		seen[m.JobID] = true
	}
	return slices.Sorted(maps.Keys(seen))
}

// renderServiceError renders a page for an error from the Service.
func (s *Server) renderServiceError(w http.ResponseWriter, r *http.Request, err error, hint string) {
	code := sim.ErrorCode(err)
	if code == sim.EInternal {
		s.log.Error("dashboard request failed", "path", r.URL.Path, "err", err)
	}
	s.renderError(w, r, statusOf(code), code, sim.ErrorMessage(err), hint)
}
