package process

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

func TestRunGone(t *testing.T) {
	if startMark(os.Getpid()) == "" {
		t.Skip("no process start times here (/proc): a run cannot be judged gone")
	}
	own := RunLabel()
	host, _ := os.Hostname()
	// A process that ran and ended: its pid is free (or someone else's).
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Skip("no true(1):", err)
	}
	ns := pidNamespace()
	dead := host + "/" + strconv.Itoa(cmd.Process.Pid) + "/1/" + ns
	for _, tt := range []struct {
		run  string
		gone bool
	}{
		{own, false},
		{dead, true},
		{"elsewhere/" + strconv.Itoa(cmd.Process.Pid) + "/1/" + ns, false}, // another host's run is never ours to judge
		{host + "/" + strconv.Itoa(os.Getppid()) + "/" + startMark(os.Getppid()) + "/" + ns, false},
		{host + "/" + strconv.Itoa(os.Getppid()) + "/1/" + ns, true}, // the pid is someone else's now
		// issue 34 item 4: a normsim in another PID namespace (a container
		// under host networking shares the host name) is not ours to
		// judge: its pids are not visible here.
		{host + "/" + strconv.Itoa(cmd.Process.Pid) + "/1/pid:[1]", false},
		{host + "/" + strconv.Itoa(cmd.Process.Pid) + "/1", false}, // a label without its namespace proves nothing
		{"garbage", false},
		{host + "/1/x/" + ns, false},
	} {
		if got := RunGone(tt.run); got != tt.gone {
			t.Errorf("RunGone(%q) = %v, want %v", tt.run, got, tt.gone)
		}
	}
	if !strings.HasPrefix(own, host+"/"+strconv.Itoa(os.Getpid())+"/") {
		t.Errorf("RunLabel() = %q", own)
	}
}
