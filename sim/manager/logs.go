package manager

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/normsim/normsim/sim"
)

// Logs reads an instance's captured output: the page q selects, given to
// each. With follow it goes on giving each the lines that come until the
// instance has ended (stopped, failed, removed) and its last lines are
// read, or ctx ends (then it returns nil). The logs outlive the instance:
// they are served after it stopped, was removed, or migrated away, and
// after a restart on the same store. An instance never known is ENotFound.
func (m *Manager) Logs(ctx context.Context, id string, q sim.LogQuery, follow bool, each func(*sim.LogPage) error) error {
	book := m.cfg.Logs
	if book == nil {
		return sim.Errorf(sim.EUnavailable, "this normsim keeps no logs (no log book configured)")
	}
	q.Instance = id
	none := q.Tail < 0
	if none {
		q.Tail = 1 // the last line's seq is where a follow starts
	}
	page, err := book.Read(ctx, q)
	if err != nil {
		return fmt.Errorf("read logs of %s: %w", id, err)
	}
	cursor := q
	cursor.Tail, cursor.Since = 0, time.Time{}
	cursor.AfterSeq = lastSeq(page, q.AfterSeq)
	if none {
		page.Lines = page.Lines[:0]
	}
	if !page.Known {
		m.mu.Lock()
		_, held := m.instances[id]
		m.mu.Unlock()
		if !held {
			return sim.Errorf(sim.ENotFound, "instance %q not found, and no logs of it are kept", id)
		}
	}
	if err := each(page); err != nil || !follow {
		return err
	}
	for {
		changed := book.Changed()
		ended, instChanged := m.instanceEnded(id)
		if ended {
			// Its last lines may still be on their way to the store.
			page, err := book.Read(ctx, cursor)
			if err != nil {
				return ignoreDone(ctx, err)
			}
			if len(page.Lines) > 0 {
				return each(page)
			}
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-changed:
		case <-instChanged:
		}
		page, err := book.Read(ctx, cursor)
		if err != nil {
			return ignoreDone(ctx, err)
		}
		if len(page.Lines) == 0 {
			continue
		}
		cursor.AfterSeq = lastSeq(page, cursor.AfterSeq)
		if err := each(page); err != nil {
			return err
		}
	}
}

func ignoreDone(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return nil
	}
	return err
}

func lastSeq(p *sim.LogPage, or int64) int64 {
	if n := len(p.Lines); n > 0 {
		return p.Lines[n-1].Seq
	}
	return or
}

// instanceEnded reports whether an instance is gone or in an end state,
// and else a channel closed on its next change.
func (m *Manager) instanceEnded(id string) (bool, <-chan struct{}) {
	m.mu.Lock()
	defer m.mu.Unlock()
	in, ok := m.instances[id]
	if !ok || in.State.Terminal() {
		return true, nil
	}
	return false, in.changed
}

// registerLogs records that an instance exists, so its log is served
// (perhaps empty) once it is gone.
// An external instance's log says why it holds nothing.
func (m *Manager) registerLogs(in sim.Instance) {
	if m.cfg.Logs == nil {
		return
	}
	m.cfg.Logs.Register(in.ID)
	if in.Runtime == sim.RuntimeExternal {
		m.cfg.Logs.CaptureLog(sim.LogLine{Instance: in.ID, Service: "normsim", Stream: sim.StreamNormsim, At: m.now(),
			Text: in.ID + " runs on the external runtime: normsim did not start it, so its output is wherever you run it"})
	}
}

// MigrationLogs fills in mig.Logs: what both sides printed from LogLead
// before it started until LogTrail after it ended (or now), and, when it
// ended aborted or failed, the last tail lines of each side (tail <= 0
// takes sim.DefaultLogTail).
func (m *Manager) MigrationLogs(ctx context.Context, mig *sim.Migration, tail int) error {
	book := m.cfg.Logs
	if book == nil {
		return nil
	}
	if tail <= 0 {
		tail = sim.DefaultLogTail
	}
	logs := &sim.MigrationLogs{From: mig.StartedAt.Add(-sim.LogLead), Until: m.now()}
	if mig.EndedAt != nil {
		logs.Until = mig.EndedAt.Add(sim.LogTrail)
	}
	logs.Lines = []sim.MigrationLogLine{}
	// The tails are the evidence of what went wrong: for a migration that
	// did not complete, and for one that completed with a seam that broke
	// a promise (its judgement is fail).
	failed := mig.State == sim.MigrationAborted || mig.State == sim.MigrationFailed ||
		(mig.State.Ended() && mig.Judged().Grade == sim.GradeFail)
	for _, side := range []struct {
		name string
		ep   sim.MigrationEndpoint
	}{{"source", mig.Source}, {"target", mig.Target}} {
		if side.ep.Instance == "" {
			continue
		}
		page, err := book.Read(ctx, sim.LogQuery{Instance: side.ep.Instance, Since: logs.From, Until: logs.Until, Tail: sim.MaxMigrationLogLines})
		if err != nil {
			return fmt.Errorf("logs of migration %s: %w", mig.ID, err)
		}
		logs.Omitted += int(page.Matched) - len(page.Lines)
		for _, l := range page.Lines {
			logs.Lines = append(logs.Lines, sim.MigrationLogLine{Side: side.name, LogLine: l})
		}
		if failed {
			tp, err := book.Read(ctx, sim.LogQuery{Instance: side.ep.Instance, Tail: tail})
			if err != nil {
				return fmt.Errorf("logs of migration %s: %w", mig.ID, err)
			}
			logs.Tails = append(logs.Tails, sim.LogTail{Side: side.name, Instance: side.ep.Instance, Lines: tp.Lines, Lost: tp.Lost})
		}
	}
	slices.SortStableFunc(logs.Lines, func(a, b sim.MigrationLogLine) int { return a.At.Compare(b.At) })
	mig.Logs = logs
	return nil
}
