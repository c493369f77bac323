package app

import (
	"sync"
	"sync/atomic"

	"github.com/normsim/normsim/sim"
	"github.com/normsim/normsim/sim/logcap"
)

// logForward is the runtimes' log sink: it hands lines to the capture once
// the store it writes to is open. A line that comes while there is none
// (before a launch is possible, or after Close) is counted, not kept.
type logForward struct {
	mu      sync.RWMutex
	capture *logcap.Capture
	lost    atomic.Int64
}

func (f *logForward) set(c *logcap.Capture) {
	f.mu.Lock()
	f.capture = c
	f.mu.Unlock()
}

// current is the capture lines go to, nil while there is none.
func (f *logForward) current() *logcap.Capture {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.capture
}

// CaptureLog implements sim.LogSink.
func (f *logForward) CaptureLog(l sim.LogLine) {
	c := f.current()
	if c == nil {
		f.lost.Add(1)
		return
	}
	c.CaptureLog(l)
}

// SkipLogs implements sim.LogSkipper.
func (f *logForward) SkipLogs(l sim.LogLine, n int64) {
	c := f.current()
	if c == nil {
		f.lost.Add(n)
		return
	}
	c.SkipLogs(l, n)
}
