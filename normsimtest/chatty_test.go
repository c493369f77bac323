package normsimtest_test

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/normsim/normsim/internal/testenv"
	"github.com/normsim/normsim/normsimtest"
	"github.com/normsim/normsim/normsimtest/normsimdocker"
	"github.com/normsim/normsim/sim"
)

var chattyTemplates = filepath.Join("testdata", "templates")

// TestChattyJobHandsOverAndKeepsEveryLine (process runtime) and its Docker
// twin: a job printing 10,000 lines/s hands over seamlessly, and each
// side's log accounts for every line it printed: kept, or counted as
// trimmed (the oldest, past the bound) or overflowed (marked where).
func TestChattyJobHandsOverAndKeepsEveryLine(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real jobs")
	}
	testChatty(t, sim.RuntimeProcess, 10000)
}

func TestChattyJobHandsOverAndKeepsEveryLineOnDocker(t *testing.T) {
	testChattyOnDocker(t, "chatty")
}

// TestChattyJobKeepsEveryLineAcrossLogRotations: with json-file logs of
// 256 KiB the engine rotates them every second or so while the capture
// reads; no line is lost to a rotation.
func TestChattyJobKeepsEveryLineAcrossLogRotations(t *testing.T) {
	testChattyOnDocker(t, "chatty-rotating")
}

func testChattyOnDocker(t *testing.T, template string) {
	if testing.Short() {
		t.Skip("runs real containers")
	}
	testenv.RequireDocker(t)
	normsimdocker.BuildSourceImage(t, "normsim/counter", filepath.Join("..", "examples", "jobs", "counter"))
	testChattyTemplate(t, sim.RuntimeDocker, template, 10000)
}

func testChatty(t *testing.T, runtime string, rate int) {
	testChattyTemplate(t, runtime, "chatty", rate)
}

func testChattyTemplate(t *testing.T, runtime, template string, rate int) {
	warnings := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	s := start(t, normsimtest.Options{Templates: []string{chattyTemplates}, Runtime: runtime, Logger: warnings})
	in := s.Launch(t, sim.LaunchRequest{Template: template, Node: "a", Params: map[string]string{"LOG_RATE": strconv.Itoa(rate)}})
	s.WaitConnected(t, in.ID)
	time.Sleep(1500 * time.Millisecond) // chatting
	m := s.MigrateAndWait(t, in.ID, sim.MigrateRequest{To: "b"})
	normsimtest.RequireSeamless(t, m)
	time.Sleep(1500 * time.Millisecond)
	if err := s.Client.Stop(context.Background(), m.Target.Instance); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{m.Source.Instance, m.Target.Instance} {
		requireEveryLine(t, s, id)
	}
}

var chattyLine = regexp.MustCompile(`^chatty (\d+)$`)
var chattyCount = regexp.MustCompile(`counter printed chatty lines" count=(\d+)`)

// requireEveryLine checks one stopped instance's log against the count
// the job printed last.
func requireEveryLine(t *testing.T, s *normsimtest.Sim, id string) {
	t.Helper()
	// The store may still be catching up (under -race, beside the rest of
	// the suite, it writes far fewer lines a second than the job prints):
	// wait for the job's last line while the log still grows; a log that
	// stopped growing without it for 30 s has lost it.
	var p *sim.LogPage
	printed := int64(-1)
	var seqs []int64
	var progress string
	for deadline := time.Now().Add(30 * time.Second); printed < 0; {
		var err error
		if p, err = s.Client.LogPage(context.Background(), id, 0); err != nil {
			t.Fatal(err)
		}
		seqs = seqs[:0]
		for _, l := range p.Lines {
			if m := chattyLine.FindStringSubmatch(l.Text); m != nil {
				n, _ := strconv.ParseInt(m[1], 10, 64)
				seqs = append(seqs, n)
			} else if m := chattyCount.FindStringSubmatch(l.Text); m != nil {
				printed, _ = strconv.ParseInt(m[1], 10, 64)
			}
		}
		if printed < 0 && time.Now().After(deadline) {
			var lastLines []string
			for _, l := range p.Lines[max(0, len(p.Lines)-3):] {
				lastLines = append(lastLines, l.Stream+" "+l.Text)
			}
			var marks []string
			for _, l := range p.Lines {
				if l.Stream == sim.StreamNormsim {
					marks = append(marks, l.Text)
				}
			}
			in := s.Instance(t, id)
			t.Fatalf("%s (%s, %q): no count of the lines it printed among its %d kept lines (lost %+v); normsim's marks: %q; the last: %q",
				id, in.State, in.Error, len(p.Lines), p.Lost, marks, lastLines)
		}
		if printed < 0 {
			if now := fmt.Sprint(len(p.Lines), seqs[max(0, len(seqs)-1):], p.Lost); now != progress {
				progress, deadline = now, time.Now().Add(30*time.Second)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	if len(seqs) == 0 {
		t.Fatalf("%s printed %d chatty lines, none kept (lost %+v)", id, printed, p.Lost)
	}
	// Kept lines are in order; a hole in the middle is overflow, lines
	// missing before the first kept one were trimmed.
	var holes int64
	for i := 1; i < len(seqs); i++ {
		if seqs[i] <= seqs[i-1] {
			t.Fatalf("%s: line %d kept after line %d", id, seqs[i], seqs[i-1])
		}
		holes += seqs[i] - seqs[i-1] - 1
	}
	first, last := seqs[0], seqs[len(seqs)-1]
	if last != printed-1 {
		t.Errorf("%s: last line kept is %d, the job printed %d", id, last, printed)
	}
	if holes != p.Lost.Overflowed {
		t.Errorf("%s: %d lines missing between kept ones, %d counted as overflowed", id, holes, p.Lost.Overflowed)
	}
	if first > p.Lost.Trimmed {
		t.Errorf("%s: %d lines missing before the first kept one, only %d counted as trimmed", id, first, p.Lost.Trimmed)
	}
	t.Logf("%s printed %d chatty lines: %d kept, %d trimmed (with its other lines), %d overflowed",
		id, printed, len(seqs), p.Lost.Trimmed, p.Lost.Overflowed)
}
