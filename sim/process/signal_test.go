package process

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestSignalStopWaitsUntilStopped: SIGSTOP returns only once every thread
// of every process in the group has stopped (a pause fault armed on a
// frame must land before the frame is sent), and SIGCONT resumes them. The
// group is `go run`-like: a leader and a ticking child, both Go programs
// with several threads.
func TestSignalStopWaitsUntilStopped(t *testing.T) {
	r, _ := MustRuntime(t)
	MustLaunch(t, r, "i1", helper("app", "parent", "tick"))
	waitLog(t, r, "i1", "app | tick 3")
	pid := r.Pids("i1")["app"]

	for round := range 5 {
		if err := r.Signal(context.Background(), "i1", syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		if !groupStopped(pid) {
			t.Fatalf("round %d: Signal(SIGSTOP) returned before the group had stopped", round)
		}
		time.Sleep(50 * time.Millisecond) // what was printed before the stop is read
		before := logsNow(t, r, "i1")
		time.Sleep(100 * time.Millisecond)
		if after := logsNow(t, r, "i1"); after != before {
			t.Fatalf("round %d: the stopped child went on ticking:\n%s", round, strings.TrimPrefix(after, before))
		}
		if err := r.Signal(context.Background(), "i1", syscall.SIGCONT); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(5 * time.Second)
		for logsNow(t, r, "i1") == before {
			if time.Now().After(deadline) {
				t.Fatalf("round %d: the child did not tick again after SIGCONT", round)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
}
