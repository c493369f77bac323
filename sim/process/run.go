package process

import (
	"os"
	"strconv"
	"strings"
)

// RunLabel is this process's sim.LabelRun value: host, pid, when the
// process started and the PID namespace it sees pids in, where the system
// tells them ("<host>/<pid>/<start>/<pidns>").
func RunLabel() string {
	host, _ := os.Hostname()
	pid := os.Getpid()
	return host + "/" + strconv.Itoa(pid) + "/" + startMark(pid) + "/" + pidNamespace()
}

// pidNamespace names the PID namespace this process sees pids in (the
// inode of /proc/self/ns/pid, "pid:[4026531836]"), "" where the system
// does not say.
func pidNamespace() string {
	ns, err := os.Readlink("/proc/self/ns/pid")
	if err != nil {
		return ""
	}
	return ns
}

// RunGone reports whether the normsim a sim.LabelRun value names is known
// to be gone: it ran on this host, in the PID namespace this process sees
// pids in, and its pid has no process now, or one that started at another
// time (the pid was given to someone else). A run of another host, of
// another PID namespace (a normsim in a container beside one on the host:
// under host networking they share the host name, and the other's pids
// are not visible here), this process's own, or one that cannot be judged
// is not gone: nothing of it may be removed.
func RunGone(run string) bool {
	parts := strings.Split(run, "/")
	if len(parts) != 4 {
		return false // a label without its namespace proves nothing
	}
	host, pidText, started, ns := parts[0], parts[1], parts[2], parts[3]
	pid, err := strconv.Atoi(pidText)
	if err != nil || pid <= 1 {
		return false
	}
	if own, _ := os.Hostname(); own != host || pid == os.Getpid() || ns != pidNamespace() {
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
