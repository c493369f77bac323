package sim_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/normsim/normsim/sim"
)

func TestLogText(t *testing.T) {
	long := strings.Repeat("x", sim.MaxLogLineBytes+100)
	// A 3-byte rune across the cut is dropped whole, and counted.
	runeCut := strings.Repeat("x", sim.MaxLogLineBytes-1) + "€" + "tail"
	tests := []struct {
		name, in, want string
	}{
		{"plain", "hello world", "hello world"},
		{"tab kept, CR at the end dropped", "a\tb\r", "a\tb"},
		{"UTF-8 kept", "grüße €", "grüße €"},
		{"invalid UTF-8 escaped", "a\xffb\xc3", `a\xffb\xc3`},
		{"control characters escaped", "\x1b[31mred\x00", `\x1b[31mred\x00`},
		{"long line cut with a marker", long, strings.Repeat("x", sim.MaxLogLineBytes) + " …[normsim: line cut, 100 more bytes]"},
		{"rune at the cut", runeCut, strings.Repeat("x", sim.MaxLogLineBytes-1) + " …[normsim: line cut, 7 more bytes]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := sim.LogText([]byte(tt.in)); got != tt.want {
				t.Errorf("LogText(%.40q…) = %.80q…, want %.80q…", tt.in, got, tt.want)
			}
		})
	}
}

func TestLineSplitter(t *testing.T) {
	var got []string
	emit := func(s string) { got = append(got, s) }
	var s sim.LineSplitter
	s.Write([]byte("one\ntw"), emit)
	s.Write([]byte("o\n\nbin\x00ary"), emit)
	huge := strings.Repeat("y", 3*sim.MaxLogLineBytes)
	s.Write([]byte("\n"+huge+"\n"), emit) // whole in one write: cut, with its count
	// Issue 34 round 5: a long line that has not ended is shown once its
	// first 8 KiB are in, not when it ends (a 10 MB line without a newline
	// showed nothing while its job ran); its count follows at its end.
	s.Write([]byte(huge[:sim.MaxLogLineBytes+5]), emit)
	if n := len(got); n != 6 || !strings.HasSuffix(got[n-1], " …[normsim: line cut; what follows until its end is counted, not kept]") {
		t.Fatalf("an open cut line is not shown yet: %d lines, last %.40q", n, got[n-1])
	}
	s.Write([]byte(huge[sim.MaxLogLineBytes+5:]+"\nlast"), emit)
	s.Flush(emit)
	cut := strings.Repeat("y", sim.MaxLogLineBytes)
	want := []string{"one", "two", "", `bin\x00ary`, cut + " …[normsim: line cut, 16384 more bytes]",
		cut + " …[normsim: line cut; what follows until its end is counted, not kept]", "…[normsim: the line cut above ended 16384 bytes later]", "last"}
	if len(got) != len(want) {
		t.Fatalf("got %d lines, want %d: %.200q", len(got), len(want), got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("line %d = %.80q, want %.80q", i, got[i], want[i])
		}
	}
}

// Attack round 16, B-F5: normsim ci printed a scenario's name, and a
// timeline's detail (a job's abort reason), with ESC and BEL as they
// were: a name could set the terminal's title or clear its screen.
func TestReportsWriteNothingATerminalActsOn(t *testing.T) {
	var b strings.Builder
	w := sim.TerminalWriter(&b)
	fmt.Fprintf(w, "=== %s\n--- ok\tdone\n", "name\x1b]0;owned\x07 \u009b2J")
	if want := "=== name\\x1b]0;owned\\x07 \\u009b2J\n--- ok\tdone\n"; b.String() != want {
		t.Errorf("wrote %q, want %q", b.String(), want)
	}
	m := &sim.Migration{StartedAt: time.Unix(0, 0)}
	line := sim.TimelineLine(m, sim.MigrationEvent{At: time.Unix(0, 0), Detail: "abort: \x1b[2J"})
	if strings.ContainsAny(line, "\x1b") || !strings.Contains(line, `abort: \x1b[2J`) {
		t.Errorf("timeline line %q", line)
	}
}
