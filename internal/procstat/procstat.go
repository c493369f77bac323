package bench

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// ProcStatus is what /proc/PID/status says about a process's memory and
// threads (Linux only).
type ProcStatus struct {
	// VmHWM is the peak resident set size, VmRSS the current one, in bytes.
	VmHWM, VmRSS int64
	Threads      int
}

// ReadProcStatus reads /proc/PID/status; pid 0 means this process.
func ReadProcStatus(pid int) (ProcStatus, error) {
	path := "/proc/self/status"
	if pid > 0 {
		path = "/proc/" + strconv.Itoa(pid) + "/status"
	}
	f, err := os.Open(path)
	if err != nil {
		return ProcStatus{}, fmt.Errorf("read memory figures: %w", err)
	}
	defer f.Close()
	var st ProcStatus
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

// MiB formats bytes as mebibytes.
func MiB(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }
