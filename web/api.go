package web

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/normsim/normsim/sim"
)

func (s *Server) listNodes(w http.ResponseWriter, r *http.Request) {
	out := []sim.NodeView{}
	for _, n := range s.svc.Nodes() {
		out = append(out, n.View())
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) listTemplates(w http.ResponseWriter, r *http.Request) {
	list := s.svc.Catalog().List()
	if list == nil {
		list = []*sim.Template{}
	}
	writeJSON(w, http.StatusOK, list)
}

func (s *Server) getTemplate(w http.ResponseWriter, r *http.Request) {
	t, err := s.svc.Catalog().Get(pathParam(r, "name"))
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, t)
}

func views(list []sim.Instance) []sim.Instance {
	out := make([]sim.Instance, 0, len(list))
	for _, in := range list {
		out = append(out, in.View())
	}
	return out
}

// listInstances lists the instances oldest first: on one node with
// node=NAME, a page of them with limit and offset (every one by default, as
// before paging). X-Total-Count says how many there are in all.
func (s *Server) listInstances(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	limit, offset, err := pageParams(q)
	if err != nil {
		writeError(w, err)
		return
	}
	p, err := s.svc.InstancePage(r.Context(), sim.InstanceFilter{Node: q.Get("node"), Limit: limit, Offset: offset})
	if err != nil {
		writeError(w, err)
		return
	}
	setTotal(w, r, p.Total, limit, offset, len(p.Items))
	writeJSON(w, http.StatusOK, views(p.Items))
}

// pageParams reads a list's limit (0 or absent: no limit) and offset.
func pageParams(q url.Values) (limit, offset int, err error) {
	for _, p := range []struct {
		name string
		v    *int
	}{{"limit", &limit}, {"offset", &offset}} {
		v := q.Get(p.name)
		if v == "" {
			continue
		}
		n, err := strconv.Atoi(v)
		if errors.Is(err, strconv.ErrRange) && !strings.HasPrefix(v, "-") {
			return 0, 0, sim.Errorf(sim.EInvalid, "%s: %s is too large; give at most %d", p.name, v, math.MaxInt)
		}
		if err != nil || n < 0 {
			return 0, 0, sim.Errorf(sim.EInvalid, "%s: must be a non-negative integer; got %q", p.name, v)
		}
		*p.v = n
	}
	return limit, offset, nil
}

// setTotal says how long the whole list is (X-Total-Count) and, when this
// page is not its end, where the next page is (Link rel="next", this
// request's address with the next offset).
func setTotal(w http.ResponseWriter, r *http.Request, total, limit, offset, n int) {
	w.Header().Set("X-Total-Count", strconv.Itoa(total))
	if limit > 0 && offset+n < total {
		// The page was full (n == limit): the next starts after it.
		q := r.URL.Query()
		q.Set("offset", strconv.Itoa(offset+n))
		w.Header().Set("Link", fmt.Sprintf(`<%s?%s>; rel="next"`, r.URL.Path, q.Encode()))
	}
}

// setUnreadable says that records of the page could not be read and were
// left out (X-Unreadable-Count), and what the first was (X-Unreadable, on
// one line): the page is served all the same, as a damaged record costs
// itself, not the list.
func setUnreadable(w http.ResponseWriter, n int, damage string) {
	if n == 0 {
		return
	}
	w.Header().Set("X-Unreadable-Count", strconv.Itoa(n))
	w.Header().Set("X-Unreadable", strings.Join(strings.Fields(damage), " "))
}

func (s *Server) launch(w http.ResponseWriter, r *http.Request) {
	var req sim.LaunchRequest
	if err := decode(r, &req); err != nil {
		writeError(w, err)
		return
	}
	in, err := s.svc.Launch(r.Context(), req)
	if err != nil {
		writeError(w, err)
		return
	}
	w.Header().Set("Location", "/api/v1/instances/"+url.PathEscape(in.ID))
	writeJSON(w, http.StatusCreated, in.View())
}

