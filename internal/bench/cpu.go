package bench

import (
	"fmt"
	"runtime"
	"time"

	"github.com/normsim/normsim/internal/procstat"
)

// CPUCost is what one step of a run (a job connected, a handover) cost in
// CPU time, on average over a phase of the run. On a machine whose cores
// are all busy, throughput is what this allows, whatever waits in queues:
// the figure to compare between runs on a noisy machine.
type CPUCost struct {
	// Sim is the sim's process (zero when it runs in this one, or is a
	// --server whose process is unknown here, and so left out); Bench is
	// this process's: the load generator, and with --sim in-process the
	// sim too.
	Sim, Bench time.Duration
	// Machine is every core's busy time: both processes, the kernel's
	// interrupt work for their sockets (loopback TCP), and whatever else
	// the machine ran meanwhile.
	Machine time.Duration
	// Cores is the machine's core count; zero when /proc could not say
	// (not Linux).
	Cores int
}

// Ceiling is how many steps a second this cost allows with every core
// busy: a throughput that needs more needs a cheaper step.
func (c CPUCost) Ceiling() float64 {
	if c.Machine <= 0 {
		return 0
	}
	return float64(c.Cores) / c.Machine.Seconds()
}

// String is one line for the report.
func (c CPUCost) String() string {
	switch {
	case c.Cores == 0:
		return "unknown (no /proc here)"
	case c.Machine <= 0:
		return "under /proc's 10 ms tick for the whole phase: too short to measure"
	}
	procs := fmt.Sprintf("bench %s", ms(c.Bench))
	if c.Sim > 0 {
		procs = fmt.Sprintf("sim %s, bench %s", ms(c.Sim), ms(c.Bench))
	}
	return fmt.Sprintf("%s, machine %s (%d cores all busy: at most %.0f/s)", procs, ms(c.Machine), c.Cores, c.Ceiling())
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", Ms(d)) }

// cpuMark is the CPU time used so far by the sim, this process and the
// machine; two marks bound a phase.
type cpuMark struct {
	sim, bench time.Duration
	machine    time.Duration
	// simOK and ok say the sim's and the machine's figures were read (a
	// sim just started can have used no tick yet).
	simOK, ok bool
}

// markCPU reads the CPU time used so far; simPID 0 leaves the sim out.
// What /proc could not give is marked unread (simOK, ok), and costPer
// leaves it out rather than count a zero.
func markCPU(simPID int) cpuMark {
	var m cpuMark
	m.bench, _ = procstat.CPU(0)
	if simPID > 0 {
		var err error
		m.sim, err = procstat.CPU(simPID)
		m.simOK = err == nil
	}
	if mc, err := procstat.ReadMachine(); err == nil {
		m.machine, m.ok = mc.Busy, true
	}
	return m
}

// costPer is the CPU time from start to m, per each of n steps.
func (m cpuMark) costPer(start cpuMark, n int) CPUCost {
	if n <= 0 || !m.ok || !start.ok {
		return CPUCost{}
	}
	c := CPUCost{Bench: (m.bench - start.bench) / time.Duration(n), Machine: (m.machine - start.machine) / time.Duration(n), Cores: runtime.NumCPU()}
	if m.simOK && start.simOK {
		c.Sim = (m.sim - start.sim) / time.Duration(n)
	}
	return c
}
