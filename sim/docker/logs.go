package docker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
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
		g.Go(func() error { return r.followLogs(gctx, in, s, out) })
	}
	if err := g.Wait(); err != nil && ctx.Err() == nil {
		return fmt.Errorf("logs of instance %s: %w", instanceID, err)
	}
	return nil
}

// followLogs follows one service's logs; after its container stops it
// waits for the container to start again, then goes on from the last line
// it wrote.
func (r *Runtime) followLogs(ctx context.Context, in *instance, s *service, out *lineOut) error {
	var last time.Time
	for {
		// Taken before reading, so a start during the read is not missed.
		r.mu.Lock()
		changed, gone := in.changed, in.gone
		r.mu.Unlock()
		var err error
		last, err = r.copyLogs(ctx, s, true, last, out)
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
func (r *Runtime) copyLogs(ctx context.Context, s *service, follow bool, since time.Time, out *lineOut) (time.Time, error) {
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
	stdout := &lineWriter{out: out, prefix: prefix, after: since, last: &last}
	stderr := &lineWriter{out: out, prefix: prefix, after: since, last: &last}
	_, err = stdcopy.StdCopy(stdout, stderr, rc)
	if ferr := errors.Join(stdout.flush(), stderr.flush()); ferr != nil && err == nil {
		err = ferr
	}
	if err != nil && ctx.Err() == nil {
		return last, fmt.Errorf("logs of service %s: %w", s.name, err)
	}
	return last, nil
}

// lineOut writes whole lines to w, one at a time, for every service.
type lineOut struct {
	mu  sync.Mutex
	w   io.Writer
	buf []byte
}

func (o *lineOut) writeLine(prefix string, line []byte) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.buf = append(append(append(o.buf[:0], prefix...), line...), '\n')
	_, err := o.w.Write(o.buf)
	return err
}

// lineWriter splits one stream of one service into lines, strips the
// engine's timestamp from each, and drops the lines at or before after (the
// ones a resumed follow has written already).
type lineWriter struct {
	out    *lineOut
	prefix string
	after  time.Time
	last   *time.Time // shared by a service's stdout and stderr
	buf    []byte
}

func (l *lineWriter) Write(p []byte) (int, error) {
	l.buf = append(l.buf, p...)
	for {
		i := bytes.IndexByte(l.buf, '\n')
		if i < 0 {
			break
		}
		if err := l.line(l.buf[:i]); err != nil {
			return 0, err
		}
		l.buf = l.buf[i+1:]
	}
	if len(l.buf) == 0 {
		l.buf = nil // let a long line's buffer go
	}
	return len(p), nil
}

func (l *lineWriter) flush() error {
	if len(l.buf) == 0 {
		return nil
	}
	err := l.line(l.buf)
	l.buf = nil
	return err
}

func (l *lineWriter) line(b []byte) error {
	if ts, rest, ok := bytes.Cut(b, []byte(" ")); ok {
		if t, err := time.Parse(time.RFC3339Nano, string(ts)); err == nil {
			if !l.after.IsZero() && !t.After(l.after) {
				return nil
			}
			if t.After(*l.last) {
				*l.last = t
			}
			b = rest
		}
	}
	return l.out.writeLine(l.prefix, b)
}
