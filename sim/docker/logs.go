package docker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/pkg/stdcopy"
	"golang.org/x/sync/errgroup"

	"github.com/normsim/normsim/sim"
)

// errGone ends a service's logs: its container no longer exists.
var errGone = errors.New("container is gone")

// Logs writes each service's stdout and stderr to w as lines prefixed
// "<service> | ". Without follow it writes what the engine has, service by
// service in the spec's order. With follow the services' lines interleave
// as they come, and Logs keeps going across container exits and restarts
// (a prepared instance's services are followed from their start) until ctx
// ends or the instance is stopped; either ends it with a nil error.
func (r *Runtime) Logs(ctx context.Context, instanceID string, follow bool, w io.Writer) error {
	r.mu.Lock()
	in := r.instances[instanceID]
	var services []*service
	if in != nil {
		services = in.services
	}
	r.mu.Unlock()
	if in == nil {
		return sim.Errorf(sim.ENotFound, "instance %s is not in the docker runtime", instanceID)
	}
	out := &lineOut{w: w}
	if !follow {
		for _, s := range services {
			if _, err := r.copyLogs(ctx, s, false, time.Time{}, out); err != nil && !errors.Is(err, errGone) {
				return fmt.Errorf("logs of instance %s: %w", instanceID, err)
			}
		}
		return nil
	}
	g, gctx := errgroup.WithContext(ctx)
	for _, s := range services {
		g.Go(func() error { return r.followLogs(gctx, in, s, out, time.Time{}, nil) })
	}
	if err := g.Wait(); err != nil && ctx.Err() == nil {
		return fmt.Errorf("logs of instance %s: %w", instanceID, err)
	}
	return nil
}

// followLogs follows one service's logs from since (all when zero); after
// its container stops it waits for the container to start again, then
// goes on from the last line it wrote. reading, when not nil, is told as
// each stream of the service begins (true) and ends (false).
func (r *Runtime) followLogs(ctx context.Context, in *instance, s *service, out lineSink, since time.Time, reading func(bool)) error {
	last := since
	for {
		// Taken before reading, so a start during the read is not missed.
		r.mu.Lock()
		changed, gone := in.changed, in.gone
		r.mu.Unlock()
		var err error
		if reading != nil {
			reading(true)
		}
		last, err = r.copyLogs(ctx, s, true, last, out)
		if reading != nil {
			reading(false)
		}
		switch {
		case ctx.Err() != nil || errors.Is(err, errGone):
			return nil
		case err != nil:
			return err
		}
		select {
		case <-ctx.Done():
			return nil
		case <-gone:
			return nil
		case <-changed:
		}
	}
}

// copyLogs copies one service's logs after since (all when zero) to out and
// returns the time of the last line written.
func (r *Runtime) copyLogs(ctx context.Context, s *service, follow bool, since time.Time, out lineSink) (time.Time, error) {
	opts := container.LogsOptions{ShowStdout: true, ShowStderr: true, Follow: follow, Timestamps: true}
	if !since.IsZero() {
		opts.Since = fmt.Sprintf("%d.%09d", since.Unix(), since.Nanosecond())
	}
	rc, err := r.cli.ContainerLogs(ctx, s.container, opts)
	if err != nil {
		if cerrdefs.IsNotFound(err) {
			return since, errGone
		}
		return since, r.engineErr("logs of service "+s.name, err)
	}
	defer rc.Close()
	last := since
	prefix := s.name + " | "
	stdout := &lineWriter{out: out, svc: s, prefix: prefix, service: s.name, stream: sim.StreamStdout, after: since, last: &last, now: r.now}
	stderr := &lineWriter{out: out, svc: s, prefix: prefix, service: s.name, stream: sim.StreamStderr, after: since, last: &last, now: r.now}
	_, err = stdcopy.StdCopy(stdout, stderr, rc)
	if ferr := errors.Join(stdout.flush(), stderr.flush()); ferr != nil && err == nil {
		err = ferr
	}
	if err != nil && ctx.Err() == nil {
		return last, fmt.Errorf("logs of service %s: %w", s.name, err)
	}
	return last, nil
}

// lineSink takes the lines a lineWriter splits off.
type lineSink interface {
	line(w *lineWriter, at time.Time, text string) error
}

// lineOut writes whole lines to w, one at a time, for every service.
type lineOut struct {
	mu  sync.Mutex
	w   io.Writer
	buf []byte
}

func (o *lineOut) line(lw *lineWriter, _ time.Time, text string) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.buf = append(append(append(o.buf[:0], lw.prefix...), text...), '\n')
	_, err := o.w.Write(o.buf)
	return err
}

