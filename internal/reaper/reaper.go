//go:build unix && !aix

// Package reaper ends what a normsim started when that normsim dies
// without ending it: killed with SIGKILL, or a test binary that timed out
// or panicked in a goroutine, where no cleanup runs. A reaper is this same
// binary, started on first use in a process group of its own and told
// over a pipe what to watch ("+ID" and "-ID" lines); when the pipe closes
// (normsim is gone, however it went) it ends what is still listed. A
// normsim that ends what it started itself, or keeps it on purpose, takes
// it off the list first, so an orderly exit leaves the reaper nothing to
// do.
//
// Each kind of thing has its own reaper, named by an environment variable
// its package's init hands to Serve: that init runs before anything else
// of the binary, ends what it was told to, and exits.
package reaper

import (
	"bufio"
	"cmp"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"
)

// Reaper is a process's end of the pipe to one reaper.
type Reaper struct {
	env  string
	once sync.Once
	mu   sync.Mutex
	w    *os.File // nil when it could not be started, or broke
	err  error
}

// New returns the reaper that Serve(env, …) runs; nothing starts before
// the first Watch.
func New(env string) *Reaper { return &Reaper{env: env} }

// Watch puts id on the reaper's list, starting the reaper the first time.
// It reports an error once when the reaper cannot be had: what id names
// then outlives a normsim that dies without ending it.
func (r *Reaper) Watch(id string) error {
	r.once.Do(r.start)
	return r.tell('+', id)
}

// Forget takes id off the list: ended, or kept on purpose.
func (r *Reaper) Forget(id string) { r.tell('-', id) }

func (r *Reaper) tell(op byte, id string) error {
	if id == "" || strings.ContainsAny(id, "\n") {
		return fmt.Errorf("reaper: %q cannot be listed", id)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.w == nil {
		if op != '+' {
			return nil
		}
		err := r.err
		r.err = nil // said once
		return err
	}
	if _, err := fmt.Fprintf(r.w, "%c%s\n", op, id); err != nil {
		r.w.Close()
		r.w = nil
		return fmt.Errorf("the reaper is gone: %w", err)
	}
	return nil
}

// start runs the reaper: this binary again, with r.env set, in a process
// group of its own so a Ctrl-C to normsim's group does not end it first.
func (r *Reaper) start() {
	pr, pw, err := os.Pipe()
	if err != nil {
		r.err = err
		return
	}
	defer pr.Close()
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		pw.Close()
		r.err = err
		return
	}
	defer devnull.Close()
	exe := "/proc/self/exe" // still there if the binary was deleted (go run's)
	if _, err := os.Stat(exe); err != nil {
		if exe, err = os.Executable(); err != nil {
			pw.Close()
			r.err = err
			return
		}
	}
	// Its output goes nowhere: a test binary's reaper must not hold the
	// pipe `go test` reads the binary's output from.
	p, err := os.StartProcess(exe, []string{os.Args[0]}, &os.ProcAttr{
		Env:   append(os.Environ(), r.env+"=1"),
		Files: []*os.File{pr, devnull, devnull},
		Sys:   &syscall.SysProcAttr{Setpgid: true},
	})
	if err != nil {
		pw.Close()
		r.err = fmt.Errorf("start the reaper: %w", err)
		return
	}
	p.Release() // it outlives us; it exits only once we are gone
	r.w = pw
}

// Serve is the reaper itself, when this process was started as env's
// (call it from an init): it reads the list until the pipe closes, hands
// end what is still listed, in the order it was listed, and exits. In
// any other process it returns at once.
func Serve(env string, end func(ids []string)) {
	if os.Getenv(env) != "1" {
		return
	}
	end(read(os.Stdin))
	os.Exit(0)
}

// read follows "+ID" and "-ID" lines until in ends: what is listed then,
// in the order it was listed. A map, so that a run of 10,000 jobs does not
// scan the list for each one it takes off.
func read(in *os.File) []string {
	listed := map[string]int{} // ID → when it was listed
	n := 0
	sc := bufio.NewScanner(in)
	for sc.Scan() {
		line := sc.Text()
		if len(line) < 2 {
			continue
		}
		switch id := line[1:]; line[0] {
		case '+':
			if _, ok := listed[id]; !ok {
				listed[id] = n
				n++
			}
		case '-':
			delete(listed, id)
		}
	}
	ids := slices.Collect(maps.Keys(listed))
	slices.SortFunc(ids, func(a, b string) int { return cmp.Compare(listed[a], listed[b]) })
	return ids
}
