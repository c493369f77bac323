package process

import (
	"bytes"
	"context"
	"io"
	"os"
	"strconv"
	"sync"
	"syscall"
	"time"
	"unsafe"
)

func sysProcAttr(pidfd *int) *syscall.SysProcAttr {
	// PidFD asks clone for a pidfd; a kernel without CLONE_PIDFD (before
	// 5.2) leaves it at -1 and the watcher falls back to polling.
	return &syscall.SysProcAttr{Setpgid: true, PidFD: pidfd}
}

// waitExit waits until pid exits and reaps it, or gives up when ctx ends
// (false). beforeReap runs once the process has exited but before it is
// reaped, while its pid cannot be reused, so it may still signal the
// process group safely. With a pidfd the wait sleeps in the netpoller and
// wakes as soon as the process exits.
func waitExit(ctx context.Context, pid, pidfd int, beforeReap func()) (exitInfo, bool) {
	if pidfd >= 0 {
		if waitPidfd(ctx, pid, pidfd) {
			beforeReap()
			return reap(pid), true
		}
		if ctx.Err() != nil {
			return exitInfo{}, false
		}
	}
	return pollExit(ctx, pid, beforeReap)
}

// waitPidfd reports whether pid exited; false if ctx ended first or the
// pidfd cannot be waited on. It closes pidfd.
func waitPidfd(ctx context.Context, pid, pidfd int) bool {
	if err := syscall.SetNonblock(pidfd, true); err != nil {
		syscall.Close(pidfd)
		return false
	}
	f := os.NewFile(uintptr(pidfd), "pidfd")
	defer f.Close()
	rc, err := f.SyscallConn()
	if err != nil {
		return false
	}
	stop := context.AfterFunc(ctx, func() { _ = f.SetReadDeadline(time.Unix(1, 0)) })
	defer stop()
	exited := false
	// The poller resets readiness before calling the function, so the
	// function must look at the process itself, not trust an earlier wake.
	_ = rc.Read(func(uintptr) bool {
		exited = hasExited(pid)
		return exited
	})
	return exited
}

// hasExited reports whether pid is waitable, without reaping it
// (waitid with WNOWAIT).
func hasExited(pid int) bool {
	const pPID = 1
	var info [16]uint64 // siginfo_t: 128 bytes
	for {
		_, _, errno := syscall.Syscall6(syscall.SYS_WAITID, pPID, uintptr(pid), uintptr(unsafe.Pointer(&info)),
			syscall.WEXITED|syscall.WNOHANG|syscall.WNOWAIT, 0, 0)
		if errno == syscall.EINTR {
			continue
		}
		if errno != 0 {
			return true // not our child any more: let reap report it
		}
		// si_signo is the first int of siginfo_t on every architecture;
		// the kernel leaves it 0 when no child is waitable.
		return *(*int32)(unsafe.Pointer(&info)) != 0
	}
}

// groupAlive reports whether a live (non-zombie) process is left in group
// pgid. kill(2) alone also finds zombies, which no signal moves: where
// orphans are not reaped (a container whose PID 1 is not an init), a killed
// group would look alive for ever, so /proc settles it.
func groupAlive(pgid int) bool {
	if !anyInGroup(pgid) {
		return false
	}
	alive := false
	ok := eachInGroup(pgid, func(pid string, state byte) bool {
		alive = state != 'Z' && state != 'X'
		return !alive
	})
	return alive || !ok
}

// groupStopped reports whether every live process of group pgid, every
// thread of it, has stopped (state T). After kill(SIGSTOP) returns, a
// multi-threaded process can run on until one of its threads gets a CPU to
// start the group stop: under load, long enough to read a frame and answer.
func groupStopped(pgid int) bool {
	stopped := true
	ok := eachInGroup(pgid, func(pid string, state byte) bool {
		if state == 'Z' || state == 'X' {
			return true
		}
		tasks, err := os.ReadDir("/proc/" + pid + "/task")
		if err != nil {
			stopped = state == 'T'
			return stopped
		}
		for _, t := range tasks {
			if st, ok := procState("/proc/" + pid + "/task/" + t.Name() + "/stat"); ok && st != 'T' && st != 'Z' && st != 'X' {
				stopped = false
				return false
			}
		}
		return true
	})
	return ok && stopped
}

