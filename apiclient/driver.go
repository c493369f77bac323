package apiclient

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/normsim/normsim/sim"
)

// Driver drives a job through normsim the one way every program of this
// module does (the CLI, normsim ci, normsim conform, normsimtest and
// normsim bench): launch it, wait until it is up, migrate it, asking
// again after a refusal the Retry policy names, and follow the migration
// to its end; and at the end take its instances out. Each step is a
// method, so a caller that does something in between (prints a launched
// instance's env, plays the job's frames while it migrates) calls them one
// by one; LaunchUp and MigrateToEnd are the usual pairs.
//
// A Driver is a small value: a caller that needs another bound for one
// step copies it and sets the field.
type Driver struct {
	C *Client
	// Retry is when Migrate asks again; the zero value asks once.
	Retry Retry
	// Fetch is what each state of a followed migration carries.
	Fetch Fetch
	// UpWait bounds WaitUp; 0 is DefaultUpWait.
	UpWait time.Duration
	// Settle, when set, is how long WaitUp watches an instance that got
	// where it was waited for, so that a job that dies at once (it was
	// running for a moment) is caught: one that ends meanwhile is an
	// *EndedError. Zero returns at once.
	Settle time.Duration
	// EndWait bounds WaitEnd: 0 is MigrationWait of the migration's own
	// timeouts (as normsim applies them, in its record); negative waits
	// until ctx ends.
	EndWait time.Duration
}

// DefaultUpWait is how long WaitUp waits when Driver.UpWait is 0: the
// launch timeout normsim ci, normsimtest and launch --until default to.
const DefaultUpWait = time.Minute

// EndMargin is what MigrationWait adds to a migration's timeouts for the
// steps no timeout bounds: creating and starting the target (an image
// pull, a compose create), the rollback's stop, and the up to 2 s the
// output seam is measured after the end.
const EndMargin = 30 * time.Second

// MigrationWait is how long a migration with timeouts t (zero fields take
// sim.DefaultTimeouts) may take to end: t.Longest(), every phase timeout
// one after another with the linger and the stop grace, plus EndMargin.
// With the defaults that is 2 min 40.25 s.
func MigrationWait(t sim.Timeouts) time.Duration { return t.Longest() + EndMargin }

// Retry is the driver's one policy for asking a migrate request again. It
// is keyed on the refusal's code, never on its message, and only one code
// is asked again: NOT_CONNECTED (422), a handover from a source whose job
// is not connected to its socket at that moment. That is a moment, not an
// answer: a job whose socket a fault or the migration before dropped
// reconnects. After it Migrate waits until the source is connected (the
// server answers the moment it is; see WaitUp), no sooner than 50 ms
// after the refusal, doubling with each ask (50, 100, 200 ms, …), and
// asks again.
//
// Every other refusal is the answer and is returned at once: a request
// the API cannot carry out as asked (404, 422 of any other code), a job
// already migrating or an instance being stopped (409 CONFLICT: by the
// time that migration ends the source has usually moved on), normsim
// shutting down (UNAVAILABLE). A request that got no answer
// (*UnreachableError) is not asked again either: the migration may have
// started, and a second request would be a second migration.
type Retry struct {
	// Asks is the most requests, the first one included; 0 or 1 asks once.
	Asks int
	// Within bounds the time spent waiting for the source to connect
	// again, all asks together; 0 is the driver's UpWait.
	Within time.Duration
}

// DefaultRetry asks up to four times (the first and three more).
var DefaultRetry = Retry{Asks: 4}

// retryPause is the least pause before the first ask again; it doubles
// with each.
const retryPause = 50 * time.Millisecond

// Fetch is what a followed migration's states carry.
type Fetch int