func (s *Server) getInstance(w http.ResponseWriter, r *http.Request) {
	wait, until, err := instanceWaitParams(r.URL.Query())
	if err != nil {
		writeError(w, err)
		return
	}
	var in sim.Instance
	if wait > 0 {
		in, err = s.awaitInstance(r.Context(), pathParam(r, "id"), until, wait)
	} else {
		in, err = s.svc.Instance(r.Context(), pathParam(r, "id"))
	}
	if id := pathParam(r, "id"); sim.ErrorCode(err) == sim.ENotFound && s.logsKept(r, id) {
		// Its record is gone, its history is not: say where it is, as
		// the dashboard's page of a removed instance shows it.
		p := "/api/v1/instances/" + url.PathEscape(id)
		err = sim.Errorf(sim.ENotFound, "instance %q was removed; normsim kept what it printed and what happened to it: GET %s/logs, %s/events and %s/frames", id, p, p, p)
	}
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, in.View())
}

// maxRecordTail bounds ?tail of an instance's frames and events.
const maxRecordTail = 10000

// recordTail reads ?tail, a number of records from 1 to maxRecordTail
// (default 200).
func recordTail(r *http.Request, what string) (int, error) {
	v := r.URL.Query().Get("tail")
	if v == "" {
		return 200, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > maxRecordTail {
		return 0, sim.Errorf(sim.EInvalid, "tail: must be a number of %s from 1 to %d; got %q", what, maxRecordTail, v)
	}
	return n, nil
}

// instanceEvents lists the last ?tail (default 200) changes of an
// instance, oldest first, each with what it says in words.
func (s *Server) instanceEvents(w http.ResponseWriter, r *http.Request) {
	serveTail(w, r, "events", func(ctx context.Context, id string, tail int) ([]sim.DescribedEvent, error) {
		evs, err := s.svc.InstanceEvents(ctx, id, tail)
		return sim.DescribeAll(evs), err
	})
}

// frames lists the last ?tail (default 200) frames between an instance's
// job and its node, oldest first.
func (s *Server) frames(w http.ResponseWriter, r *http.Request) {
	serveTail(w, r, "frames", s.svc.Frames)
}

// frameCounts says how many of an instance's frame records are kept and
// how many were let go of to stay within the store's bounds.
func (s *Server) frameCounts(w http.ResponseWriter, r *http.Request) {
	c, err := s.svc.FrameCounts(r.Context(), pathParam(r, "id"))
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, c)
}

// serveTail answers with the last ?tail records of one kind (what) of the
// instance the path names, as read gives them.
func serveTail[T any](w http.ResponseWriter, r *http.Request, what string, read func(ctx context.Context, id string, tail int) ([]T, error)) {
	tail, err := recordTail(r, what)
	if err != nil {
		writeError(w, err)
		return
	}
	recs, err := read(r.Context(), pathParam(r, "id"), tail)
	if unreadable, ok := errors.AsType[*sim.UnreadableRecords](err); ok {
		// A damaged record costs itself, as in a migration list.
		setUnreadable(w, unreadable.Count, unreadable.First.Error())
	} else if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, recs)
}

// output reports what an instance sent to the output sink since the
// RFC 3339 time in since (every packet the sink keeps when absent).
func (s *Server) output(w http.ResponseWriter, r *http.Request) {
	var since time.Time
	if v := r.URL.Query().Get("since"); v != "" {
		t, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			writeError(w, sim.Errorf(sim.EInvalid, "since: want an RFC 3339 time like 2026-12-01T18:00:00.5Z; got %q", v))
			return
		}
		since = t
	}
	sum, err := s.svc.Output(r.Context(), pathParam(r, "id"), since)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, sum)
}