// eachInGroup calls fn with the pid and state of each process in group
// pgid until fn returns false. It reports false when /proc cannot be read.
func eachInGroup(pgid int, fn func(pid string, state byte) bool) bool {
	want := []byte(strconv.Itoa(pgid))
	return eachProc(func(pid string) bool {
		f, ok := procStat(pid)
		if !ok || len(f) < 3 || !bytes.Equal(f[2], want) {
			return true
		}
		return fn(pid, f[0][0])
	})
}

// eachProc calls fn with each pid in /proc until fn returns false. It
// reports false when /proc cannot be read.
func eachProc(fn func(pid string) bool) bool {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return false
	}
	for _, e := range ents {
		name := e.Name()
		if name == "" || name[0] < '0' || name[0] > '9' {
			continue
		}
		if !fn(name) {
			break
		}
	}
	return true
}

// foreignPIDNamespace says whether pid runs in another PID namespace than
// normsim's: a container's process (the Docker runtime's jobs carry the
// owner's labels too), never the process runtime's, which starts its jobs
// beside normsim. Found by their labels from the host's side, they were
// counted twice.
func foreignPIDNamespace(pid string) bool {
	own := ownPIDNamespace()
	if own == "" {
		return false
	}
	ns, err := os.Readlink("/proc/" + pid + "/ns/pid")
	return err == nil && ns != own
}

// ownPIDNamespace is normsim's PID namespace ("pid:[4026531836]"), read
// once: a process never changes its own. "" where it cannot be read.
var ownPIDNamespace = sync.OnceValue(func() string {
	ns, _ := os.Readlink("/proc/self/ns/pid")
	return ns
})

// procStat is the fields of /proc/PID/stat after "pid (comm)".
func procStat(pid string) ([][]byte, bool) {
	b, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return nil, false
	}
	return statFields(b)
}

// procState is the state letter in a /proc stat file.
func procState(path string) (byte, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	f, ok := statFields(b)
	if !ok || len(f) < 1 {
		return 0, false
	}
	return f[0][0], true
}

// statFields splits a /proc stat line after "pid (comm)": state, ppid,
// pgrp, ... The comm may hold spaces and parentheses.
func statFields(b []byte) ([][]byte, bool) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return nil, false
	}
	f := bytes.Fields(b[i+1:])
	if len(f) == 0 || len(f[0]) == 0 {
		return nil, false
	}
	return f, true
}

// taggedGroups is the process groups of the processes whose environment
// holds key=v for one of values, and also the entry also. A process that
// cannot be read (another user's, or gone) is not ours to find.
func taggedGroups(key string, values []string, also string) []int {
	if len(values) == 0 {
		return nil
	}
	want := make(map[string]bool, len(values))
	for _, v := range values {
		want[key+"="+v] = true
	}
	var groups []int
	eachProc(func(pid string) bool {
		env, err := os.ReadFile("/proc/" + pid + "/environ")
		if err != nil || !environHas(env, want) || !environHas(env, map[string]bool{also: true}) || foreignPIDNamespace(pid) {
			return true
		}
		if f, ok := procStat(pid); ok && len(f) >= 3 {
			if pgid, err := strconv.Atoi(string(f[2])); err == nil && pgid > 1 {
				groups = append(groups, pgid)
			}
		}
		return true
	})
	return groups
}