const (
	// FetchAll: the timeline and, once it failed or aborted, the sides'
	// last log lines (Client.LogTail of each): Client.WaitMigration.
	FetchAll Fetch = iota
	// FetchTimeline: the timeline without the logs, for a client that
	// follows many migrations at once: Client.WaitMigrationState.
	FetchTimeline
	// FetchSummary: neither, only the state, phase, sides and durations,
	// for a client that needs only how each of thousands ended:
	// Client.WaitMigrationSummary. A follower that is given each needs
	// the timeline, so it is fetched then.
	FetchSummary
)

func (f Fetch) ask(each bool) migrationAsk {
	switch {
	case f == FetchAll:
		return migrationAsk{logs: true, events: true}
	case f == FetchTimeline || each:
		return migrationAsk{events: true}
	}
	return migrationAsk{}
}

// NotUpError: an instance did not get where it was waited for within
// the wait, or cannot: its node serves no job socket, so its job never
// connects (docs/contract.md: such a job runs without one).
type NotUpError struct {
	// Instance is the instance as it was last seen; nil when it was not
	// read (NoSocket).
	Instance *sim.Instance
	ID       string
	Until    sim.Until
	Wait     time.Duration
	// NoSocket names the node without a job socket the instance is on,
	// when that is why.
	NoSocket string
}

func (e *NotUpError) Error() string {
	if e.NoSocket != "" {
		return fmt.Sprintf("instance %s cannot be %s: its node %s serves no job socket (normsim up --no-job-socket), so its job never connects; wait until it is running", e.ID, e.Until, e.NoSocket)
	}
	in := e.Instance
	why := ""
	if in.Error != "" {
		why = ": " + in.Error
	}
	return fmt.Sprintf("instance %s on %s is not %s after %v: state %s, connected %v%s", e.ID, in.Node, e.Until, e.Wait, in.State, in.Connected, why)
}

// UnendedError: a migration had not ended when the driver's wait for it
// (Driver.EndWait) passed.
type UnendedError struct {
	// Migration is the migration as it was last seen.
	Migration *sim.Migration
	Wait      time.Duration
}

func (e *UnendedError) Error() string {
	m := e.Migration
	return fmt.Sprintf("migration %s still %s in phase %s after %v", m.ID, m.State, m.Phase, e.Wait)
}

// RetriedError: a migrate request still refused after the driver asked
// again. errors.As finds the last refusal (*Error) in it, and, when a wait
// for the source to connect is why the driver stopped asking, that wait's
// error (*EndedError, *NotUpError).
type RetriedError struct {
	Last *Error
	Asks int
	// Why is the error of the wait that ended the asking; nil when Asks
	// ran out.
	Why error
}

func (e *RetriedError) Error() string {
	asked := sim.Plural(int64(e.Asks), "time")
	if e.Why != nil {
		return fmt.Sprintf("%v (asked %s; then the source did not connect again: %v)", e.Last, asked, e.Why)
	}
	return fmt.Sprintf("%v (asked %s)", e.Last, asked)
}

func (e *RetriedError) Unwrap() []error {
	if e.Why == nil {
		return []error{e.Last}
	}
	return []error{e.Last, e.Why}
}

// HasCode says whether err is a refusal of the API with that code.
func HasCode(err error, code string) bool {
	var e *Error
	return errors.As(err, &e) && e.Code == code
}

// LaunchUp launches and, unless until is "", waits until it holds
// (WaitUp). A refused launch returns no instance; a wait that fails
// returns the instance as last seen with WaitUp's error, so the caller
// can read its logs and remove it.
func (d Driver) LaunchUp(ctx context.Context, req sim.LaunchRequest, until sim.Until) (*sim.Instance, error) {
	in, err := d.C.Launch(ctx, req)
	if err != nil || until == "" {
		return in, err
	}
	up, err := d.waitUp(ctx, in.ID, in.Node, until)
	return cmp.Or(up, in), err
}