// CensusView is GET /api/v1/census: what the runtimes have running, as the
// host sees it, and whether the manager knows each unit.
type CensusView struct {
	Units []sim.RunningUnit `json:"units"`
	// Unknown counts the units whose instance the manager does not hold
	// as running: what should not be there.
	Unknown int `json:"unknown"`
	// Unsupported are the runtimes that cannot list what they run.
	Unsupported []string `json:"unsupported"`
}

func (s *Server) census(w http.ResponseWriter, r *http.Request) {
	units, unsupported, err := s.svc.Census(r.Context())
	if err != nil {
		writeError(w, err)
		return
	}
	v := CensusView{Units: units, Unsupported: unsupported}
	if v.Units == nil {
		v.Units = []sim.RunningUnit{}
	}
	if v.Unsupported == nil {
		v.Unsupported = []string{}
	}
	for _, u := range units {
		if !u.Known {
			v.Unknown++
		}
	}
	writeJSON(w, http.StatusOK, v)
}

// stop is DELETE /instances/{id}: stop and remove it, or, with
// stopped=true, remove it only as the stopped record it is (a migration's
// stopped source while its job runs on elsewhere).
func (s *Server) stop(w http.ResponseWriter, r *http.Request) {
	onlyStopped, err := boolParam(r.URL.Query(), "stopped")
	if err != nil {
		writeError(w, err)
		return
	}
	remove := s.svc.Stop
	if onlyStopped {
		remove = s.svc.RemoveStopped
	}
	if err := remove(r.Context(), pathParam(r, "id")); err != nil {
		writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// logs serves an instance's captured output, as `docker compose logs`
// prints it ("service | text"), or as JSON with format=json. since takes
// an RFC 3339 time or a duration back from now (10m), tail a count or
// "all", timestamps and follow 1 or true. The logs outlive the instance.
//
// A follow is a stream: under a flood of connections it may be closed to
// make room (as the events stream is), and a write that its reader does
// not take within the event write timeout closes it, so a follower that
// stopped reading holds no connection. With format=json it is one page
// per line (NDJSON), each line with its seq: a client that lost the
// stream resumes with after=SEQ, as `normsim logs -f` does.
func (s *Server) logs(w http.ResponseWriter, r *http.Request) {
	id := pathParam(r, "id")
	opts, err := parseLogOptions(r.URL.Query(), time.Now())
	if err != nil {
		writeError(w, err)
		return
	}
	rc := http.NewResponseController(w)
	if opts.follow && s.cfg.Streaming != nil {
		s.cfg.Streaming(r.Context())
	}
	// write sends one page's bytes; a follow's with a deadline.
	write := func(b []byte) error {
		if opts.follow {
			if err := rc.SetWriteDeadline(time.Now().Add(s.eventWriteTimeout)); err != nil {
				return err
			}
		}
		if _, err := w.Write(b); err != nil {
			return err
		}
		if err := rc.Flush(); err != nil && !errors.Is(err, http.ErrNotSupported) {
			return err
		}
		return nil
	}
	started := false
	first := true
	err = s.svc.Logs(r.Context(), id, opts.query, opts.follow, func(p *sim.LogPage) error {
		if opts.json && !opts.follow {
			writeJSON(w, http.StatusOK, p)
			started = true
			return nil
		}
		if !started {
			if opts.json {
				w.Header().Set("Content-Type", "application/x-ndjson")
			} else {
				w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			}
			w.Header().Set("X-Content-Type-Options", "nosniff")
			started = true
		}
		if opts.json {
			b, err := json.Marshal(p)
			if err != nil {
				return err
			}
			return write(append(b, '\n'))
		}
		var b strings.Builder
		if first && p.OpensTrimmed() {
			b.WriteString(sim.TrimmedNote(id, p.Lost))
			b.WriteByte('\n')
		}
		first = false
		for _, l := range p.Lines {
			b.WriteString(sim.FormatLogLine(l, opts.timestamps))
			b.WriteByte('\n')
		}
		return write([]byte(b.String()))
	})
	if err == nil || r.Context().Err() != nil {
		if !started {
			w.WriteHeader(http.StatusOK)
		}
		return
	}
	if !started {
		writeError(w, err)
		return
	}
	if opts.json {
		// The stream is cut: the client resumes, or reports it.
		panic(http.ErrAbortHandler)
	}
	fmt.Fprintf(w, "\nnormsim: could not read logs: %s\n", sim.ErrorMessage(err))
}

// logOptions are a logs request's query.
type logOptions struct {
	query              sim.LogQuery
	follow, timestamps bool
	json               bool
}

func parseLogOptions(q url.Values, now time.Time) (logOptions, error) {
	var o logOptions
	var err error
	if o.follow, err = boolParam(q, "follow"); err != nil {
		return o, err
	}
	if o.timestamps, err = boolParam(q, "timestamps"); err != nil {
		return o, err
	}
	switch f := q.Get("format"); f {
	case "", "text":
	case "json":
		o.json = true
	default:
		return o, sim.Errorf(sim.EInvalid, "format: must be text or json; got %q", f)
	}
	if v := q.Get("since"); v != "" {
		o.query.Since, err = sim.ParseSince(v, now)
		if err != nil {
			return o, err
		}
	}
	if v := q.Get("tail"); v != "" && v != "all" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return o, sim.Errorf(sim.EInvalid, "tail: must be a non-negative number of lines or \"all\"; got %q", v)
		}
		o.query.Tail = n
		if n == 0 {
			o.query.Tail = -1 // none: a follow that wants only what comes
		}
	}
	if v := q.Get("after"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return o, sim.Errorf(sim.EInvalid, "after: must be a non-negative line seq; got %q", v)
		}
		o.query.AfterSeq = max(o.query.AfterSeq, n)
	}
	return o, nil
}