// captureOut hands lines to the runtime's log sink.
type captureOut struct {
	sink     sim.LogSink
	instance string
}

func (c captureOut) line(lw *lineWriter, at time.Time, text string) error {
	if lw.svc != nil {
		lw.svc.captured.Add(1)
	}
	c.sink.CaptureLog(sim.LogLine{Instance: c.instance, Service: lw.service, Stream: lw.stream, At: at, Text: text})
	return nil
}

// lineWriter splits one stream of one service into lines, strips the
// engine's timestamp from each, and drops the lines at or before after (the
// ones a resumed follow has written already). A line over
// sim.MaxLogLineBytes is cut, the rest of it counted.
type lineWriter struct {
	out     lineSink
	svc     *service // nil in tests
	prefix  string
	service string
	stream  string
	after   time.Time
	last    *time.Time // shared by a service's stdout and stderr
	// own is the latest time of this stream's lines: the engine stamps a
	// stream's lines in order, so one before it is a line read again.
	own   time.Time
	atOwn []string // the lines stamped own, to tell one read again
	now   func() time.Time
	// live marks a stream read straight from the container (attached):
	// its lines carry no engine timestamp and are stamped as they come.
	live bool
	buf  []byte
	cut  int // bytes of the current line discarded
}

// lineBufMax is what a line may hold before it is cut: room for the
// engine's timestamp before the text.
const lineBufMax = sim.MaxLogLineBytes + 64

func (l *lineWriter) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		chunk := p
		if i >= 0 {
			chunk = p[:i]
		}
		room := max(0, lineBufMax-len(l.buf))
		take := min(room, len(chunk))
		l.buf = append(l.buf, chunk[:take]...)
		l.cut += len(chunk) - take
		if i < 0 {
			break
		}
		if err := l.line(l.buf); err != nil {
			return 0, err
		}
		l.buf, l.cut = l.buf[:0], 0
		p = p[i+1:]
	}
	return n, nil
}

func (l *lineWriter) flush() error {
	if len(l.buf) == 0 && l.cut == 0 {
		return nil
	}
	err := l.line(l.buf)
	l.buf, l.cut = nil, 0
	return err
}

func (l *lineWriter) line(b []byte) error {
	var at time.Time
	if l.live {
		at = l.now()
		if at.After(*l.last) {
			*l.last = at
		}
	} else if ts, rest, ok := bytes.Cut(b, []byte(" ")); ok {
		if t, err := time.Parse(time.RFC3339Nano, string(ts)); err == nil {
			if !l.after.IsZero() && !t.After(l.after) {
				return nil
			}
			// The json-file driver's follow can read a rotated file again
			// (max-size): what comes before this stream's last line was
			// written already.
			if t.Before(l.own) || t.Equal(l.own) && slices.Contains(l.atOwn, string(rest)) {
				return nil
			}
			if !t.Equal(l.own) {
				l.own, l.atOwn = t, l.atOwn[:0]
			}
			l.atOwn = append(l.atOwn, string(rest))
			if t.After(*l.last) {
				*l.last = t
			}
			at, b = t, rest
		}
	}
	if at.IsZero() && l.now != nil {
		at = l.now()
	}
	var text string
	if cut := l.cut + max(0, len(b)-sim.MaxLogLineBytes); cut > 0 {
		text = sim.LogCutText(b[:min(len(b), sim.MaxLogLineBytes)], cut)
	} else {
		text = sim.LogText(b)
	}
	return l.out.line(l, at, text)
}

