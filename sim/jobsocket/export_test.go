package jobsocket

// JobCloseRead reports whether the guard of the instance's current
// connection has read the job's close frame: the moment between that
// read and the read loop's news of it, which tests hold open.
func (l *Listener) JobCloseRead(jobID, role string) bool {
	c := l.current(jobID, role)
	return c != nil && c.jobClose() != nil
}