func boolParam(q url.Values, name string) (bool, error) {
	switch v := q.Get(name); v {
	case "":
		return false, nil
	case "1", "true":
		return true, nil
	case "0", "false":
		return false, nil
	default:
		return false, sim.Errorf(sim.EInvalid, "%s: must be 1, true, 0 or false; got %q", name, v)
	}
}

// trueOrFalse reads a parameter normsim's own API spells true or false
// (boolParam reads the docker-style flags that also take 1 and 0); absent,
// it is def.
func trueOrFalse(q url.Values, name string, def bool) (bool, error) {
	if !q.Has(name) {
		return def, nil
	}
	switch v := q.Get(name); v {
	case "true":
		return true, nil
	case "false":
		return false, nil
	default:
		return false, sim.Errorf(sim.EInvalid, "%s: must be true or false; got %q", name, v)
	}
}

func (s *Server) migrate(w http.ResponseWriter, r *http.Request) {
	var req sim.MigrateRequest
	if r.ContentLength != 0 {
		if err := decode(r, &req); err != nil {
			writeError(w, err)
			return
		}
	}
	m, err := s.svc.Migrate(r.Context(), pathParam(r, "id"), req)
	if err != nil {
		writeError(w, err)
		return
	}
	w.Header().Set("Location", "/api/v1/migrations/"+url.PathEscape(m.ID))
	writeJSON(w, http.StatusAccepted, m)
}

// abortMigration asks a running migration to roll back (202 with the
// migration as it is; it ends aborted at its next step), or says why it
// cannot (409).
func (s *Server) abortMigration(w http.ResponseWriter, r *http.Request) {
	var req sim.AbortRequest
	if r.ContentLength != 0 {
		if err := decode(r, &req); err != nil {
			writeError(w, err)
			return
		}
	}
	m, err := s.svc.AbortMigration(r.Context(), pathParam(r, "id"), req.Reason)
	if err != nil {
		writeError(w, err)
		return
	}
	w.Header().Set("Location", "/api/v1/migrations/"+url.PathEscape(m.ID))
	writeJSON(w, http.StatusAccepted, m)
}

