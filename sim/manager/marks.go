package manager

// The point-of-no-return marks (sim.NoReturnMarks) let the next start roll
// back what a killed normsim left before that point. A mark that cannot be
// written costs only that: the migration is recovered as if unmarked
// (failed, nothing rolled back), and the loss is logged and counted.

// markBegun marks migration id begun.
func (m *Manager) markBegun(id string) {
	if m.marks == nil {
		return
	}
	if err := m.marks.MarkBegun(id); err != nil {
		m.marksLost.Add(1)
		m.log.Warn("could not mark a migration begun: if normsim is killed while it runs, the next start will not roll it back", "migration", id, "err", err)
	}
}

// markPassed marks migration id past its point of no return; it must be
// called before what crosses the point (cutover-apply, the source's stop)
// is written.
func (m *Manager) markPassed(id string) {
	if m.marks == nil {
		return
	}
	if err := m.marks.MarkPassed(id); err != nil {
		m.marksLost.Add(1)
		m.log.Error("could not mark a migration past its point of no return: if normsim is killed before it ends, the next start may roll it back wrongly; stop that normsim with SIGTERM, not SIGKILL",
			"migration", id, "err", err)
	}
}

// markEnded lets migration id's mark go.
func (m *Manager) markEnded(id string) {
	if m.marks != nil {
		m.marks.MarkEnded(id)
	}
}

// MarksLost is how many point-of-no-return marks could not be written.
func (m *Manager) MarksLost() int64 { return m.marksLost.Load() }
