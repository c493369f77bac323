// Package apiclient is a Go client of normsim's HTTP API (/api/v1). The CLI,
// `normsim ci`, `normsim conform`, normsimtest and `normsim bench` all talk
// to a simulator through it, and so can any Go program. Client is a call
// each; Driver is the one way they launch a job, wait until it is up,
// migrate it (with the one retry policy, keyed on codes) and follow the
// migration to its end.
package apiclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/normsim/normsim/sim"
)

// Error is a refusal of the API: its HTTP status and the body's
// {"error":{"code","message"}}.
type Error struct {
	Status  int    `json:"status"`
	Code    string `json:"code"`
	Message string `json:"message"`
	// Ended is, for GONE (a finished migration whose record the sim's
	// --keep-migrations dropped), the state the migration ended in.
	Ended sim.MigrationState `json:"ended,omitempty"`
}

func (e *Error) Error() string { return fmt.Sprintf("%d %s: %s", e.Status, e.Code, e.Message) }

// UnreachableError says the simulator did not answer at all.
type UnreachableError struct {
	Base string
	Err  error
}

func (e *UnreachableError) Error() string {
	return fmt.Sprintf("cannot reach normsim at %s: %v", e.Base, e.Err)
}

func (e *UnreachableError) Unwrap() error { return e.Err }

// Client calls one simulator.
type Client struct {
	base string
	http *http.Client
	// LogTail is how many last lines of each side a failed or aborted
	// migration carries (Migration, WaitMigration); 0: the server's 50.
	LogTail int
}

// New returns a client of the simulator at base (e.g.
// "http://127.0.0.1:7788"); hc nil uses http.DefaultClient.
func New(base string, hc *http.Client) *Client {
	if hc == nil {
		hc = http.DefaultClient
	}
	return &Client{base: strings.TrimRight(base, "/"), http: hc}
}

// Base is the simulator's base URL.
func (c *Client) Base() string { return c.base }

// Do sends body as JSON and decodes the answer into out (either may be nil).
// A non-2xx answer is an *Error.
func (c *Client) Do(ctx context.Context, method, path string, body, out any) error {
	resp, err := c.send(ctx, method, path, body)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if out != nil {
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			return fmt.Errorf("%s %s: decode the answer: %w", method, path, err)
		}
	}
	return nil
}

// send performs a request and turns a non-2xx answer into an *Error.
func (c *Client) send(ctx context.Context, method, path string, body any) (*http.Response, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return nil, fmt.Errorf("normsim at %s: %w", c.base, err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, &UnreachableError{Base: c.base, Err: err}
	}
	if resp.StatusCode >= 300 {
		defer resp.Body.Close()
		data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		var eb struct {
			Error struct {
				Code, Message string
				Ended         sim.MigrationState
			} `json:"error"`
		}
		if json.Unmarshal(data, &eb) == nil && eb.Error.Code != "" {
			return nil, &Error{Status: resp.StatusCode, Code: eb.Error.Code, Message: eb.Error.Message, Ended: eb.Error.Ended}
		}
		return nil, &Error{Status: resp.StatusCode, Code: http.StatusText(resp.StatusCode), Message: strings.TrimSpace(string(data))}
	}
	return resp, nil
}

// Nodes lists the simulated nodes as the API shows them.
func (c *Client) Nodes(ctx context.Context) ([]sim.NodeView, error) {
	var out []sim.NodeView
	return out, c.Do(ctx, http.MethodGet, "/api/v1/nodes", nil, &out)
}

// Templates lists the loaded templates, valid or not.
func (c *Client) Templates(ctx context.Context) ([]sim.Template, error) {
	var out []sim.Template
	return out, c.Do(ctx, http.MethodGet, "/api/v1/templates", nil, &out)
}

// Launch places a template on a node.
func (c *Client) Launch(ctx context.Context, req sim.LaunchRequest) (*sim.Instance, error) {
	var in sim.Instance
	if err := c.Do(ctx, http.MethodPost, "/api/v1/instances", req, &in); err != nil {
		return nil, err
	}
	return &in, nil
}

// Instance fetches one instance.
func (c *Client) Instance(ctx context.Context, id string) (*sim.Instance, error) {
	var in sim.Instance
	if err := c.Do(ctx, http.MethodGet, "/api/v1/instances/"+url.PathEscape(id), nil, &in); err != nil {
		return nil, err
	}
	return &in, nil
}

