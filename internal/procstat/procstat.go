// Package procstat reads what Linux says about a process's memory, threads
// and CPU time in /proc: the sim reports its own, and the bench the sim's
// and the machine's.
package procstat

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// Status is what /proc/PID/status says about a process's memory and
// threads (Linux only).
type Status struct {
	// VmHWM is the peak resident set size, VmRSS the current one, in bytes.
	VmHWM, VmRSS int64
	Threads      int
}

// Read reads /proc/PID/status; pid 0 means this process.
func Read(pid int) (Status, error) {
	path := "/proc/self/status"
	if pid > 0 {
		path = "/proc/" + strconv.Itoa(pid) + "/status"
	}
	f, err := os.Open(path)
	if err != nil {
		return Status{}, fmt.Errorf("read memory figures: %w", err)
	}
	defer f.Close()
	var st Status
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		fields := strings.Fields(v)
		if len(fields) == 0 {
			continue
		}
		n, _ := strconv.ParseInt(fields[0], 10, 64)
		switch k {
		case "VmHWM":
			st.VmHWM = n * 1024
		case "VmRSS":
			st.VmRSS = n * 1024
		case "Threads":
			st.Threads = int(n)
		}
	}
	return st, sc.Err()
}

// clockTick is the unit of /proc's CPU times (USER_HZ): 100 a second on
// every Linux architecture Go builds for.
const clockTick = 10 * time.Millisecond

// CPU is the CPU time, user and system, that process pid has used so far
// (pid 0: this process), in clock ticks of 10 ms.
func CPU(pid int) (time.Duration, error) {
	path := "/proc/self/stat"
	if pid > 0 {
		path = "/proc/" + strconv.Itoa(pid) + "/stat"
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, fmt.Errorf("read CPU time: %w", err)
	}
	return parseStatCPU(string(b))
}

// parseStatCPU reads utime and stime, the 14th and 15th fields of
// /proc/PID/stat. The second field, the command name in parentheses, can
// hold spaces and parentheses itself, so fields count from its last ')'.
func parseStatCPU(stat string) (time.Duration, error) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, fmt.Errorf("read CPU time: no command name in %q", stat)
	}
	fields := strings.Fields(stat[i+1:]) // from the 3rd field, state, on
	if len(fields) < 13 {
		return 0, fmt.Errorf("read CPU time: %d fields after the command name, want at least 13", len(fields))
	}
	var ticks int64
	for _, f := range fields[11:13] {
		n, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("read CPU time: %w", err)
		}
		ticks += n
	}
	return time.Duration(ticks) * clockTick, nil
}

// Machine is what every core of the machine has done since boot, from
// the first line of /proc/stat.
type Machine struct {
	// Busy is the time spent on anything but idling or waiting for I/O:
	// every process's user and system time, the kernel's interrupts, and
	// time a hypervisor took (steal). Total adds the idle time.
	Busy, Total time.Duration
}

// ReadMachine reads /proc/stat.
func ReadMachine() (Machine, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return Machine{}, fmt.Errorf("read the machine's CPU time: %w", err)
	}
	return parseMachine(string(b))
}

// parseMachine reads the "cpu" line of /proc/stat: user nice system idle
// iowait irq softirq steal (guest time is already counted in user).
func parseMachine(stat string) (Machine, error) {
	line, _, _ := strings.Cut(stat, "\n")
	fields := strings.Fields(line)
	if len(fields) < 9 || fields[0] != "cpu" {
		return Machine{}, fmt.Errorf("read the machine's CPU time: unexpected first line %q", line)
	}
	var m Machine
	for i, f := range fields[1:9] {
		n, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return Machine{}, fmt.Errorf("read the machine's CPU time: %w", err)
		}
		d := time.Duration(n) * clockTick
		m.Total += d
		if i != 3 && i != 4 { // idle, iowait
			m.Busy += d
		}
	}
	return m, nil
}
