package process

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/normsim/normsim/sim"
)

func TestJudgeRun(t *testing.T) {
	if startMark(os.Getpid()) == "" || bootID() == "" || pidNamespace() == "" {
		t.Skip("no process start times, boot id or PID namespace here (/proc): a run cannot be judged gone")
	}
	own := RunLabel()
	host, _ := os.Hostname()
	// A process that ran and ended: its pid is free (or someone else's).
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Skip("no true(1):", err)
	}
	ns, boot := pidNamespace(), bootID()
	label := func(host string, pid int, start, ns, boot string) string {
		return host + "/" + strconv.Itoa(pid) + "/" + start + "/" + ns + "/" + boot
	}
	dead := cmd.Process.Pid
	// A killed normsim its parent has not reaped yet is a zombie: its pid
	// and start time still show, but it holds nothing and will never run
	// again (issue 34 round 11, B2: a restart was refused as "still
	// running" until the parent waited).
	zombie := exec.Command("true")
	if err := zombie.Start(); err != nil {
		t.Fatal(err)
	}
	defer zombie.Wait()
	for i := 0; i < 500; i++ {
		if isZombie(zombie.Process.Pid) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	for _, tt := range []struct {
		name string
		run  string
		want sim.RunVerdict
	}{
		{"this process", own, sim.RunAlive},
		{"a pid with no process", label(host, dead, "1", ns, boot), sim.RunGone},
		{"a zombie", label(host, zombie.Process.Pid, startMark(zombie.Process.Pid), ns, boot), sim.RunGone},
		{"the parent", label(host, os.Getppid(), startMark(os.Getppid()), ns, boot), sim.RunAlive},
		{"a pid given to someone else", label(host, os.Getppid(), "1", ns, boot), sim.RunGone},
		{"another host's run", label("elsewhere", dead, "1", ns, boot), sim.RunUnjudged},
		// issue 34 item 4: a normsim in another PID namespace (a container
		// under host networking shares the host name) is not ours to
		// judge: its pids are not visible here.
		{"another PID namespace", label(host, dead, "1", "pid:[1]", boot), sim.RunUnjudged},
		// issue 34 item 4: every machine's first PID namespace has the same
		// inode; two machines of one host name on one engine are told
		// apart by their boot.
		{"another machine of the same name", label(host, dead, "1", ns, "00000000-0000-0000-0000-000000000000"), sim.RunUnjudged},
		{"a label without namespace and boot", host + "/" + strconv.Itoa(dead) + "/1", sim.RunUnjudged},
		{"a label without boot", host + "/" + strconv.Itoa(dead) + "/1/" + ns, sim.RunUnjudged},
		{"garbage", "garbage", sim.RunUnjudged},
		{"pid 1", label(host, 1, "x", ns, boot), sim.RunUnjudged},
		{"no start time", label(host, dead, "", ns, boot), sim.RunUnjudged},
	} {
		if got := JudgeRun(tt.run); got != tt.want {
			t.Errorf("%s: JudgeRun(%q) = %v, want %v", tt.name, tt.run, got, tt.want)
		}
	}
	if !strings.HasPrefix(own, host+"/"+strconv.Itoa(os.Getpid())+"/") || !strings.HasSuffix(own, "/"+ns+"/"+boot) {
		t.Errorf("RunLabel() = %q", own)
	}
}
