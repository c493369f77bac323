package process

import (
	"bytes"
	"context"
	"os"
	"strconv"
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
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return true
	}
	want := []byte(strconv.Itoa(pgid))
	for _, e := range ents {
		name := e.Name()
		if name == "" || name[0] < '0' || name[0] > '9' {
			continue
		}
		b, err := os.ReadFile("/proc/" + name + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid pgrp ...; comm may hold spaces and parens.
		i := bytes.LastIndexByte(b, ')')
		if i < 0 {
			continue
		}
		f := bytes.Fields(b[i+1:])
		if len(f) < 3 || string(f[0]) == "Z" || string(f[0]) == "X" {
			continue
		}
		if bytes.Equal(f[2], want) {
			return true
		}
	}
	return false
}