// AwaitInstance asks for an instance once until holds for it or it has
// ended: the server waits up to wait (at most a minute) and then answers
// with the instance as it is, whatever happened.
func (c *Client) AwaitInstance(ctx context.Context, id string, until sim.Until, wait time.Duration) (*sim.Instance, error) {
	q := url.Values{"wait": {wait.String()}, "until": {string(until)}}
	var in sim.Instance
	if err := c.Do(ctx, http.MethodGet, "/api/v1/instances/"+url.PathEscape(id)+"?"+q.Encode(), nil, &in); err != nil {
		return nil, err
	}
	return &in, nil
}

// EndedError: the instance waited on stopped or failed before until held,
// or, Settling, right after it did (Driver.Settle).
type EndedError struct {
	Instance *sim.Instance
	Until    sim.Until
	Settling bool
}

func (e *EndedError) Error() string {
	in := e.Instance
	why := in.Error
	if why == "" {
		why = "no error given"
	}
	if e.Settling {
		return fmt.Sprintf("instance %s on %s ended (%s) right after it was %s: %s", in.ID, in.Node, in.State, e.Until, why)
	}
	return fmt.Sprintf("instance %s on %s ended (%s) before it was %s: %s", in.ID, in.Node, in.State, e.Until, why)
}

// WaitInstance waits until until holds for the instance: the server
// answers the moment it does (AwaitInstance), so nothing is polled for. An
// instance that ends first is an *EndedError; when ctx ends first it
// returns the last state fetched (nil if none) with ctx's error.
func (c *Client) WaitInstance(ctx context.Context, id string, until sim.Until) (*sim.Instance, error) {
	var last *sim.Instance
	for {
		in, err := c.AwaitInstance(ctx, id, until, c.waitFor(ctx, serverWait))
		if err != nil {
			if ctx.Err() != nil {
				err = ctx.Err() // the request was cut short by it
			}
			return last, err
		}
		last = in
		switch {
		case until.Holds(*in):
			return in, nil
		case in.State.Terminal():
			return in, &EndedError{Instance: in, Until: until}
		}
		// The wait ran out, or a server that does not wait answered at
		// once: never ask again in a tight loop.
		select {
		case <-time.After(unchangedPause):
		case <-ctx.Done():
			return in, ctx.Err()
		}
	}
}

// Frames are the last tail frames between an instance's job and its node,
// oldest first.
func (c *Client) Frames(ctx context.Context, id string, tail int) ([]sim.FrameRecord, error) {
	return tailOf[sim.FrameRecord](ctx, c, "/api/v1/instances/"+url.PathEscape(id)+"/frames", tail)
}

// tailOf reads the last tail records of an instance's list at path. Records
// the store could not read are left out and said: the error is then a
// *sim.UnreadableRecords, returned with the rest, as the store's own.
func tailOf[T any](ctx context.Context, c *Client, path string, tail int) ([]T, error) {
	var out []T
	h, err := c.list(ctx, path, url.Values{"tail": {strconv.Itoa(tail)}}, &out)
	if err != nil {
		return nil, err
	}
	if n, _ := strconv.Atoi(h.Get("X-Unreadable-Count")); n > 0 {
		return out, &sim.UnreadableRecords{Count: n, First: errors.New(h.Get("X-Unreadable"))}
	}
	return out, nil
}

// FrameCounts says how many of an instance's frame records normsim keeps,
// and how many it let go of, oldest first, to stay within its bounds.
func (c *Client) FrameCounts(ctx context.Context, id string) (sim.FrameCounts, error) {
	var out sim.FrameCounts
	return out, c.Do(ctx, http.MethodGet, "/api/v1/instances/"+url.PathEscape(id)+"/frames/counts", nil, &out)
}

// InstanceEvents are the last tail changes of an instance (its states, its
// job's connections, what its runtime noticed), oldest first.
func (c *Client) InstanceEvents(ctx context.Context, id string, tail int) ([]sim.DescribedEvent, error) {
	return tailOf[sim.DescribedEvent](ctx, c, "/api/v1/instances/"+url.PathEscape(id)+"/events", tail)
}

// Instances lists every instance.
func (c *Client) Instances(ctx context.Context) ([]sim.Instance, error) {
	var out []sim.Instance
	return out, c.Do(ctx, http.MethodGet, "/api/v1/instances", nil, &out)
}