// WaitUp waits until until holds for the instance (running, or running
// with its job connected to its job socket), at most UpWait: the server
// answers the moment it does (Client.WaitInstance), and the last answer
// comes before the wait ends. Waiting for connected on a node that serves
// no job socket fails at once (*NotUpError with NoSocket). An instance
// that ends first is an *EndedError, one that is not there in time a
// *NotUpError; when ctx ends first it is ctx's error. Each comes with the
// instance as last seen (nil if never).
func (d Driver) WaitUp(ctx context.Context, id string, until sim.Until) (*sim.Instance, error) {
	return d.waitUp(ctx, id, "", until)
}

func (d Driver) waitUp(ctx context.Context, id, node string, until sim.Until) (*sim.Instance, error) {
	if until == sim.UntilConnected {
		if err := d.socketOf(ctx, id, node); err != nil {
			return nil, err
		}
	}
	wait := cmp.Or(d.UpWait, DefaultUpWait)
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	in, err := d.C.WaitInstance(wctx, id, until)
	switch {
	case err == nil:
	case ctx.Err() != nil:
		return in, ctx.Err()
	case in != nil && wctx.Err() != nil:
		return in, &NotUpError{Instance: in, ID: id, Until: until, Wait: wait}
	default:
		return in, err
	}
	if d.Settle <= 0 {
		return in, nil
	}
	return d.settle(ctx, in, until)
}

// socketOf fails with a *NotUpError when the instance's node serves no
// job socket (node "" is read from the instance).
func (d Driver) socketOf(ctx context.Context, id, node string) error {
	if node == "" {
		in, err := d.C.Instance(ctx, id)
		if err != nil {
			return err
		}
		node = in.Node
	}
	nodes, err := d.C.Nodes(ctx)
	if err != nil {
		return err
	}
	for _, n := range nodes {
		if n.Name == node && n.Socket == nil {
			return &NotUpError{ID: id, Until: sim.UntilConnected, NoSocket: node}
		}
	}
	return nil
}

// settlePoll is how often settle looks at the instance.
const settlePoll = 100 * time.Millisecond

// settle watches an instance that is up for Settle and fails if it ends
// meanwhile.
func (d Driver) settle(ctx context.Context, in *sim.Instance, until sim.Until) (*sim.Instance, error) {
	deadline := time.Now().Add(d.Settle)
	for {
		select {
		case <-time.After(settlePoll):
		case <-ctx.Done():
			return in, ctx.Err()
		}
		now, err := d.C.Instance(ctx, in.ID)
		if err != nil {
			return in, err
		}
		in = now
		if in.State.Terminal() {
			return in, &EndedError{Instance: in, Until: until, Settling: true}
		}
		if time.Now().After(deadline) {
			return in, nil
		}
	}
}

// Migrate asks normsim to migrate the instance (body is usually a
// sim.MigrateRequest) and returns the migration as it started, asking
// again as Retry says. A refusal asked once is the API's *Error; one
// asked again is a *RetriedError with the last.
func (d Driver) Migrate(ctx context.Context, id string, body any) (*sim.Migration, error) {
	asks := max(d.Retry.Asks, 1)
	within := cmp.Or(d.Retry.Within, d.UpWait, DefaultUpWait)
	deadline := time.Now().Add(within)
	pause := retryPause
	for n := 1; ; n++ {
		m, err := d.C.Migrate(ctx, id, body)
		var refusal *Error
		if err == nil || !errors.As(err, &refusal) || refusal.Code != sim.ENotConnected || asks == 1 {
			return m, err
		}
		if n == asks {
			return nil, &RetriedError{Last: refusal, Asks: n}
		}
		if werr := d.reconnected(ctx, id, time.Now().Add(pause), deadline, within); werr != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, &RetriedError{Last: refusal, Asks: n, Why: werr}
		}
		pause *= 2
	}
}

