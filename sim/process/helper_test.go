//go:build unix && !aix

package process

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// helperEnv switches the test binary into a helper process: the tests run
// os.Args[0] itself as the service, so they need no external tools.
const helperEnv = "PROCESS_TEST_HELPER"

// floodPad makes each line of the flood helper 100 bytes long.
var floodPad = strings.Repeat("x", 100-len("flood 0000000 "))

func TestMain(m *testing.M) {
	if mode := os.Getenv(helperEnv); mode != "" {
		os.Exit(helperMain(mode, os.Args[1:]))
	}
	os.Exit(m.Run())
}

// helperMain is a service for the tests. Every mode that waits for a
// signal prints "ready" once its handler is in place.
func helperMain(mode string, args []string) int {
	switch mode {
	case "env":
		var env []string
		for _, kv := range os.Environ() {
			if strings.HasPrefix(kv, "NORSK_") || strings.HasPrefix(kv, "NORMSIM_") || strings.HasPrefix(kv, "SPEC_") {
				env = append(env, kv)
			}
		}
		slices.Sort(env)
		for _, kv := range env {
			fmt.Println("env", kv)
		}
		wd, _ := os.Getwd()
		fmt.Println("wd", wd)
		fmt.Println("env done")
		return 0
	case "exit":
		code, _ := strconv.Atoi(args[0])
		fmt.Println("to stdout")
		fmt.Fprintln(os.Stderr, "to stderr")
		fmt.Print("exiting with ", code) // no newline: the last line must still be read
		return code
	case "selfkill":
		fmt.Println("killing myself")
		syscall.Kill(os.Getpid(), syscall.SIGKILL)
		time.Sleep(time.Hour)
	case "sleep":
		fmt.Println("ready")
		time.Sleep(time.Hour)
	case "dying-normsim", "keeping-normsim":
		// A normsim that starts a job and then dies: killed (dying), or
		// after letting go of the job on purpose (keeping).
		return parentMain(mode == "keeping-normsim")
	case "tick":
		for i := 0; ; i++ {
			fmt.Println("tick", i)
			time.Sleep(10 * time.Millisecond)
		}
	case "graceful":
		c := make(chan os.Signal, 1)
		signal.Notify(c, syscall.SIGTERM)
		fmt.Println("ready")
		<-c
		fmt.Println("got SIGTERM, exiting")
		return 0
	case "stubborn":
		c := make(chan os.Signal, 1)
		signal.Notify(c, syscall.SIGTERM)
		fmt.Println("ready")
		for range c {
			fmt.Println("ignoring SIGTERM")
		}
	case "slowstop":
		c := make(chan os.Signal, 1)
		signal.Notify(c, syscall.SIGTERM)
		fmt.Println("ready")
		<-c
		time.Sleep(200 * time.Millisecond)
		fmt.Println("grandchild stopped")
		return 0
	case "flood":
		// As fast as it can: many more lines than a drain batch holds.
		n, _ := strconv.Atoi(args[0])
		w := bufio.NewWriterSize(os.Stdout, 64<<10)
		for i := range n {
			fmt.Fprintf(w, "flood %07d %s\n", i, floodPad)
		}
		w.Flush()
		return 0
	case "parent":
		// Like `go run`: the leader dies of SIGTERM at once; the real
		// program is its child, in the same process group.
		cmd := exec.Command(os.Args[0])
		cmd.Env = append(os.Environ(), helperEnv+"="+args[0])
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		if err := cmd.Start(); err != nil {
			fmt.Println("start grandchild:", err)
			return 1
		}
		fmt.Println("grandchild", cmd.Process.Pid)
		time.Sleep(time.Hour)
	}
	fmt.Fprintln(os.Stderr, "unknown helper mode", mode)
	return 2
}
