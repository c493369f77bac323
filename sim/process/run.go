package process

import (
	"os"
	"strconv"
	"strings"
	"sync"

	"github.com/normsim/normsim/sim"
)

// RunLabel is this process's sim.LabelRun value: host, pid, when the
// process started, the PID namespace it sees pids in and the machine's
// boot, where the system tells them
// ("<host>/<pid>/<start>/<pidns>/<boot>"). It does not change while the
// process runs, so /proc is read for it once.
var RunLabel = sync.OnceValue(func() string {
	host, _ := os.Hostname()
	pid := os.Getpid()
	return host + "/" + strconv.Itoa(pid) + "/" + startMark(pid) + "/" + pidNamespace() + "/" + bootID()
})

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

// bootID names this boot of this machine, "" where the system does not
// say. It tells machines apart where nothing else does: every machine's
// first PID namespace has the same inode, and two may share a host name
// and one Docker engine (DOCKER_HOST).
func bootID() string {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// JudgeRun says what this process can prove of the normsim a
// sim.LabelRun value names. It is gone when it ran on this machine, in
// this boot, in the PID namespace this process sees pids in, and its pid
// has no process now, one that started at another time (the pid was
// given to someone else), or one that ended and waits for its parent to
// reap it (a zombie: a harness that kills before it waits). A run of
// another machine or boot, of another PID namespace (a normsim in a
// container beside one on the host: under host networking they share the
// host name, and the other's pids are not visible here), or with a label
// that does not say all of that, is unjudged: nothing of it may be
// removed. This process's own run is
// alive.
func JudgeRun(run string) sim.RunVerdict {
	parts := strings.Split(run, "/")
	if len(parts) != 5 {
		return sim.RunUnjudged // an older label, without namespace and boot, proves nothing
	}
	host, pidText, started, ns, boot := parts[0], parts[1], parts[2], parts[3], parts[4]
	pid, err := strconv.Atoi(pidText)
	if err != nil || pid <= 1 || started == "" {
		return sim.RunUnjudged
	}
	own, _ := os.Hostname()
	if own != host || ns == "" || ns != pidNamespace() || boot == "" || boot != bootID() {
		return sim.RunUnjudged
	}
	if pid == os.Getpid() {
		return sim.RunAlive
	}
	now := startMark(pid)
	if now == "" {
		// No process with that pid (or a system that cannot say when one
		// started: then only a missing /proc entry is proof, on Linux).
		if _, err := os.Stat("/proc/" + pidText); os.IsNotExist(err) {
			return sim.RunGone
		}
		return sim.RunUnjudged
	}
	if now != started || isZombie(pid) {
		return sim.RunGone // someone else's pid, or one that ended and waits to be reaped
	}
	return sim.RunAlive
}
