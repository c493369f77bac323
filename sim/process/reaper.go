//go:build unix && !aix

package process

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// The reaper ends the jobs a normsim started when that normsim dies
// without stopping them: killed with SIGKILL, or a test binary that timed
// out or panicked in a goroutine, where no cleanup runs. It is this same
// binary, started once per process in a process group of its own, told
// over a pipe which process groups to watch; when the pipe closes (normsim
// is gone, however it went) it sends SIGTERM to the groups still listed,
// and SIGKILL to what is left after reaperGrace. A normsim that stops its
// jobs itself, or keeps them on purpose (Close with keep), takes them off
// the list first, so an orderly exit leaves it nothing to do. A container
// dies with its engine's record; a host process has only this.
const (
	reaperEnv   = "NORMSIM_INTERNAL_REAPER"
	reaperGrace = 2 * time.Second
)

func init() {
	if os.Getenv(reaperEnv) == "1" {
		runReaper(os.Stdin)
		os.Exit(0)
	}
}

// runReaper reads "+PGID" and "-PGID" lines until the pipe closes, then
// ends the groups still listed.
func runReaper(in *os.File) {
	groups := map[int]bool{}
	sc := bufio.NewScanner(in)
	for sc.Scan() {
		line := sc.Text()
		if len(line) < 2 {
			continue
		}
		g, err := strconv.Atoi(line[1:])
		if err != nil || g <= 1 { // kill(-1) would signal everything
			continue
		}
		switch line[0] {
		case '+':
			groups[g] = true
		case '-':
			delete(groups, g)
		}
	}
	for g := range groups {
		syscall.Kill(-g, syscall.SIGTERM)
	}
	for deadline := time.Now().Add(reaperGrace); len(groups) > 0 && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		for g := range groups {
			if syscall.Kill(-g, 0) == syscall.ESRCH {
				delete(groups, g)
			}
		}
	}
	for g := range groups {
		syscall.Kill(-g, syscall.SIGKILL)
	}
}

// reaper is this process's end of the pipe to its reaper.
var reaper struct {
	once sync.Once
	mu   sync.Mutex
	w    *os.File // nil when it could not be started, or broke
	err  error
}

// startReaper starts the reaper, once.
func startReaper() {
	r, w, err := os.Pipe()
	if err != nil {
		reaper.err = err
		return
	}
	defer r.Close()
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		w.Close()
		reaper.err = err
		return
	}
	defer devnull.Close()
	exe := "/proc/self/exe" // still there if the binary was deleted (go run's)
	if _, err := os.Stat(exe); err != nil {
		if exe, err = os.Executable(); err != nil {
			w.Close()
			reaper.err = err
			return
		}
	}
	// Its output goes nowhere: a test binary's reaper must not hold the
	// pipe `go test` reads the binary's output from.
	p, err := os.StartProcess(exe, []string{os.Args[0]}, &os.ProcAttr{
		Env:   append(os.Environ(), reaperEnv+"=1"),
		Files: []*os.File{r, devnull, devnull},
		Sys:   &syscall.SysProcAttr{Setpgid: true},
	})
	if err != nil {
		w.Close()
		reaper.err = fmt.Errorf("start the reaper: %w", err)
		return
	}
	p.Release() // it outlives us; it exits only once we are gone
	reaper.w = w
}

// reapOnDeath puts a job's process group on the reaper's list. It reports
// an error once, when the reaper cannot be had: the job then outlives a
// normsim that dies without stopping it.
func reapOnDeath(pgid int) error {
	reaper.once.Do(startReaper)
	return tellReaper('+', pgid)
}

// forgetOnDeath takes a group off the list: stopped, exited, or kept.
func forgetOnDeath(pgid int) { tellReaper('-', pgid) }

func tellReaper(op byte, pgid int) error {
	reaper.mu.Lock()
	defer reaper.mu.Unlock()
	if reaper.w == nil {
		if op != '+' {
			return nil
		}
		err := reaper.err
		reaper.err = nil // said once
		return err
	}
	if _, err := fmt.Fprintf(reaper.w, "%c%d\n", op, pgid); err != nil {
		reaper.w.Close()
		reaper.w = nil
		return fmt.Errorf("the reaper is gone: %w", err)
	}
	return nil
}
