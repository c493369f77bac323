//go:build unix && !aix

package process

import (
	"context"
	"fmt"
	"os"
	"syscall"
	"time"
)

// supported: the process runtime works on this system.
const supported = true

// exitPoll is how often pollExit asks whether a process has exited, where
// the platform gives no way to be woken.
const exitPoll = 20 * time.Millisecond

// startProcess starts path as the leader of a new process group with stdin
// from /dev/null and stdout and stderr to out. It returns the pid and, where
// the kernel provides one, a pidfd (else -1) that the caller must close.
func startProcess(path string, argv []string, dir string, env []string, stdout, stderr *os.File) (pid, pidfd int, err error) {
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		return 0, -1, err
	}
	defer devnull.Close()
	pidfd = -1
	p, err := os.StartProcess(path, argv, &os.ProcAttr{
		Dir:   dir,
		Env:   env,
		Files: []*os.File{devnull, stdout, stderr},
		Sys:   sysProcAttr(&pidfd),
	})
	if err != nil {
		return 0, -1, err
	}
	pid = p.Pid
	// The exit watcher reaps the process itself (so it can stop watching
	// when the runtime is closed with keep); os has nothing left to do.
	_ = p.Release()
	return pid, pidfd, nil
}

// terminateGroup sends SIGTERM to the process group pgid.
func terminateGroup(pgid int) error { return signalGroup(pgid, syscall.SIGTERM) }

// killGroup sends SIGKILL to the process group pgid.
func killGroup(pgid int) error { return signalGroup(pgid, syscall.SIGKILL) }

func signalGroup(pgid int, sig syscall.Signal) error {
	// kill(-1) would signal every process we may signal; never let a bad
	// pid get there.
	if pgid <= 1 {
		return fmt.Errorf("signal process group %d: not a process group this runtime started", pgid)
	}
	if err := syscall.Kill(-pgid, sig); err != nil && err != syscall.ESRCH {
		return fmt.Errorf("signal process group %d: %w", pgid, err)
	}
	return nil
}

// ownGroup is normsim's own process group (a variable for the tests).
var ownGroup = syscall.Getpgrp

// anyInGroup reports whether kill can still find a member of group pgid,
// zombies included.
func anyInGroup(pgid int) bool {
	if pgid <= 1 {
		return false
	}
	return syscall.Kill(-pgid, 0) != syscall.ESRCH
}

// pollExit waits for pid to exit by asking every exitPoll. beforeReap runs
// once the process has exited, just after it is reaped: without a pidfd the
// exit cannot be seen without reaping.
func pollExit(ctx context.Context, pid int, beforeReap func()) (exitInfo, bool) {
	t := time.NewTicker(exitPoll)
	defer t.Stop()
	for {
		var ws syscall.WaitStatus
		wpid, err := syscall.Wait4(pid, &ws, syscall.WNOHANG, nil)
		switch {
		case err == syscall.EINTR:
			continue
		case err != nil:
			beforeReap()
			return unknownExit(err), true
		case wpid == pid:
			beforeReap()
			return decodeWait(ws), true
		}
		select {
		case <-ctx.Done():
			return exitInfo{}, false
		case <-t.C:
		}
	}
}

// reap collects the exit status of pid, which has exited.
func reap(pid int) exitInfo {
	for {
		var ws syscall.WaitStatus
		_, err := syscall.Wait4(pid, &ws, 0, nil)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return unknownExit(err)
		}
		return decodeWait(ws)
	}
}

// decodeWait turns a wait status into the exit code a shell would report:
// 128+n for death by signal n.
func decodeWait(ws syscall.WaitStatus) exitInfo {
	switch {
	case ws.Exited():
		return exitInfo{code: ws.ExitStatus(), detail: fmt.Sprintf("exited with code %d", ws.ExitStatus())}
	case ws.Signaled():
		n := int(ws.Signal())
		return exitInfo{code: 128 + n, signal: n, detail: fmt.Sprintf("killed by signal %d", n)}
	default:
		return exitInfo{code: -1, detail: fmt.Sprintf("exited with wait status %#x", int(ws))}
	}
}