// listMigrations lists migrations newest first, of one job (job=ID) or in
// one state (state=S), a page of them with limit and offset (every one by
// default). X-Total-Count says how many match in all.
func (s *Server) listMigrations(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	f := sim.MigrationFilter{JobID: q.Get("job"), State: sim.MigrationState(q.Get("state"))}
	if f.State != "" && !slices.Contains(sim.MigrationStates, f.State) {
		writeError(w, sim.Errorf(sim.EInvalid, "state: must be one of %s; got %q", stateList(), f.State))
		return
	}
	var err error
	if f.Limit, f.Offset, err = pageParams(q); err != nil {
		writeError(w, err)
		return
	}
	p, err := s.svc.MigrationPage(r.Context(), f)
	if err != nil {
		writeError(w, err)
		return
	}
	setTotal(w, r, p.Total, f.Limit, f.Offset, len(p.Items))
	setUnreadable(w, p.Unreadable, p.Damage)
	for i, m := range p.Items {
		p.Items[i] = withJudgement(m)
	}
	writeJSON(w, http.StatusOK, nonNil(p.Items))
}

// nonNil makes an empty list JSON's [] rather than null.
func nonNil[T any](list []T) []T {
	if list == nil {
		return []T{}
	}
	return list
}

// seamCapture serves the media received around a migration's switch as a
// file a player opens (ffplay, VLC).
func (s *Server) seamCapture(w http.ResponseWriter, r *http.Request) {
	id := pathParam(r, "id")
	side := r.URL.Query().Get("side")
	if side != "" && side != "both" && side != "target" {
		writeError(w, sim.Errorf(sim.EInvalid, "side: must be both (the default: what the receiver got around the switch, from a keyframe) or target (the target's alone, as a receiver that joined at the switch got it); got %q", side))
		return
	}
	c, err := s.svc.SeamCapture(r.Context(), id)
	if err != nil {
		writeError(w, err)
		return
	}
	ts, name, what := c.TS, id+"-seam.ts", "around the switch"
	if side == "target" {
		ts, name, what = c.TargetTS, id+"-seam-target.ts", "from the target"
	}
	if len(ts) == 0 {
		// An empty file would play as nothing, and say nothing of why.
		writeError(w, sim.Errorf(sim.ENotFound, "migration %q's seam capture holds nothing a player can open %s: what the receiver got there was of no known format, or RTP packets that gave no whole NAL unit (the migration's timeline says how many, at \"seam capture kept\"; get seam.rtp for the RTP as it came)", id, what))
		return
	}
	w.Header().Set("Content-Type", "video/mp2t")
	w.Header().Set("Content-Disposition", fmt.Sprintf("attachment; filename=%q", name))
	w.Header().Set("Content-Length", strconv.Itoa(len(ts)))
	w.Write(ts)
}

