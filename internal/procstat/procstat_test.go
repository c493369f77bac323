package procstat

import (
	"testing"
	"time"
)

func TestParseStatCPUCountsFromTheCommandNamesEnd(t *testing.T) {
	// A command name may hold spaces and parentheses: "a) (b" here.
	stat := "4242 (a) (b) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 75 3 4 20 0 9 0 5000 1000 200 0"
	got, err := parseStatCPU(stat)
	if err != nil {
		t.Fatal(err)
	}
	if want := 325 * clockTick; got != want { // utime 250 + stime 75, not the children's 3 + 4
		t.Fatalf("CPU = %s, want %s", got, want)
	}
	if _, err := parseStatCPU("4242 (short) S 1 2"); err == nil {
		t.Fatal("a truncated stat line parsed")
	}
}

func TestParseMachineLeavesIdleAndIOWaitOut(t *testing.T) {
	m, err := parseMachine("cpu  100 5 40 1000 30 1 9 15 0 0\ncpu0 50 2 20 500 15 0 4 7 0 0\n")
	if err != nil {
		t.Fatal(err)
	}
	if want := (100 + 5 + 40 + 1 + 9 + 15) * clockTick; m.Busy != want {
		t.Errorf("Busy = %s, want %s", m.Busy, want)
	}
	if want := (100 + 5 + 40 + 1000 + 30 + 1 + 9 + 15) * clockTick; m.Total != want {
		t.Errorf("Total = %s, want %s", m.Total, want)
	}
	if _, err := parseMachine("intr 1 2 3\n"); err == nil {
		t.Fatal("a /proc/stat without its cpu line parsed")
	}
}

func TestCPUGrowsWithWork(t *testing.T) {
	before, err := CPU(0)
	if err != nil {
		t.Skipf("no /proc here: %v", err)
	}
	// Spin until this process's CPU time moves by two ticks: it does within
	// milliseconds unless CPU reads a figure that does not count.
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		now, err := CPU(0)
		if err != nil {
			t.Fatal(err)
		}
		if now-before >= 2*clockTick {
			return
		}
	}
	t.Fatalf("CPU stayed at about %s through 10 s of spinning", before)
}