// InstancePage lists a page of the instances, oldest first, and how many
// there are in all (the server's X-Total-Count).
func (c *Client) InstancePage(ctx context.Context, f sim.InstanceFilter) (sim.Page[sim.Instance], error) {
	q := pageQuery(f.Limit, f.Offset)
	if f.Node != "" {
		q.Set("node", f.Node)
	}
	var p sim.Page[sim.Instance]
	h, err := c.list(ctx, "/api/v1/instances", q, &p.Items)
	if err != nil {
		return p, err
	}
	if p.Total, err = totalOf("/api/v1/instances", h); err != nil {
		return p, err
	}
	return p, nil
}

// MigrationPage lists a page of the migrations, newest first, and how many
// match f in all.
func (c *Client) MigrationPage(ctx context.Context, f sim.MigrationFilter) (sim.Page[sim.Migration], error) {
	var p sim.Page[sim.Migration]
	h, err := c.list(ctx, "/api/v1/migrations", migrationQuery(f), &p.Items)
	if err != nil {
		return p, err
	}
	if p.Total, err = totalOf("/api/v1/migrations", h); err != nil {
		return p, err
	}
	// Records the store could not read are left out of the page: said,
	// never dropped unseen.
	p.Unreadable, _ = strconv.Atoi(h.Get("X-Unreadable-Count"))
	p.Damage = h.Get("X-Unreadable")
	return p, nil
}

// totalOf is the X-Total-Count of a list's answer.
func totalOf(path string, h http.Header) (int, error) {
	total, err := strconv.Atoi(h.Get("X-Total-Count"))
	if err != nil {
		return 0, fmt.Errorf("GET %s: X-Total-Count %q is not a count; is normsim older than paging?", path, h.Get("X-Total-Count"))
	}
	return total, nil
}

// list GETs a list into out and returns the answer's header.
func (c *Client) list(ctx context.Context, path string, q url.Values, out any) (http.Header, error) {
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	resp, err := c.send(ctx, http.MethodGet, path, nil)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return nil, fmt.Errorf("GET %s: decode the answer: %w", path, err)
	}
	return resp.Header, nil
}

func pageQuery(limit, offset int) url.Values {
	q := url.Values{}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	if offset > 0 {
		q.Set("offset", strconv.Itoa(offset))
	}
	return q
}

func migrationQuery(f sim.MigrationFilter) url.Values {
	q := pageQuery(f.Limit, f.Offset)
	if f.JobID != "" {
		q.Set("job", f.JobID)
	}
	if f.State != "" {
		q.Set("state", string(f.State))
	}
	return q
}

