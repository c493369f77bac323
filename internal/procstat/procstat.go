// Package procstat reads what Linux says about a process's memory and threads
// in /proc/PID/status: the sim reports its own, and the bench the sim's.
package procstat

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
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