// reconnected waits until the instance is connected, and until notBefore,
// by deadline (within after the first ask).
func (d Driver) reconnected(ctx context.Context, id string, notBefore, deadline time.Time, within time.Duration) error {
	if time.Now().After(deadline) {
		// Spent on earlier asks: say where the source is.
		in, err := d.C.Instance(ctx, id)
		if err != nil {
			return err
		}
		return &NotUpError{Instance: in, ID: id, Until: sim.UntilConnected, Wait: within}
	}
	wctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	in, err := d.C.WaitInstance(wctx, id, sim.UntilConnected)
	if err != nil {
		if in != nil && ctx.Err() == nil && wctx.Err() != nil {
			return &NotUpError{Instance: in, ID: id, Until: sim.UntilConnected, Wait: within}
		}
		return err
	}
	select {
	case <-time.After(time.Until(notBefore)):
	case <-ctx.Done():
		return ctx.Err()
	}
	return nil
}

// WaitEnd follows the started migration m until it ends, calling each
// (when not nil) with every state fetched, as Fetch says, at each step
// and at least once a second. It waits EndWait at most: a migration still
// running then is an *UnendedError. When ctx ends first it returns ctx's
// error. Each comes with the migration as last seen (m itself when no
// answer came).
func (d Driver) WaitEnd(ctx context.Context, m *sim.Migration, each func(*sim.Migration)) (*sim.Migration, error) {
	wait := d.EndWait
	if wait == 0 {
		wait = MigrationWait(m.Timeouts)
	}
	wctx := ctx
	if wait > 0 {
		var cancel context.CancelFunc
		wctx, cancel = context.WithTimeout(ctx, wait)
		defer cancel()
	}
	got, err := d.C.waitMigration(wctx, m.ID, each, d.Fetch.ask(each != nil))
	last := cmp.Or(got, m)
	switch {
	case err == nil:
		return got, nil
	case ctx.Err() != nil:
		return last, ctx.Err()
	case wait > 0 && wctx.Err() != nil:
		return last, &UnendedError{Migration: last, Wait: wait}
	}
	return last, err
}

// MigrateToEnd migrates (Migrate) and follows the migration to its end
// (WaitEnd). A refusal returns no migration; once the migration started
// the error of the wait comes with it as last seen.
func (d Driver) MigrateToEnd(ctx context.Context, id string, body any, each func(*sim.Migration)) (*sim.Migration, error) {
	m, err := d.Migrate(ctx, id, body)
	if err != nil {
		return nil, err
	}
	return d.WaitEnd(ctx, m, each)
}

// Remove takes an instance out as a cleanup does (Client.Remove: one that
// runs is stopped and removed, one that ended loses its record); one
// already gone is no error. The API refuses (409 CONFLICT) to remove an
// instance a running migration holds as its source or target, and a
// stopped source the migration moved its job from, when it is removed as
// one that runs. On that code Remove waits for each running migration of
// the instance's job to end (the server answers the moment it does, and
// normsim lets go of a migration's instances before its end is visible),
// reads the instance again and removes it once more, as it is now.
func (d Driver) Remove(ctx context.Context, in sim.Instance) error {
	err := d.C.Remove(ctx, in)
	if HasCode(err, sim.ENotFound) {
		return nil
	}
	if !HasCode(err, sim.EConflict) {
		return err
	}
	job := in.JobID
	if job == "" {
		now, gerr := d.C.Instance(ctx, in.ID)
		if gerr != nil {
			return err
		}
		job = now.JobID
	}
	running, lerr := d.C.Migrations(ctx, sim.MigrationFilter{JobID: job, State: sim.MigrationRunning})
	if lerr != nil {
		return err
	}
	end := d
	end.Fetch = FetchSummary
	for i := range running {
		if _, werr := end.WaitEnd(ctx, &running[i], nil); werr != nil {
			return fmt.Errorf("%w; then waiting for migration %s to end: %w", err, running[i].ID, werr)
		}
	}
	now, err := d.C.Instance(ctx, in.ID)
	if HasCode(err, sim.ENotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	err = d.C.Remove(ctx, *now)
	if HasCode(err, sim.ENotFound) {
		return nil
	}
	return err
}
