package cli

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/normsim/normsim/sim"
)

// The external runtime starts nothing: the developer runs the job, often
// under a debugger, with the env normsim shows. These helpers are what the
// CLI prints for that loop: the env in the forms a shell and the two
// common Go IDEs take, and while a migration waits for an external target,
// how long it still waits.

// printExternalEnv prints each service's launch env as shell exports, a VS
// Code launch configuration and a GoLand environment line.
func printExternalEnv(w io.Writer, name string, env map[string]map[string]string) {
	bw := bufio.NewWriter(w)
	defer bw.Flush()
	services := slices.Sorted(maps.Keys(env))
	for _, s := range services {
		vars := env[s]
		keys := slices.Sorted(maps.Keys(vars))
		fmt.Fprintf(bw, "\n# service %s: shell\n", s)
		for _, k := range keys {
			fmt.Fprintf(bw, "export %s=%s\n", k, shellQuote(vars[k]))
		}
		cfg := struct {
			Name    string            `json:"name"`
			Type    string            `json:"type"`
			Request string            `json:"request"`
			Mode    string            `json:"mode"`
			Program string            `json:"program"`
			Env     map[string]string `json:"env"`
		}{name + " (" + s + ")", "go", "launch", "debug", "${workspaceFolder}", vars}
		b, _ := json.MarshalIndent(cfg, "", "  ")
		fmt.Fprintf(bw, "\n# service %s: VS Code, one of \"configurations\" in .vscode/launch.json\n# (for Python or Node keep \"env\" and set your debugger's type and program)\n%s\n", s, b)
		pairs := make([]string, len(keys))
		for i, k := range keys {
			pairs[i] = k + "=" + vars[k]
		}
		fmt.Fprintf(bw, "\n# service %s: GoLand, Run/Debug Configuration > Environment variables\n%s\n", s, strings.Join(pairs, ";"))
	}
}

// shellQuote quotes v for a POSIX shell, in single quotes unless it needs
// none.
func shellQuote(v string) string {
	if v != "" && strings.IndexFunc(v, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./:=@,+", r))
	}) < 0 {
		return v
	}
	return "'" + strings.ReplaceAll(v, "'", `'\''`) + "'"
}

// externalWatch follows a migration whose target runs on the external
// runtime: it prints the target's env once the target is placed, and a
// countdown of the targetStart timeout until the target's job connects.
type externalWatch struct {
	out io.Writer
	// live: out is a terminal, so the countdown rewrites one line each
	// second; otherwise a line every 15 s keeps logs short.
	live bool

	envShown  bool
	seen      int // events already scanned for the target's placement and hello
	placedAt  time.Time
	connected bool
	shownLeft time.Duration
	onLine    bool // a live countdown is on the current line
}

func newExternalWatch(out io.Writer) *externalWatch {
	return &externalWatch{out: out, live: isTerminal(out), shownLeft: -1}
}

// clear wipes a live countdown line before other output.
func (w *externalWatch) clear() {
	if w.onLine {
		fmt.Fprint(w.out, "\r\033[K")
		w.onLine = false
	}
}

// showEnv prints the target's env the first time the migration shows it,
// unless it has ended by then, and says how long normsim waits for the
// job. It reports whether the env's moment has come.
func (w *externalWatch) showEnv(mig *sim.Migration) bool {
	if w.envShown || mig.Target.Runtime != sim.RuntimeExternal || len(mig.Target.Env) == 0 {
		return w.envShown
	}
	w.envShown = true
	if mig.State.Ended() {
		// First seen ended (an abort --wait): the target is removed, and
		// a job started with its env would get 4401.
		return true
	}
	w.clear()
	fmt.Fprintf(w.out, "\nThe target %s on node %s runs on the external runtime: start its job yourself with this env.\n",
		mig.Target.Instance, mig.Target.Node)
	printExternalEnv(w.out, "normsim "+mig.Target.Instance, mig.Target.Env)
	t := mig.Timeouts
	fmt.Fprintf(w.out, "\nnormsim waits up to %s (targetStart) for it to connect", waitText(t.TargetStart.D()))
	if mig.Strategy == sim.Handover {
		fmt.Fprintf(w.out, ", then %s (targetReady) for its target-ready", waitText(t.TargetReady.D()))
	}
	fmt.Fprintf(w.out, ";\nlonger: migrate --timeout targetStart=10m, or normsim up --timeouts targetStart=10m.\n\n")
	return true
}

// tick follows the migration after each poll: the env once the target is
// placed, then the countdown until the target connects or the migration
// ends.
func (w *externalWatch) tick(mig *sim.Migration, now time.Time) {
	if !w.showEnv(mig) {
		return
	}
	if w.placedAt.IsZero() || !w.connected {
		// Only events not seen yet: this runs on every poll. Matched by
		// kind, never by their text, which is for people.
		for _, ev := range mig.Events[min(w.seen, len(mig.Events)):] {
			if ev.Side != "target" {
				continue
			}
			if w.placedAt.IsZero() && ev.Kind == sim.TimelineTargetCreated {
				w.placedAt = ev.At
			}
			if ev.Kind == sim.TimelineConnected {
				w.connected = true
			}
		}
	}
	w.seen = len(mig.Events)
	if w.placedAt.IsZero() || w.connected || mig.State.Ended() {
		w.clear()
		return
	}
	left := mig.Timeouts.TargetStart.D() - now.Sub(w.placedAt)
	if left < 0 {
		left = 0
	}
	left = (left + time.Second - 1).Truncate(time.Second) // 59.2s left reads 1m, not 59s
	step := time.Second
	if !w.live {
		step = 15 * time.Second
	}
	if w.shownLeft >= 0 && w.shownLeft-left < step && left > 0 {
		return
	}
	w.shownLeft = left
	msg := fmt.Sprintf("  waiting for your target job to connect: %s left", waitText(left))
	if w.live {
		fmt.Fprintf(w.out, "\r\033[K%s", msg)
		w.onLine = true
		return
	}
	fmt.Fprintln(w.out, msg)
}

// sourceEnded is said after a migration that stopped an external source:
// the process runs on until its developer ends it.
func sourceEnded(w io.Writer, mig *sim.Migration) {
	if mig.Source.Runtime != sim.RuntimeExternal {
		return
	}
	for _, ev := range mig.Events {
		if ev.Side == "source" && ev.Kind == sim.TimelineSourceStopped {
			fmt.Fprintf(w, "\nYour source job (instance %s on node %s) was stopped: normsim closed its socket with 1000\n"+
				"(the real worker would have sent it SIGTERM). End its process now.\n", mig.Source.Instance, mig.Source.Node)
			return
		}
	}
}

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// waitText is a whole-second wait as people write it: "1m", "1m30s", "45s".
func waitText(d time.Duration) string {
	s := d.Round(time.Second).String() // 1m0s, 10s, 1h0m0s
	if strings.HasSuffix(s, "m0s") {
		s = s[:len(s)-2]
	}
	if strings.HasSuffix(s, "h0m") {
		s = s[:len(s)-2]
	}
	return s
}