// Output is what an instance sent to the output sink since then (every
// packet the sink keeps for a zero since).
func (c *Client) Output(ctx context.Context, id string, since time.Time) (*sim.OutputSummary, error) {
	path := "/api/v1/instances/" + url.PathEscape(id) + "/output"
	if !since.IsZero() {
		path += "?since=" + url.QueryEscape(since.UTC().Format(time.RFC3339Nano))
	}
	var out sim.OutputSummary
	if err := c.Do(ctx, http.MethodGet, path, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Census is what the runtimes have running as the host sees it
// (GET /api/v1/census).
type Census struct {
	Units       []sim.RunningUnit `json:"units"`
	Unknown     int               `json:"unknown"`
	Unsupported []string          `json:"unsupported"`
}

// Census asks the sim what its runtimes have running.
func (c *Client) Census(ctx context.Context) (*Census, error) {
	var out Census
	if err := c.Do(ctx, http.MethodGet, "/api/v1/census", nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Stats reads the sim's figures: its memory, goroutines, what its store
// holds and the frame records it could not keep. With gc the sim collects
// garbage first, so the live heap is exact (at the cost of a pause).
func (c *Client) Stats(ctx context.Context, gc bool) (*sim.Stats, error) {
	var out sim.Stats
	path := "/api/v1/stats"
	if gc {
		path += "?gc=true"
	}
	if err := c.Do(ctx, http.MethodGet, path, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Stop stops and removes an instance.
func (c *Client) Stop(ctx context.Context, id string) error {
	return c.Do(ctx, http.MethodDelete, "/api/v1/instances/"+url.PathEscape(id), nil, nil)
}

// RemoveStopped removes an instance that is not running, as its stopped
// record (DELETE ?stopped=true): a migration's stopped source, say, while
// its job runs on elsewhere. An instance that runs is refused (409).
func (c *Client) RemoveStopped(ctx context.Context, id string) error {
	return c.Do(ctx, http.MethodDelete, "/api/v1/instances/"+url.PathEscape(id)+"?stopped=true", nil, nil)
}

// Remove takes an instance out of the sim as a cleanup does: one that runs
// is stopped and removed (Stop), one that has ended only loses its record
// (RemoveStopped), so a migration's stopped source goes whether or not its
// job runs on.
func (c *Client) Remove(ctx context.Context, in sim.Instance) error {
	if in.State.Terminal() {
		return c.RemoveStopped(ctx, in.ID)
	}
	return c.Stop(ctx, in.ID)
}

// LogOptions select what Logs prints, as `docker compose logs` does.
type LogOptions struct {
	Follow     bool
	Timestamps bool
	// Since is an RFC 3339 time or a duration back from now ("10m").
	Since string
	// Tail is how many last lines; negative prints all.
	Tail int
}

// Logs streams an instance's logs to w; with Follow until the instance
// ends or ctx does. The logs outlive the instance; an instance normsim
// never knew is an error.
func (c *Client) Logs(ctx context.Context, id string, o LogOptions, w io.Writer) error {
	if o.Follow {
		return c.followLogs(ctx, id, o, w)
	}
	resp, err := c.send(ctx, http.MethodGet, logsPath(id, o, -1), nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, err = io.Copy(w, resp.Body)
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// logsPath is the logs request for o; a follow's as JSON pages, after the
// line seq after when it is not negative (a resumed follow).
func logsPath(id string, o LogOptions, after int64) string {
	q := url.Values{}
	if o.Follow {
		q.Set("follow", "1")
		q.Set("format", "json")
	} else if o.Timestamps {
		q.Set("timestamps", "1")
	}
	switch {
	case after >= 0:
		q.Set("after", strconv.FormatInt(after, 10))
	default:
		if o.Since != "" {
			q.Set("since", o.Since)
		}
		if o.Tail >= 0 {
			q.Set("tail", strconv.Itoa(o.Tail))
		}
	}
	path := "/api/v1/instances/" + url.PathEscape(id) + "/logs"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	return path
}

// followResumes is how many times in a row a follow reconnects before it
// gives up: normsim closes a follow to make room under a flood of
// connections, or when its reader fell 5 s behind.
const followResumes = 10

// follower is one `logs -f`: where it is in the instance's lines.
type follower struct {
	id      string
	o       LogOptions
	w       io.Writer
	last    int64 // the seq of the last line printed; -1 before any
	printed bool  // a page was printed: the trim note is said only first
}

// followLogs prints an instance's lines as they come, from the follow's
// JSON pages, and when normsim closes the stream before the instance
// ended, resumes after the last line it printed: nothing is printed
// twice, and lines dropped meanwhile are said to be.
func (c *Client) followLogs(ctx context.Context, id string, o LogOptions, w io.Writer) error {
	f := &follower{id: id, o: o, w: w, last: -1}
	cuts := 0 // in a row: a stream that brought pages starts the count again
	for {
		resp, err := c.send(ctx, http.MethodGet, logsPath(id, o, f.last), nil)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			var un *UnreachableError
			if cuts == 0 || !errors.As(err, &un) || cuts >= followResumes {
				return err
			}
		} else {
			pages, cut := f.print(resp.Body, cuts > 0)
			resp.Body.Close()
			if ctx.Err() != nil || cut == nil {
				return nil
			}
			if pages > 0 {
				cuts = 0
			}
			if cuts >= followResumes {
				return fmt.Errorf("the log stream of %s was cut %d times in a row: %w", id, cuts, cut)
			}
		}
		cuts++
		t := time.NewTimer(time.Duration(cuts) * 100 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
	}
}

// print prints the JSON pages of one follow stream (resumed: after a
// cut), and returns how many it read and why the stream was cut, nil
// once it ended with the instance.
func (f *follower) print(body io.Reader, resumed bool) (pages int, cut error) {
	dec := json.NewDecoder(body)
	for ; ; pages++ {
		var p sim.LogPage
		if err := dec.Decode(&p); err != nil {
			if errors.Is(err, io.EOF) {
				return pages, nil
			}
			return pages, err
		}
		var b strings.Builder
		switch {
		case !f.printed && p.OpensTrimmed():
			b.WriteString(sim.TrimmedNote(f.id, p.Lost) + "\n")
		case resumed && pages == 0 && f.last >= 0 && p.Kept.FirstSeq > f.last && p.Lost.Trimmed > 0:
			b.WriteString("normsim | lines of " + f.id + " may have been dropped while this follow reconnected: the oldest kept is newer than the last printed (docs/logs.md)\n")
		}
		f.printed = true
		for _, l := range p.Lines {
			b.WriteString(sim.FormatLogLine(l, f.o.Timestamps))
			b.WriteByte('\n')
			f.last = l.Seq
		}
		if _, err := io.WriteString(f.w, b.String()); err != nil {
			return pages, nil // the reader is gone: nothing to resume for
		}
	}
}

// LogPage reads an instance's lines as JSON: the last tail (all when
// tail <= 0).
func (c *Client) LogPage(ctx context.Context, id string, tail int) (*sim.LogPage, error) {
	path := "/api/v1/instances/" + url.PathEscape(id) + "/logs?format=json"
	if tail > 0 {
		path += "&tail=" + strconv.Itoa(tail)
	}
	var p sim.LogPage
	if err := c.Do(ctx, http.MethodGet, path, nil, &p); err != nil {
		return nil, err
	}
	return &p, nil
}

// Migrate starts a migration; body is usually a sim.MigrateRequest.
func (c *Client) Migrate(ctx context.Context, id string, body any) (*sim.Migration, error) {
	var m sim.Migration
	if err := c.Do(ctx, http.MethodPost, "/api/v1/instances/"+url.PathEscape(id)+"/migrate", body, &m); err != nil {
		return nil, err
	}
	return &m, nil
}

// AbortMigration asks a running migration to roll back (why, in the
// user's words, goes on its timeline); it ends aborted at its next step.
// Past the point of no return the answer is a 409 saying so.
func (c *Client) AbortMigration(ctx context.Context, id, why string) (*sim.Migration, error) {
	var m sim.Migration
	if err := c.Do(ctx, http.MethodPost, "/api/v1/migrations/"+url.PathEscape(id)+"/abort", sim.AbortRequest{Reason: why}, &m); err != nil {
		return nil, err
	}
	return &m, nil
}

// Migration fetches a migration with its timeline and its sides' logs (the
// last LogTail lines of each when it failed; 0 takes the server's 50).
func (c *Client) Migration(ctx context.Context, id string) (*sim.Migration, error) {
	return c.getMigration(ctx, id, migrationAsk{logs: true, events: true})
}

// MigrationState is the migration without its logs (?logs=false): what a
// client polling for a phase or its end needs, at a fraction of the
// sim's cost.
func (c *Client) MigrationState(ctx context.Context, id string) (*sim.Migration, error) {
	return c.getMigration(ctx, id, migrationAsk{events: true})
}

// MigrationSummary is the migration without its logs or its timeline
// (?logs=false&events=false): its state, phase, sides and durations, for a
// client that polls thousands of migrations for where they are.
func (c *Client) MigrationSummary(ctx context.Context, id string) (*sim.Migration, error) {
	return c.getMigration(ctx, id, migrationAsk{})
}

// AwaitMigration asks for a migration, without its logs, once its
// timeline has an event past seq after or it has ended (after < 0: once it
// has ended): the server waits up to wait (at most a minute) for that and
// then answers with the migration as it is, whatever happened. A client
// that follows a migration passes the last seq it has seen.
func (c *Client) AwaitMigration(ctx context.Context, id string, after int, wait time.Duration) (*sim.Migration, error) {
	return c.getMigration(ctx, id, migrationAsk{events: true, wait: wait, after: after})
}

// migrationAsk is what GET /api/v1/migrations/{id} is asked for.
type migrationAsk struct {
	logs, events bool
	wait         time.Duration
	after        int // with wait; < 0: until it ends
}

func (c *Client) getMigration(ctx context.Context, id string, mq migrationAsk) (*sim.Migration, error) {
	q := url.Values{}
	switch {
	case !mq.logs:
		q.Set("logs", "false")
	case c.LogTail > 0:
		q.Set("logTail", strconv.Itoa(c.LogTail))
	}
	if !mq.events {
		q.Set("events", "false")
	}
	if mq.wait > 0 {
		q.Set("wait", mq.wait.String())
		if mq.after >= 0 {
			q.Set("after", strconv.Itoa(mq.after))
		}
	}
	path := "/api/v1/migrations/" + url.PathEscape(id)
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	var m sim.Migration
	if err := c.Do(ctx, http.MethodGet, path, nil, &m); err != nil {
		return nil, err
	}
	return &m, nil
}

// WaitMigration follows a migration until it ends, calling each (when not
// nil) with every state it fetched: the server answers at each step of
// the migration (AwaitMigration), so no step is polled for, and at least
// once a second, so each can show a countdown. When ctx ends first it
// returns the last state fetched (nil if none) with ctx's error.
func (c *Client) WaitMigration(ctx context.Context, id string, each func(*sim.Migration)) (*sim.Migration, error) {
	return c.waitMigration(ctx, id, each, migrationAsk{logs: true, events: true})
}

// WaitMigrationState is WaitMigration without the logs (see
// MigrationState): for a client that follows many migrations at once.
func (c *Client) WaitMigrationState(ctx context.Context, id string) (*sim.Migration, error) {
	return c.waitMigration(ctx, id, nil, migrationAsk{events: true})
}

// WaitMigrationSummary is WaitMigrationState without the timeline either
// (see MigrationSummary): for a client that only needs how each of many
// migrations ended.
func (c *Client) WaitMigrationSummary(ctx context.Context, id string) (*sim.Migration, error) {
	return c.waitMigration(ctx, id, nil, migrationAsk{})
}

// serverWait is how long one request of WaitMigration or WaitInstance
// lets the server wait (waitFor).
const serverWait = 20 * time.Second

// waitFor is how long one request may let the server wait: wait, never
// more than half the HTTP client's own timeout, and ending before ctx's
// deadline, so that the last answer comes before the caller gives up and
// says where things were (a request cut short says nothing).
func (c *Client) waitFor(ctx context.Context, wait time.Duration) time.Duration {
	if t := c.http.Timeout; t > 0 {
		wait = min(wait, t/2)
	}
	if dl, ok := ctx.Deadline(); ok {
		left := (time.Until(dl) - deadlineSlack).Truncate(time.Millisecond)
		wait = min(wait, max(left, minServerWait))
	}
	return wait
}

// deadlineSlack is how long before a caller's deadline the server is
// asked to answer; minServerWait the least wait ever asked for (the API
// takes a wait above 0s).
const (
	deadlineSlack = 100 * time.Millisecond
	minServerWait = 10 * time.Millisecond
)

// waitMigration asks for what ask says (its logs and events; each needs
// the events, to follow the timeline).
func (c *Client) waitMigration(ctx context.Context, id string, each func(*sim.Migration), ask migrationAsk) (*sim.Migration, error) {
	wait := serverWait
	var last *sim.Migration
	after := 0 // no event seen: the first answer comes at once
	if each == nil {
		after = -1 // only the end is wanted
	} else {
		wait = time.Second
	}
	for {
		ask.wait, ask.after = c.waitFor(ctx, wait), after
		m, err := c.getMigration(ctx, id, ask)
		if err != nil {
			if ctx.Err() != nil {
				err = ctx.Err() // the request was cut short by it
			}
			return last, err
		}
		last = m
		if each != nil {
			each(m)
		}
		if m.State.Ended() {
			return m, nil
		}
		seen := after
		if n := len(m.Events); n > 0 && after >= 0 {
			after = m.Events[n-1].Seq
		}
		if after == seen {
			// Nothing new: the wait ran out, or a server that does not wait
			// answered at once. Never ask again in a tight loop.
			select {
			case <-time.After(unchangedPause):
			case <-ctx.Done():
				return m, ctx.Err()
			}
		}
	}
}

// unchangedPause is how long waitMigration pauses after an answer with
// nothing new before it asks again.
const unchangedPause = 50 * time.Millisecond

// Migrations lists migrations newest first, without their timelines.
func (c *Client) Migrations(ctx context.Context, f sim.MigrationFilter) ([]sim.Migration, error) {
	q := migrationQuery(f)
	path := "/api/v1/migrations"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	var out []sim.Migration
	return out, c.Do(ctx, http.MethodGet, path, nil, &out)
}
