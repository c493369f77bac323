package process

import (
	"os"
	"strconv"
	"strings"
)

// RunLabel is this process's sim.LabelRun value: host, pid and, where the
// system tells it, when the process started ("<host>/<pid>/<start>").
func RunLabel() string {
	host, _ := os.Hostname()
	pid := os.Getpid()
	return host + "/" + strconv.Itoa(pid) + "/" + startMark(pid)
}

// RunGone reports whether the normsim a sim.LabelRun value names is known
// to be gone: it ran on this host, and its pid has no process now, or one
// that started at another time (the pid was given to someone else). A run
// of another host, this process's own, or one that cannot be judged is not
// gone: nothing of it may be removed.
func RunGone(run string) bool {
	host, rest, ok := strings.Cut(run, "/")
	if !ok {
		return false
	}
	pidText, started, ok := strings.Cut(rest, "/")
	pid, err := strconv.Atoi(pidText)
	if !ok || err != nil || pid <= 1 {
		return false
	}
	if own, _ := os.Hostname(); own != host || pid == os.Getpid() {
		return false
	}
	now := startMark(pid)
	if now == "" {
		// No process with that pid (or a system that cannot say when one
		// started: then only a missing /proc entry is proof, on Linux).
		_, err := os.Stat("/proc/" + pidText)
		return os.IsNotExist(err) && started != ""
	}
	return started != "" && now != started
}