// capture follows every service of in into the runtime's log sink from
// since (all its output when zero) until the instance is gone or the
// runtime closes. It starts once per instance; without a sink it does
// nothing.
func (r *Runtime) capture(in *instance, since time.Time) {
	if r.logs == nil {
		return
	}
	r.mu.Lock()
	if in.captured != nil || r.closed {
		r.mu.Unlock()
		return
	}
	in.captured = make(chan struct{})
	services := in.services
	r.mu.Unlock()
	out := captureOut{sink: r.logs, instance: in.id}
	// From the start, each container's first run is read attached: the
	// json-file driver's follow on engines before 23.0 can skip or stall
	// at a file rotation when it lags, losing lines it cannot count.
	attached := make([]*types.HijackedResponse, len(services))
	dies := make([]int, len(services)) // before the attached runs
	r.mu.Lock()
	for i, s := range services {
		dies[i] = s.dies
	}
	r.mu.Unlock()
	if since.IsZero() {
		for i, s := range services {
			a, err := r.cli.ContainerAttach(r.capCtx, s.container, container.AttachOptions{Stream: true, Stdout: true, Stderr: true})
			if err != nil {
				r.log.Warn("attach to capture logs; following the engine's log instead", "instance", in.id, "service", s.name, "err", err)
				r.logs.CaptureLog(sim.LogLine{Instance: in.id, Service: s.name, Stream: sim.StreamNormsim, At: r.now(),
					Text: fmt.Sprintf("normsim: could not attach to %s (%v); its output is read from the engine's log, which may lose lines at a file rotation", s.name, err)})
				continue
			}
			attached[i] = &a
		}
	}
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		defer close(in.captured)
		var wg sync.WaitGroup
		for i, s := range services {
			wg.Go(func() {
				reading := func(reading bool) {
					r.mu.Lock()
					s.reading = reading
					if !reading {
						s.drainedAt = time.Now()
					}
					r.mu.Unlock()
				}
				from := since
				if a := attached[i]; a != nil {
					last, err := r.readAttached(a, s, out, reading)
					switch {
					case r.capCtx.Err() != nil:
						return
					case err != nil:
						r.log.Warn("capture logs", "instance", in.id, "service", s.name, "err", err)
						r.logs.CaptureLog(sim.LogLine{Instance: in.id, Service: s.name, Stream: sim.StreamNormsim, At: r.now(),
							Text: fmt.Sprintf("normsim: reading %s's output broke off (%v); it goes on from the engine's log, where lines around this may be missing or repeated", s.name, err)})
						from = last
					default:
						var again bool
						if from, again = r.nextRun(in, s, dies[i]); !again {
							return
						}
					}
				}
				// Restarts (by the engine or a later Start) are read from
				// the engine's log.
				if err := r.followLogs(r.capCtx, in, s, out, from, reading); err != nil {
					r.log.Warn("capture logs", "instance", in.id, "service", s.name, "err", err)
				}
			})
		}
		wg.Wait()
	}()
}

// readAttached reads one attached container's output until its run ends
// (or the runtime closes) and returns when it received the last line.
func (r *Runtime) readAttached(a *types.HijackedResponse, s *service, out lineSink, reading func(bool)) (time.Time, error) {
	defer a.Close()
	// The hijacked connection does not watch the context it was made with.
	defer context.AfterFunc(r.capCtx, a.Close)()
	last := r.now()
	reading(true)
	defer reading(false)
	sp := newSpool(a.Reader, r.now)
	defer sp.stop()
	prefix := s.name + " | "
	stdout := &lineWriter{out: out, svc: s, prefix: prefix, service: s.name, stream: sim.StreamStdout, last: &last, now: sp.at, live: true}
	stderr := &lineWriter{out: out, svc: s, prefix: prefix, service: s.name, stream: sim.StreamStderr, last: &last, now: sp.at, live: true}
	_, err := stdcopy.StdCopy(stdout, stderr, sp)
	if ferr := errors.Join(stdout.flush(), stderr.flush()); ferr != nil && err == nil {
		err = ferr
	}
	if err != nil && r.capCtx.Err() == nil {
		return last, fmt.Errorf("attached output of service %s: %w", s.name, err)
	}
	return last, nil
}

// nextRun waits until the event watcher has seen the death that ended
// the attached run (the dies-th), and returns its time: the engine's log
// is followed from there. The engine reports a death once its log copier
// has taken the run's last line and before it restarts the container, so
// every line of the old run is stamped before it and every line of a
// restart after it; neither the time the last line arrived (the copier
// can lag behind an attached reader) nor the run's exit time (before the
// copier is done) divides them. again is false when the instance is gone
// or the runtime closes first.
func (r *Runtime) nextRun(in *instance, s *service, dies int) (from time.Time, again bool) {
	for {
		r.mu.Lock()
		changed, gone := in.changed, in.gone
		seen, died := s.dies, s.diedAt
		r.mu.Unlock()
		if seen > dies {
			return died, true
		}
		select {
		case <-r.capCtx.Done():
			return time.Time{}, false
		case <-gone:
			return time.Time{}, false
		case <-changed:
		}
	}
}

// drainBound is how long an exit's report waits for the service's output
// to be captured.
const drainBound = time.Second

// awaitDrained waits (boundedly) until the capture of s has read its
// output to the end of a stream that ended after died: an exit is
// reported after the lines the service printed before it.
func (r *Runtime) awaitDrained(in *instance, s *service, died time.Time) {
	deadline := time.Now().Add(drainBound)
	for {
		r.mu.Lock()
		capturing := in.captured != nil
		drained := !s.drainedAt.Before(died)
		r.mu.Unlock()
		if !capturing || drained || time.Now().After(deadline) {
			return
		}
		time.Sleep(2 * time.Millisecond)
	}
}