// ownedProcesses is, for every live process whose environment holds
// also, the value of key in it and its process group: what owner's runs
// have running on this host, found from the host's side.
func ownedProcesses(key, also string) (map[int]string, bool) {
	groups := map[int]string{}
	prefix := []byte(key + "=")
	ok := eachProc(func(pid string) bool {
		env, err := os.ReadFile("/proc/" + pid + "/environ")
		if err != nil || !environHas(env, map[string]bool{also: true}) || foreignPIDNamespace(pid) {
			return true
		}
		f, ok := procStat(pid)
		if !ok || len(f) < 3 || f[0][0] == 'Z' {
			return true // a zombie runs nothing
		}
		pgid, err := strconv.Atoi(string(f[2]))
		if err != nil || pgid <= 1 {
			return true
		}
		for kv := range bytes.SplitSeq(env, []byte{0}) {
			if v, found := bytes.CutPrefix(kv, prefix); found {
				groups[pgid] = string(v)
			}
		}
		return true
	})
	return groups, ok
}

// environHas reports whether a /proc environ (NUL-separated key=value)
// holds one of the wanted entries.
func environHas(env []byte, want map[string]bool) bool {
	for len(env) > 0 {
		kv, rest, _ := bytes.Cut(env, []byte{0})
		if want[string(kv)] {
			return true
		}
		env = rest
	}
	return false
}

// startMark is when process pid started, in clock ticks since boot (field
// 22 of /proc/PID/stat), or "" when it cannot be read. A pid given to a
// later process gets another mark.
func startMark(pid int) string {
	f, ok := procStat(strconv.Itoa(pid))
	if !ok || len(f) < 20 {
		return ""
	}
	return string(f[19])
}

// releaseRead frees the disk the first off bytes of a log file take, which
// have been read, by punching a hole: the writer's offset and every byte
// not yet read stay as they are, so nothing is lost (truncating would lose
// what was written between the last read and the truncation). A file
// system that cannot punch holes keeps the bytes.
// It returns the offset released up to.
// dataFrom is where f's next data at or after off begins, skipping a
// hole (never written, it reads as zeros and holds no line end); end is
// set when only a hole is left up to f's end.
func dataFrom(f *os.File, off int64) (next int64, end bool) {
	const seekData = 3 // SEEK_DATA
	n, err := f.Seek(off, seekData)
	if err == syscall.ENXIO {
		return off, true
	}
	if err != nil || n < off {
		f.Seek(off, io.SeekStart)
		return off, false
	}
	return n, false
}

func releaseRead(f *os.File, off int64) int64 {
	const punchHole = 0x02 | 0x01 // FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE
	_ = syscall.Fallocate(int(f.Fd()), punchHole, 0, off)
	return off
}

// watchWrites wakes the tailer as soon as a file in dir is written, so a
// line is stamped with (within a scheduling delay) the moment it was
// printed, not the next poll. It returns nil where inotify is not to be
// had; the tailer then polls alone. stop ends the watch and waits for it.
func watchWrites(dir string) (wake <-chan struct{}, stop func()) {
	fd, err := syscall.InotifyInit1(syscall.IN_NONBLOCK | syscall.IN_CLOEXEC)
	if err != nil {
		return nil, func() {}
	}
	if _, err := syscall.InotifyAddWatch(fd, dir, syscall.IN_MODIFY); err != nil {
		syscall.Close(fd)
		return nil, func() {}
	}
	f := os.NewFile(uintptr(fd), "inotify "+dir) // non-blocking: read through the poller
	ch := make(chan struct{}, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 4096)
		for {
			if _, err := f.Read(buf); err != nil {
				return // closed by stop
			}
			select {
			case ch <- struct{}{}:
			default:
			}
		}
	}()
	return ch, func() { f.Close(); <-done }
}

// isZombie reports whether pid has ended and only waits to be reaped: it
// holds nothing and never runs again, though its pid and start time
// still show.
func isZombie(pid int) bool {
	st, ok := procState("/proc/" + strconv.Itoa(pid) + "/stat")
	return ok && (st == 'Z' || st == 'X')
}