// seamRTP serves the RTP packets received around a migration's switch as
// they came, each framed by its 2-byte length (RFC 4571), for a job that
// sends RTP: the SSRC, sequence numbers and timestamps seam.ts leaves out.
func (s *Server) seamRTP(w http.ResponseWriter, r *http.Request) {
	id := pathParam(r, "id")
	c, err := s.svc.SeamCapture(r.Context(), id)
	if err != nil {
		writeError(w, err)
		return
	}
	if len(c.RTP) == 0 {
		writeError(w, sim.Errorf(sim.ENotFound, "migration %q's seam capture holds no RTP: its job sent MPEG-TS straight in UDP (get seam.ts)", id))
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Disposition", fmt.Sprintf("attachment; filename=%q", id+"-seam.rtp"))
	w.Header().Set("Content-Length", strconv.Itoa(len(c.RTP)))
	w.Write(c.RTP)
}

func (s *Server) getMigration(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	tail := sim.DefaultLogTail
	if v := q.Get("logTail"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 10000 {
			writeError(w, sim.Errorf(sim.EInvalid, "logTail: must be a number of lines from 1 to 10000; got %q", v))
			return
		}
		tail = n
	}
	withLogs, err := trueOrFalse(q, "logs", true)
	if err != nil {
		writeError(w, err)
		return
	}
	withEvents, err := trueOrFalse(q, "events", true)
	if err != nil {
		writeError(w, err)
		return
	}
	wait, after, err := waitParams(q)
	if err != nil {
		writeError(w, err)
		return
	}
	// Without events the timeline is neither copied nor read: thousands
	// of clients polling where their migrations are ask this way.
	var m *sim.Migration
	id := pathParam(r, "id")
	switch {
	case wait > 0:
		m, err = s.awaitMigration(r.Context(), id, after, wait, withEvents)
	case withEvents:
		m, err = s.svc.Migration(r.Context(), id)
	default:
		m, err = s.svc.MigrationSummary(r.Context(), id)
	}
	if err != nil {
		writeError(w, err)
		return
	}
	m = withJudgement(m)
	if !withLogs {
		writeJSON(w, http.StatusOK, m)
		return
	}
	if err := s.svc.MigrationLogs(r.Context(), m, tail); err != nil {
		s.log.Warn("read a migration's logs", "migration", m.ID, "err", err)
	}
	writeJSON(w, http.StatusOK, m)
}

// maxMigrationWait bounds ?wait: a client that wants longer asks again.
const maxMigrationWait = time.Minute

// waitParams reads a migration's ?wait (a duration up to
// maxMigrationWait; 0 answers at once) and ?after (the timeline seq the
// client has seen; without it the wait is for the end).
func waitParams(q url.Values) (wait time.Duration, after int, err error) {
	after = -1
	if v := q.Get("wait"); v != "" {
		wait, err = time.ParseDuration(v)
		if err != nil || wait < 0 || wait > maxMigrationWait {
			return 0, 0, sim.Errorf(sim.EInvalid, "wait: must be a duration from 0s to %s, e.g. 30s; got %q", maxMigrationWait, v)
		}
	}
	if v := q.Get("after"); v != "" {
		after, err = strconv.Atoi(v)
		if err != nil || after < 0 {
			return 0, 0, sim.Errorf(sim.EInvalid, "after: must be a timeline seq, 0 or more; got %q", v)
		}
		if wait == 0 {
			return 0, 0, sim.Errorf(sim.EInvalid, "after: says what to wait past; give wait too, e.g. wait=30s&after=%d", after)
		}
	}
	return wait, after, nil
}

// instanceWaitParams reads an instance's ?wait (a duration up to
// maxMigrationWait) and ?until (what to wait for: running or connected);
// each needs the other.
func instanceWaitParams(q url.Values) (time.Duration, sim.Until, error) {
	w, u := q.Get("wait"), q.Get("until")
	if w == "" && u == "" {
		return 0, "", nil
	}
	if w == "" {
		return 0, "", sim.Errorf(sim.EInvalid, "until: says what to wait for; give wait too, e.g. wait=30s&until=%s", u)
	}
	wait, err := time.ParseDuration(w)
	if err != nil || wait <= 0 || wait > maxMigrationWait {
		return 0, "", sim.Errorf(sim.EInvalid, "wait: must be a duration above 0s up to %s, e.g. 30s; got %q", maxMigrationWait, w)
	}
	if u == "" {
		return 0, "", sim.Errorf(sim.EInvalid, "wait: says how long; give until too: until=running or until=connected")
	}
	until, err := sim.ParseUntil(u)
	return wait, until, err
}

// awaitInstance answers once until holds for the instance, or it has
// ended, or wait has passed, or normsim is shutting down: then with the
// instance as it is.
func (s *Server) awaitInstance(ctx context.Context, id string, until sim.Until, wait time.Duration) (in sim.Instance, err error) {
	ranOut, err := s.waitUpTo(ctx, wait, func(ctx context.Context) error {
		in, err = s.svc.AwaitInstance(ctx, id, until)
		return err
	})
	if ranOut {
		err = nil // waited as long as asked: the answer is the instance as it is
	}
	return in, err
}

// waitUpTo runs await with a context that ends after wait or when normsim
// shuts down (EndWaits); ranOut says await's error is only that end.
func (s *Server) waitUpTo(ctx context.Context, wait time.Duration, await func(context.Context) error) (ranOut bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	stop := context.AfterFunc(s.waits, cancel)
	defer stop()
	err = await(ctx)
	return ctx.Err() != nil && errors.Is(err, ctx.Err()), err
}

// awaitMigration answers once the migration has an event past after, or
// has ended, or wait has passed, or normsim is shutting down: then with
// the migration as it is.
func (s *Server) awaitMigration(ctx context.Context, id string, after int, wait time.Duration, events bool) (m *sim.Migration, err error) {
	await := s.svc.AwaitMigration
	if !events {
		await = s.svc.AwaitMigrationSummary
	}
	ranOut, err := s.waitUpTo(ctx, wait, func(ctx context.Context) error {
		m, err = await(ctx, id, after)
		return err
	})
	if m != nil && ranOut {
		err = nil // waited as long as asked: the answer is the migration as it is
	}
	return m, err
}

// EndWaits answers every request waiting on a migration (?wait) now, with
// the migration as it is: a server shutting down does not wait for them.
func (s *Server) EndWaits() { s.endWaits() }

// eventBacklog is how far an /api/v1/events subscriber may fall behind
// before it is dropped. A burst is far larger than the pace it keeps on
// average: a thousand handovers released at once publish thousands of
// events within milliseconds, which a reader on a busy two-core machine
// may not be scheduled to take for a few hundred. Only what waits costs
// memory; the bus bounds that in bytes too (sim.DefaultStreamBytes), an
// event's data being of any size.
const eventBacklog = 1 << 16

// eventChunk is how much of a backlog one write (and flush) carries.
const eventChunk = 64 << 10

// events streams the bus as Server-Sent Events. What came while the
// subscriber was writing goes out together in one write. A subscriber that
// falls eventBacklog events or the bus's bytes behind, or holds the most
// when all together pass the bus's totals, is dropped: it is told so by a
// "dropped" event, the drop is counted and logged, and the stream ends (an
// EventSource reconnects; the dashboard then refreshes what it shows).
func (s *Server) events(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Streaming != nil {
		s.cfg.Streaming(r.Context())
	}
	// A client that reconnects resumes after the last event it read: an
	// EventSource sends its id as Last-Event-ID by itself; ?after= does
	// the same for other clients.
	after := r.Header.Get("Last-Event-ID")
	if q := r.URL.Query().Get("after"); q != "" {
		after = q
	}
	afterID := int64(-1) // none: what comes next
	if after != "" {
		n, err := strconv.ParseInt(after, 10, 64)
		if err != nil || n < 0 {
			writeError(w, sim.Errorf(sim.EInvalid, "after (or Last-Event-ID): want the id of the last event read, a whole number; got %q", after))
			return
		}
		afterID = n
	}
	rc := http.NewResponseController(w)
	bus := s.svc.Bus()
	st, resumed := bus.StreamAfter(eventBacklog, afterID)
	defer st.Close()
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	// send writes one chunk with a deadline: a subscriber that stops
	// reading is dropped (its connection closed) instead of holding this
	// goroutine, its connection and its buffered events for ever.
	var sendErr error
	droppedSaid := false
	send := func(b []byte) bool {
		if sendErr = rc.SetWriteDeadline(time.Now().Add(s.eventWriteTimeout)); sendErr != nil {
			return false
		}
		if _, sendErr = w.Write(b); sendErr == nil {
			sendErr = rc.Flush()
		}
		return sendErr == nil
	}
	// A subscriber that stopped reading is usually cut by the write's
	// deadline, before the bus drops it: that is the same drop, and is
	// counted and logged as one (its stream ends without the dropped
	// event, which it would not read).
	defer func() {
		if droppedSaid || !errors.Is(sendErr, os.ErrDeadlineExceeded) {
			return // logged already; or sent, or the subscriber went away
		}
		cause := fmt.Sprintf("it read nothing for %s", s.eventWriteTimeout)
		if !st.Cut(cause) {
			cause = st.DropCause()
		}
		s.logDropped(st, cause)
	}()
	if !send([]byte("retry: 1000\n: connected\n\n")) {
		return
	}
	if !resumed {
		data, _ := json.Marshal(map[string]any{"reason": fmt.Sprintf("the events after %d are no longer kept (normsim keeps the last %d, and a restart begins again at 1): read the state afresh", afterID, sim.RecentEvents), "after": afterID})
		if !send(fmt.Appendf(nil, "event: reset\ndata: %s\n\n", data)) {
			return
		}
	}
	ping := time.NewTicker(15 * time.Second)
	defer ping.Stop()
	var batch []sim.Event
	var buf bytes.Buffer
	for {
		select {
		case <-st.Ready():
			batch = st.Take(batch)
			buf.Reset()
			for _, ev := range batch {
				data, _ := json.Marshal(ev)
				fmt.Fprintf(&buf, "id: %d\nevent: %s\ndata: %s\n\n", ev.ID, ev.Kind, data)
				if buf.Len() >= eventChunk {
					if !send(buf.Bytes()) {
						return
					}
					buf.Reset()
				}
			}
			if buf.Len() > 0 && !send(buf.Bytes()) {
				return
			}
		case <-st.Done():
			if st.Dropped() {
				droppedSaid = true
				s.dropped(st, send)
				// Its connection is closed, not kept for a next request:
				// a subscriber that stopped reading sends none, and would
				// hold the connection and its goroutine until it goes.
				panic(http.ErrAbortHandler)
			}
			return
		case <-ping.C:
			if !send([]byte(": ping\n\n")) {
				return
			}
		case <-r.Context().Done():
			return
		}
	}
}

// StreamDropped is the data of the "dropped" event a subscriber of
// /api/v1/events gets when it fell too far behind, just before its stream
// ends.
type StreamDropped struct {
	Reason string `json:"reason"`
	// Limit is how many events a subscriber may fall behind, LimitBytes
	// how many bytes of them it may hold waiting.
	Limit      int   `json:"limit"`
	LimitBytes int64 `json:"limitBytes"`
	// DroppedSubscribers counts the subscribers dropped since normsim
	// started, this one included.
	DroppedSubscribers int64 `json:"droppedSubscribers"`
}

// logDropped logs that a subscriber was dropped, and why, and returns how
// many have been since normsim started.
func (s *Server) logDropped(st *sim.Stream, cause string) int64 {
	n := s.svc.Bus().Stats().DroppedSubscribers
	s.log.Warn("an /api/v1/events subscriber fell behind and was dropped; it misses the events until it reconnects",
		"why", cause, "limit", st.Limit(), "limitBytes", st.LimitBytes(), "droppedSubscribers", n)
	return n
}

// dropped tells a subscriber it was dropped, and logs it: what it shows
// may miss events from here until it reconnects and reads the state again.
func (s *Server) dropped(st *sim.Stream, send func([]byte) bool) {
	cause := st.DropCause()
	n := s.logDropped(st, cause)
	data, _ := json.Marshal(StreamDropped{
		Reason: fmt.Sprintf("this subscriber was dropped, as %s: the events from here until it reconnects are not sent to it; "+
			"reconnect and read again the state it shows", cause),
		Limit: st.Limit(), LimitBytes: st.LimitBytes(), DroppedSubscribers: n,
	})
	send(fmt.Appendf(nil, "event: dropped\ndata: %s\n\n", data))
}
