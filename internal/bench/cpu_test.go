package bench

import (
	"strings"
	"testing"
	"time"
)

func TestCPUCostPerStep(t *testing.T) {
	// A sim just started may not have used a 10 ms tick yet: its zero is
	// a figure.
	start := cpuMark{sim: 0, bench: 4 * time.Second, machine: 100 * time.Second, simOK: true, ok: true}
	end := cpuMark{sim: 2 * time.Second, bench: 5 * time.Second, machine: 103 * time.Second, simOK: true, ok: true}
	c := end.costPer(start, 1000)
	if c.Sim != 2*time.Millisecond || c.Bench != time.Millisecond || c.Machine != 3*time.Millisecond || c.Cores == 0 {
		t.Fatalf("cost %+v, want sim 2 ms, bench 1 ms, machine 3 ms a step", c)
	}
	c.Cores = 2
	if got := c.Ceiling(); got < 666 || got > 667 {
		t.Errorf("ceiling %.1f/s, want 2 cores / 3 ms = 666.7/s", got)
	}
	if s := c.String(); !strings.Contains(s, "sim 2.00 ms, bench 1.00 ms, machine 3.00 ms") || !strings.Contains(s, "at most 667/s") {
		t.Errorf("String() = %q", s)
	}

	// The sim's figure is left out where its process is unknown (zero).
	inProcess := cpuMark{bench: 7 * time.Second, machine: 105 * time.Second, ok: true}.costPer(cpuMark{bench: 5 * time.Second, machine: 101 * time.Second, ok: true}, 1000)
	if inProcess.Sim != 0 || !strings.HasPrefix(inProcess.String(), "bench 2.00 ms, machine 4.00 ms") {
		t.Errorf("in-process cost %+v: %q", inProcess, inProcess)
	}
	if c := end.costPer(cpuMark{}, 1000); c.Cores != 0 || c.String() != "unknown (no /proc here)" {
		t.Errorf("without /proc: %+v %q", c, c)
	}
	if c := start.costPer(start, 1000); c.Cores == 0 || c.Ceiling() != 0 || !strings.Contains(c.String(), "too short") {
		t.Errorf("a phase under a tick: %+v %q", c, c)
	}
}
